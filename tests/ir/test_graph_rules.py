"""The graph rules (onemodel/ir/graph_rules.py) where the evaluator needs them beyond the readers:
function bodies (rules 1 to 3 with ``function_bodies=True``), one graph with the names of its
enclosing scopes (``check_graph``), and a cycle message naming a node on the cycle."""

from __future__ import annotations

import pytest
from onnx import TensorProto as TP
from onnx import helper

from onemodel.errors import InvalidModelError
from onemodel.formats.onnx import decode_model
from onemodel.ir import graph_rules

F = TP.FLOAT


def _vi(name):
    return helper.make_tensor_value_info(name, F, [2])


def _with_function(body_nodes, inputs=("X",), outputs=("Y",), body_opsets=(("", 21),)):
    fn = helper.make_function("local", "F", list(inputs), list(outputs), body_nodes,
                              [helper.make_opsetid(d, v) for d, v in body_opsets])
    g = helper.make_graph([helper.make_node("F", ["x"], ["y"], domain="local")], "g",
                          [_vi("x"), _vi("w")], [_vi("y")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21),
                                            helper.make_opsetid("local", 1)], functions=[fn])
    m.ir_version = 10
    return decode_model(m.SerializeToString())


def _branch(reads: str):
    return helper.make_graph([helper.make_node("Neg", [reads], ["b"])], "b", [], [_vi("b")])


@pytest.mark.parametrize("nodes, inputs, message, path", [
    ([helper.make_node("Add", ["X", "ghost"], ["Y"])], ("X",),
     "input 'ghost' of node 'Add' is not defined in this graph or an enclosing one",
     "functions[0].nodes[0].inputs[1]"),
    # a body reads only its parameters: the calling graph's 'w' is not visible
    ([helper.make_node("Add", ["X", "w"], ["Y"])], ("X",),
     "input 'w' of node 'Add' is not defined in this graph or an enclosing one",
     "functions[0].nodes[0].inputs[1]"),
    ([helper.make_node("Neg", ["X"], ["Y"]), helper.make_node("Abs", ["X"], ["Y"])], ("X",),
     "name 'Y' is defined twice in one graph", "functions[0].nodes[1].outputs[0]"),
    ([helper.make_node("Neg", ["X"], ["Y"])], ("X", "X"),
     "name 'X' is defined twice in one graph", "functions[0].inputs[1]"),
    ([helper.make_node("Neg", ["X"], ["t"])], ("X",),
     "name 'Y' is not defined in this graph or an enclosing one", "functions[0].outputs[0]"),
    ([helper.make_node("Neg", ["b"], ["Y"], name="p"), helper.make_node("Abs", ["Y"], ["b"])],
     ("X",), "the nodes form a cycle through node 'Neg' named 'p' (no dependency order exists)",
     "functions[0].nodes[0]"),
    # a subgraph in a body reads the body's values, not the calling graph's
    ([helper.make_node("If", ["X"], ["Y"], then_branch=_branch("w"), else_branch=_branch("X"))],
     ("X",), "input 'w' of node 'Neg' is not defined in this graph or an enclosing one",
     "functions[0].nodes[0].attributes[1].g.nodes[0].inputs[0]"),
])
def test_function_bodies_follow_rules_1_to_3_when_asked(nodes, inputs, message, path):
    m = _with_function(nodes, inputs)
    graph_rules.check_model(m)  # the readers' check: rule 4 only in bodies, as before
    with pytest.raises(InvalidModelError) as e:
        graph_rules.check_model(m, function_bodies=True)
    assert (e.value.message, e.value.path) == (message, path)


def test_a_function_body_is_ordered_and_its_subgraphs_read_its_values():
    m = _with_function([helper.make_node("If", ["c"], ["Y"], then_branch=_branch("t"),
                                         else_branch=_branch("X")),
                        helper.make_node("Neg", ["X"], ["t"]),
                        helper.make_node("Cast", ["X"], ["c"], to=TP.BOOL)])
    fn = m.functions[0]
    orders = graph_rules.check_model(m, function_bodies=True)
    assert orders[id(fn)] == [1, 2, 0]  # the If reads t (in its branch) and c: after both
    assert orders[id(fn.nodes[0].attributes[0].g)] == [0]
    assert id(fn) not in graph_rules.check_model(m)


def test_rule_4_in_a_body_takes_the_function_s_or_the_model_s_imports():
    nodes = [helper.make_node("Op", ["X"], ["Y"], domain="only.body")]
    m = _with_function(nodes, body_opsets=(("", 21), ("only.body", 1)))
    graph_rules.check_model(m, function_bodies=True)
    m = _with_function(nodes)
    with pytest.raises(InvalidModelError) as e:
        graph_rules.check_model(m, function_bodies=True)
    assert e.value.path == "functions[0].nodes[0].domain"


def test_check_graph_reads_the_names_of_the_enclosing_scopes():
    g = decode_model(helper.make_model(
        helper.make_graph([helper.make_node("Neg", ["t"], ["y"]),
                           helper.make_node("Add", ["outer", "x"], ["t"])],
                          "g", [_vi("x")], [_vi("y")]),
        opset_imports=[helper.make_opsetid("", 21)]).SerializeToString()).graph
    assert graph_rules.check_graph(g, "sub", {"ai.onnx"}, outer={"outer"}) == {id(g): [1, 0]}
    with pytest.raises(InvalidModelError) as e:
        graph_rules.check_graph(g, "sub", {""})
    assert (e.value.message, e.value.path) == (
        "input 'outer' of node 'Add' is not defined in this graph "
        "or an enclosing one", "sub.nodes[1].inputs[0]")
    with pytest.raises(InvalidModelError) as e:
        graph_rules.check_graph(g, "sub", {"com.x"}, outer={"outer"})
    assert e.value.path == "sub.nodes[0].domain"


def test_a_cycle_names_a_node_on_it_or_the_one_it_reads_from():
    def model(nodes):
        g = helper.make_graph(nodes, "g", [_vi("x")], [_vi("y")])
        return decode_model(helper.make_model(
            g, opset_imports=[helper.make_opsetid("", 21)]).SerializeToString())

    # node 0 reads b, which the cycle a -> b -> a (nodes 1 and 2) computes
    m = model([helper.make_node("Neg", ["b"], ["y"], name="after"),
               helper.make_node("Neg", ["b"], ["a"], name="p"),
               helper.make_node("Abs", ["a"], ["b"], name="q")])
    with pytest.raises(InvalidModelError) as e:
        graph_rules.check_model(m)
    assert e.value.path == "graph.nodes[0]"
    assert e.value.message == ("node 'Neg' named 'after' reads from a cycle through node 'Abs' "
                               "named 'q' (no dependency order exists)")
    m = model([helper.make_node("Identity", ["y"], ["y"])])
    with pytest.raises(InvalidModelError) as e:
        graph_rules.check_model(m)
    assert e.value.message == ("the nodes form a cycle through node 'Identity' (no dependency "
                               "order exists)")


def test_model_problems_finds_every_problem_check_model_raises_the_first_of():
    """model_problems: the rules written once; check_model raises the first of its problems
    (same message, same path), and the other problems are all there, in walk order."""
    sub = helper.make_graph([helper.make_node("Neg", ["ghost2"], ["b"])], "b", [], [_vi("b")])
    nodes = [helper.make_node("Add", ["x", "ghost"], ["y"]),
             helper.make_node("Neg", ["x"], ["y"]),
             helper.make_node("Foo", ["x"], ["z"], domain="com.x"),
             helper.make_node("If", ["x"], ["u"], then_branch=sub, else_branch=sub),
             helper.make_node("Neg", ["q"], ["p"]), helper.make_node("Neg", ["p"], ["q"])]
    g = helper.make_graph(nodes, "g", [_vi("x")], [_vi("y"), _vi("missing")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    model = decode_model(m.SerializeToString())
    orders, problems = graph_rules.model_problems(model)
    got = [(rule, e.message, e.path) for rule, e in problems]
    assert got == [
        ("duplicate", "name 'y' is defined twice in one graph", "graph.nodes[1].outputs[0]"),
        ("undefined", "input 'ghost' of node 'Add' is not defined in this graph "
        "or an enclosing one",
         "graph.nodes[0].inputs[1]"),
        ("domain", "domain 'com.x' of node 'Foo' is not imported by opsets",
         "graph.nodes[2].domain"),
        ("undefined", "input 'ghost2' of node 'Neg' is not defined in this graph "
        "or an enclosing one",
         "graph.nodes[3].attributes[0].g.nodes[0].inputs[0]"),
        ("undefined", "input 'ghost2' of node 'Neg' is not defined in this graph "
        "or an enclosing one",
         "graph.nodes[3].attributes[1].g.nodes[0].inputs[0]"),
        ("undefined", "name 'missing' is not defined in this graph or an enclosing one",
         "graph.outputs[1]"),
        ("cycle", "the nodes form a cycle through node 'Neg' (no dependency order exists)",
         "graph.nodes[4]"),
    ]
    assert id(model.graph) not in orders  # no order for a graph with a cycle
    assert {r for r, _ in problems} <= set(graph_rules.RULES)
    with pytest.raises(InvalidModelError) as e:
        graph_rules.check_model(model)
    assert (e.value.message, e.value.path) == (problems[0][1].message, problems[0][1].path)
