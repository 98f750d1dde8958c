"""Inference rules of the element-wise family (onemodel/inference/rules/elementwise.py): the
exact inferred element type and shape of every operator (symbolic where the inputs are;
Clause 6.6 broadcasting, the opset < 7 legacy broadcast, opset < 8 variadic equal shapes),
contradictions, unknown ranks, the evaluator agreeing under random bindings (``sound``), onnx's
inference agreeing where it has an answer, and data propagation of integer (shape) tensors."""

import numpy as np
import pytest
from onnx import TensorProto as T

from onemodel.inference import Expr, Value
from onemodel.inference import dims as D
from onemodel.inference.rules._util import at_least, lower
from tests.infer.harness import inferred, node_model, sound
from tests.infer.rules_check import (
    check_family_registered,
    check_unknown_inputs,
    contradicts,
    data_sound,
    expect,
    infer_values,
)

N, M, H = Expr.var("N"), Expr.var("M"), Expr.var("H")
F, I32, I64, B8, U8 = T.FLOAT, T.INT32, T.INT64, T.BOOL, T.UINT8


def test_every_kernel_has_a_rule_at_its_versions():
    assert check_family_registered("elementwise") >= 50


def test_unknown_inputs_never_raise():
    assert check_unknown_inputs("elementwise") > 100


# -- shapes -------------------------------------------------------------------------------------
BINARY = [
    # op, opset, (elem a, shape a), (elem b, shape b), attrs, expected shape, expected elem
    ("Add", 14, (F, ["N", 1, 3]), (F, [4, 1]), {}, ["N", 4, 3], F),
    ("Add", 7, (F, ["N", "M"]), (F, ["N", "M"]), {}, ["N", "M"], F),
    ("Sub", 13, (I32, [2, 3]), (I32, [3]), {}, [2, 3], I32),
    ("Mul", 14, (F, ["N", 1]), (F, [1, "M"]), {}, ["N", "M"], F),
    ("Div", 7, (F, ["N"]), (F, []), {}, ["N"], F),
    ("Div", 14, (I64, [2, 1, 3]), (I64, [5, 1]), {}, [2, 5, 3], I64),
    ("Pow", 15, (I32, [2, 3]), (F, [3]), {}, [2, 3], I32),   # the base's element type
    ("Pow", 7, (F, ["N", 3]), (F, [1]), {}, ["N", 3], F),
    ("Pow", 12, (F, [2]), (I64, []), {}, [2], F),
    ("Mod", 13, (I64, ["N", 1]), (I64, [1, "M"]), {}, ["N", "M"], I64),
    ("Mod", 10, (F, [3]), (F, [3]), {"fmod": 1}, [3], F),
    ("Mod", 28, (I32, [2, 3]), (I32, []), {}, [2, 3], I32),
    ("BitShift", 11, (U8, [3, 1]), (U8, [4]), {"direction": "LEFT"}, [3, 4], U8),
    ("BitShift", 28, (I32, ["N"]), (I32, [1]), {"direction": "RIGHT"}, ["N"], I32),
    ("BitwiseAnd", 18, (I32, [2, 1]), (I32, [1, 4]), {}, [2, 4], I32),
    ("BitwiseOr", 18, (U8, ["N"]), (U8, ["N"]), {}, ["N"], U8),
    ("BitwiseXor", 18, (I64, []), (I64, [3]), {}, [3], I64),
    ("Equal", 19, (I64, ["N", 3]), (I64, [3]), {}, ["N", 3], B8),
    ("Equal", 11, (F, [2]), (F, [2]), {}, [2], B8),
    ("Equal", 7, (I32, [1, 4]), (I32, [3, 1]), {}, [3, 4], B8),
    ("Greater", 13, (F, ["N", 1]), (F, [5]), {}, ["N", 5], B8),
    ("Greater", 9, (I32, [2]), (I32, [2]), {}, [2], B8),
    ("Less", 13, (I64, [4]), (I64, [1]), {}, [4], B8),
    ("GreaterOrEqual", 16, (F, [2, 3]), (F, [3]), {}, [2, 3], B8),
    ("GreaterOrEqual", 12, (I32, [1]), (I32, ["N"]), {}, ["N"], B8),
    ("LessOrEqual", 16, (F, ["N"]), (F, ["N"]), {}, ["N"], B8),
    ("And", 7, (B8, [2, 1]), (B8, [3]), {}, [2, 3], B8),
    ("Or", 7, (B8, ["N"]), (B8, []), {}, ["N"], B8),
    ("Xor", 7, (B8, [1]), (B8, [4]), {}, [4], B8),
    # opset < 7: the first input's shape, the second aligned inside it
    ("Add", 6, (F, [2, 3, 4, 5]), (F, [5]), {"broadcast": 1}, [2, 3, 4, 5], F),
    ("Add", 6, (F, [2, 3, 4, 5]), (F, [3, 4]), {"broadcast": 1, "axis": 1}, [2, 3, 4, 5], F),
    ("Mul", 6, (F, ["N", 3, 4]), (F, ["N"]), {"broadcast": 1, "axis": 0}, ["N", 3, 4], F),
    ("Sub", 6, (F, ["N", 3]), (F, ["N", 3]), {}, ["N", 3], F),
    ("Div", 6, (F, ["N", 3]), (F, [1, 1]), {"broadcast": 1}, ["N", 3], F),
    ("Mul", 1, (F, [2, 3]), (F, []), {"broadcast": 1}, [2, 3], F),
    ("Equal", 1, (I32, [2, 3]), (I32, [3]), {"broadcast": 1}, [2, 3], B8),
    ("And", 1, (B8, [4, 2]), (B8, [4]), {"broadcast": 1, "axis": 0}, [4, 2], B8),
    ("Pow", 1, (F, [2, 3]), (F, [3]), {"broadcast": 1}, [2, 3], F),
]


@pytest.mark.parametrize("op,opset,a,b,attrs,shape,elem", BINARY,
                         ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(BINARY)])
def test_binary(op, opset, a, b, attrs, shape, elem):
    m = node_model(op, [("a", *a), ("b", *b)], opset=opset, **attrs)
    expect(m, shape, elem)


def test_legacy_broadcast_fills_extents_from_the_second_input():
    # opset 6, broadcast=1: B's extent 3 is A's at that position
    m = node_model("Add", [("a", F, ["N", None]), ("b", F, [3])], opset=6, broadcast=1)
    assert inferred(m)["y"].shape == (N, 3)


UNARY = [
    (op, opset, elem, out) for op, opset, elem, out in [
        ("Abs", 13, I32, I32), ("Abs", 6, F, F), ("Neg", 13, I64, I64), ("Floor", 13, F, F),
        ("Ceil", 6, F, F), ("Sqrt", 13, F, F), ("Exp", 13, T.DOUBLE, T.DOUBLE),
        ("Tanh", 13, F, F), ("Log", 13, F, F), ("Round", 22, F, F), ("Round", 11, F, F),
        ("Sin", 22, F, F), ("Cos", 7, F, F), ("Tan", 22, F, F), ("Asin", 22, F, F),
        ("Acos", 22, F, F), ("Atan", 22, F, F), ("Sinh", 22, F, F), ("Cosh", 9, F, F),
        ("Asinh", 22, F, F), ("Acosh", 22, F, F), ("Atanh", 22, F, F), ("Sign", 13, I32, I32),
        ("Sign", 9, F, F), ("Not", 1, B8, B8), ("BitwiseNot", 18, U8, U8),
        ("Reciprocal", 13, F, F), ("IsNaN", 20, F, B8), ("IsNaN", 9, F, B8),
        ("IsNaN", 13, T.FLOAT16, B8), ("IsInf", 20, F, B8), ("IsInf", 10, T.DOUBLE, B8),
        ("Erf", 13, F, F), ("Erf", 9, F, F)]]


@pytest.mark.parametrize("op,opset,elem,out", UNARY,
                         ids=[f"{c[0]}-{c[1]}" for c in UNARY])
def test_unary_keeps_the_shape(op, opset, elem, out):
    m = node_model(op, [("x", elem, ["N", 3, "H"])], opset=opset)
    expect(m, ["N", 3, "H"], out)


def test_isinf_attributes_do_not_change_the_type():
    m = node_model("IsInf", [("x", F, [2, "N"])], opset=20, detect_negative=0)
    expect(m, [2, "N"], B8)


VARIADIC = [
    ("Sum", 13, F, [["N", 1], [1, 3], [3]], ["N", 3]),
    ("Sum", 8, T.DOUBLE, [[2, 1], [4]], [2, 4]),
    ("Sum", 6, F, [["N", 3], ["N", 3], ["N", 3]], ["N", 3]),
    ("Sum", 13, F, [["N", "M"]], ["N", "M"]),
    ("Mean", 13, F, [[2, 3], [3]], [2, 3]),
    ("Mean", 6, F, [["N"], ["N"]], ["N"]),
    ("Max", 13, I32, [[1, 4], [3, 1]], [3, 4]),
    ("Max", 12, T.UINT16, [["N"], [1]], ["N"]),
    ("Max", 8, F, [[2, 1, 5], [3, 1]], [2, 3, 5]),
    ("Max", 6, F, [[2, 5], [2, 5]], [2, 5]),
    ("Min", 13, I64, [["N", 1], [1, "M"]], ["N", "M"]),
    ("Min", 12, F, [[3], []], [3]),
    ("Min", 1, F, [[3], [3]], [3]),
]


@pytest.mark.parametrize("op,opset,elem,shapes,shape", VARIADIC,
                         ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(VARIADIC)])
def test_variadic(op, opset, elem, shapes, shape):
    m = node_model(op, [(f"x{k}", elem, s) for k, s in enumerate(shapes)], opset=opset)
    expect(m, shape, elem)


def test_where_broadcasts_three_ways_with_the_type_of_x():
    m = node_model("Where", [("c", B8, ["N", 1, 1]), ("x", I64, [3, 1]), ("z", I64, [4])],
                   opset=16)
    expect(m, ["N", 3, 4], I64)
    m = node_model("Where", [("c", B8, [2]), ("x", F, ["M", 1]), ("z", F, [])], opset=9)
    expect(m, ["M", 2], F)


CLIP = [
    (6, [], {"min": -1.0, "max": 1.0}),
    (1, [], {"max": 0.5}),
    (11, [("lo", np.array(-1.0, np.float32)), ("hi", np.array(2.0, np.float32))], {}),
    (12, [("", ), ("hi", np.array(2.0, np.float32))], {}),
    (13, [("lo", np.array(0.0, np.float32))], {}),
    (13, [], {}),
]


@pytest.mark.parametrize("opset,bounds,attrs", CLIP, ids=[f"Clip-{c[0]}-{i}"
                                                          for i, c in enumerate(CLIP)])
def test_clip_keeps_the_input_shape(opset, bounds, attrs):
    m = node_model("Clip", [("x", F, ["N", 3])] + bounds, opset=opset, **attrs)
    expect(m, ["N", 3], F)


# -- contradictions and unknown ranks ----------------------------------------------------------
@pytest.mark.parametrize("op,opset,inputs,attrs,words", [
    ("Add", 14, [("a", F, [2, 3]), ("b", F, [4])], {}, ("broadcast", "[3, 4]")),
    ("Equal", 19, [("a", I64, ["N", 2]), ("b", I64, [5])], {}, ("broadcast",)),
    ("Where", 16, [("c", B8, [2]), ("x", F, [3]), ("z", F, [1])], {}, ("broadcast",)),
    ("Sum", 13, [("a", F, [2]), ("b", F, [3]), ("c", F, [1])], {}, ("broadcast",)),
    ("Max", 6, [("a", F, [2, 3]), ("b", F, [3])], {}, ("same shape",)),
    ("Min", 6, [("a", F, [2, 3]), ("b", F, [2, 4])], {}, ("differ",)),
    ("Add", 6, [("a", F, [2, 3]), ("b", F, [3])], {}, ("same shape",)),
    ("Add", 6, [("a", F, [2, 3]), ("b", F, [2, 4])], {}, ("differ",)),
    ("Mul", 6, [("a", F, [3]), ("b", F, [2, 3])], {"broadcast": 1}, ("does not fit",)),
    ("Sub", 6, [("a", F, [2, 3, 4]), ("b", F, [3, 4])], {"broadcast": 1, "axis": 2},
     ("does not fit", "axis 2")),
    ("Div", 6, [("a", F, [2, 3, 4]), ("b", F, [4])], {"broadcast": 1, "axis": 1},
     ("differ", "3 and 4")),
    ("Mod", 13, [("a", I32, [5]), ("b", I32, [2])], {}, ("broadcast",)),
    ("Clip", 13, [("x", F, [3]), ("lo", F, [2])], {}, ("broadcast",)),
])
def test_contradictions(op, opset, inputs, attrs, words):
    contradicts(node_model(op, inputs, opset=opset, **attrs), *words)


def test_unknown_rank_gives_unknown_rank_and_known_type():
    for op, opset, elem, out in [("Add", 14, F, F), ("Equal", 19, I64, B8), ("Abs", 13, F, F),
                                 ("Add", 6, F, F), ("Sum", 6, F, F), ("Max", 13, F, F)]:
        m = node_model(op, [("a", elem, None), ("b", elem, [2, 3])][:2 if op != "Abs" else 1],
                       opset=opset)
        v = inferred(m)["y"]
        assert v.elem == out
        # opset < 7 Add and opset < 8 Sum take the known shape; the broadcast does not
        assert v.shape == ((2, 3) if (op, opset) in {("Sum", 6)} else None), (op, opset, v)
    m = node_model("Where", [("c", B8, None), ("x", F, [3]), ("z", F, [3])])
    assert inferred(m)["y"].shape is None and inferred(m)["y"].elem == F


# -- data propagation ---------------------------------------------------------------------------
def shape_value(*extents, elem=I64):
    """The Value Shape gives: a rank-1 integer tensor of the extents."""
    return Value.tensor(elem, (len(extents),), extents)


def const(*v, elem=I64):
    return Value.tensor(elem, (len(v),), v)


def data_of(op, values, opset=21, **attrs):
    (out,), msgs = infer_values(op, values, opset=opset, **attrs)
    assert not msgs, msgs
    return out


@pytest.mark.parametrize("op,a,b,attrs,want", [
    ("Mul", shape_value(N, 3, H), const(2), {}, (2 * N, 6, 2 * H)),
    ("Add", shape_value(N, H), const(1), {}, (N + 1, H + 1)),
    ("Sub", shape_value(N, 3), const(1, 3), {}, (N - 1, 0)),
    ("Mul", shape_value(N, M), shape_value(H, 2), {}, (N * H, 2 * M)),
    ("Div", shape_value(N, 6, 2 * N), const(2), {}, (D.floordiv(N, 2), 3, N)),
    ("Div", shape_value(N, 7), const(-2), {}, (-D.floordiv(N, 2), -3)),
    ("Div", shape_value(N, N * M), shape_value(M, N * M), {}, (D.floordiv(N, M), 1)),
    ("Div", shape_value(N - 1), const(2), {}, (None,)),   # N - 1 may be negative: truncation
    ("Div", shape_value(N), const(0), {}, (None,)),
    ("Mod", shape_value(N + 2, 7), const(2), {}, (D.mod(N + 2, 2), 1)),
    ("Mod", shape_value(N), const(3), {"fmod": 1}, (D.mod(N, 3),)),
    ("Mod", shape_value(N - 3), const(3), {}, (None,)),
    ("Max", shape_value(N, 3), const(0, 5), {}, (N, 5)),
    ("Max", shape_value(N + 1, N), shape_value(N, M), {}, (N + 1, None)),
    ("Min", shape_value(N, 3), const(0, 5), {}, (0, 3)),
    ("Min", shape_value(N, 2 * N), shape_value(N - 1, N), {}, (N - 1, N)),
    ("Sum", shape_value(N, 3), const(1), {}, (N + 1, 4)),
    ("Mul", shape_value(N, 3, elem=I32), const(2, elem=I32), {}, (2 * N, 6)),
])
def test_data_of_symbolic_extents(op, a, b, attrs, want):
    v = data_of(op, [a, b], opset=13 if op == "Mod" else 21, **attrs)
    assert v.shape == (len(want),) and v.data == want, (v, v.data)


def test_data_of_variadic_and_unary_ops():
    assert data_of("Sum", [shape_value(N, 3), shape_value(N, 3), const(1, 1)]).data == \
        (2 * N + 1, 7)
    assert data_of("Max", [shape_value(N), const(2), shape_value(N + 2)]).data == (N + 2,)
    assert data_of("Neg", [shape_value(N, 3)]).data == (-N, -3)
    assert data_of("Abs", [shape_value(N, 3)]).data == (N, 3)
    assert data_of("Abs", [const(-4, 5)]).data == (4, 5)
    assert data_of("Abs", [data_of("Neg", [shape_value(N, 2 * M + 1)])]).data == (N, 2 * M + 1)
    assert data_of("Abs", [shape_value(N - M)]).data == (None,)
    # Mean of integers is not followed (its rounding is the kernel's float division)
    assert data_of("Mean", [shape_value(N), shape_value(N)]).data is None


@pytest.mark.parametrize("op,a,b,want", [
    ("Equal", shape_value(N, 3), const(-1, 3), (False, True)),
    ("Equal", shape_value(N + 1, 4), const(0, 4), (False, True)),
    ("Equal", shape_value(N, N), shape_value(N, N + 1), (True, False)),
    ("Equal", shape_value(N), const(0), None),        # N may be 0: undecided, no elements
    ("Greater", shape_value(N + 1, 2), const(0, 3), (True, False)),
    ("Less", shape_value(N, 3), const(-1, 4), (False, True)),
    ("GreaterOrEqual", shape_value(N, N), shape_value(0, N + 1), (True, False)),
    ("LessOrEqual", shape_value(N), shape_value(N * M), None),   # M may be 0
    ("LessOrEqual", shape_value(N - 2), shape_value(N), (True,)),
])
def test_comparisons_on_extents(op, a, b, want):
    v = data_of(op, [a, b])
    assert v.elem == B8 and v.shape == (len(a.data),)
    assert v.data == want


def test_where_on_shape_data_replaces_the_minus_one():
    # the pattern of torch exports: Where(Equal(shape, -1), ones, shape)
    shape = shape_value(N, 3, H)
    cond = data_of("Equal", [shape, const(-1, -1, -1)])
    assert cond.data == (False, False, False)
    v = data_of("Where", [cond, const(1, 1, 1), shape])
    assert v.data == (N, 3, H)
    picked = data_of("Where", [Value.tensor(B8, (3,), (True, False, True)), const(1, 1, 1),
                               shape])
    assert picked.data == (1, 3, 1)
    # an unknown condition: no elements
    assert data_of("Where", [Value.tensor(B8, (3,)), const(1, 1, 1), shape]).data is None


def test_logic_on_known_bools():
    t, f = Value.tensor(B8, (2,), (True, False)), Value.tensor(B8, (2,), (True, True))
    assert data_of("And", [t, f]).data == (True, False)
    assert data_of("Or", [t, Value.tensor(B8, (2,), (False, False))]).data == (True, False)
    assert data_of("Xor", [t, f]).data == (False, True)
    assert data_of("Not", [t]).data == (False, True)


def test_data_of_unknown_or_large_inputs_is_not_invented():
    assert data_of("Add", [Value.tensor(I64, (2,)), const(1)]).data is None
    assert data_of("Add", [Value.tensor(I64, None), const(1)]).shape is None
    big = Value.tensor(I64, (2000,), tuple(range(2000)))
    v = data_of("Add", [big, const(1)])
    assert v.shape == (2000,) and v.data is None
    # float elements are not computed (their rounding is the element type's)
    fl = Value.tensor(F, (1,), (1.5,))
    assert data_of("Add", [fl, fl]).data is None


# models: constant inputs, evaluator vs inference on the elements (sound compares int data)
@pytest.mark.parametrize("op,a,b,attrs,opset,want", [
    ("Add", np.array([1, 2, 3], np.int64), np.array([[10], [20]], np.int64), {}, 14,
     [11, 12, 13, 21, 22, 23]),
    ("Div", np.array([7, -7, 7, -7], np.int32), np.array([2, 2, -2, -2], np.int32), {}, 14,
     [3, -3, -3, 3]),
    ("Mod", np.array([-7, 7, -7, 7], np.int64), np.array([3, -3, -3, 3], np.int64), {}, 13,
     [2, -2, -1, 1]),
    ("Mod", np.array([-7, 7, -7, 7], np.int64), np.array([3, -3, -3, 3], np.int64),
     {"fmod": 1}, 13, [-1, 1, -1, 1]),
    ("Add", np.array([127, -128], np.int8), np.array([1, -1], np.int8), {}, 14, [-128, 127]),
    ("Mul", np.array([200], np.uint8), np.array([2], np.uint8), {}, 14, [144]),
    ("Sub", np.array([0], np.uint32), np.array([1], np.uint32), {}, 14, [2**32 - 1]),
    ("BitwiseAnd", np.array([12, 7], np.int32), np.array([10], np.int32), {}, 18, [8, 2]),
    ("BitwiseOr", np.array([12], np.uint8), np.array([3], np.uint8), {}, 18, [15]),
    ("BitwiseXor", np.array([5, 6], np.int64), np.array([3, 3], np.int64), {}, 18, [6, 5]),
    ("Mul", np.array([[2, 3]], np.int64), np.array([5], np.int64), {"broadcast": 1}, 6,
     [10, 15]),
])
def test_data_of_constant_models(op, a, b, attrs, opset, want):
    m = node_model(op, [("a", a), ("b", b)], opset=opset, **attrs)
    v = inferred(m)["y"]
    assert list(v.data) == want
    assert sound(m, draws=1) == 1


def test_data_of_constant_comparisons_and_where():
    m = node_model("Less", [("a", np.array([1, 5, 3], np.int64)),
                            ("b", np.array([2, 2, 3], np.int64))])
    assert inferred(m)["y"].data == (True, False, False)
    m = node_model("Where", [("c", np.array([True, False])), ("x", np.array([1, 2], np.int32)),
                             ("z", np.array([[7], [8]], np.int32))])
    v = inferred(m)["y"]
    assert v.shape == (2, 2) and v.data == (1, 7, 1, 8)
    assert sound(m, draws=1) == 1
    m = node_model("Neg", [("x", np.array([-128, 5], np.int8))])
    assert inferred(m)["y"].data == (-128, -5)   # -(-128) wraps in int8
    assert sound(m, draws=1) == 1


# -- bounds of extent arithmetic ------------------------------------------------------------------
def test_lower_bounds_and_comparisons():
    assert lower(N) == 0 and lower(N + 3) == 3 and lower(2 * N * M + 1) == 1
    assert lower(N - 1) == -1 and lower(D.floordiv(N, 2) + 1) == 1 and lower(M - N) is None
    assert lower(D.floordiv(N - 5, 2)) is None and lower(None) is None and lower(-4) == -4
    assert lower(D.mod(N, M) + 2) == 2 and lower(D.mod(N - 1, M)) is None
    assert at_least(N + 1, N, 1) is True and at_least(N, N) is True
    assert at_least(N, N + 2) is False and at_least(N, M) is None and at_least(N, -1, 1) is True
    assert at_least(None, 1) is None and at_least(N, 0, 1) is None and at_least(3, 5) is False


# -- through Shape (task B's rule) in whole models ----------------------------------------------
def graph(nodes, inputs, outputs, inits=None, opset=21):
    import onnx
    from onnx import helper

    import onemodel
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_empty_tensor_value_info(o) for o in outputs],
                          [onnx.numpy_helper.from_array(np.asarray(a), n)
                           for n, a in (inits or {}).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return onemodel.load(m.SerializeToString())


def test_shape_times_two_drives_a_reshape():
    from onnx import helper
    m = graph([helper.make_node("Shape", ["x"], ["s"]),
               helper.make_node("Mul", ["s", "two"], ["s2"]),            # (2, 2H)
               helper.make_node("ConstantOfShape", ["s2"], ["c"]),
               helper.make_node("Div", ["s2", "twos"], ["half"]),        # (1, H)
               helper.make_node("Mul", ["half", "four_one"], ["t"]),     # (4, H)
               helper.make_node("Div", ["s2", "four"], ["q"]),           # (0, floor(H/2))
               helper.make_node("Reshape", ["c", "t"], ["r"])],
              [("x", F, [1, "H"])], ["r", "q"],
              {"two": np.array([2], np.int64), "twos": np.array([2, 2], np.int64),
               "four_one": np.array([4, 1], np.int64), "four": np.array([4], np.int64)})
    got = inferred(m)
    assert got["s2"].data == (2, 2 * H)
    assert got["half"].data == (1, H)
    assert got["t"].data == (4, H)
    assert got["q"].data == (0, D.floordiv(H, 2))
    assert got["c"].shape == (2, 2 * H)
    assert got["r"].shape == (4, H)
    assert sound(m, draws=4) > 0
    assert data_sound(m, draws=4) == 4 * 10   # every element of s2, half, t, q and s


def test_shape_arithmetic_of_a_transformer_export():
    # seq + 1 positions, the last one taken: Gather(Shape(x), 1) + 1, Cast to int32, Equal
    from onnx import helper
    m = graph([helper.make_node("Shape", ["x"], ["s"]),
               helper.make_node("Gather", ["s", "one"], ["seq"], axis=0),
               helper.make_node("Add", ["seq", "one"], ["seq1"]),
               helper.make_node("Cast", ["seq1"], ["seq32"], to=I32),
               helper.make_node("Sub", ["s", "one"], ["sm1"]),
               helper.make_node("Equal", ["s", "minus"], ["eq"]),
               helper.make_node("Where", ["eq", "ones", "s"], ["w"]),
               helper.make_node("Max", ["s", "ones"], ["mx"])],
              [("x", F, ["B", "S", 8])], ["seq32", "sm1", "w", "mx"],
              {"one": np.array(1, np.int64), "minus": np.array([-1, -1, -1], np.int64),
               "ones": np.array([1, 1, 1], np.int64)})
    got = inferred(m)
    Bv, S = Expr.var("B"), Expr.var("S")
    assert got["seq1"].shape == () and got["seq1"].data == (S + 1,)
    assert got["seq32"].elem == I32 and got["seq32"].data == got["seq1"].data
    assert got["sm1"].data == (Bv - 1, S - 1, 7)
    assert got["eq"].data == (False, False, False)
    assert got["w"].data == (Bv, S, 8)
    assert got["mx"].data == (Bv, S, 8)     # B, S >= 1 (input dimensions): max(B, 1) is B
    # an input dimension taken only >= 0: B may be 0, and max(B, 1) is not B
    assert inferred(m, positive_dims=False)["mx"].data == (None, None, 8)
    assert sound(m) > 0
    assert data_sound(m, draws=3) > 0


@pytest.mark.parametrize("op,inputs,attrs,opset,words", [
    ("Softmax", [("x", F, [2, 3])], {"axis": "a"}, 13, ("attribute axis is 'a'",)),
    ("Hardmax", [("x", F, [2, 3])], {"axis": [1, 2]}, 11, ("attribute axis is [1, 2]",)),
    ("Add", [("a", F, [2, 3]), ("b", F, [3])], {"broadcast": 1, "axis": "q"}, 6,
     ("attribute axis",)),
    ("Mul", [("a", F, [2, 3]), ("b", F, [3])], {"broadcast": [1]}, 6,
     ("attribute broadcast is [1]",)),
    ("Sub", [("a", F, [2, 3]), ("b", F, [3])], {"broadcast": 1, "axis": 1.5}, 6,
     ("attribute axis is 1.5",)),
    ("Cast", [("x", F, [2])], {"to": [1]}, 21, ("attribute to is [1]",)),
    ("BitCast", [("x", F, [2])], {"to": 1.0}, 26, ("attribute to is 1.0",)),
])
def test_attributes_of_the_wrong_type_are_contradictions_not_errors(op, inputs, attrs, opset,
                                                                   words):
    msgs = contradicts(node_model(op, inputs, opset=opset, **attrs), *words)
    assert len(msgs) == 1, msgs
