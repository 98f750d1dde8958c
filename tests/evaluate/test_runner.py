"""The graph runner (onemodel/evaluate/runner.py): refusal before work, user kernels, freeing of
intermediates, function expansion, outer scope, inputs and initializers, errors with locations."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from onemodel.errors import EvaluationError, InputError, InvalidModelError, UnsupportedError
from onemodel.evaluate import (
    Session,
    op,
    random_inputs,
    register_kernel,
    registry,
    run,
    unregister_kernel,
)
from onemodel.formats.onnx import decode_model

F = TP.FLOAT


def _vi(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, inits=(), opset=21, extra_opsets=(), functions=(),
           sparse=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits),
                          sparse_initializer=list(sparse))
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    m = helper.make_model(g, opset_imports=ops, functions=list(functions))
    m.ir_version = 10
    return decode_model(m.SerializeToString())


@pytest.fixture
def user_kernels():
    """Registers user kernels for one test and removes them afterwards."""
    added = []

    def add(domain, op_type, since, fn):
        register_kernel(domain, op_type, since, fn)
        added.append((domain, op_type, since))

    yield add
    for d, t, s in added:
        unregister_kernel(d, t, s)


# -- refusal before work ------------------------------------------------------------------------
def test_unsupported_operators_are_all_listed_before_any_kernel_runs(user_kernels):
    calls = []
    user_kernels("test.probe", "Count", 1, lambda ctx, x: calls.append(1) or x)
    m = _model([helper.make_node("Count", ["x"], ["a"], domain="test.probe"),
                helper.make_node("Frobnicate", ["a"], ["b"], domain="custom.ops"),
                helper.make_node("Relu", ["b"], ["c"]),
                helper.make_node("Twiddle", ["c"], ["y"], domain="custom.ops")],
               [_vi("x", F, [2])], [_vi("y")],
               extra_opsets=[("test.probe", 1), ("custom.ops", 3)])
    with pytest.raises(UnsupportedError) as e:
        run(m, {"x": np.ones(2, np.float32)})
    text = str(e.value)
    assert "(custom.ops, Frobnicate, 3)" in text and "(custom.ops, Twiddle, 3)" in text
    assert "2 operator(s)" in text
    assert calls == []  # nothing was computed


def test_unsupported_operator_inside_a_subgraph_is_refused_before_work():
    then_g = helper.make_graph([helper.make_node("Mystery", ["x"], ["t"], domain="zz")], "then",
                               [], [_vi("t")])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [_vi("e")])
    m = _model([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
               [_vi("c", TP.BOOL, []), _vi("x", F, [1])], [_vi("y")], extra_opsets=[("zz", 1)])
    with pytest.raises(UnsupportedError, match=r"\(zz, Mystery, 1\)"):
        Session(m)


def test_default_domain_operator_at_an_opset_before_it_existed_is_refused():
    # Gelu appeared in opset 20; at opset 18 no definition exists, so no kernel either.
    m = _model([helper.make_node("Gelu", ["x"], ["y"])], [_vi("x", F, [1])], [_vi("y")],
               opset=18)
    with pytest.raises(UnsupportedError, match=r"\(ai.onnx, Gelu, 18\)"):
        Session(m)


def test_domain_not_imported_is_invalid():
    m = _model([helper.make_node("Foo", ["x"], ["y"], domain="nowhere")], [_vi("x", F, [1])],
               [_vi("y")])
    with pytest.raises(InvalidModelError, match="nowhere"):
        Session(m)


# -- user kernels -------------------------------------------------------------------------------
def test_user_kernel_for_a_custom_domain(user_kernels):
    user_kernels("my.ops", "AddTwice", 1, lambda ctx, a, b: a + 2 * b)
    m = _model([helper.make_node("AddTwice", ["a", "b"], ["y"], domain="my.ops")],
               [_vi("a", F, [2]), _vi("b", F, [2])], [_vi("y")], extra_opsets=[("my.ops", 1)])
    y = run(m, {"a": np.array([1, 2], np.float32), "b": np.array([10, 20], np.float32)})["y"]
    np.testing.assert_array_equal(y, np.array([21, 42], np.float32))


def test_user_kernel_overrides_the_builtin(user_kernels):
    user_kernels("", "Relu", 1, lambda ctx, x: x * 0 + 7)
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", F, [2])], [_vi("y")])
    y = run(m, {"x": np.array([-1, 1], np.float32)})["y"]
    np.testing.assert_array_equal(y, np.array([7, 7], np.float32))


def test_user_kernel_versions_and_decorator():
    try:
        @op("Pick", since=1, domain="ver.test", user=True)
        def v1(ctx, x):
            return x + 1

        @op("Pick", since=5, domain="ver.test", user=True)
        def v5(ctx, x):
            return x + 5

        for version, add in ((1, 1), (4, 1), (5, 5), (9, 5)):
            m = _model([helper.make_node("Pick", ["x"], ["y"], domain="ver.test")],
                       [_vi("x", F, [1])], [_vi("y")], extra_opsets=[("ver.test", version)])
            y = run(m, {"x": np.zeros(1, np.float32)})["y"]
            assert y[0] == add, version
    finally:
        unregister_kernel("ver.test", "Pick")
    assert registry.lookup("ver.test", "Pick", 9) is None


def test_kernel_context_attributes_and_outputs(user_kernels):
    seen = {}

    def kernel(ctx, x, missing=None, trailing=None):
        seen.update(attrs=dict(ctx.attrs), opset=ctx.opset, n=ctx.num_outputs,
                    raw=ctx.attr_bytes("s"), missing=missing, trailing=trailing,
                    default=ctx.attr("absent", 42), used=[ctx.output_used(i) for i in range(3)])
        return x, None, x * 2

    user_kernels("ctx.test", "Look", 1, kernel)
    node = helper.make_node("Look", ["x", ""], ["a", "", "c"], domain="ctx.test", f=1.5, i=3,
                            s="héllo", fs=[1.0, 2.5], is_=[1, 2], ss=["p", "q"],
                            t=numpy_helper.from_array(np.arange(3, dtype=np.int32)))
    m = _model([node], [_vi("x", F, [1])], [_vi("a"), _vi("c")], extra_opsets=[("ctx.test", 4)])
    out = run(m, {"x": np.ones(1, np.float32)})
    np.testing.assert_array_equal(out["c"], [2.0])
    a = seen["attrs"]
    assert a["f"] == 1.5 and a["i"] == 3 and a["s"] == "héllo"
    assert a["fs"] == [1.0, 2.5] and a["is_"] == [1, 2] and a["ss"] == ["p", "q"]
    np.testing.assert_array_equal(a["t"], np.arange(3, dtype=np.int32))
    assert seen["raw"] == "héllo".encode()
    assert seen["opset"] == 4 and seen["n"] == 3 and seen["default"] == 42
    assert seen["missing"] is None and seen["trailing"] is None
    assert seen["used"] == [True, False, True]


# -- freeing of intermediates -------------------------------------------------------------------
def test_intermediate_is_freed_after_its_last_use(user_kernels):
    refs = {}

    def make(ctx, x):
        t = x + 1
        refs["t"] = weakref.ref(t)
        return t

    def check(ctx, u):
        gc.collect()
        refs["alive_at_check"] = refs["t"]() is not None
        return u

    user_kernels("free.test", "Make", 1, make)
    user_kernels("free.test", "Check", 1, check)
    m = _model([helper.make_node("Make", ["x"], ["t"], domain="free.test"),
                helper.make_node("Neg", ["t"], ["u"]),
                helper.make_node("Check", ["u"], ["y"], domain="free.test")],
               [_vi("x", F, [3])], [_vi("y")], extra_opsets=[("free.test", 1)])
    y = run(m, {"x": np.zeros(3, np.float32)})["y"]
    np.testing.assert_array_equal(y, [-1, -1, -1])
    assert refs["alive_at_check"] is False


def test_value_read_by_a_later_subgraph_is_kept_until_then(user_kernels):
    refs = {}

    def make(ctx, x):
        t = x * 3
        refs["t"] = weakref.ref(t)
        return t

    def check(ctx, u):
        gc.collect()
        refs["alive"] = refs["t"]() is not None
        return u

    user_kernels("keep.test", "Make", 1, make)
    user_kernels("keep.test", "Check", 1, check)
    then_g = helper.make_graph([helper.make_node("Identity", ["t"], ["r"])], "then", [],
                               [_vi("r")])
    else_g = helper.make_graph([helper.make_node("Neg", ["t"], ["r2"])], "else", [], [_vi("r2")])
    m = _model([helper.make_node("Make", ["x"], ["t"], domain="keep.test"),
                helper.make_node("Abs", ["x"], ["a"]),
                helper.make_node("Check", ["a"], ["a2"], domain="keep.test"),
                helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
               [_vi("x", F, [2]), _vi("c", TP.BOOL, [])], [_vi("y"), _vi("a2")],
               extra_opsets=[("keep.test", 1)])
    out = run(m, {"x": np.array([1, -2], np.float32), "c": np.array(False)})
    assert refs["alive"] is True  # still needed by the If's else branch
    np.testing.assert_array_equal(out["y"], [-3, 6])


# -- subgraphs and outer scope ------------------------------------------------------------------
def test_nested_subgraph_reads_values_two_scopes_out():
    inner_then = helper.make_graph([helper.make_node("Add", ["x", "k"], ["i1"])], "it", [],
                                   [_vi("i1")])
    inner_else = helper.make_graph([helper.make_node("Sub", ["x", "k"], ["i2"])], "ie", [],
                                   [_vi("i2")])
    outer_then = helper.make_graph(
        [helper.make_node("If", ["c2"], ["o1"], then_branch=inner_then, else_branch=inner_else)],
        "ot", [], [_vi("o1")])
    outer_else = helper.make_graph([helper.make_node("Identity", ["k"], ["o2"])], "oe", [],
                                   [_vi("o2")])
    m = _model([helper.make_node("Mul", ["x", "x"], ["k"]),
                helper.make_node("If", ["c1"], ["y"], then_branch=outer_then,
                                 else_branch=outer_else)],
               [_vi("x", F, [2]), _vi("c1", TP.BOOL, []), _vi("c2", TP.BOOL, [])], [_vi("y")])
    x = np.array([2, 3], np.float32)
    s = Session(m)
    np.testing.assert_array_equal(s.run({"x": x, "c1": np.array(True), "c2": np.array(True)})["y"],
                                  [6, 12])
    np.testing.assert_array_equal(s.run({"x": x, "c1": np.array(True), "c2": np.array(False)})["y"],
                                  [-2, -6])
    np.testing.assert_array_equal(s.run({"x": x, "c1": np.array(False), "c2": np.array(True)})["y"],
                                  [4, 9])


def test_subgraph_reading_an_undefined_name_is_refused():
    then_g = helper.make_graph([helper.make_node("Neg", ["ghost"], ["t"])], "then", [],
                               [_vi("t")])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [_vi("e")])
    m = _model([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
               [_vi("c", TP.BOOL, []), _vi("x", F, [1])], [_vi("y")])
    with pytest.raises(InvalidModelError, match="ghost"):
        Session(m)


# -- model-local functions ----------------------------------------------------------------------
def _scale_function():
    # ScaleShift(X) = X * alpha + LeakyRelu(X) with LeakyRelu's alpha from attribute "slope"
    AP = helper.AttributeProto
    const = helper.make_node("Constant", [], ["a"])
    const.attribute.append(helper.make_attribute_ref("value_float", AP.FLOAT,
                                                     ref_attr_name="alpha"))
    leaky = helper.make_node("LeakyRelu", ["X"], ["l"])
    leaky.attribute.append(helper.make_attribute_ref("alpha", AP.FLOAT, ref_attr_name="slope"))
    nodes = [const, helper.make_node("Mul", ["X", "a"], ["m"]), leaky,
             helper.make_node("Add", ["m", "l"], ["Y"])]
    return helper.make_function("local", "ScaleShift", ["X"], ["Y"], nodes,
                                [helper.make_opsetid("", 21)], attributes=["slope"],
                                attribute_protos=[helper.make_attribute("alpha", 2.0)])


def test_function_binds_attributes_defaults_and_omits_unset_references():
    fn = _scale_function()
    x = np.array([-1.0, 3.0], np.float32)
    cases = [({"alpha": 0.5, "slope": 0.25}, 0.5, 0.25),  # both given at the call site
             ({"slope": 0.25}, 2.0, 0.25),                # alpha from the function's default
             ({}, 2.0, 0.01)]                              # slope omitted: LeakyRelu's default
    for attrs, alpha, slope in cases:
        node = helper.make_node("ScaleShift", ["x"], ["y"], domain="local", **attrs)
        m = _model([node], [_vi("x", F, [2])], [_vi("y")], extra_opsets=[("local", 1)],
                   functions=[fn])
        y = run(m, {"x": x})["y"]
        leaky = np.where(x >= 0, x, x * np.float32(slope))
        np.testing.assert_allclose(y, x * np.float32(alpha) + leaky, rtol=1e-6)


def test_function_that_calls_itself_is_refused():
    fn = helper.make_function("local", "Loopy", ["X"], ["Y"],
                              [helper.make_node("Loopy", ["X"], ["Y"], domain="local")],
                              [helper.make_opsetid("", 21), helper.make_opsetid("local", 1)])
    m = _model([helper.make_node("Loopy", ["x"], ["y"], domain="local")], [_vi("x", F, [1])],
               [_vi("y")], extra_opsets=[("local", 1)], functions=[fn])
    with pytest.raises(UnsupportedError, match="calls itself"):  # Clause 15.4: would not end
        Session(m)


def test_registered_kernel_wins_over_the_function_body(user_kernels):
    fn = _scale_function()
    user_kernels("local", "ScaleShift", 1, lambda ctx, x: x * 0 - 1)
    m = _model([helper.make_node("ScaleShift", ["x"], ["y"], domain="local")],
               [_vi("x", F, [2])], [_vi("y")], extra_opsets=[("local", 1)], functions=[fn])
    np.testing.assert_array_equal(run(m, {"x": np.ones(2, np.float32)})["y"], [-1, -1])


# -- inputs, initializers, order ----------------------------------------------------------------
def test_initializer_is_a_zero_copy_view_and_inputs_override_defaults():
    w = numpy_helper.from_array(np.array([1, 2, 3], np.float32), "w")
    m = _model([helper.make_node("Identity", ["w"], ["y"])], [_vi("w", F, [3])], [_vi("y")],
               inits=[w])
    y = run(m, {})["y"]
    raw = np.frombuffer(m.graph.initializers[0].raw_view(), np.float32)
    assert np.shares_memory(y, raw)  # the weight was not copied
    y2 = run(m, {"w": np.array([7, 8, 9], np.float32)})["y"]
    np.testing.assert_array_equal(y2, [7, 8, 9])


def test_constant_initializer_cannot_be_supplied_and_inputs_are_checked():
    w = numpy_helper.from_array(np.array([1, 2], np.float32), "w")
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", F, [2])], [_vi("y")],
               inits=[w])
    with pytest.raises(InputError, match="constant"):
        run(m, {"x": np.zeros(2, np.float32), "w": np.zeros(2, np.float32)})
    with pytest.raises(InputError, match="no value given"):
        run(m, {})
    with pytest.raises(InputError, match="dtype float64"):
        run(m, {"x": np.zeros(2)})
    with pytest.raises(InputError, match="extent 3"):
        run(m, {"x": np.zeros(3, np.float32)})
    with pytest.raises(InputError, match="not an input"):
        run(m, {"x": np.zeros(2, np.float32), "bogus": 1})


def test_sparse_initializer_is_dense():
    values = numpy_helper.from_array(np.array([5.0, 6.0], np.float32), "s")
    indices = numpy_helper.from_array(np.array([1, 3], np.int64), "s_idx")
    sp = helper.make_sparse_tensor(values, indices, [4])
    m = _model([helper.make_node("Identity", ["s"], ["y"])], [], [_vi("y")], sparse=[sp])
    np.testing.assert_array_equal(run(m, {})["y"], [0, 5, 0, 6])


def test_unsorted_graph_runs_in_dependency_order_and_a_cycle_is_refused():
    m = _model([helper.make_node("Neg", ["t"], ["y"]), helper.make_node("Abs", ["x"], ["t"])],
               [_vi("x", F, [2])], [_vi("y")])
    np.testing.assert_array_equal(run(m, {"x": np.array([-1, 2], np.float32)})["y"], [-1, -2])
    m = _model([helper.make_node("Neg", ["b"], ["a"]), helper.make_node("Abs", ["a"], ["b"])],
               [_vi("x", F, [2])], [_vi("a")])
    with pytest.raises(InvalidModelError, match="cycle"):
        Session(m)


def test_requested_intermediate_output_runs_only_what_it_needs(user_kernels):
    calls = []
    user_kernels("side.test", "Mark", 1, lambda ctx, x: calls.append(1) or x)
    m = _model([helper.make_node("Abs", ["x"], ["t"]),
                helper.make_node("Mark", ["t"], ["y"], domain="side.test")],
               [_vi("x", F, [2])], [_vi("y")], extra_opsets=[("side.test", 1)])
    out = Session(m).run({"x": np.array([-4, 5], np.float32)}, outputs=["t"])
    assert list(out) == ["t"] and calls == []
    np.testing.assert_array_equal(out["t"], [4, 5])


def test_kernel_failure_names_the_node():
    m = _model([helper.make_node("Relu", ["x"], ["r"], name="first"),
                helper.make_node("Reshape", ["r", "s"], ["y"], name="bad_reshape")],
               [_vi("x", F, [6]), _vi("s", TP.INT64, [2])], [_vi("y")])
    with pytest.raises(EvaluationError) as e:
        run(m, {"x": np.zeros(6, np.float32), "s": np.array([4, 4], np.int64)})
    assert e.value.path.startswith("graph.nodes[1]")
    assert e.value.kind == "EvaluationError" and not isinstance(e.value, InvalidModelError)
    # the node (index, op_type, name) and the element type and shape of each input
    assert e.value.message.startswith("node 1 (Reshape 'bad_reshape') failed: ")
    assert e.value.message.endswith("its inputs: r float32[6], s int64[2]")
    assert "cannot reshape" in e.value.message


def test_broadcast_mismatch_is_an_evaluation_error_and_a_missing_attribute_stays_invalid():
    m = _model([helper.make_node("Add", ["a", "b"], ["y"], name="plus")],
               [_vi("a", F, ["n"]), _vi("b", F, [3])], [_vi("y")])
    # inference entails n in {1, 3}: the input is refused before anything runs, at the input
    with pytest.raises(InputError) as e:
        run(m, {"a": np.zeros(2, np.float32), "b": np.zeros(3, np.float32)})
    assert e.value.path == "graph.inputs[0]"
    assert "input 'a' has extent 2 on axis 0 (n)" in e.value.message
    assert "Add 'plus'" in e.value.message and "n in {1, 3}" in e.value.message
    # without the input check, the node fails and says so
    with pytest.raises(EvaluationError) as e:
        run(m, {"a": np.zeros(2, np.float32), "b": np.zeros(3, np.float32)}, check_inputs=False)
    assert "node 0 (Add 'plus')" in e.value.message and "a float32[2], b float32[3]" in \
        e.value.message
    # a structural problem of the node (Cast without 'to') is the model's, as read
    m = _model([helper.make_node("Cast", ["a"], ["y"])], [_vi("a", F, [2])], [_vi("y")])
    with pytest.raises(InvalidModelError, match="'to'"):
        run(m, {"a": np.zeros(2, np.float32)})


def test_random_inputs_follow_the_declared_types_and_are_deterministic():
    m = _model([helper.make_node("Identity", ["a"], ["y"])],
               [_vi("a", F, ["batch", 3]), _vi("b", TP.INT64, [2]), _vi("c", TP.BOOL, [None]),
                _vi("d", TP.STRING, [2]), _vi("w", F, [1])], [_vi("y")],
               inits=[numpy_helper.from_array(np.zeros(1, np.float32), "w")])
    r1 = random_inputs(m, seed=3, dims={"batch": 4})
    r2 = random_inputs(m, seed=3, dims={"batch": 4})
    assert set(r1) == {"a", "b", "c", "d"}  # w has an initializer
    assert r1["a"].shape == (4, 3) and r1["a"].dtype == np.float32
    assert np.all((r1["a"] >= -1) & (r1["a"] < 1))
    assert r1["b"].dtype == np.int64 and np.all((r1["b"] >= 0) & (r1["b"] < 3))
    assert r1["c"].shape == (1,) and r1["c"].dtype == np.bool_
    assert r1["d"].dtype == object and all(isinstance(v, str) for v in r1["d"])
    for k in r1:
        np.testing.assert_array_equal(r1[k], r2[k])
    assert not np.array_equal(random_inputs(m, seed=4, dims={"batch": 4})["a"], r1["a"])


def test_string_inputs_of_any_form_become_str():
    m = _model([helper.make_node("Identity", ["s"], ["y"])], [_vi("s", TP.STRING, [2])],
               [_vi("y")])
    for value in (np.array([b"ab", "c\u00e9".encode()], dtype=object), np.array(["ab", "cé"]),
                  ["ab", "cé"]):
        y = run(m, {"s": value})["y"]
        assert y.dtype == object and y.tolist() == ["ab", "cé"]


def _bad_sparse_model(where: str):
    """A model whose sparse tensor has index 9 in dims [4]: as a sparse initializer read by
    ``Identity``, or as a Constant's ``sparse_value``. Built in memory (a reader refuses it)."""
    from onemodel.ir import Attribute, SparseTensor, Tensor
    good = _model([helper.make_node("Identity", ["x"], ["y"])], [_vi("x", F, [4])], [_vi("y")])
    sp = SparseTensor(values=Tensor.from_numpy(np.array([5.0, 6.0], np.float32), name="s"),
                      indices=Tensor.from_numpy(np.array([1, 9], np.int64)), dims=[4])
    if where == "initializer":
        good.graph.inputs = []
        good.graph.sparse_initializers = [sp]
        good.graph.nodes[0].inputs = ["s"]
    else:
        node = good.graph.nodes[0]
        node.op_type, node.inputs = "Constant", []
        node.attributes = [Attribute(name="sparse_value", type=11, sparse_tensor=sp)]
        good.graph.inputs = []
    return good


@pytest.mark.parametrize("where, path", [("initializer", "graph.sparse_initializers[0]"),
                                         ("attribute", "graph.nodes[0]")])
def test_a_sparse_index_out_of_range_is_an_invalid_model_with_its_place(where, path):
    with pytest.raises(InvalidModelError) as e:
        run(_bad_sparse_model(where), {})
    assert e.value.path == path
    assert e.value.message == ("sparse tensor 's': indices: index 9 at position 1 is outside "
                               "the 4 elements of dims [4]")


def test_a_failure_inside_a_subgraph_names_the_inner_node_once():
    then_g = helper.make_graph([helper.make_node("Reshape", ["x", "s"], ["t"], name="inner")],
                               "then", [], [_vi("t")])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [],
                               [_vi("e")])
    m = _model([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g,
                                 name="branch")],
               [_vi("c", TP.BOOL, []), _vi("x", F, [6]), _vi("s", TP.INT64, [1])], [_vi("y")])
    with pytest.raises(EvaluationError) as e:
        run(m, {"c": np.array(True), "x": np.zeros(6, np.float32), "s": np.array([4], np.int64)})
    assert e.value.path == "graph.nodes[0].attributes[1].g.nodes[0] (Reshape 'inner')"
    assert e.value.message.startswith("node 0 (Reshape 'inner') failed: ValueError: cannot "
                                      "reshape")
    assert e.value.message.count("failed") == 1 and "x float32[6], s int64[1]" in e.value.message


def test_session_kernels_take_precedence_without_touching_the_global_registry(user_kernels):
    user_kernels("", "Relu", 1, lambda ctx, x: x * 0 + 7)  # a global user registration
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", F, [2])], [_vi("y")])
    x = np.array([-1, 1], np.float32)
    s = Session(m, kernels={("", "Relu"): lambda ctx, x: x * 0 + 5})
    np.testing.assert_array_equal(s.run({"x": x})["y"], np.array([5, 5], np.float32))
    # since-versioned keys: the greatest since <= the node's opset (21) is chosen
    s = Session(m, kernels={("ai.onnx", "Relu", 14): lambda ctx, x: x * 0 + 14,
                            ("", "Relu", 22): lambda ctx, x: x * 0 + 22})
    np.testing.assert_array_equal(s.run({"x": x})["y"], np.array([14, 14], np.float32))
    # another session sees the global registration, untouched
    np.testing.assert_array_equal(Session(m).run({"x": x})["y"], np.array([7, 7], np.float32))


def test_session_kernels_for_a_custom_domain_and_bad_keys():
    from onemodel.errors import UsageError

    m = _model([helper.make_node("AddTwice", ["a", "b"], ["y"], domain="my.ops")],
               [_vi("a", F, [2]), _vi("b", F, [2])], [_vi("y")], extra_opsets=[("my.ops", 1)])
    with pytest.raises(UnsupportedError):
        Session(m)  # no global registration: the per-session one did not leak
    s = Session(m, kernels={("my.ops", "AddTwice"): lambda ctx, a, b: a + 2 * b})
    y = s.run({"a": np.array([1, 2], np.float32), "b": np.array([10, 20], np.float32)})["y"]
    np.testing.assert_array_equal(y, np.array([21, 42], np.float32))
    with pytest.raises(UsageError):
        Session(m, kernels={"AddTwice": lambda ctx, a, b: a})
    with pytest.raises(UnsupportedError):
        Session(m)


# -- the graph rules, as onemodel.ir.graph_rules states them --------------------------------------
def _rule_breaking_models():
    """name -> (model, message, path) of the graph rule each model breaks."""
    cases = {}
    cases["duplicate"] = (
        _model([helper.make_node("Neg", ["x"], ["y"]), helper.make_node("Abs", ["x"], ["y"])],
               [_vi("x", F, [1])], [_vi("y")]),
        "name 'y' is defined twice in one graph", "graph.nodes[1].outputs[0]")
    cases["undefined"] = (
        _model([helper.make_node("Add", ["x", "nowhere"], ["y"])], [_vi("x", F, [1])],
               [_vi("y")]),
        "input 'nowhere' of node 'Add' is not defined in this graph or an enclosing one",
        "graph.nodes[0].inputs[1]")
    cases["undefined-output"] = (
        _model([helper.make_node("Neg", ["x"], ["t"])], [_vi("x", F, [1])], [_vi("y")]),
        "name 'y' is not defined in this graph or an enclosing one", "graph.outputs[0]")
    then_g = helper.make_graph([helper.make_node("Neg", ["ghost"], ["t"])], "then", [],
                               [_vi("t")])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [_vi("e")])
    cases["undefined-in-subgraph"] = (
        _model([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
               [_vi("c", TP.BOOL, []), _vi("x", F, [1])], [_vi("y")]),
        "input 'ghost' of node 'Neg' is not defined in this graph or an enclosing one",
        "graph.nodes[0].attributes[1].g.nodes[0].inputs[0]")
    cases["domain"] = (
        _model([helper.make_node("Foo", ["x"], ["y"], domain="nowhere")], [_vi("x", F, [1])],
               [_vi("y")]),
        "domain 'nowhere' of node 'Foo' is not imported by opsets", "graph.nodes[0].domain")
    cases["cycle"] = (
        _model([helper.make_node("Neg", ["b"], ["a"], name="neg"),
                helper.make_node("Abs", ["a"], ["b"])], [_vi("x", F, [2])], [_vi("a")]),
        "the nodes form a cycle through node 'Neg' named 'neg' (no dependency order exists)",
        "graph.nodes[0]")
    body = helper.make_function("local", "F", ["X"], ["Y"],
                                [helper.make_node("Add", ["X", "x"], ["Y"])],
                                [helper.make_opsetid("", 21)])
    cases["function-body-reads-the-caller"] = (
        _model([helper.make_node("F", ["x"], ["y"], domain="local")], [_vi("x", F, [1])],
               [_vi("y")], extra_opsets=[("local", 1)], functions=[body]),
        "input 'x' of node 'Add' is not defined in this graph or an enclosing one",
        "functions[0].nodes[0].inputs[1]")
    # Clause 8.4: a function's version is that of its domain as the model imports it
    cases["function-domain-not-imported"] = (
        _model([helper.make_node("F", ["x"], ["y"], domain="local")], [_vi("x", F, [1])],
               [_vi("y")], functions=[body]),
        "domain 'local' of node 'F' is not imported by opsets", "graph.nodes[0].domain")
    return cases


@pytest.mark.parametrize("case", sorted(_rule_breaking_models()))
def test_the_planner_refuses_what_the_graph_rules_refuse_with_their_message_and_path(case):
    from onemodel.ir import graph_rules

    model, message, path = _rule_breaking_models()[case]
    with pytest.raises(InvalidModelError) as e:
        Session(model)
    assert (e.value.message, e.value.path) == (message, path)
    with pytest.raises(InvalidModelError) as rules:
        graph_rules.check_model(model, function_bodies=True)
    assert (rules.value.message, rules.value.path) == (message, path)


def test_a_function_body_out_of_order_runs_in_dependency_order():
    body = helper.make_function("local", "F", ["X"], ["Y"],
                                [helper.make_node("Neg", ["t"], ["Y"]),
                                 helper.make_node("Abs", ["X"], ["t"])],
                                [helper.make_opsetid("", 21)])
    m = _model([helper.make_node("F", ["x"], ["y"], domain="local")], [_vi("x", F, [2])],
               [_vi("y")], extra_opsets=[("local", 1)], functions=[body])
    np.testing.assert_array_equal(run(m, {"x": np.array([-3, 4], np.float32)})["y"], [-3, -4])


def test_a_subgraph_in_a_function_body_with_bound_attributes_keeps_its_order():
    # the then branch holds an attribute reference, so binding copies it; its nodes are out of
    # order, and the copy runs in the order the graph rules gave the branch
    AP = helper.AttributeProto
    leaky = helper.make_node("LeakyRelu", ["t"], ["r"])
    leaky.attribute.append(helper.make_attribute_ref("alpha", AP.FLOAT, ref_attr_name="slope"))
    then_g = helper.make_graph([leaky, helper.make_node("Neg", ["X"], ["t"])], "then", [],
                               [_vi("r")])
    else_g = helper.make_graph([helper.make_node("Identity", ["X"], ["e"])], "else", [],
                               [_vi("e")])
    body = helper.make_function("local", "G", ["X", "C"], ["Y"],
                                [helper.make_node("If", ["C"], ["Y"], then_branch=then_g,
                                                  else_branch=else_g)],
                                [helper.make_opsetid("", 21)], attributes=["slope"])
    m = _model([helper.make_node("G", ["x", "c"], ["y"], domain="local", slope=0.5)],
               [_vi("x", F, [2]), _vi("c", TP.BOOL, [])], [_vi("y")],
               extra_opsets=[("local", 1)], functions=[body])
    x = np.array([-2, 4], np.float32)
    y = run(m, {"x": x, "c": np.array(True)})["y"]
    np.testing.assert_array_equal(y, [2, -2])  # LeakyRelu(-x) with alpha 0.5


def test_a_graph_a_kernel_builds_is_checked_by_the_graph_rules_before_it_runs():
    from onemodel.ir import Graph, Node, ValueInfo

    def kernel_for(reads):
        def kernel(ctx, x):
            g = Graph(name="made", inputs=[ValueInfo(name="v")], outputs=[ValueInfo(name="w")],
                      nodes=[Node(op_type="Neg", inputs=[reads], outputs=["w"])])
            return ctx.run_graph(g, [x])[0]
        return kernel

    m = _model([helper.make_node("Make", ["x"], ["y"], domain="made.ops")], [_vi("x", F, [2])],
               [_vi("y")], extra_opsets=[("made.ops", 1)])
    x = np.array([1, -2], np.float32)
    s = Session(m, kernels={("made.ops", "Make"): kernel_for("v")})
    np.testing.assert_array_equal(s.run({"x": x})["y"], [-1, 2])
    s = Session(m, kernels={("made.ops", "Make"): kernel_for("elsewhere")})
    with pytest.raises(InvalidModelError) as e:
        s.run({"x": x})
    assert e.value.message == ("input 'elsewhere' of node 'Neg' is not defined in this graph "
                               "or an enclosing one")
    assert e.value.path == "graph.nodes[0] (made.ops.Make).<subgraph>.nodes[0].inputs[0]"
