"""Field paths in ONNX terms (``ModelProto.graph.node[3].attribute[0]``) for error messages."""

from __future__ import annotations

import re

from .schema import BY_CLASS, MESSAGE

_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)")


def proto_path(root, target, root_name: str | None = None) -> str | None:
    """The path from ``root`` to the record ``target`` (compared by identity), in proto field
    names, or ``None`` when ``target`` is not inside ``root``. Iterative: any depth is safe."""
    msg = BY_CLASS.get(type(root))
    if msg is None:
        return None
    name = root_name or msg.proto_name
    stack = [(root, name)]
    while stack:
        obj, path = stack.pop()
        if obj is target:
            return path
        m = BY_CLASS[type(obj)]
        for f in m.fields:
            if f.kind != MESSAGE:
                continue
            v = getattr(obj, f.name)
            if v is None:
                continue
            if f.repeated:
                for i, item in enumerate(v):
                    stack.append((item, f"{path}.{f.proto_name}[{i}]"))
            else:
                stack.append((v, f"{path}.{f.proto_name}"))
    return None


def onnx_path(model, path: str) -> str:
    """``path`` (IR field names from ``model``) in Annex B field names, walking ``model`` to
    find each record's message; a part it cannot follow is kept as it is. ``ModelProto.``
    before a path is dropped (the readers' error paths carry it)."""
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
