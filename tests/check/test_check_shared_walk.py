"""What the check families share (onemodel/validation): the graph rules' producers of a sorted
graph (kept by the structure checks for the type checks), and the type checks giving the same
findings with them as without them (a graph out of order has none)."""

from __future__ import annotations

from onnx import TensorProto as TP
from onnx import helper

from onemodel.formats.onnx import decode_model
from onemodel.ir import graph_rules
from onemodel.validation.structure import check_structure, producers
from onemodel.validation.types import check_types


def _vi(name, elem=TP.FLOAT):
    return helper.make_tensor_value_info(name, elem, [2])


def _model(nodes, value_info=(), outputs=("y",)):
    g = helper.make_graph(nodes, "g", [_vi("x")], [_vi(n) for n in outputs],
                          [helper.make_tensor("w", TP.FLOAT, [1], [1.0])],
                          value_info=list(value_info))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return decode_model(m.SerializeToString())


def test_producers_of_a_sorted_graph_name_every_node_output_and_graph_level_name():
    m = _model([helper.make_node("Add", ["x", "w"], ["t"]), helper.make_node("Relu", ["t"], ["y"])])
    made: dict = {}
    graph_rules.model_problems(m, producers=made)
    assert made == {id(m.graph): {"x": -1, "w": -1, "t": 0, "y": 1}}
    ctx: dict = {}
    assert check_structure(m, ctx=ctx) == []
    assert producers(m, ctx) == made
    assert producers(_model([]), ctx) == {}   # kept for the model it ran on only
    assert producers(m, None) == {}


def test_an_unsorted_or_faulty_graph_has_no_producers():
    unsorted = _model([helper.make_node("Relu", ["t"], ["y"]),
                       helper.make_node("Add", ["x", "w"], ["t"])])
    twice = _model([helper.make_node("Add", ["x", "w"], ["y"]),
                    helper.make_node("Relu", ["x"], ["y"])])
    for m in (unsorted, twice):
        made: dict = {}
        graph_rules.model_problems(m, producers=made)
        assert made == {}


def _findings(m, ctx):
    return [(f.code, f.message, f.path) for f in check_types(m, ctx)]


def test_output_types_are_checked_the_same_with_the_producers_as_without():
    # t is stated INT64 by value_info: Add's T is float for x and w, so t (an output of Add)
    # breaks the binding (OM403); Relu's output y stated BOOL is outside T (OM402)
    nodes = [helper.make_node("Add", ["x", "w"], ["t"]), helper.make_node("Relu", ["t"], ["y"])]
    expect = [
        ("OM403", "type parameter T of node 'Add' (Add-14) is tensor(float) for input 'x' but "
         "tensor(int64) for output 't' (declared by value_info)", "graph.nodes[0].outputs[0]"),
        ("OM402", "output 'y' of node 'Relu' (Relu-14) is declared tensor(bool) (by a graph "
         "output), which T of 'Y' does not allow (tensor(bfloat16), tensor(double), "
         "tensor(float), tensor(float16), tensor(int16), tensor(int32), ...)",
         "graph.nodes[1].outputs[0]"),
    ]
    g = helper.make_graph(nodes, "g", [_vi("x")], [_vi("y", TP.BOOL)],
                          [helper.make_tensor("w", TP.FLOAT, [1], [1.0])],
                          value_info=[_vi("t", TP.INT64)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    m = decode_model(m.SerializeToString())
    ctx: dict = {}
    check_structure(m, ctx=ctx)
    assert producers(m, ctx)[id(m.graph)]["t"] == 0
    assert _findings(m, ctx) == expect
    assert _findings(m, {}) == expect     # without the structure checks' producers
