"""ONNX files (Part 1, Clause 12 and Annex B): reading into and writing from :mod:`onemodel.ir`.

No ``onnx`` or ``protobuf`` import happens at run time: the wire codec is :mod:`.decode` and
:mod:`.encode`, driven by the message table of :mod:`.schema`.

* :func:`decode_model` / :func:`encode_model`: bytes <-> Model.
* :func:`decode_message` / :func:`encode_message`: any Annex B message (TensorProto,
  SequenceProto, MapProto, OptionalProto ...), e.g. the .pb files of the conformance tests.
* ``PLUGIN``: the format plugin (``read(source)`` / ``write(model, sink)``).
"""

from __future__ import annotations

from ...errors import MalformedError
from ...ir import Model
from ...storage.base import BlockView, RangeBuffer, Sink, Source
from .checks import check_tensors
from .decode import decode
from .encode import RawPiece, encode, encode_pieces
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


def decode_model(data, *, source: str | None = None) -> Model:
    """Decode ONNX model bytes (a ModelProto) into a :class:`~onemodel.ir.Model`.

    External data references are kept but not resolved (there is no base directory); use
    :func:`onemodel.load` on a path for that.
    """
    return decode_message(data, "ModelProto", source=source)


def encode_message(record) -> bytes:
    """The octets of any record as its ONNX message, as the protobuf serializer writes them."""
    return encode(record)


encode_model = encode_message


def _sniff(head: bytes) -> bool:
    # ONNX has no magic; an exporter's file starts with ir_version (field 1, varint: 0x08).
    return len(head) > 1 and head[0] == 0x08 and head[1] < 0x80


def read(source: Source, **options) -> Model:
    """Read a ModelProto from a byte source (Clause 12).

    A local or in-memory source is decoded in place: every ``raw_data`` is a zero-copy view.
    A remote source (no ``whole()``) is read through a block cache while ``raw_data`` values are
    skipped and become lazy ranges fetched on first use. The source is kept in
    ``model.resources`` (released by ``model.close()``).
    """
    whole = source.whole()
    raw = None
    if whole is None:
        data = BlockView(source, options.get("block_size", 64 * 1024))
        raw = lambda start, end: RangeBuffer(source, start, end - start)  # noqa: E731
    else:
        data = whole
    model = decode(data, "ModelProto", raw=raw, source=source.name, origin=source,
                   check=_check(source.name))
    model.resources = [source]
    model.source = source.name
    return model


def write(model, sink: Sink, **options) -> None:
    """Write ``model`` as a ModelProto to ``sink`` (not committed here).

    Large ``raw_data`` values are streamed: copied file to file when they are untouched views of
    a local source, else written from their buffers; nothing is concatenated in memory.
    """
    if not isinstance(model, Model):
        raise TypeError("write() takes an onemodel.ir.Model")
    for piece in encode_pieces(model):
        if isinstance(piece, RawPiece):
            t = piece.tensor
            where = t.origin_of(t.raw_data)
            if where is not None and hasattr(where[0], "fileno"):
                sink.copy_from(where[0], where[1], piece.nbytes)
            else:
                sink.write(piece.view())
        else:
            sink.write(piece)


class _Plugin:
    name = "onnx"
    suffixes = (".onnx",)
    sniff = staticmethod(_sniff)
    read = staticmethod(read)
    write = staticmethod(write)


PLUGIN = _Plugin()

__all__ = ["decode_model", "encode_model", "decode_message", "encode_message", "read", "write",
           "PLUGIN", "BY_CLASS", "MalformedError"]
