"""The splice's two loops in C (``_cdecode.c``: ``insertion_point`` and ``value_info_octets``)
against their Python forms in onemodel/formats/onnx/splice.py (``ONEMODEL_PURE_PYTHON=1``):
the same octets for entries of every kind (shared and distinct types, names of one, two and
three length octets, lone surrogates, doc_string "" and set, metadata_props, unknown fields),
the same insertion point, and for octets that are not fields the same WireError (Clause 12)."""

from __future__ import annotations

import random

import pytest
from onnx import TensorProto as T
from onnx import helper

from onemodel.formats.onnx import splice, wire_decode
from onemodel.formats.protobuf import WireError
from onemodel.ir import StringStringEntry, Type, ValueInfo

pytestmark = pytest.mark.skipif(wire_decode._C is None, reason="_cdecode.c is not built")


def _pure(monkeypatch, fn, *args):
    with monkeypatch.context() as m:
        m.setenv("ONEMODEL_PURE_PYTHON", "1")
        assert splice._accelerator() is None
        return fn(*args)


def _entries():
    shared = Type.tensor(T.FLOAT, ["N", 2, 3])
    out = [ValueInfo(name=f"v{k}", type=shared) for k in range(5)]
    out += [ValueInfo(name="n" * 127, type=Type.tensor(T.INT64, [None])),
            ValueInfo(name="n" * 128, type=shared),
            ValueInfo(name="m" * 16384, type=Type.tensor(T.FLOAT16, [7])),
            ValueInfo(name="caf\u00e9 \U0001F600", type=shared),
            ValueInfo(name="lone\udcff", type=shared),          # a surrogateescape'd octet
            ValueInfo(name="", type=shared),
            ValueInfo(name="doc", type=shared, doc_string=""),
            ValueInfo(name="doc2", type=shared, doc_string="the doc"),
            ValueInfo(name="meta", type=shared,
                      metadata_props=[StringStringEntry(key="k", value="v")])]
    odd = ValueInfo(name="unknown", type=shared)
    odd.unknown = b"\xa0\x06\x01"  # field 100, varint 1
    return out + [odd]


def test_value_info_octets_in_c_equal_the_python_loop(monkeypatch):
    entries = _entries()
    got = splice.value_info_octets(entries)
    assert got == _pure(monkeypatch, splice.value_info_octets, entries)
    # and decode back to the entries, in order
    from onemodel.formats.onnx import decode_model

    g = helper.make_graph([], "g", [], [])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    data = m.SerializeToString()
    spliced = b"".join(bytes(p) for p in splice.splice_value_info(data, entries))
    back = decode_model(spliced).graph.value_info
    assert [vi.name for vi in back] == [vi.name for vi in entries]
    assert [str(vi.type) for vi in back] == [str(vi.type) for vi in entries]
    assert back[11].doc_string == "" and back[12].doc_string == "the doc"


def test_value_info_octets_of_no_entry_is_empty():
    assert splice.value_info_octets([]) == b""


def _graph_octets():
    nodes = [helper.make_node("Relu", [f"v{i}"], [f"v{i + 1}"], name="n" * (60 * i))
             for i in range(4)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("v0", T.FLOAT, [2])],
                          [helper.make_tensor_value_info("v4", T.FLOAT, [2])])
    g.quantization_annotation.add().tensor_name = "v1"
    g.metadata_props.add(key="k", value="v")
    return g.SerializeToString()


def test_insertion_point_in_c_equals_the_python_walk(monkeypatch):
    data = memoryview(_graph_octets())
    at = splice.insertion_point(data, 0, len(data))
    assert at == _pure(monkeypatch, splice.insertion_point, data, 0, len(data))
    assert 0 < at < len(data)


@pytest.mark.parametrize("seed", range(60))
def test_octets_that_are_not_fields_raise_the_python_walks_error(monkeypatch, seed):
    rng = random.Random(seed)
    data = bytearray(_graph_octets())
    for _ in range(rng.randint(1, 4)):  # damage a few octets, or cut the end off
        if rng.random() < 0.3:
            del data[rng.randrange(len(data)):]
        else:
            where = rng.randrange(40 if rng.random() < 0.7 else len(data))  # keys, lengths
            data[where] = rng.randrange(256)
    view = memoryview(bytes(data))

    def outcome(fn):
        try:
            return ("ok", fn(view, 0, len(view)))
        except WireError as e:
            return ("error", str(e), e.offset)

    assert outcome(splice.insertion_point) == _pure(monkeypatch, outcome, splice.insertion_point)
