"""Normalization kernels (onemodel/evaluate/kernels/norm.py) against onnx.reference and
hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from oracle import F32_ORACLE as F32
from oracle import assert_outputs, node_model, ort, ours, reference

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
    # onnx.reference leaves out the absolute value of LpNormalization p=1; onnxruntime is the
    # oracle for these.
    for op_type, attrs in (("LpNormalization", {"axis": 1, "p": 1}),
                           ("LpNormalization", {"p": 2}),
                           ("MeanVarianceNormalization", {})):
        model = node_model(op_type, {"x": x}, ["x"], ["y"], **attrs)
        assert_outputs(ours(model, {"x": x}), ort(model, {"x": x},
            relies_on=F32.format(what="LpNormalization and MeanVarianceNormalization: sums over at "
                                      "most 36 elements and a division")), rtol=1e-5, atol=1e-5)
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

