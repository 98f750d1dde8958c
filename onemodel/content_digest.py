"""The content digest of a model (docs/content-digest.md): :func:`digest` of a model or a path,
and what :mod:`onemodel.formats.content_digest` computes it with (:class:`ModelDigest`,
:func:`model_digest`, :func:`tensor_digest`, :func:`manifest`, the prefixes and the version).

    >>> import onemodel
    >>> d = onemodel.digest("model.onnx")
    >>> d.hex                                   # 'sha256:3b0c...'
    >>> d.tensors["graph.initializers[0]"]      # (name, 'sha256:...') of each tensor

The computation is in ``formats`` (the OneModel writer and ``check`` use it, below
:mod:`onemodel.api`); this module reads a path with :func:`onemodel.load` and so stands above
``api``.
"""

from __future__ import annotations

from .api import load
from .formats.content_digest import (
    MANIFEST_FORMAT,
    MODEL_PREFIX,
    PARALLEL_BYTES,
    TENSOR_PREFIX,
    VERSION,
    ModelDigest,
    manifest,
    model_digest,
    structure,
    tensor_digest,
    tensor_header,
)
from .ir import Model
from .storage import check_storage_options


def digest(model_or_path, *, storage_options: dict | None = None, workers: int | None = None,
           **load_options) -> ModelDigest:
    """The content digest of a model or of the model at a path or URL (ONNX in any layout,
    OneModel, ``.zst``; read with :func:`onemodel.load`, tensors streamed, never all in
    memory). Raises the errors of :func:`onemodel.load` and :func:`model_digest`."""
    check_storage_options(storage_options, model_or_path, load_options.get("base_dir"))
    if isinstance(model_or_path, Model):
        return model_digest(model_or_path, workers=workers)

    m = load(model_or_path, storage_options=storage_options, **load_options)
    try:
        return model_digest(m, workers=workers)
    finally:
        m.close()


__all__ = ["digest", "ModelDigest", "model_digest", "tensor_digest", "tensor_header", "manifest",
           "structure", "VERSION", "TENSOR_PREFIX", "MODEL_PREFIX", "MANIFEST_FORMAT",
           "PARALLEL_BYTES"]
