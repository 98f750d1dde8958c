"""Tiny helpers to hand-assemble protobuf octets in tests (written from Clause 12, not from our
codec, so a codec bug cannot hide in both)."""

from __future__ import annotations

import struct


def varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(tag: int, wire: int) -> bytes:
    return varint(tag << 3 | wire)


def vint(tag: int, v: int) -> bytes:
    """A varint field."""
    return key(tag, 0) + varint(v)


def ld(tag: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return key(tag, 2) + varint(len(payload)) + payload


def f32(tag: int, v: float) -> bytes:
    return key(tag, 5) + struct.pack("<f", v)


def f64(tag: int, v: float) -> bytes:
    return key(tag, 1) + struct.pack("<d", v)


def tensor(dims=(), data_type=1, raw=None, name=b"t", extra=b"") -> bytes:
    """A TensorProto (Annex B.2.16): dims (1), data_type (2), name (8), raw_data (9)."""
    out = b"".join(vint(1, d) for d in dims) + vint(2, data_type) + ld(8, name)
    if raw is not None:
        out += ld(9, raw)
    return out + extra


def model_with_initializer(t: bytes) -> bytes:
    """A ModelProto with ir_version, one opset import and a graph holding initializer ``t``."""
    graph = ld(2, b"g") + ld(5, t)
    return vint(1, 10) + ld(7, graph) + ld(8, ld(1, b"") + vint(2, 21))
