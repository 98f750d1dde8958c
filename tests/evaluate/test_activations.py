"""Activation and softmax kernels (onemodel/evaluate/kernels/activations.py) against
onnx.reference, float64 formulas (exact_misc.py) and hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
from exact_misc import coerced_2d, hardmax_2d, log_softmax_2d, softmax_2d
from oracle import assert_close_to_exact, assert_outputs, node_model, ours, reference

X = np.random.default_rng(1).uniform(-3, 3, (2, 3, 5)).astype(np.float32)


@pytest.mark.parametrize("op_type, attrs, opset", [
    ("Relu", {}, 21), ("LeakyRelu", {"alpha": 0.2}, 21), ("Elu", {"alpha": 0.7}, 21),
    ("Selu", {}, 21), ("Celu", {"alpha": 1.5}, 21), ("Sigmoid", {}, 21),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, 21), ("HardSwish", {}, 21),
    ("Softplus", {}, 21), ("Softsign", {}, 21), ("Gelu", {}, 21),
    ("Gelu", {"approximate": "tanh"}, 21), ("Mish", {}, 21),
    ("ThresholdedRelu", {"alpha": 0.5}, 21), ("Shrink", {"bias": 0.5, "lambd": 1.0}, 21),
    ("Swish", {"alpha": 1.5}, 24),
    ("Softmax", {}, 21), ("Softmax", {"axis": 1}, 21), ("LogSoftmax", {"axis": 0}, 21),
    ("Hardmax", {"axis": 1}, 21),
])
def test_against_reference(op_type, attrs, opset):
    feeds = {"x": X}
    model = node_model(op_type, feeds, ["x"], ["y"], opset=opset, **attrs)
    assert_outputs(ours(model, feeds), reference(model, feeds), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_softmax_family_before_opset_13_against_exact(op_type, axis):
    # opset 11 coerces the input to 2-D at ``axis`` (onnx.reference applies the opset-13
    # single-axis rule to every version, so it is no oracle here): exact_misc's float64 rows.
    feeds = {"x": X}
    model = node_model(op_type, feeds, ["x"], ["y"], opset=11, axis=axis)
    (got,) = ours(model, feeds)
    rows = coerced_2d(X, axis)
    n = rows.shape[1]
    if op_type == "Hardmax":
        # 0/1 by comparisons: exact. X is continuous random: no row has a tied maximum (the
        # tie rule, first index, is tested by hand below).
        assert ((rows == rows.max(axis=1, keepdims=True)).sum(axis=1) == 1).all()
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, hardmax_2d(X, axis))
        return
    spread = float(X.max() - X.min())
    # float32, per element: the shifted argument s = x - max (or the tensor's maximum) is
    # rounded once (u |s|, |s| <= spread, which exp turns into a relative error), exp errs by
    # at most 3 ulps (6u; numpy's SIMD exp: 2.52), the row sum of n positive terms by
    # (n - 1) u relative in any order, the division by u: (spread + n + 6) u relative, i.e.
    # (spread + n + 6) / 2 ulps of |y| (EPS32 = 2u).
    ulps = (spread + n + 6) / 2
    if op_type == "Softmax":
        assert_close_to_exact(got, softmax_2d(X, axis), ulps=ulps,
                              scale=np.abs(softmax_2d(X, axis)))
    else:
        # y = s - log(S): the sum's relative error above, (spread + n + 5) u, becomes an
        # absolute error of log(S); log (<= 4 ulps), s and the subtraction add 10 u |y|
        # (|s| and log S are both <= |y|): max(5, ulps) of |y| + 1
        exact = log_softmax_2d(X, axis)
        assert_close_to_exact(got, exact, ulps=max(5.0, ulps), scale=np.abs(exact) + 1)


def test_hardmax_before_opset_13_picks_the_first_maximum_of_the_coerced_row():
    # axis 1 of [2, 2, 3] coerces to rows of 6: row 0 ties 3.0 at flat 1 and 4, row 1 ties
    # 5.0 at flat 0, 3 and 5 (the definition: 1 for the first maximum, 0 for the others)
    x = np.array([[[0, 3, 1], [2, 3, -1]], [[5, 1, 5], [5, 0, 5]]], np.float32)
    model = node_model("Hardmax", {"x": x}, ["x"], ["y"], opset=11, axis=1)
    (y,) = ours(model, {"x": x})
    want = np.zeros((2, 6), np.float32)
    want[0, 1] = want[1, 0] = 1
    np.testing.assert_array_equal(y, want.reshape(x.shape))
    np.testing.assert_array_equal(hardmax_2d(x, 1), y)


def test_softmax_axis_semantics_before_and_from_opset_13():
    x = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    (old,) = ours(node_model("Softmax", {"x": x}, ["x"], ["y"], opset=11), {"x": x})
    (new,) = ours(node_model("Softmax", {"x": x}, ["x"], ["y"], opset=13), {"x": x})
    e = np.exp(x - x.max())
    np.testing.assert_allclose(old, e / e.sum(), rtol=1e-6)  # coerced to [1, 6]
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(new, e / e.sum(axis=-1, keepdims=True), rtol=1e-6)


def test_prelu_broadcast_and_sigmoid_extremes():
    feeds = {"x": X, "s": np.array([0.1, 0.2, 0.3, 0.4, 0.5], np.float32)}
    model = node_model("PRelu", feeds, ["x", "s"], ["y"])
    assert_outputs(ours(model, feeds), reference(model, feeds))
    x = np.array([-1000.0, 0.0, 1000.0], np.float32)
    (y,) = ours(node_model("Sigmoid", {"x": x}, ["x"], ["y"]), {"x": x})
    np.testing.assert_array_equal(y, [0.0, 0.5, 1.0])


def test_float16_is_computed_in_float32_and_rounded_once():
    x = np.array([-2.0, -0.5, 0.25, 3.0], np.float16)
    (y,) = ours(node_model("Gelu", {"x": x}, ["x"], ["y"]), {"x": x})
    assert y.dtype == np.float16
    from math import erf, sqrt
    want = np.array([0.5 * v * (1 + erf(v / sqrt(2))) for v in x.astype(np.float64)])
    np.testing.assert_array_equal(y, want.astype(np.float32).astype(np.float16))

