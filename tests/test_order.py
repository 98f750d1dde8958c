"""Dependency order of nodes and the names subgraphs read from outside (onemodel/ir/order.py), as
the evaluator and the OneModel reading rules use them."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

from onemodel.errors import InvalidModelError
from onemodel.evaluate import Session
from onemodel.formats.onnx import decode_model
from onemodel.ir import graph_rules
from onemodel.ir.order import node_outer_names, outer_names, stable_topological_order

F = TP.FLOAT


def _model(nodes, inputs, outputs):
    g = helper.make_graph(nodes, "g", inputs, outputs)
    return decode_model(helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 21)]).SerializeToString())


def _reversed_chain(n: int):
    """``t{n} = -(-(...-t0))``: node ``i`` of the list computes step ``n - 1 - i``."""
    nodes = [helper.make_node("Neg", [f"t{i}"], [f"t{i + 1}"]) for i in range(n)][::-1]
    return _model(nodes, [helper.make_tensor_value_info("t0", F, [2])],
                  [helper.make_tensor_value_info(f"t{n}", F, [2])])


def test_stable_order_keeps_sorted_nodes_and_takes_the_lowest_ready_index():
    assert stable_topological_order([set(), {0}, {1}], "graph") == [0, 1, 2]
    # 0 reads 2: as soon as 2 is placed, 0 is the lowest ready index (before 3)
    assert stable_topological_order([{2}, set(), set(), set()], "graph") == [1, 2, 0, 3]
    assert stable_topological_order([{1}, {2}, set()], "graph") == [2, 1, 0]
    assert stable_topological_order([], "graph") == []


def test_a_cycle_names_the_lowest_node_that_cannot_be_ordered():
    with pytest.raises(InvalidModelError) as e:
        stable_topological_order([set(), {3}, {1}, {2}, {0}], "graph.nodes[7].attributes[0].g")
    assert e.value.path == "graph.nodes[7].attributes[0].g.nodes[1]"
    assert "cycle" in e.value.message
    with pytest.raises(InvalidModelError) as e:
        stable_topological_order([{0}], "graph", cycle=lambda i: f"node {i} reads itself")
    assert (e.value.message, e.value.path) == ("node 0 reads itself", "graph.nodes[0]")


def test_long_reversed_chain_is_sorted_by_the_evaluator_and_the_reading_rules():
    n = 8000
    m = _reversed_chain(n)
    out = Session(m).run({"t0": np.array([1.5, -2], np.float32)})[f"t{n}"]
    np.testing.assert_array_equal(out, [1.5, -2])  # an even number of negations
    assert graph_rules.check_model(m)[id(m.graph)] == list(range(n - 1, -1, -1))


def test_evaluator_cycle_keeps_its_message_and_path():
    m = _model([helper.make_node("Abs", ["x"], ["t"], name="first"),
                helper.make_node("Neg", ["b"], ["a"], name="neg"),
                helper.make_node("Abs", ["a"], ["b"], name="abs")],
               [helper.make_tensor_value_info("x", F, [2])],
               [helper.make_tensor_value_info("a", F, [2])])
    with pytest.raises(InvalidModelError) as e:
        Session(m)
    assert e.value.path == "graph.nodes[1]"
    assert "cycle through node" in e.value.message and "neg" in e.value.message
    with pytest.raises(InvalidModelError) as e:
        graph_rules.check_model(m)
    assert e.value.path == "graph.nodes[1]"


def test_outer_names_are_what_a_subgraph_reads_from_around_it_at_every_level():
    inner = helper.make_graph(
        [helper.make_node("Add", ["outer_a", "local"], ["r"])], "inner", [],
        [helper.make_tensor_value_info("r", F, None)])
    body = helper.make_graph(
        [helper.make_node("Neg", ["outer_b"], ["local"]),
         helper.make_node("If", ["cond"], ["s"], then_branch=inner, else_branch=inner),
         helper.make_node("Identity", ["s"], ["o"])],
        "body", [helper.make_tensor_value_info("cond", TP.BOOL, [])],
        [helper.make_tensor_value_info("o", F, None),
         helper.make_tensor_value_info("outer_c", F, None)])
    node = helper.make_node("Loop", ["n", ""], ["y"], body=body)
    m = _model([node], [helper.make_tensor_value_info("n", TP.INT64, [])],
               [helper.make_tensor_value_info("y", F, None)])
    loop = m.graph.nodes[0]
    # "local" is defined in body, so the inner graph's read of it stays inside
    assert outer_names(loop.attributes[0].g) == {"outer_a", "outer_b", "outer_c"}
    assert node_outer_names(loop) == {"outer_a", "outer_b", "outer_c"}
    assert node_outer_names(m.graph.nodes[0].attributes[0].g.nodes[0]) == set()
