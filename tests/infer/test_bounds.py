"""Bounded inference (issue 24, items 1 and 2; ONNX Part 1, Clause 15.4): every symbolic extent
within MAX_EXPR_SIZE atoms and MAX_EXPR_INTEGER, each model-local function inferred once per
distinct inputs, recursive functions never expanded. The command-line guards (time, memory) of
the same models are tests/cli/test_bounded_cli.py."""

from __future__ import annotations

import math
import time

from onnx import TensorProto, helper

import onemodel
from onemodel.inference import dims as D
from onemodel.inference import infer_model
from onemodel.inference.dims import Expr
from onemodel.ir.calls import cycle_text, recursive_functions
from onemodel.limits import MAX_EXPR_INTEGER, MAX_EXPR_SIZE, MAX_FUNCTION_SIGNATURES
from tests.infer import hostile

N, A, B = Expr.var("N"), Expr.var("A"), Expr.var("B")


def _load(m):
    return onemodel.load(m.SerializeToString())


def _power(x, k):
    out = 1
    for _ in range(k):
        out = D.mul(out, x)
    return out


# -- expressions ---------------------------------------------------------------------------
def test_squaring_is_exact_up_to_the_size_bound_then_unknown():
    assert MAX_EXPR_SIZE == 64
    s, before = N, D.BOUNDED
    for k in range(1, 7):  # N^2 ... N^64: 64 atoms, the bound itself
        s = D.mul(s, s)
        assert s == _power(N, 2 ** k) and s.size == 2 ** k
    assert D.BOUNDED == before
    assert D.mul(s, s) is None and D.BOUNDED == before + 1  # N^128
    assert D.mul(s, N) is None and D.add(D.mul(s, N), 1) is None  # unknown stays unknown


def test_binomial_powers_are_exact_within_the_bound():
    """(A+B)^4 has the binomial coefficients 1 4 6 4 1 (20 atoms); (A+B)^8 has 9 terms of
    degree 8 (72 atoms): past the bound."""
    t = D.add(A, B)
    t4 = D.mul(D.mul(t, t), D.mul(t, t))
    want = {tuple(sorted(["A"] * i + ["B"] * (4 - i))): math.comb(4, i) for i in range(5)}
    assert dict(t4.terms) == want and t4.const == 0 and t4.size == 20
    t6 = D.mul(t4, D.mul(t, t))  # 7 terms of degree 6: 42 atoms
    assert t6.size == 42 and dict(t6.terms)[("A", "A", "A", "B", "B", "B")] == 20
    assert D.mul(t4, t4) is None


def test_a_product_with_more_terms_to_expand_than_the_bound_is_unknown():
    """Sums of 9 and 8 variables: 72 products to expand, over 64, refused before any."""
    xs = [Expr.var(f"v{i}") for i in range(9)]
    s9 = xs[0]
    for x in xs[1:]:
        s9 = D.add(s9, x)
    s8 = D.sub(s9, xs[-1])
    assert len(s9.terms) == 9 and len(s8.terms) == 8
    assert D.mul(s9, s8) is None
    s7 = D.sub(s8, xs[-2])
    assert D.mul(s7, s7).size == 2 * 28  # 7*7 products, 28 distinct monomials of degree 2
    assert D.mul(s8, s8) is None  # 36 monomials of degree 2: 72 atoms
    small = D.mul(D.add(xs[0], 1), D.sub(xs[0], 1))  # (v0+1)(v0-1) = v0^2 - 1
    assert small == D.sub(D.mul(xs[0], xs[0]), 1)


def test_integers_in_expressions_past_the_int64_bound_are_unknown():
    assert D.mul(N, MAX_EXPR_INTEGER) == Expr(((("N",), MAX_EXPR_INTEGER),), 0)
    assert D.mul(N, MAX_EXPR_INTEGER + 1) is None  # a coefficient past it
    assert D.add(N, -MAX_EXPR_INTEGER - 1) is None  # a constant past it
    assert D.sub(D.add(N, MAX_EXPR_INTEGER), N) == MAX_EXPR_INTEGER
    # two ints stay exact: elements wrap to their type in the rules, extents in the engine
    assert D.mul(MAX_EXPR_INTEGER, 2) == 2 * MAX_EXPR_INTEGER
    assert D.mul(N, 1 << 70) == Expr(((("N",), 1 << 70),), 0)  # past int64, within 256 bits


def test_int_squarings_wrap_as_int64_elements_do():
    """Shape(x) of [2], squared 27 times: the int64 elements wrap to 0 after the sixth
    squaring (2^64), as the evaluator computes them; nothing is unknown."""
    res = infer_model(_load(hostile.squarings(27, 2)))
    v = res.values
    assert v["s5"].data == (1 << 32,) and v["s6"].data == (0,) and v["s27"].data == (0,)
    assert v["y"].shape == (0,) and not res.notes


def test_nested_divisions_count_their_operands():
    """floor(e/2) holds e's atoms and one more: a nesting that doubles the size each step
    stops at the bound instead of growing 2^30."""
    e, sizes = N, []
    for _ in range(30):
        e = D.add(e, D.floordiv(e, 3))
        if e is None:
            break
        sizes.append(e.size)
    assert e is None and max(sizes) <= MAX_EXPR_SIZE
    assert sizes[:3] == [4, 10, 22]  # N + floor(N/3): 1 + (1 + 1 + 1), an int operand one


# -- the engine -------------------------------------------------------------------------------
def test_thirty_squarings_infer_in_linear_time_with_a_note():
    """Shape(x) then 27 Mul(s, s) (issue 24: 4.1 GB and 21 s before): s6 is N^64, s7 and
    every later one unknown; the first node past the bound is noted."""
    m = _load(hostile.squarings(27))
    t0 = time.perf_counter()
    res = infer_model(m)
    assert time.perf_counter() - t0 < 5  # 0.05 s measured; generous
    v = res.values
    assert v["s6"].data == (_power(N, 64),) and v["s6"].shape == (1,)
    assert v["s7"].data == (None,) and v["s27"].data == (None,)
    assert v["y"].shape == (None,) and v["y"].elem == TensorProto.FLOAT
    assert [(n.path, n.message) for n in res.notes] == [
        ("graph.nodes[7]", "Mul: an extent or element past a bound of inference is unknown "
                           f"(MAX_EXPR_SIZE: {MAX_EXPR_SIZE} atoms; MAX_DATA_EXPR_SIZE: 4096 "
                           "atoms in one tensor; MAX_EXPR_INTEGER: 2^256 - 1)")]
    assert not res.contradictions


def test_square_plus_and_binomial_chains_end_quickly_and_exactly_where_bounded():
    for model, known in ((hostile.square_plus(14), "s3"), (hostile.binomial(12), "t2")):
        t0 = time.perf_counter()
        res = infer_model(_load(model))
        assert time.perf_counter() - t0 < 5
        assert res.values["y"].shape == (None,) and len(res.notes) >= 1
        assert res.values[known].data[0] is not None
    s = N
    for _ in range(3):
        s = D.add(D.mul(s, s), s)
    assert infer_model(_load(hostile.square_plus(14))).values["s3"].data == (s,)


# -- functions --------------------------------------------------------------------------------
def test_each_function_is_inferred_once_per_distinct_input():
    """31 functions each calling the previous one twice: 2^30 expansions before, 31 now; the
    shape is exact ([N]: Add keeps it)."""
    m = _load(hostile.doubling_chain(31))
    from onemodel.inference.engine import Engine

    e = Engine(m)
    t0 = time.perf_counter()
    res = e.run()
    assert time.perf_counter() - t0 < 5
    assert res.values["y"].shape == (N,) and res.values["y"].elem == TensorProto.FLOAT
    assert sorted(e._expanded.values()) == [1] * 31 and not res.notes


def test_a_function_is_inferred_for_at_most_max_function_signatures_inputs():
    """A function called with 17 distinct input shapes: the first 16 calls are inferred
    through its body; the 17th is not (a function has no type constraints: nothing is known
    of its output) and is noted."""
    f = helper.make_function("local", "Id", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])],
                             [helper.make_opsetid("", 17)])
    k = MAX_FUNCTION_SIGNATURES + 1
    ins = [helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [i + 1]) for i in range(k)]
    nodes = [helper.make_node("Id", [f"x{i}"], [f"y{i}"], domain="local") for i in range(k)]
    g = helper.make_graph(nodes, "g", ins, [helper.make_tensor_value_info("y0", 1, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("local", 1)], functions=[f])
    res = infer_model(_load(m))
    for i in range(k - 1):
        assert res.values[f"y{i}"].shape == (i + 1,)
    last = res.values[f"y{k - 1}"]
    assert last.kind is None
    assert [(n.path, n.message) for n in res.notes] == [
        (f"graph.nodes[{k - 1}]", f"Id: function Id was inferred for {k - 1} distinct input "
                                  "types (MAX_FUNCTION_SIGNATURES); this call is not expanded")]
    # the same inputs again are not a new signature
    again = helper.make_node("Id", ["x0"], ["z"], domain="local")
    m.graph.node.append(again)
    assert infer_model(_load(m)).values["z"].shape == (1,)


def test_recursive_functions_are_found_and_not_expanded():
    m = _load(hostile.mutual(30))
    cycles = recursive_functions(m)
    assert len(cycles) == 30
    assert cycles[("local", "F0", "")] == [("local", f"F{i}", "") for i in range(30)]
    assert cycle_text([("local", "F", "")]) == "function local.F calls itself"
    assert cycle_text(cycles[("local", "F29", "")]).startswith(
        "function local.F29 calls itself through local.F0, local.F1, ")
    t0 = time.perf_counter()
    res = infer_model(m)
    assert time.perf_counter() - t0 < 5
    y = res.values["y"]
    assert y.shape is None  # F0's output: nothing expanded, no constraint types b
    assert [n.path for n in res.notes] == ["graph.nodes[0]"]
    assert res.notes[0].message == ("F0: " + cycle_text(cycles[("local", "F0", "")])
                                    + "; the call is not expanded")
    one = _load(hostile.self_calling(30))
    assert recursive_functions(one) == {("local", "F", ""): [("local", "F", "")]}
    assert infer_model(one).values["y"].shape is None


def test_a_call_inside_a_subgraph_of_a_body_counts_and_chains_without_cycles_do_not():
    then = helper.make_graph([helper.make_node("G", ["a"], ["t"], domain="local")], "then", [],
                             [helper.make_tensor_value_info("t", 1, None)])
    f = helper.make_function("local", "G", ["a"], ["b"],
                             [helper.make_node("If", ["a"], ["b"], then_branch=then,
                                               else_branch=then)],
                             [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
    h = helper.make_function("local", "H", ["a"], ["b"],
                             [helper.make_node("G", ["a"], ["b"], domain="local")],
                             [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
    g = helper.make_graph([helper.make_node("H", ["x"], ["y"], domain="local")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info("y", 1, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("local", 1)], functions=[f, h])
    assert recursive_functions(_load(m)) == {("local", "G", ""): [("local", "G", "")]}
    assert recursive_functions(_load(hostile.doubling_chain(31))) == {}


def test_an_int_extent_past_the_bound_a_rule_computes_is_unknown_and_noted():
    """Flatten of [2^62] * 5 + [3] at axis 5: [2^310, 3] by the rule's product of ints; 2^310
    is past MAX_EXPR_INTEGER (256 bits), so unknown. At axis 2 the extent 2^124 is kept
    exactly (no dim_value records it: check --full's OM412 says so)."""
    big = 1 << 62
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [big] * 5 + [3])
    g = helper.make_graph([helper.make_node("Flatten", ["x"], ["y"], axis=5),
                           helper.make_node("Flatten", ["x"], ["z"], axis=2)], "g", [x],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    res = infer_model(_load(m))
    assert MAX_EXPR_INTEGER == (1 << 256) - 1
    assert res.values["y"].shape == (None, 3)
    assert res.values["z"].shape == (1 << 124, 3 << 186)  # within the bound: exact
    assert [n.path for n in res.notes] == ["graph.nodes[0]"] and not res.contradictions


def test_the_symbolic_elements_of_one_tensor_are_bounded_together():
    """1024 elements d_i + (d0 + ... + d59), 61 atoms each: 62464 atoms, past
    MAX_DATA_EXPR_SIZE, so the elements of u0 are unknown (its shape is kept) and the 24 Adds
    after it cost no more than their shapes (4.3 s and 490 MB for such a model of 250-term
    sums before the bound; under a second now)."""
    m = _load(hostile.wide(24, 60))
    t0 = time.perf_counter()
    res = infer_model(m)
    assert time.perf_counter() - t0 < 5
    v = res.values
    d = [Expr.var(f"d{i}") for i in range(1024)]
    t = d[0]
    for x in d[1:60]:
        t = D.add(t, x)
    assert v["t"].data == (t,) and t.size == 60
    assert v["u0"].shape == (1024,) and v["u0"].data is None
    assert v["u24"].shape == (1024,) and v["y"].rank == 1024
    assert [n.path for n in res.notes] == ["graph.nodes[5]"]
    small = infer_model(_load(hostile.wide(2, 60, rank=64))).values  # 64 x 61 atoms: kept
    assert small["u0"].data == tuple(D.add(x, t) for x in d[:64])
