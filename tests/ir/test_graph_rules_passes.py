"""The graph rules' one pass for sorted graphs and their rule-by-rule walk for the rest
(onemodel/ir/graph_rules.py, ``_in_order``): the cases where the one pass must give way, each
with the order, the problems and the outer names the rules state (Part 1, Clauses 7.5, 7.5.1)."""

from __future__ import annotations

import pytest
from onnx import TensorProto as TP
from onnx import helper

from onemodel.errors import InvalidModelError
from onemodel.formats.onnx import decode_model
from onemodel.ir import graph_rules


def _vi(name):
    return helper.make_tensor_value_info(name, TP.FLOAT, [2])


def _model(nodes, inputs=("x",), outputs=("y",), inits=()):
    g = helper.make_graph(nodes, "g", [_vi(n) for n in inputs], [_vi(n) for n in outputs],
                          [helper.make_tensor(n, TP.FLOAT, [1], [1.0]) for n in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return decode_model(m.SerializeToString())


def _problems(model):
    orders, problems = graph_rules.model_problems(model)
    return orders.get(id(model.graph)), [(r, e.message, e.path) for r, e in problems]


def _chain(n):
    """``t0 = Neg(x)``, ``t{i} = Add(t{i-1}, w)``: every input defined before its use."""
    nodes = [helper.make_node("Neg", ["x"], ["t0"])]
    nodes += [helper.make_node("Add", [f"t{i - 1}", "w"], [f"t{i}"]) for i in range(1, n)]
    return nodes


def test_a_sorted_graph_keeps_its_order_with_graph_inputs_initializers_and_empty_inputs():
    nodes = _chain(300) + [helper.make_node("Clip", ["t299", "", "w"], ["y"])]
    orders, problems = _problems(_model(nodes, inits=("w",)))
    assert problems == [] and orders == list(range(301))


def test_a_use_before_its_definition_is_sorted_stably():
    nodes = _chain(5)
    nodes.insert(1, helper.make_node("Neg", ["t4"], ["y"]))  # reads the chain's last value
    orders, problems = _problems(_model(nodes, inits=("w",)))
    # the reader of t4 waits for t1..t4 (indices 2..5); the others keep their places
    assert problems == [] and orders == [0, 2, 3, 4, 5, 1]


def test_a_node_reading_its_own_output_is_a_cycle():
    orders, problems = _problems(_model([helper.make_node("Neg", ["x"], ["a"]),
                                         helper.make_node("Abs", ["y"], ["y"])]))
    assert orders is None
    assert problems == [("cycle", "the nodes form a cycle through node 'Abs' (no dependency "
                         "order exists)", "graph.nodes[1]")]


def test_problems_after_a_long_clean_prefix_come_in_rule_order_with_the_first_definition_kept():
    nodes = _chain(200) + [helper.make_node("Neg", ["t199"], ["t5"], name="again"),
                           helper.make_node("Neg", ["ghost"], ["u"]),
                           helper.make_node("Add", ["t5", "u"], ["y"])]
    orders, problems = _problems(_model(nodes, inits=("w",)))
    assert problems == [
        ("duplicate", "name 't5' is defined twice in one graph", "graph.nodes[200].outputs[0]"),
        ("undefined", "input 'ghost' of node 'Neg' is not defined in this graph or an "
         "enclosing one", "graph.nodes[201].inputs[0]"),
    ]
    assert orders == list(range(203))  # y reads t5 of node 5 (the first definition), not 200


def test_a_duplicate_of_a_graph_input_and_an_undeclared_domain_after_clean_nodes():
    nodes = _chain(50) + [helper.make_node("Neg", ["t49"], ["x"]),
                          helper.make_node("Foo", ["t49"], ["y"], domain="com.x")]
    orders, problems = _problems(_model(nodes, inits=("w",)))
    assert problems == [
        ("duplicate", "name 'x' is defined twice in one graph", "graph.nodes[50].outputs[0]"),
        ("domain", "domain 'com.x' of node 'Foo' is not imported by opsets",
         "graph.nodes[51].domain"),
    ]


def _graph(nodes, inputs=("x",), outputs=("y",)):
    return _model(nodes, inputs, outputs).graph


def test_an_outer_name_read_then_defined_later_in_the_graph_is_the_graph_s_own():
    # 'v' is an enclosing scope's name and also node 1's output: node 0 reads node 1's
    g = _graph([helper.make_node("Neg", ["v"], ["y"]), helper.make_node("Neg", ["x"], ["v"])])
    assert graph_rules.check_graph(g, "sub", {""}, outer={"v"}) == {id(g): [1, 0]}
    # read from the enclosing scope only: nothing to sort, 'v' comes from outside
    g = _graph([helper.make_node("Add", ["v", "x"], ["y"])])
    assert graph_rules.check_graph(g, "sub", {""}, outer={"v"}) == {id(g): [0]}


def test_a_subgraph_reading_a_later_value_orders_its_node_after_the_producer():
    branch = helper.make_graph([helper.make_node("Neg", ["late"], ["b"])], "b", [], [_vi("b")])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch),
             helper.make_node("Neg", ["x"], ["late"]),
             helper.make_node("Cast", ["x"], ["c"], to=TP.BOOL)]
    model = _model(nodes)
    orders, problems = _problems(model)
    assert problems == [] and orders == [1, 2, 0]
    then = model.graph.nodes[0].attributes[0].g
    assert graph_rules.model_problems(model)[0][id(then)] == [0]


def test_a_subgraph_problem_in_a_sorted_graph_has_its_path():
    branch = helper.make_graph([helper.make_node("Neg", ["nowhere"], ["b"])], "b", [],
                               [_vi("b")])
    nodes = [helper.make_node("Cast", ["x"], ["c"], to=TP.BOOL),
             helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)]
    with pytest.raises(InvalidModelError) as e:
        graph_rules.check_model(_model(nodes))
    assert (e.value.message, e.value.path) == (
        "input 'nowhere' of node 'Neg' is not defined in this graph or an enclosing one",
        "graph.nodes[1].attributes[0].g.nodes[0].inputs[0]")


def test_one_and_two_input_and_output_nodes_with_empty_names_and_later_definitions():
    """The one pass tests a node of one or two inputs and of one output inline: an empty
    input or output name is no use or definition, an input defined by a later node is
    sorted after it, and a second output that redefines a name is a duplicate."""
    nodes = _chain(10) + [helper.make_node("Add", ["", "t9"], ["a"]),
                          helper.make_node("Split", ["a"], ["", "b"]),
                          helper.make_node("Add", ["b", "late"], ["y"]),
                          helper.make_node("Neg", ["b"], ["late"])]
    orders, problems = _problems(_model(nodes, inits=("w",)))
    assert problems == [] and orders == list(range(12)) + [13, 12]
    nodes = _chain(10) + [helper.make_node("Split", ["t9"], ["c", "t3"])]
    orders, problems = _problems(_model(nodes, inits=("w",), outputs=("c",)))
    assert problems == [("duplicate", "name 't3' is defined twice in one graph",
                         "graph.nodes[10].outputs[1]")]
