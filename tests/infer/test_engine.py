"""The inference engine: declared types merged with inferred ones, contradictions, operators
without a rule, subgraph scopes and model-local functions (Clause 9.4)."""

import pytest
from onnx import TensorProto as T
from onnx import helper

import onemodel
from onemodel.inference import Expr, infer_model


def _model(nodes, inputs, outputs, value_info=(), opset=17, functions=(), inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits), value_info=list(value_info))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset),
                                            helper.make_opsetid("local", 1)],
                          functions=list(functions))
    return onemodel.load(m.SerializeToString())


def vi(name, shape, elem=T.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def test_broadcast_keeps_symbols_and_ints():
    m = _model([helper.make_node("Add", ["x", "y"], ["z"])],
               [vi("x", ["N", 1, 3]), vi("y", [4, 1])], [vi("z", None)])
    z = infer_model(m).values["z"]
    assert z.elem == T.FLOAT and z.shape == (Expr.var("N"), 4, 3)


def test_a_declared_type_that_contradicts_is_reported_with_its_path():
    m = _model([helper.make_node("Add", ["x", "y"], ["z"])],
               [vi("x", [2, 3]), vi("y", [3])], [vi("z", [2, 4], T.FLOAT)])
    res = infer_model(m)
    assert [(c.path, "axis 1" in c.message) for c in res.contradictions] == \
        [("graph.outputs[0]", True)]
    m = _model([helper.make_node("Add", ["x", "y"], ["z"])],
               [vi("x", [2, 3]), vi("y", [3])], [vi("z", [2, 3], T.INT64)])
    assert [c.path for c in infer_model(m).contradictions] == ["graph.outputs[0]"]


def test_incompatible_broadcast_is_a_contradiction_at_the_node():
    m = _model([helper.make_node("Add", ["x", "y"], ["z"], name="add")],
               [vi("x", [2, 3]), vi("y", [4])], [vi("z", None)])
    res = infer_model(m)
    assert len(res.contradictions) == 1
    c = res.contradictions[0]
    assert c.path == "graph.nodes[0]" and "Add 'add'" in c.message and "[3, 4]" in c.message


def test_declared_value_info_fills_what_inference_cannot_know():
    # a custom operator has no rule: its output is what value_info says
    m = _model([helper.make_node("Foo", ["x"], ["y"], domain="custom"),
                helper.make_node("Add", ["y", "x"], ["z"])],
               [vi("x", ["N", 3])], [vi("z", None)], value_info=[vi("y", ["N", 3])])
    m.opset_imports.append(type(m.opset_imports[0])(domain="custom", version=1))
    res = infer_model(m)
    assert res.values["z"].shape == (Expr.var("N"), 3)
    assert ("custom", "Foo", 1) in res.no_rule


def test_element_types_come_from_the_type_constraints_without_a_shape_rule():
    # a node whose rule says nothing of the element type gets the constraint's: Shape's
    # output is typed tensor(int64) by its definition
    m = _model([helper.make_node("Shape", ["x"], ["s"])], [vi("x", [2])],
               [helper.make_empty_tensor_value_info("s")])
    assert infer_model(m).values["s"].elem == T.INT64


def test_model_local_function_body_is_inferred_with_the_call_types():
    f = helper.make_function("local", "AddSelf", ["a"], ["b"],
                             [helper.make_node("Add", ["a", "a"], ["b"])],
                             [helper.make_opsetid("", 17)])
    m = _model([helper.make_node("AddSelf", ["x"], ["y"], domain="local")],
               [vi("x", ["B", 7])], [vi("y", None)], functions=[f])
    y = infer_model(m).values["y"]
    assert y.elem == T.FLOAT and y.shape == (Expr.var("B"), 7)


def test_infer_returns_types_by_name(tmp_path):
    p = tmp_path / "m.onnx"
    g = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["y"])], "g", [vi("x", ["N", 2])],
                          [vi("y", None)])
    p.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
                  .SerializeToString())
    types = onemodel.infer(str(p))
    assert str(types["y"]) == "tensor(float)[N,2]"


def test_a_closed_model_is_inferred_without_the_bytes_it_no_longer_has(tmp_path):
    """Inference of a model whose file was closed: a rule that needs the bytes of a tensor
    attribute (ConstantOfShape's ``value``) gives what the type constraints give rather than
    failing (it raised InternalError), and the rest of the graph is still inferred."""
    import numpy as np
    from onnx import numpy_helper

    value = numpy_helper.from_array(np.array([5], np.int64))
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["c"], value=value),
             helper.make_node("Relu", ["x"], ["y"])]
    g = helper.make_graph(nodes, "g", [vi("x", ["N", 3])], [vi("c", None, T.INT64),
                                                            vi("y", None)])
    path = tmp_path / "m.onnx"
    path.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    assert str(infer_model(str(path)).values["c"]) == "tensor(int64)[N,3]"
    with onemodel.load(str(path)) as m:
        pass
    res = infer_model(m)
    assert str(res.values["c"]) == "tensor(int64)[N,3]"    # its elements (5) unknown
    assert res.values["c"].data is None
    assert str(res.values["y"]) == "tensor(float)[N,3]"
    assert not res.contradictions


def _chain_model(sorted_: bool):
    """x -> Relu -> a -> Neg -> b -> Abs -> y, listed in order or with the first node last."""
    from onnx import TensorProto as T
    from onnx import helper

    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["b"]),
             helper.make_node("Abs", ["b"], ["y"])]
    if not sorted_:
        nodes = nodes[1:] + nodes[:1]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, ["N", 3])],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)])
    return onemodel.load(helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 21)]).SerializeToString())


@pytest.mark.parametrize("sorted_", [True, False])
def test_the_graph_rules_orders_spare_the_engines_pass_and_give_the_same_values(
        monkeypatch, sorted_):
    """infer_model(orders=check_model(...)), as onemodel infer calls it: a main graph the rules
    found in order is inferred in that order without the engine's own pass over its nodes
    (engine._order is not called); one out of order is ordered by the engine as before. The
    values are those of the call without orders either way."""
    from onemodel.inference import engine as engine_mod
    from onemodel.inference import infer_model
    from onemodel.ir import graph_rules

    m = _chain_model(sorted_)
    want = {k: str(v) for k, v in infer_model(m).values.items()}
    assert want["y"] == "tensor(float)[N,3]"
    calls = []
    real = engine_mod._order
    monkeypatch.setattr(engine_mod, "_order", lambda *a: calls.append(1) or real(*a))
    got = infer_model(m, orders=graph_rules.check_model(m))
    assert {k: str(v) for k, v in got.values.items()} == want
    assert calls == ([] if sorted_ else [1])


def test_initializer_values_are_lazy_tensors_read_once_and_equal_by_source():
    """An initializer's Value (built without hashing its elements) has the initializer's type
    and dims, reads its elements on the first use only, equals only a Value of the same
    source, and has the signature the memo of node results keys on; a STRING initializer is
    a plain tensor with no elements."""
    import numpy as np
    from onnx import numpy_helper

    from onemodel.inference import value as value_mod
    from onemodel.inference.engine import initializer_value
    from onemodel.inference.value import Value

    a = numpy_helper.from_array(np.array([[1, 2, 3], [4, 5, 6]], np.int64), "a")
    s = helper.make_tensor("s", T.STRING, [2], [b"x", b"y"])
    m = _model([helper.make_node("Add", ["x", "a"], ["z"])], [vi("x", [2, 3], T.INT64)],
               [vi("z", None)], inits=[a, s])
    ta, ts = m.graph.initializers
    va, va2, vs = initializer_value(ta), initializer_value(ta), initializer_value(ts)
    assert (va.kind, va.elem, va.shape, va.inner) == ("tensor", T.INT64, (2, 3), None)
    assert va.signature == va2.signature == ("tensor", T.INT64, (2, 3))
    assert va != va2 and va == va and hash(va) != hash(Value.tensor(T.INT64, (2, 3)))
    reads = value_mod.LAZY_READS
    assert va.data == (1, 2, 3, 4, 5, 6) and value_mod.LAZY_READS == reads + 1
    assert va.data == (1, 2, 3, 4, 5, 6)
    assert (vs.kind, vs.elem, vs.shape, vs.data) == ("tensor", T.STRING, (2,), None)
    assert vs.signature is vs and vs == Value.tensor(T.STRING, (2,))


def test_nodes_of_zero_to_three_inputs_some_omitted_are_inferred():
    """The inputs of a node, however many and with omitted ones (an empty name: no input),
    reach the rule in their positions."""
    nodes = [helper.make_node("Constant", [], ["c"], value_ints=[1, 2, 3]),
             helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Clip", ["x", ""], ["p"]),
             helper.make_node("Clip", ["x", "", "mx"], ["q"]),
             helper.make_node("Add", ["x", "y"], ["s"]),
             helper.make_node("Add", ["x", "y"], ["s2"])]
    m = _model(nodes, [vi("x", ["N", 3]), vi("y", [3]), vi("mx", [])], [vi("s2", None)])
    got = infer_model(m).values
    assert (got["c"].elem, got["c"].shape, got["c"].data) == (T.INT64, (3,), (1, 2, 3))
    for name in ("r", "p", "q", "s", "s2"):
        assert (got[name].elem, got[name].shape) == (T.FLOAT, (Expr.var("N"), 3)), name


def test_the_memo_of_node_results_keys_on_equal_input_values_not_on_objects():
    """Nodes whose inputs are equal Values (other objects: two graph inputs of one declared
    type) share one memoized result; an input of another shape or element type, or an
    initializer (read lazily, keyed by its type and dims), gives its own."""
    nodes = [helper.make_node("Relu", ["x1"], ["r1"]), helper.make_node("Relu", ["x2"], ["r2"]),
             helper.make_node("Relu", ["x3"], ["r3"]), helper.make_node("Relu", ["x4"], ["r4"]),
             helper.make_node("Add", ["x1", "w"], ["a1"]),
             helper.make_node("Add", ["x2", "w2"], ["a2"])]
    w = [helper.make_tensor(n, T.FLOAT, [3], [1.0, 2.0, 3.0]) for n in ("w", "w2")]
    m = _model(nodes, [vi("x1", ["N", 3]), vi("x2", ["N", 3]), vi("x3", ["N", 4]),
                       vi("x4", ["N", 3], T.DOUBLE)], [vi("a2", None)], inits=w)
    got = infer_model(m).values
    assert got["x1"] is not got["x2"] and got["x1"] == got["x2"]
    assert got["r1"] is got["r2"] and got["a1"] == got["a2"]
    assert got["r3"].shape == (Expr.var("N"), 4) and got["r4"].elem == T.DOUBLE
    assert got["r1"] is not got["r3"] and got["r1"] is not got["r4"]
