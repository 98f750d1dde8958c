"""Inference rules of Cast, CastLike and BitCast (onemodel/inference/rules/cast.py): the input's
shape (symbolic too), the element type from ``to`` or the second input, BitCast's equal-width
requirement, data propagation of converted elements (integer shape data kept across integer
types), contradictions, unknown ranks, the evaluator agreeing (``sound``) and onnx's inference
agreeing where it has an answer."""

import math

import numpy as np
import pytest
from onnx import TensorProto as T

from onemodel.inference import Expr, Value
from onemodel.inference.rules.cast import cast_data
from tests.infer.harness import inferred, node_model, sound
from tests.infer.rules_check import (
    check_family_registered,
    check_unknown_inputs,
    contradicts,
    data_sound,
    expect,
    infer_values,
)

N, M = Expr.var("N"), Expr.var("M")
F, I32, I64, I8, U8, B8 = T.FLOAT, T.INT32, T.INT64, T.INT8, T.UINT8, T.BOOL


def test_every_kernel_has_a_rule_at_its_versions():
    assert check_family_registered("cast") == 3


def test_unknown_inputs_never_raise():
    assert check_unknown_inputs("cast") > 20


@pytest.mark.parametrize("opset,src,to", [
    (21, F, I64), (21, I64, F), (19, T.DOUBLE, T.FLOAT16), (13, I32, B8), (9, B8, F),
    (6, F, I32), (1, F, T.DOUBLE), (23, F, T.BFLOAT16), (25, I64, T.INT4), (28, F, U8),
    (21, F, T.FLOAT8E4M3FN), (24, F, T.FLOAT8E8M0),
])
def test_cast_element_type_is_to(opset, src, to):
    m = node_model("Cast", [("x", src, ["N", 3])], opset=opset, to=to)
    expect(m, ["N", 3], to)


@pytest.mark.parametrize("opset,src,like", [(15, F, I64), (19, I32, T.DOUBLE),
                                            (21, T.DOUBLE, F), (25, F, T.FLOAT16)])
def test_castlike_takes_the_type_of_the_second_input(opset, src, like):
    m = node_model("CastLike", [("x", src, ["N", "M"]), ("t", like, [1])], opset=opset)
    expect(m, ["N", "M"], like)


@pytest.mark.parametrize("src,to", [(F, I32), (I64, T.DOUBLE), (T.FLOAT16, T.INT16),
                                    (U8, I8), (I32, T.UINT32)])
def test_bitcast_between_equal_widths(src, to):
    m = node_model("BitCast", [("x", src, ["N", 2])], opset=26, to=to)
    v = inferred(m)["y"]
    assert v.shape == (N, 2) and v.elem == to
    assert sound(m) > 0


@pytest.mark.parametrize("op,inputs,attrs,words", [
    ("BitCast", [("x", F, [2])], {"to": I64}, ("FLOAT (32 bits)", "INT64 (64 bits)")),
    ("BitCast", [("x", T.STRING, [2])], {"to": I64}, ("string",)),
    ("BitCast", [("x", F, [2])], {"to": T.STRING}, ("string",)),
    ("Cast", [("x", F, [2])], {"to": 99}, ("'to' is 99",)),
    ("Cast", [("x", F, [2])], {}, ("'to' is None",)),
])
def test_contradictions(op, inputs, attrs, words):
    opset = 26 if op == "BitCast" else 21
    contradicts(node_model(op, inputs, opset=opset, **attrs), *words)


def test_unknown_rank_keeps_the_element_type():
    v = inferred(node_model("Cast", [("x", F, None)], to=I64))["y"]
    assert v.shape is None and v.elem == I64
    v = inferred(node_model("CastLike", [("x", F, None), ("t", U8, None)]))["y"]
    assert v.shape is None and v.elem == U8


# -- data ---------------------------------------------------------------------------------------
def shape_data(*extents):
    return Value.tensor(I64, (len(extents),), extents)


@pytest.mark.parametrize("to,want", [
    (I64, (N, 3, N + 1)), (I32, (N, 3, N + 1)), (T.UINT64, (N, 3, N + 1)),
    (I8, (None, 3, None)),          # an extent may not fit 8 bits: unknown, the int kept
    (B8, None),                     # N may be 0
    (F, None),                      # symbolic extents have no float value
])
def test_cast_of_shape_data(to, want):
    (v,), msgs = infer_values("Cast", [shape_data(N, 3, N + 1)], to=to)
    assert not msgs and v.elem == to and v.shape == (3,)
    assert v.data == want


def test_cast_of_extents_that_may_be_negative_to_unsigned():
    (v,), _ = infer_values("Cast", [shape_data(N - 5, N + 1, 3)], to=T.UINT64)
    assert v.data == (None, N + 1, 3)
    (v,), _ = infer_values("Cast", [shape_data(N - 5, N + 1, 3)], to=T.INT64)
    assert v.data == (N - 5, N + 1, 3)


def test_cast_of_positive_extents_to_bool():
    (v,), _ = infer_values("Cast", [shape_data(N + 1, 2, 0)], to=B8)
    assert v.data == (True, True, False)


@pytest.mark.parametrize("arr,to,want", [
    (np.array([1.7, -2.5, 3e10, 0.0], np.float32), I32, (1, -2, None, 0)),  # 3e10: undefined
    (np.array([300, -1, 7], np.int64), U8, (44, 255, 7)),        # wraps as the kernel does
    (np.array([300, -129], np.int32), I8, (44, 127)),
    (np.array([2, 0, -3], np.int64), B8, (True, False, True)),
    (np.array([True, False]), I64, (1, 0)),
    (np.array([16777217, 3], np.int64), F, (16777216.0, 3.0)),  # rounded to float32
    (np.array([0.1, 1e300], np.float64), F, (0.10000000149011612, math.inf)),
    (np.array([0.1, 65520.0], np.float32), T.FLOAT16, (0.0999755859375, math.inf)),
    (np.array([1, 2], np.int32), T.DOUBLE, (1.0, 2.0)),
])
def test_cast_of_constant_data(arr, to, want):
    m = node_model("Cast", [("x", arr)], to=to)
    v = inferred(m)["y"]
    assert v.elem == to and v.data == want
    assert sound(m, draws=1) == 1   # the evaluator's integer elements are the same


def test_castlike_data_and_cast_data_helper():
    m = node_model("CastLike", [("x", np.array([1.9, -1.9], np.float32)),
                                ("t", np.array([0], np.int16))])
    v = inferred(m)["y"]
    assert v.elem == T.INT16 and v.data == (1, -1)
    assert sound(m, draws=1) == 1
    assert cast_data((1, 2.5, True), B8) == (True, True, True)
    assert cast_data((float("nan"), float("inf"), 5.0), I32) == (None, None, 5)
    assert cast_data((N,), T.STRING) is None and cast_data(None, I64) is None
    # 2**62 + 2**38 + 1 rounds up to float32 directly, but to 2**62 through float64: unknown
    assert cast_data((2**62 + 2**38 + 1,), F) is None and cast_data((2**53,), F) == (2.0**53,)


def test_cast_of_a_shape_in_a_model():
    from onnx import helper

    import onemodel
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Cast", ["s"], ["s32"], to=I32),
             helper.make_node("Cast", ["s32"], ["s8"], to=I8),
             helper.make_node("Cast", ["s"], ["b"], to=B8)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, ["N", 3])],
                          [helper.make_empty_tensor_value_info(o) for o in ("s8", "b")])
    m = onemodel.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
                      .SerializeToString())
    got = inferred(m, positive_dims=False)
    assert got["s32"].elem == I32 and got["s32"].data == (N, 3)
    assert got["s8"].data == (None, 3) and got["b"].data is None
    # N >= 1 (the default for an input's dimension): N != 0 casts to True
    assert inferred(m)["b"].data == (True, True)
    assert data_sound(m) == 3 * 7    # per draw: s, s32, b (2 each) and the 3 of s8
