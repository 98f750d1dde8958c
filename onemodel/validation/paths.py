"""Field paths in a file's own terms: a path in :mod:`onemodel.ir` field names
(``graph.nodes[3].inputs[1]``) as the ONNX field names of Annex B (``graph.node[3].input[1]``)
or the OneModel manifest's (``manifest.graph.nodes[3].inputs[1]``)."""

from __future__ import annotations

import re

_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)")


def onnx_path(model, path: str) -> str:
    """``path`` (IR field names from ``model``) in Annex B field names, walking ``model`` to
    find each record's message; a part it cannot follow is kept as it is. ``ModelProto.``
    before a path is dropped (the readers' error paths carry it)."""
    from ..formats.onnx.schema import BY_CLASS

    if path.startswith("ModelProto."):
        return path[len("ModelProto."):]
    out = []
    obj = model
    parts = path.split(".")
    for i, part in enumerate(parts):
        m = _SEGMENT.fullmatch(part)
        msg = BY_CLASS.get(type(obj)) if obj is not None else None
        f = None
        if m and msg is not None:
            f = next((f for f in msg.fields if f.name == m.group(1)), None)
        if f is None:
            out.extend(parts[i:])
            break
        out.append(f.proto_name + m.group(2))
        value = getattr(obj, f.name, None)
        for idx in re.findall(r"\[(\d+)\]", m.group(2)):
            try:
                value = value[int(idx)]
            except (TypeError, IndexError):
                value = None
        obj = value
    return ".".join(out)


def file_path(model, path: str | None, fmt: str | None) -> str | None:
    """``path`` in the terms of format ``fmt`` (``"onnx"``, ``"onemodel"``; ``None`` for a
    model in memory: IR names). A path already in the file's terms (``manifest.``) is kept."""
    if path is None:
        return None
    if fmt == "onnx":
        return onnx_path(model, path)
    if fmt == "onemodel" and not path.startswith("manifest"):
        return "manifest." + path
    return path
