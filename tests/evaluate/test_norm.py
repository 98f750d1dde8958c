"""Normalization kernels (onemodel/evaluate/kernels/norm.py) against onnx.reference, float64
formulas (exact_misc.py) and hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
from exact_misc import lp_normalization, mean_variance_normalization, mvn_error_scale
from oracle import assert_close_to_exact, assert_outputs, node_model, ours, reference

RNG = np.random.default_rng(4)


def _r(*shape, lo=-1.0):
    return RNG.uniform(lo, 1, shape).astype(np.float32)


def test_batch_norm_inference_and_training():
    feeds = {"x": _r(2, 3, 4, 5), "s": _r(3), "b": _r(3), "m": _r(3), "v": _r(3, lo=0.1)}
    model = node_model("BatchNormalization", feeds, ["x", "s", "b", "m", "v"], ["y"],
                       epsilon=1e-3)
    assert_outputs(ours(model, feeds), reference(model, feeds), rtol=1e-5, atol=1e-6)
    model = node_model("BatchNormalization", feeds, ["x", "s", "b", "m", "v"],
                       ["y", "rm", "rv"], training_mode=1, momentum=0.8)
    assert_outputs(ours(model, feeds), reference(model, feeds), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis", [-1, 1])
def test_layer_norm(axis):
    feeds = {"x": _r(2, 3, 4), "s": _r(*(4,) if axis == -1 else (3, 4)),
             "b": _r(*(4,) if axis == -1 else (3, 4))}
    model = node_model("LayerNormalization", feeds, ["x", "s", "b"], ["y", "mean", "inv"],
                       axis=axis)
    assert_outputs(ours(model, feeds), reference(model, feeds), rtol=1e-5, atol=1e-6)


def test_instance_group_lp_mvn_rms():
    x = _r(2, 4, 3, 3)
    feeds = {"x": x, "s": _r(4), "b": _r(4)}
    for op_type, attrs in (("InstanceNormalization", {"epsilon": 1e-4}),
                           ("GroupNormalization", {"num_groups": 2})):
        model = node_model(op_type, feeds, ["x", "s", "b"], ["y"], **attrs)
        assert_outputs(ours(model, feeds), reference(model, feeds), rtol=1e-5, atol=1e-5)
    # exact: the definitions in float64 (onnx.reference leaves out the absolute value of
    # LpNormalization p=1, and its MeanVarianceNormalization function body adds a float32
    # Epsilon constant, so reference64 refuses it)
    for axis, p in ((1, 1), (-1, 2)):
        model = node_model("LpNormalization", {"x": x}, ["x"], ["y"], axis=axis, p=p)
        (got,) = ours(model, {"x": x})
        n = x.shape[axis]
        # float32: the norm is a sum of n positive terms (p 2: n squares, then a square root,
        # which halves their relative error and adds u), (n - 1) u or (n / 2 + 1) u relative;
        # the division adds u: (n + 1) u at most, (n + 1) / 2 ulps of |y| (EPS32 = 2u)
        exact = lp_normalization(x, axis=axis, p=p)
        assert_close_to_exact(got, exact, ulps=(n + 1) / 2, scale=np.abs(exact))
    (got,) = ours(node_model("MeanVarianceNormalization", {"x": x}, ["x"], ["y"]), {"x": x})
    # the default axes [0, 2, 3] reduce n elements per channel; see mvn_error_scale for the
    # n + 3 ulps of its scale that bound a float32 computation
    n = x.size // x.shape[1]
    assert_close_to_exact(got, mean_variance_normalization(x), ulps=n + 3,
                          scale=mvn_error_scale(x))
    feeds = {"x": x, "s": _r(3)}
    (y,) = ours(node_model("RMSNormalization", feeds, ["x", "s"], ["y"], opset=23), feeds)
    want = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5) * feeds["s"]
    np.testing.assert_allclose(y, want, rtol=1e-5)


def test_group_norm_opset_18_scales_per_group():
    x = _r(1, 4, 2)
    feeds = {"x": x, "s": np.array([2.0, 3.0], np.float32), "b": np.array([0.0, 1.0], np.float32)}
    (y,) = ours(node_model("GroupNormalization", feeds, ["x", "s", "b"], ["y"], opset=18,
                           num_groups=2), feeds)
    g = x.reshape(1, 2, -1)
    z = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5))
    want = (z * np.array([2.0, 3.0]).reshape(1, 2, 1) + np.array([0, 1.0]).reshape(1, 2, 1))
    np.testing.assert_allclose(y, want.reshape(x.shape), rtol=1e-5)


def test_lp_normalization_of_zero_vector_is_zero():
    x = np.zeros((2, 3), np.float32)
    (y,) = ours(node_model("LpNormalization", {"x": x}, ["x"], ["y"]), {"x": x})
    np.testing.assert_array_equal(y, x)

