"""Our decode -> encode gives, for any octets, exactly what protobuf's ParseFromString ->
SerializeToString gives (Clause 12): field order, last-wins scalars, merged messages, packed and
unpacked forms, oneofs, closed enumerations, unknown fields of every wire type, overlong varints.

Messages are generated at the byte level from our schema (Annex B), so the two implementations see
the same arbitrary but valid octets.
"""

from __future__ import annotations

import struct

import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wire import key, varint

from onemodel.formats.onnx.schema import (
    BYTES,
    DOUBLE,
    ENUM,
    FLOAT,
    INT32,
    INT64,
    MESSAGE,
    MESSAGES,
    RAW,
    STRING,
    UINT64,
)
from onemodel.formats.onnx.wire_decode import decode
from onemodel.formats.onnx.wire_encode import encode

PB = {
    "ModelProto": onnx.ModelProto, "GraphProto": onnx.GraphProto, "NodeProto": onnx.NodeProto,
    "AttributeProto": onnx.AttributeProto, "TensorProto": onnx.TensorProto,
    "TypeProto": onnx.TypeProto, "ValueInfoProto": onnx.ValueInfoProto,
    "SparseTensorProto": onnx.SparseTensorProto, "FunctionProto": onnx.FunctionProto,
    "TrainingInfoProto": onnx.TrainingInfoProto, "SequenceProto": onnx.SequenceProto,
    "MapProto": onnx.MapProto, "OptionalProto": onnx.OptionalProto,
    "OperatorSetProto": onnx.OperatorSetProto, "TensorShapeProto": onnx.TensorShapeProto,
}


def overlong(v: int) -> bytes:
    """A non-minimal varint of ``v`` (one redundant continuation octet), which Clause 12 allows."""
    enc = bytearray(varint(v))
    if len(enc) >= 10:
        return bytes(enc)
    enc[-1] |= 0x80
    enc.append(0)
    return bytes(enc)


@st.composite
def scalar(draw, kind, enum_values=None):
    if kind in (INT64, UINT64):
        v = draw(st.integers(-(1 << 63), (1 << 64) - 1) if kind == UINT64
                 else st.integers(-(1 << 63), (1 << 63) - 1))
        return draw(st.sampled_from([varint, overlong]))(v), 0
    if kind == INT32:
        return varint(draw(st.integers(-(1 << 31), (1 << 31) - 1))), 0
    if kind == ENUM:
        return varint(draw(st.integers(-3, 20))), 0
    if kind == FLOAT:
        return draw(st.binary(min_size=4, max_size=4)), 5
    if kind == DOUBLE:
        return draw(st.binary(min_size=8, max_size=8)), 1
    if kind == STRING:
        b = draw(st.text(max_size=6)).encode()
        return varint(len(b)) + b, 2
    b = draw(st.binary(max_size=12))
    return varint(len(b)) + b, 2


@st.composite
def message(draw, msg, depth=0):
    out = bytearray()
    n = draw(st.integers(0, 6 if depth < 2 else 3))
    for _ in range(n):
        choice = draw(st.integers(0, 9))
        if choice == 0:  # an unknown field
            tag = draw(st.integers(1, 300).filter(lambda t: t not in msg.by_tag))
            wire = draw(st.sampled_from([0, 1, 2, 5]))
            payload = {0: varint(draw(st.integers(0, (1 << 64) - 1))),
                       1: draw(st.binary(min_size=8, max_size=8)),
                       5: draw(st.binary(min_size=4, max_size=4))}.get(wire)
            if payload is None:
                b = draw(st.binary(max_size=8))
                payload = varint(len(b)) + b
            out += key(tag, wire) + payload
            continue
        f = draw(st.sampled_from(msg.fields))
        if f.kind == MESSAGE:
            if depth >= 3:
                continue
            body = draw(message(f.message, depth + 1))
            out += key(f.tag, 2) + varint(len(body)) + body
        elif f.repeated and f.kind not in (STRING, BYTES, RAW) and draw(st.booleans()):
            items = [draw(scalar(f.kind, f.enum_values))[0] for _ in range(draw(st.integers(0, 4)))]
            body = b"".join(items)
            out += key(f.tag, 2) + varint(len(body)) + body  # packed form
        else:
            val, wire = draw(scalar(f.kind, f.enum_values))
            out += key(f.tag, wire) + val
    return bytes(out)


def _roundtrip(name: str, data: bytes) -> None:
    pb = PB[name]()
    pb.ParseFromString(data)
    expected = pb.SerializeToString()
    ours = encode(decode(data, name))
    assert ours == expected, (name, data.hex())


@pytest.mark.parametrize("name", sorted(PB))
@settings(max_examples=int(__import__("os").environ.get("ONEMODEL_FUZZ_EXAMPLES", "120")),
          deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_same_bytes_as_protobuf(name, data):
    raw = data.draw(message(MESSAGES[name]))
    _roundtrip(name, raw)


def test_specific_protobuf_rules():
    # last one wins for a singular scalar; singular messages merge; packed + unpacked concatenate
    t = (key(2, 0) + varint(1) + key(2, 0) + varint(7)          # data_type 1 then 7
         + key(1, 2) + b"\x02\x02\x03" + key(1, 0) + varint(4))  # dims packed [2,3] + unpacked 4
    m = decode(t, "TensorProto")
    assert m.data_type == 7 and m.dims == [2, 3, 4]
    _roundtrip("TensorProto", t)
    # TypeProto oneof: a later member replaces an earlier one
    ty = key(1, 2) + b"\x02\x08\x01" + key(4, 2) + b"\x00"
    m = decode(ty, "TypeProto")
    assert m.tensor_type is None and m.sequence_type is not None
    _roundtrip("TypeProto", ty)
    # an AttributeType outside the enumeration is kept as an unknown field, as proto2 does
    a = key(1, 2) + b"\x01a" + key(20, 0) + varint(99)
    m = decode(a, "AttributeProto")
    assert m.type is None and m.unknown == key(20, 0) + varint(99)
    _roundtrip("AttributeProto", a)
    # explicitly empty fields are kept
    n = key(3, 2) + b"\x00" + key(7, 2) + b"\x00"
    m = decode(n, "NodeProto")
    assert m.name == "" and m.domain == "" and m.op_type is None
    assert encode(m) == n
    # negative int32 and int64 take ten octets
    t = key(2, 0) + varint(-1)
    assert encode(decode(t, "TensorProto")) == key(2, 0) + b"\xff" * 9 + b"\x01"


def test_float_bits_survive():
    snan = struct.pack("<I", 0x7F800001)
    a = key(1, 2) + b"\x01a" + key(2, 5) + snan + key(7, 5) + struct.pack("<I", 0xFFC00123)
    m = decode(a, "AttributeProto")
    assert m.f.bits == 0x7F800001 and m.f != m.f  # a NaN as a float, its signalling payload kept
    assert encode(m) == a
