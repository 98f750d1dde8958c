"""Encoding :mod:`onemodel.ir` records as ONNX messages (Clause 12, Annex B), byte for byte as
the protobuf serializers do.

What the official serializer emits, so a file written by ``onnx.save`` or ``torch.onnx.export``
comes back identical: known fields in increasing tag order; every present optional field, even
``""`` or ``0`` (proto2 presence); repeated fields in the form Annex B records (packed for
``float_data``, ``int32_data``, ``int64_data``, ``double_data``, ``uint64_data``; unpacked for
the others); negative integers as ten-octet varints (12.2.3); floats by their bit patterns; the
octets of unknown fields last, in the order they were read.

Large ``raw_data`` values are not copied into the output: :func:`encode_pieces` returns them as
separate pieces that a writer streams to its sink.
"""

from __future__ import annotations

import numpy as np

from ...ir.record import LazyBuffer, buffer_view
from ..protobuf import encode_packed_varints, encode_varint
from .schema import BY_CLASS, BYTES, DOUBLE, ENUM, FLOAT, INT32, INT64, MESSAGE, RAW, STRING, UINT64

#: ``raw_data`` values at least this large (bytes) are kept as separate pieces, not copied.
BIG = 1 << 16

_v = encode_varint


class RawPiece:
    """A large ``raw_data`` value in the output, not copied: ``tensor`` and ``nbytes``."""

    __slots__ = ("tensor", "nbytes")

    def __init__(self, tensor, nbytes: int):
        self.tensor = tensor
        self.nbytes = nbytes

    def view(self) -> memoryview:
        """The bytes (fetched if the tensor's raw_data is lazy)."""
        return buffer_view(self.tensor.raw_data)


def _f32_unpacked(key: bytes, values) -> bytes:
    a = np.asarray(values, dtype="<f4").reshape(-1)
    rec = np.empty(a.size, dtype=[("k", f"V{len(key)}"), ("v", "<f4")])
    rec["k"] = np.frombuffer(key, dtype=f"V{len(key)}")[0]
    rec["v"] = a
    return rec.tobytes()


def _encode(obj, msg, out: bytearray, parts: list) -> None:
    """Append the encoding of ``obj`` (message ``msg``) to ``out``; large raw_data values
    flush ``out`` into ``parts`` and are appended to ``parts`` as RawPiece."""
    for f in msg.fields:
        v = getattr(obj, f.name)
        if v is None:
            continue
        kind = f.kind
        if f.repeated:
            if f.array_dtype is not None:
                if len(v) == 0:
                    continue
                if f.packed:
                    if kind == FLOAT:
                        payload = np.asarray(v, dtype="<f4").tobytes()
                    elif kind == DOUBLE:
                        payload = np.asarray(v, dtype="<f8").tobytes()
                    else:
                        payload = encode_packed_varints(np.asarray(v))
                    out += f.key
                    out += _v(len(payload))
                    out += payload
                else:  # Attribute.floats: unpacked fixed32 values
                    out += _f32_unpacked(f.key, v)
                continue
            if not v:
                continue
            key = f.key
            if kind == MESSAGE:
                sub = f.message
                for item in v:
                    _encode_sub(item, sub, key, out, parts)
            elif kind == STRING:
                for s in v:
                    b = s.encode("utf-8", "surrogateescape")
                    out += key
                    out += _v(len(b))
                    out += b
            elif kind == BYTES:
                for b in v:
                    out += key
                    out += _v(len(b))
                    out += b
            elif kind == FLOAT:
                out += _f32_unpacked(key, v)
            elif kind == DOUBLE:
                for x in v:
                    out += key
                    out += np.float64(x).tobytes()
            else:
                for x in v:
                    out += key
                    out += _v(x)
            continue
        if kind == STRING:
            b = v.encode("utf-8", "surrogateescape")
            out += f.key
            out += _v(len(b))
            out += b
        elif kind == MESSAGE:
            _encode_sub(v, f.message, f.key, out, parts)
        elif kind in (INT64, INT32, ENUM, UINT64):
            out += f.key
            out += _v(v)
        elif kind == FLOAT:
            out += f.key
            out += np.float32(v).tobytes()
        elif kind == DOUBLE:
            out += f.key
            out += np.float64(v).tobytes()
        elif kind == BYTES:
            out += f.key
            out += _v(len(v))
            out += v
        elif kind == RAW:
            n = v.nbytes if isinstance(v, LazyBuffer) else len(buffer_view(v))
            out += f.key
            out += _v(n)
            if n >= BIG or isinstance(v, LazyBuffer):
                parts.append(bytes(out))
                out.clear()
                parts.append(RawPiece(obj, n))
            else:
                out += buffer_view(v)
    if obj.unknown:
        out += obj.unknown


def _encode_sub(item, sub, key: bytes, out: bytearray, parts: list) -> None:
    inner_out = bytearray()
    inner_parts: list = []
    _encode(item, sub, inner_out, inner_parts)
    if not inner_parts:
        out += key
        out += _v(len(inner_out))
        out += inner_out
        return
    if inner_out:
        inner_parts.append(bytes(inner_out))
    n = sum(p.nbytes if isinstance(p, RawPiece) else len(p) for p in inner_parts)
    out += key
    out += _v(n)
    parts.append(bytes(out))
    out.clear()
    parts.extend(inner_parts)


def encode_pieces(obj) -> list:
    """The encoding of a record as a list of ``bytes`` and :class:`RawPiece` (large raw_data).

    Concatenating the pieces (a RawPiece stands for its tensor's raw_data bytes) gives the
    message's octets.
    """
    msg = BY_CLASS[type(obj)]
    out = bytearray()
    parts: list = []
    _encode(obj, msg, out, parts)
    if out:
        parts.append(bytes(out))
    return parts


def encode(obj) -> bytes:
    """The octets of a record as its ONNX message (a ``Model`` as ModelProto, ...)."""
    return b"".join(bytes(p.view()) if isinstance(p, RawPiece) else p for p in encode_pieces(obj))


def pieces_size(pieces: list) -> int:
    """Total octets of the pieces from :func:`encode_pieces`."""
    return sum(p.nbytes if isinstance(p, RawPiece) else len(p) for p in pieces)
