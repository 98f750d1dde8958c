"""ONNX files (Part 1, Clause 12 and Annex B): reading into and writing from :mod:`onemodel.ir`.

No ``onnx`` or ``protobuf`` import happens at run time: the wire codec is :mod:`.decode` and
:mod:`.encode`, driven by the message table of :mod:`.schema`.

* :func:`decode_model` / :func:`encode_model`: bytes <-> Model.
* :func:`decode_message` / :func:`encode_message`: any Annex B message (TensorProto,
  SequenceProto, MapProto, OptionalProto ...), e.g. the .pb files of the conformance tests.
* ``PLUGIN``: the format plugin (``read(source)`` / ``write(model, sink)``), with external data
  (Clause 13): resolution under the Clause 15.3 checks in :mod:`.external`, writing layouts
  (keep, inline, one file, one file per tensor) in :mod:`.layout`.
* :func:`external_data_report`: per data file, the bytes referenced and unreferenced and whether
  every offset can be mapped.
"""

from __future__ import annotations

from .. import Plugin
from ...errors import InvalidModelError, MalformedError
from ...ir import Model, iter_tensors
from ...ir.tensor import EXTERNAL, Tensor
from ...limits import EXTERNAL_DATA_ALIGNMENT
from ...storage.base import BlockView, Sink, Source
from .checks import check_tensors
from .decode import decode
from .encode import encode
from .external import default_base, resolve_external_data
from .layout import external_data_report, write_layout
from .schema import BY_CLASS


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


def encode_message(record) -> bytes:
    """The octets of any record as its ONNX message, as the protobuf serializer writes them."""
    return encode(record)


encode_model = encode_message


def _sniff(head: bytes) -> bool:
    # ONNX has no magic; an exporter's file starts with ir_version (field 1, varint: 0x08).
    return len(head) > 1 and head[0] == 0x08 and head[1] < 0x80


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
                storage_options=storage_options, offsets=external, source=source.name)
    return model


def write(model, sink: Sink, *, layout: str | None = None, external_data: str | None = None,
          threshold: int = 1024, align: int = EXTERNAL_DATA_ALIGNMENT, force: bool = False,
          base_dir=None, allow_outside: bool = False, convert_attributes: bool = False,
          storage_options: dict | None = None) -> None:
    """Write ``model`` as a ModelProto to ``sink`` (not committed here) and its external data
    files beside it (committed here, after everything was written).

    Args:
        layout: where tensor contents go (:mod:`.layout` has the details):
            ``"keep"`` (default): every tensor stays where it is; external references are kept
            as written and their data files rewritten to hold exactly the referenced bytes, so
            a model read and written back gives the same .onnx and data files, byte for byte.
            ``"inline"``: every tensor in the .onnx file. ``"file"``: tensors of ``threshold``
            bytes or more in one data file ``external_data``. ``"per_tensor"``: one data file per
            such tensor, named after it. Default ``"file"`` when ``external_data`` is given.
        external_data: the data file name for ``"file"`` (a relative location; default the
            .onnx file's name + ``.data``).
        threshold: tensors smaller than this many bytes stay inline (``file``, ``per_tensor``).
        align: every tensor offset in a data file is a multiple of this (default 4096, a page, so
            the data can be mapped; 65536 for Windows readers that map by allocation granule).
        force: write a .onnx file of 2 GiB or more (protobuf-based tools cannot read it);
            without it such a write raises UnsupportedError. Also replace an existing data file
            that may belong to another model: without it, a data file whose name the user did
            not choose (``keep``, ``per_tensor``, ``file`` without ``external_data``) may replace
            an existing file only when the model was read from that file or the destination
            .onnx file references it; otherwise IoError, before anything is written.
        base_dir: the directory data files go to; default the directory of the sink's file.
        allow_outside: keep references outside that directory (``keep``); never the default.
        convert_attributes: ``file``/``per_tensor`` also move attribute tensors and sparse
            tensors (as ``onnx``'s ``convert_attribute``); by default only initializers.
        storage_options: fsspec options for data files under a URL.

    Large tensor contents are streamed: copied file to file when they are untouched views of a
    local source (``copy_file_range`` or ``splice``, a bounded buffered copy where the kernel
    does neither; see LocalSink.copy_from), else written from their buffers in bounded chunks;
    nothing is concatenated in memory. Data files are written to temporary files renamed into
    place, so writing onto the files the model is mapped from is safe (the maps keep the old
    files alive) and an existing file is never appended to. Raises InvalidModelError,
    UnsupportedError, IoError; on error no data file is changed.
    """
    if not isinstance(model, Model):
        raise TypeError("write() takes an onemodel.ir.Model")
    # what the reader would refuse is not written (InvalidModelError with the field path)
    check_tensors(model, [(t, None) for _, t in iter_tensors(model)], sink.name)
    write_layout(model, sink, layout=layout, external_data=external_data, threshold=threshold,
                 align=align, force=force, base_dir=base_dir, allow_outside=allow_outside,
                 convert_attributes=convert_attributes, storage_options=storage_options)


PLUGIN = Plugin("onnx", (".onnx",), _sniff, read, write)

__all__ = ["decode_model", "encode_model", "decode_message", "encode_message", "read", "write",
           "PLUGIN", "BY_CLASS", "MalformedError", "resolve_external_data",
           "external_data_report"]
