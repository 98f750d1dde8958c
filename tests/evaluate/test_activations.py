"""Activation and softmax kernels (onemodel/evaluate/kernels/activations.py) against
onnx.reference and hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from oracle import F32_ORACLE as F32
from oracle import assert_outputs, node_model, ort, ours, reference

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
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_softmax_family_before_opset_13_against_onnxruntime(op_type, axis):
    # onnx.reference applies the opset-13 single-axis rule to every version; onnxruntime follows
    # the coerced-to-2-D definition of opsets 1 and 11.
    feeds = {"x": X}
    model = node_model(op_type, feeds, ["x"], ["y"], opset=11, axis=axis)
    assert_outputs(ours(model, feeds), ort(model, feeds,
        relies_on=F32.format(what="Softmax/LogSoftmax exp and sum over a coerced 2-D row; Hardmax "
                                  "is a comparison")), rtol=1e-5, atol=1e-6)


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

