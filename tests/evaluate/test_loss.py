"""Kernels of onemodel/evaluate/kernels/loss.py (NegativeLogLikelihoodLoss,
SoftmaxCrossEntropyLoss) against onnxruntime and hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import assert_close_to_exact, node_model, ours, reference64

from onemodel.errors import EvaluationError

RNG = np.random.default_rng(21)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("opset", [13, 22])
def test_nll_loss_matches_onnxruntime(reduction, weighted, opset):
    x = RNG.standard_normal((3, 5, 2, 4)).astype(np.float32)
    t = RNG.integers(0, 5, (3, 2, 4)).astype(np.int64)
    t[0, 0, 0] = -7  # ignored, and not a valid class
    feeds = {"x": x, "t": t}
    names = ["x", "t"]
    if weighted:
        feeds["w"] = RNG.uniform(0.1, 2, 5).astype(np.float32)
        names.append("w")
    model = node_model("NegativeLogLikelihoodLoss", feeds, names, ["y"], opset=opset,
                       reduction=reduction, ignore_index=-7)
    # exact: the definition in float64. A loss is -x[t] * w[t], summed over at most 24 terms
    # and divided by the sum of the weights: at most 24 + 24 + 2 roundings, 50 ulps of the same
    # loss on -|x| (the weighted mean of |x[t]|, where the sum cannot cancel)
    mag = np.abs(reference64(model, {**feeds, "x": -np.abs(x)})[0])
    assert_close_to_exact(ours(model, feeds), reference64(model, feeds), ulps=50, scale=mag)


def test_nll_mean_divides_by_the_weights_of_the_elements_not_ignored():
    x = np.log(np.array([[0.5, 0.25, 0.25], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6]], np.float32))
    t = np.array([0, 1, 2], np.int64)
    w = np.array([1.0, 2.0, 4.0], np.float32)
    feeds = {"x": x, "t": t, "w": w}
    model = node_model("NegativeLogLikelihoodLoss", feeds, ["x", "t", "w"], ["y"], opset=22,
                       ignore_index=2)
    (y,) = ours(model, feeds)
    want = -(1.0 * np.log(0.5) + 2.0 * np.log(0.8)) / 3.0
    assert y.shape == () and y.dtype == np.float32
    np.testing.assert_allclose(y, want, rtol=1e-6)


def test_nll_target_outside_the_classes_is_refused():
    feeds = {"x": np.zeros((2, 3), np.float32), "t": np.array([0, 3], np.int64)}
    model = node_model("NegativeLogLikelihoodLoss", feeds, ["x", "t"], ["y"], opset=22)
    with pytest.raises(EvaluationError, match="outside"):
        ours(model, feeds)


@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_softmax_cross_entropy_loss_and_log_prob_match_onnxruntime(reduction):
    x = (RNG.standard_normal((4, 6, 3)) * 3).astype(np.float32)
    t = RNG.integers(0, 6, (4, 3)).astype(np.int64)
    w = RNG.uniform(0.5, 1.5, 6).astype(np.float32)
    feeds = {"x": x, "t": t, "w": w}
    model = node_model("SoftmaxCrossEntropyLoss", feeds, ["x", "t", "w"], ["loss", "log_prob"],
                       opset=13, reduction=reduction, ignore_index=1)
    # exact: the definition in float64. log_prob is x - max - log(sum of 6 exps): a few ulps
    # of its magnitude (|x| <= ~10); the loss a weighted mean of 12 of those: 12 + 12 + 2
    # roundings more. 40 ulps of each output's largest value
    assert_close_to_exact(ours(model, feeds), reference64(model, feeds), ulps=40)


def test_softmax_cross_entropy_of_float16_is_computed_in_float32():
    x = RNG.standard_normal((5, 4)).astype(np.float16)
    t = RNG.integers(0, 4, 5).astype(np.int32)
    feeds = {"x": x, "t": t}
    model = node_model("SoftmaxCrossEntropyLoss", feeds, ["x", "t"], ["loss"], opset=13)
    (loss,) = ours(model, feeds)
    w = x.astype(np.float32)
    logp = w - w.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    want = np.float16(-logp[np.arange(5), t].mean())
    assert loss.dtype == np.float16 and loss.shape == ()
    np.testing.assert_allclose(loss.astype(np.float32), want.astype(np.float32), rtol=1e-3)
