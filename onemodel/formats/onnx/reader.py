"""Reading ONNX files: the format plugin's read path (ONNX Part 1, Clause 12 and 13).

:func:`read` (the plugin's ``read``) decodes a ModelProto from a byte source
(:mod:`.wire_decode`, with its C accelerator), checks every tensor as it is decoded
(:mod:`.checks`), checks the items Clause 5.3.1 makes mandatory (:func:`check_model`) and resolves
the external data references (:func:`.external.resolve_external_data`, Clause 13 under the
Clause 15.3 rules). :func:`decode_message` / :func:`decode_model` do the same for bytes in
memory, without external data.
"""

from __future__ import annotations

from ...errors import InvalidModelError
from ...ir import Model
from ...ir.tensor import EXTERNAL, Tensor
from ...storage.base import BlockView, Source
from .checks import check_tensors
from .external import default_base, resolve_external_data
from .wire_decode import decode


def _check(source_name):
    def run(root, tensors):
        check_tensors(root, tensors, source_name)
    return run


def decode_message(data, message: str = "ModelProto", *, source: str | None = None):
    """Decode ``data`` as the Annex B message ``message`` (``ModelProto``, ``TensorProto``,
    ``SequenceProto``, ``MapProto``, ``OptionalProto``, ...) and check every tensor in it.

    ``raw_data`` values are zero-copy views of ``data``. Raises MalformedError (Clause 12),
    InvalidModelError or UnsupportedError (tensor contents), each with the field path.
    """
    return decode(data, message, source=source, check=_check(source))


def check_model(model: Model, source: str | None = None) -> None:
    """The items Clause 5.3.1 (Table 2) makes mandatory: an IR version and a graph.

    Raises InvalidModelError naming the missing field; an empty file or any protobuf message
    that is not a model fails here rather than reading as an empty model.
    """
    if model.ir_version is None:
        raise InvalidModelError("the model has no ir_version (mandatory, Clause 5.3.1): not an "
                                "ONNX model", path="ModelProto.ir_version", source=source)
    if model.graph is None:
        raise InvalidModelError("the model has no graph (mandatory, Clause 5.3.1)",
                                path="ModelProto.graph", source=source)


def decode_model(data, *, source: str | None = None) -> Model:
    """Decode ONNX model bytes (a ModelProto) into a :class:`~onemodel.ir.Model`.

    External data references are kept but not resolved (there is no base directory); use
    :func:`onemodel.load` on a path for that.
    """
    model = decode_message(data, "ModelProto", source=source)
    check_model(model, source)
    return model


def read(source: Source, *, base_dir=None, allow_outside: bool = False,
         load_external: bool = True, storage_options: dict | None = None,
         block_size: int = 64 * 1024) -> Model:
    """Read a ModelProto from a byte source (Clause 12) and resolve its external data (Clause 13).

    Every ``raw_data`` is a :class:`~onemodel.storage.blob.Blob`: its range of the source (a
    zero-copy view of a local or in-memory source, fetched on first use from a remote one). A
    local or in-memory source is decoded in place; a remote source (no ``whole()``) is read
    through a block cache of ``block_size`` bytes, raw_data skipped. The source is kept in
    ``model.resources`` (released by ``model.close()``).

    External data (see :mod:`.external`):

    Args:
        base_dir: the directory the external data locations are relative to (a local path, or
            a URL of a directory). Default: the directory of the source's file (never the working
            directory); a model read from bytes has none.
        allow_outside: also resolve locations outside ``base_dir`` (absolute paths, ``..``,
            symbolic and hard links). Never the default (Clause 15.3); CLI
            ``--allow-external-outside``.
        load_external: resolve external tensors now (default). When ``False`` the references
            are kept unresolved (``tensor.external`` is ``None``; reading their values raises)
            and no data file is opened; :func:`.external.resolve_external_data` can resolve
            them later.
        storage_options: fsspec options for data files under a URL.
    Each data file is opened once and mapped; every external tensor's ``external`` is the Blob
    of exactly its bytes in that file. The data sources join ``model.resources``.
    ``model.base_dir`` records the directory used.

    Raises MalformedError (Clause 12), InvalidModelError (tensor contents; a refused external
    reference; external tensors in a model with no base directory), UnsupportedError, IoError
    (a data file that cannot be read). When it raises, the data files it opened are closed again.
    """
    data = source.whole()
    if data is None:
        data = BlockView(source, block_size)
    external: dict = {}

    def check(root, tensors):
        check_tensors(root, tensors, source.name)
        for t, offset in tensors:
            if type(t) is Tensor and t.data_location == EXTERNAL:  # (sparse tensors are listed too)
                external[id(t)] = offset

    model = decode(data, "ModelProto", source=source.name, blob_source=source, check=check)
    check_model(model, source.name)
    model.resources = [source]
    model.source = source.name
    if external:
        model.base_dir = base_dir if base_dir is not None else default_base(source)
        if load_external:
            model.resources += resolve_external_data(
                model, model.base_dir, allow_outside=allow_outside,
                storage_options=storage_options, offsets=external, source=source.name,
                model_file=source)
    return model


__all__ = ["read", "decode_message", "decode_model", "check_model"]
