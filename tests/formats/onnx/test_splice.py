"""onemodel.formats.onnx.splice: value_info entries inserted into a file's octets equal the
writer's encoding of the model with the entries appended, and decode to it."""

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import onemodel
from onemodel.formats.onnx.splice import splice_value_info
from onemodel.formats.onnx.wire_encode import encode
from onemodel.ir import Type, ValueInfo


def _proto(graph_extras: bool):
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    g = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
         helper.make_node("Neg", ["b"], ["y"])], "g",
        [helper.make_tensor_value_info("x", T.FLOAT, ["N", 2, 3])],
        [helper.make_tensor_value_info("y", T.FLOAT, None)], [w],
        value_info=[helper.make_tensor_value_info("a", T.FLOAT, ["N", 2, 3])])
    if graph_extras:
        ann = g.quantization_annotation.add()
        ann.tensor_name = "a"
        e = g.metadata_props.add()
        e.key, e.value = "k", "v"
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.metadata_props.add(key="top", value="1")
    return m


@pytest.mark.parametrize("graph_extras", [False, True])
def test_spliced_octets_equal_the_writers_encoding(graph_extras):
    data = _proto(graph_extras).SerializeToString()
    m = onemodel.load(data)
    entries = [ValueInfo(name="b", type=Type.tensor(T.FLOAT, ["N", 2, 3])),
               ValueInfo(name="y2", type=Type.tensor(T.INT64, [None]))]
    got = b"".join(bytes(p) for p in splice_value_info(data, entries))
    m.graph.value_info.extend(entries)
    assert got == encode(m)
    back = onemodel.load(got)
    assert [vi.name for vi in back.graph.value_info] == ["a", "b", "y2"]
    assert str(back.graph.value_info[1].type) == "tensor(float)[N,2,3]"


def test_a_model_without_a_graph_is_not_spliced():
    m = helper.make_model(helper.make_graph([], "g", [], []))
    m.ClearField("graph")
    assert splice_value_info(m.SerializeToString(), []) is None
