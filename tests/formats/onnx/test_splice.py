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


def _reference_point(data, start, end, before):
    """insertion_point's answer by the plain field walk (no inline fast path)."""
    from onemodel.formats.onnx.splice import _field_at

    pos, at = start, start
    while pos < end:
        tag, _, _, nxt = _field_at(data, pos, end)
        if tag in before:
            at = nxt
        pos = nxt
    return at


@pytest.mark.parametrize("name_len", [1, 100, 126, 127, 128, 200, 16383, 16384, 20000])
def test_insertion_point_over_one_two_and_three_octet_lengths(name_len):
    """The walk's inline path (one-octet key, one- or two-octet length) and its fallback
    (longer lengths, other wire types) find the point the plain walk finds: after the last
    field the writer puts before value_info, before quantization_annotation and
    metadata_props, whatever the length prefixes' sizes."""
    from onemodel.formats.onnx.splice import (
        _graph_tags_before_value_info,
        graph_span,
        insertion_point,
    )

    nodes = [helper.make_node("Relu", [f"v{i}"], [f"v{i + 1}"], name="n" * (name_len + i))
             for i in range(3)]
    g = helper.make_graph(nodes, "g" * name_len,
                          [helper.make_tensor_value_info("v0", T.FLOAT, [2])],
                          [helper.make_tensor_value_info("v3", T.FLOAT, [2])],
                          [numpy_helper.from_array(np.zeros(name_len, np.float32), "w")])
    g.quantization_annotation.add().tensor_name = "v1"
    g.metadata_props.add(key="k" * name_len, value="v")
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    data = m.SerializeToString()
    _, start, end = graph_span(memoryview(data))
    before = _graph_tags_before_value_info()
    at = insertion_point(memoryview(data), start, end)
    assert at == _reference_point(memoryview(data), start, end, before)
    # the graph's own octets up to there hold every field up to output, none after it
    head = helper.make_graph(nodes, "g" * name_len,
                             [helper.make_tensor_value_info("v0", T.FLOAT, [2])],
                             [helper.make_tensor_value_info("v3", T.FLOAT, [2])],
                             [numpy_helper.from_array(np.zeros(name_len, np.float32), "w")])
    assert at - start == len(head.SerializeToString())
