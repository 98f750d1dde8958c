"""Element-wise kernels (onemodel/evaluate/kernels/elementwise.py) against onnx.reference and
hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from oracle import assert_outputs, node_model, ours, reference

RNG = np.random.default_rng(0)
X = RNG.uniform(-2, 2, (2, 3, 4)).astype(np.float32)
Y = RNG.uniform(0.5, 2, (3, 1)).astype(np.float32)  # broadcasts against X
P = RNG.uniform(0.1, 0.9, (2, 3, 4)).astype(np.float32)


@pytest.mark.parametrize("op_type", ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum",
                                     "Mean"])
def test_binary_float_with_broadcast(op_type):
    feeds = {"a": X if op_type != "Pow" else np.abs(X), "b": Y}
    model = node_model(op_type, feeds, ["a", "b"], ["y"])
    assert_outputs(ours(model, feeds), reference(model, feeds))


@pytest.mark.parametrize("op_type", ["Abs", "Neg", "Floor", "Ceil", "Sqrt", "Exp", "Log", "Tanh",
                                     "Round", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh",
                                     "Cosh", "Asinh", "Atanh", "Sign", "Reciprocal", "Erf"])
def test_unary_float(op_type):
    x = P if op_type in ("Sqrt", "Log", "Asin", "Acos", "Atanh") else X
    feeds = {"x": x}
    model = node_model(op_type, feeds, ["x"], ["y"])
    assert_outputs(ours(model, feeds), reference(model, feeds), rtol=1e-6)


def test_acosh_and_round_half_to_even():
    feeds = {"x": np.array([1.0, 1.5, 10.0], np.float32)}
    (y,) = ours(node_model("Acosh", feeds, ["x"], ["y"]), feeds)
    np.testing.assert_allclose(y, np.arccosh(feeds["x"]), rtol=1e-6)
    feeds = {"x": np.array([0.5, 1.5, 2.5, -0.5, -2.5, 2.6], np.float32)}
    (y,) = ours(node_model("Round", feeds, ["x"], ["y"]), feeds)
    np.testing.assert_array_equal(y, [0, 2, 2, -0.0, -2, 3])


def test_erf_matches_math_erf_in_float64():
    x = np.linspace(-7, 7, 2001)
    feeds = {"x": x}
    (y,) = ours(node_model("Erf", feeds, ["x"], ["y"]), feeds)
    want = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(y, want, rtol=0, atol=5e-15)


def test_integer_div_truncates_toward_zero_and_mod_sign_rules():
    a = np.array([7, -7, 7, -7], np.int32)
    b = np.array([2, 2, -2, -2], np.int32)
    feeds = {"a": a, "b": b}
    (q,) = ours(node_model("Div", feeds, ["a", "b"], ["y"]), feeds)
    np.testing.assert_array_equal(q, [3, -3, -3, 3])
    (m,) = ours(node_model("Mod", feeds, ["a", "b"], ["y"]), feeds)
    np.testing.assert_array_equal(m, [1, 1, -1, -1])  # sign of the divisor
    (f,) = ours(node_model("Mod", feeds, ["a", "b"], ["y"], fmod=1), feeds)
    np.testing.assert_array_equal(f, [1, -1, 1, -1])  # sign of the dividend
    fa = {"a": np.array([-4.5, 4.5], np.float32), "b": np.array([2.0, -2.0], np.float32)}
    (m,) = ours(node_model("Mod", fa, ["a", "b"], ["y"], opset=28), fa)
    np.testing.assert_array_equal(m, [1.5, -1.5])


def test_pow_keeps_the_base_type():
    feeds = {"x": np.array([2, 3], np.int64), "y": np.array([2.0, 0.5], np.float32)}
    (y,) = ours(node_model("Pow", feeds, ["x", "y"], ["z"]), feeds)
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, [4, 1])


@pytest.mark.parametrize("op_type", ["Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"])
def test_comparisons(op_type):
    a = np.array([[1, 2, 3], [3, 2, 1]], np.int32)
    b = np.array([2, 2, 2], np.int32)
    feeds = {"a": a, "b": b}
    model = node_model(op_type, feeds, ["a", "b"], ["y"])
    assert_outputs(ours(model, feeds), reference(model, feeds))


def test_string_equality():
    feeds = {"a": np.array(["x", "yy", "z"], dtype=object), "b": np.array(["yy"], dtype=object)}
    (y,) = ours(node_model("Equal", feeds, ["a", "b"], ["y"]), feeds)
    np.testing.assert_array_equal(y, [False, True, False])


@pytest.mark.parametrize("op_type", ["And", "Or", "Xor"])
def test_logic(op_type):
    feeds = {"a": np.array([True, True, False, False]), "b": np.array([True, False, True, False])}
    model = node_model(op_type, feeds, ["a", "b"], ["y"])
    assert_outputs(ours(model, feeds), reference(model, feeds))
    (n,) = ours(node_model("Not", {"a": feeds["a"]}, ["a"], ["y"]), {"a": feeds["a"]})
    np.testing.assert_array_equal(n, [False, False, True, True])


@pytest.mark.parametrize("op_type", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
def test_bitwise(op_type):
    feeds = {"a": np.array([12, 10, 255], np.uint8), "b": np.array([10, 6, 1], np.uint8)}
    model = node_model(op_type, feeds, ["a", "b"], ["y"])
    assert_outputs(ours(model, feeds), reference(model, feeds))


def test_bitshift_including_opset_28_out_of_range_shifts():
    feeds = {"x": np.array([16, 4, 1], np.uint32), "y": np.array([1, 2, 31], np.uint32)}
    (r,) = ours(node_model("BitShift", feeds, ["x", "y"], ["z"], direction="RIGHT"), feeds)
    np.testing.assert_array_equal(r, [8, 1, 0])
    (l,) = ours(node_model("BitShift", feeds, ["x", "y"], ["z"], direction="LEFT"), feeds)
    np.testing.assert_array_equal(l, [32, 16, 1 << 31])
    feeds = {"x": np.array([-8, -8, 8, 8], np.int8), "y": np.array([1, 9, 9, -1], np.int8)}
    (r,) = ours(node_model("BitShift", feeds, ["x", "y"], ["z"], direction="RIGHT", opset=28),
                feeds)
    np.testing.assert_array_equal(r, [-4, -1, 0, 0])


def test_isnan_isinf_where_clip():
    x = np.array([1.0, np.nan, np.inf, -np.inf], np.float32)
    (n,) = ours(node_model("IsNaN", {"x": x}, ["x"], ["y"]), {"x": x})
    np.testing.assert_array_equal(n, [False, True, False, False])
    (i,) = ours(node_model("IsInf", {"x": x}, ["x"], ["y"], detect_negative=0), {"x": x})
    np.testing.assert_array_equal(i, [False, False, True, False])
    feeds = {"c": np.array([True, False]), "a": np.array([1, 2], np.int64),
             "b": np.array([[9], [8]], np.int64)}
    model = node_model("Where", feeds, ["c", "a", "b"], ["y"])
    assert_outputs(ours(model, feeds), reference(model, feeds))
    feeds = {"x": np.array([-5, 0, 5], np.int32), "lo": np.array(-1, np.int32),
             "hi": np.array(2, np.int32)}
    (c,) = ours(node_model("Clip", feeds, ["x", "lo", "hi"], ["y"]), feeds)
    np.testing.assert_array_equal(c, [-1, 0, 2])
    assert c.dtype == np.int32
    del feeds["lo"]
    (c,) = ours(node_model("Clip", feeds, ["x", "", "hi"], ["y"]), feeds)
    np.testing.assert_array_equal(c, [-5, 0, 2])
    f = {"x": np.array([-5.0, 0.5, 5.0], np.float32)}
    (c,) = ours(node_model("Clip", f, ["x"], ["y"], opset=6, min=-1.0, max=1.0), f)
    np.testing.assert_array_equal(c, [-1, 0.5, 1])


def test_legacy_broadcast_attribute_before_opset_7():
    feeds = {"a": np.ones((2, 3, 4), np.float32), "b": np.array([1, 2, 3], np.float32)}
    (y,) = ours(node_model("Add", feeds, ["a", "b"], ["y"], opset=6, broadcast=1, axis=1), feeds)
    np.testing.assert_array_equal(y[1, :, 0], [2, 3, 4])
