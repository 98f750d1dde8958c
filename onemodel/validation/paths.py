"""Field paths in a file's own terms: a path in :mod:`onemodel.ir` field names
(``graph.nodes[3].inputs[1]``) as the ONNX field names of Annex B (``graph.node[3].input[1]``,
:func:`onemodel.formats.onnx.paths.onnx_path`) or the OneModel manifest's
(``manifest.graph.nodes[3].inputs[1]``)."""

from __future__ import annotations


def file_path(model, path: str | None, fmt: str | None) -> str | None:
    """``path`` in the terms of format ``fmt`` (``"onnx"``, ``"onemodel"``; ``None`` for a
    model in memory: IR names). A path already in the file's terms (``manifest.``) is kept."""
    if path is None:
        return None
    if fmt == "onnx":
        from ..formats.onnx.paths import onnx_path

        return onnx_path(model, path)
    if fmt == "onemodel" and not path.startswith("manifest"):
        return "manifest." + path
    return path

