"""The C decoder shares the str of values that repeat (op_type, domains, attribute names,
dim_param): the same values as the pure-Python decoder, one object per text."""

from __future__ import annotations

import importlib
import os

import pytest
from onnx import TensorProto, helper

D = importlib.import_module("onemodel.formats.onnx.wire_decode")
needs_c = pytest.mark.skipif(D._C is None, reason="C decoder not built")

LONG = "Op" + "x" * 60  # past the shared length: decoded each time


def _model() -> bytes:
    ops = ["Relu", "Add", "Relu", "Ünïcode", "Add", LONG, LONG, "", "Relu"]
    nodes = [helper.make_node(op, ["a"], ["b"], name=f"n{i}", domain="com.x" if i % 2 else "",
                              axis=i) for i, op in enumerate(ops)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])
    g = helper.make_graph(nodes, "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21),
                                            helper.make_opsetid("com.x", 1)])
    return m.SerializeToString()


def _decode(data: bytes, pure: bool):
    old = os.environ.pop("ONEMODEL_PURE_PYTHON", None)
    if pure:
        os.environ["ONEMODEL_PURE_PYTHON"] = "1"
    try:
        return D.decode(memoryview(data))
    finally:
        os.environ.pop("ONEMODEL_PURE_PYTHON", None)
        if old is not None:
            os.environ["ONEMODEL_PURE_PYTHON"] = old


@needs_c
def test_shared_strings_equal_the_python_decoders_values():
    data = _model()
    c, py = _decode(data, False), _decode(data, True)
    assert c == py
    for a, b in zip(c.graph.nodes, py.graph.nodes):
        assert (a.op_type, a.domain, a.name) == (b.op_type, b.domain, b.name)
        assert type(a.op_type) is str and type(a.domain) is str
        assert [x.name for x in a.attributes] == [x.name for x in b.attributes] == ["axis"]


@needs_c
def test_repeated_values_are_one_object():
    nodes = _decode(_model(), False).graph.nodes
    assert nodes[0].op_type is nodes[2].op_type is nodes[8].op_type == "Relu"
    assert nodes[1].op_type is nodes[4].op_type == "Add"
    assert nodes[1].domain is nodes[3].domain == "com.x"
    assert nodes[0].attributes[0].name is nodes[5].attributes[0].name == "axis"
    # across decodes too
    again = _decode(_model(), False).graph.nodes
    assert again[0].op_type is nodes[0].op_type
    # names identify: not shared
    assert nodes[5].op_type == nodes[6].op_type == LONG
    assert nodes[3].op_type == "Ünïcode" and nodes[7].op_type == ""
    g = _decode(_model(), False).graph
    dims = [d.dim_param for v in (g.inputs[0], g.outputs[0]) for d in v.type.shape.dims
            if d.dim_param]
    assert dims == ["batch", "batch", "seq"] and dims[0] is dims[1]


@needs_c
def test_many_distinct_values_replace_each_other():
    """More distinct op_types than the cache holds: every value still right."""
    ops = [f"Op{i}" for i in range(3000)]
    g = helper.make_graph([helper.make_node(op, [], ["o"]) for op in ops] * 2, "g", [], [])
    data = helper.make_model(g).SerializeToString()
    c, py = _decode(data, False), _decode(data, True)
    assert [n.op_type for n in c.graph.nodes] == [n.op_type for n in py.graph.nodes] == ops * 2
