"""One attribute decoder (Clause 7.4, Table B.4): ``Attribute.value`` (the IR's form: bytes,
Tensor) and the evaluator's ``attribute_value`` (str, ndarray) are ``decode_attribute`` with and
without converters, and give for every attribute type the values stated here."""

from __future__ import annotations

import numpy as np
import pytest

from onemodel.evaluate.context import attribute_value
from onemodel.ir import Attribute, AttributeType, DataType, Graph, SparseTensor, Tensor, Type
from onemodel.ir.model import decode_attribute

A = AttributeType
BAD = b"caf\xc3\xa9 \xff"  # valid UTF-8, then a byte that is not
BAD_TEXT = "caf\u00e9 \udcff"  # what surrogateescape keeps of it


def _tensor(values, dt=DataType.FLOAT):
    return Tensor.from_numpy(np.asarray(values, dtype=np.float32 if dt == DataType.FLOAT else
                                        np.int64))


def _sparse():
    return SparseTensor(values=Tensor.from_numpy(np.asarray([5.0], np.float32)),
                        indices=Tensor.from_numpy(np.asarray([2], np.int64)), dims=[4])


def test_scalars_and_their_absent_defaults():
    for kind, field, value, ir, ev in [
            (A.FLOAT, "f", 0.1, float(np.float32(0.1)), float(np.float32(0.1))),
            (A.FLOAT, "f", None, 0.0, 0.0),
            (A.INT, "i", -7, -7, -7),
            (A.INT, "i", None, 0, 0),
            (A.STRING, "s", BAD, BAD, BAD_TEXT),
            (A.STRING, "s", None, b"", "")]:
        a = Attribute.make("x", value, kind) if value is not None else Attribute(name="x",
                                                                                   type=int(kind))
        assert a.value == ir and type(a.value) is type(ir), (kind, value)
        got = attribute_value(a)
        assert got == ev and type(got) is type(ev), (kind, value)
        assert decode_attribute(a) == ir


def test_lists():
    floats = Attribute.make("f", [0.1, -2.5], A.FLOATS)
    assert floats.value == [float(np.float32(0.1)), -2.5] == attribute_value(floats)
    assert Attribute(name="f", type=int(A.FLOATS)).value == []
    ints = Attribute.make("i", [3, -1], A.INTS)
    assert ints.value == [3, -1] and ints.value is ints.ints  # the IR form is the field itself
    got = attribute_value(ints)
    assert got == [3, -1] and got is not ints.ints  # a kernel gets its own list
    got.append(9)
    assert ints.ints == [3, -1]
    strings = Attribute.make("s", [BAD, b"b"], A.STRINGS)
    assert strings.value == [BAD, b"b"]
    assert attribute_value(strings) == [BAD_TEXT, "b"]


def test_tensors_become_arrays_for_kernels_only():
    t = _tensor([1.0, 2.0])
    a = Attribute.make("t", t, A.TENSOR)
    assert a.value is t
    got = attribute_value(a)
    assert isinstance(got, np.ndarray) and got.dtype == np.float32 and got.tolist() == [1.0, 2.0]
    assert Attribute(name="t", type=int(A.TENSOR)).value is None
    assert attribute_value(Attribute(name="t", type=int(A.TENSOR))) is None
    text = Tensor(name="s", dims=[2], data_type=DataType.STRING, string_data=[BAD, b"z"])
    assert attribute_value(Attribute.make("t", text, A.TENSOR)).tolist() == [BAD_TEXT, "z"]
    many = Attribute.make("ts", [t, _tensor([3], DataType.INT64)], A.TENSORS)
    assert many.value == [t, many.tensors[1]]
    assert [x.tolist() for x in attribute_value(many)] == [[1.0, 2.0], [3]]
    sp = _sparse()
    one = Attribute.make("sp", sp, A.SPARSE_TENSOR)
    assert one.value is sp
    assert attribute_value(one).tolist() == [0.0, 0.0, 5.0, 0.0]
    both = Attribute.make("sps", [sp, sp], A.SPARSE_TENSORS)
    assert [x.tolist() for x in attribute_value(both)] == [[0.0, 0.0, 5.0, 0.0]] * 2


def test_graphs_and_types_pass_through():
    g, h = Graph(name="g"), Graph(name="h")
    assert Attribute.make("g", g, A.GRAPH).value is g
    assert attribute_value(Attribute.make("g", g, A.GRAPH)) is g
    gs = Attribute.make("gs", [g, h], A.GRAPHS)
    assert gs.value == [g, h] and attribute_value(gs) == [g, h]
    assert attribute_value(gs) is not gs.graphs
    tp = Type.tensor(DataType.FLOAT, [2])
    assert Attribute.make("tp", tp, A.TYPE_PROTO).value is tp
    assert attribute_value(Attribute.make("tp", tp, A.TYPE_PROTO)) is tp
    tps = Attribute.make("tps", [tp], A.TYPE_PROTOS)
    assert tps.value == [tp] and attribute_value(tps) == [tp]


@pytest.mark.parametrize("kind", [None, 0, 99])
def test_undefined_or_unknown_type_has_no_value(kind):
    a = Attribute(name="x", type=kind, i=3, s=b"s")
    assert a.value is None and attribute_value(a) is None and decode_attribute(a) is None


def test_a_reference_sets_no_value_field():
    # Clause 8.4: the value comes from the calling node; the attribute itself reads as empty
    a = Attribute(name="alpha", type=int(A.FLOAT), ref_attr_name="alpha")
    assert a.value == 0.0 and attribute_value(a) == 0.0
    b = Attribute(name="axes", type=int(A.INTS), ref_attr_name="axes")
    assert b.value == [] and attribute_value(b) == []
    c = Attribute(name="alpha", ref_attr_name="alpha")
    assert c.value is None and attribute_value(c) is None
