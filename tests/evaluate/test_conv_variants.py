"""DeformConv and CausalConvWithState (onemodel/evaluate/kernels/conv.py) against onnxruntime,
the onnx reference evaluator and the definitions' own identities; Conv's batch-chunked im2col
against the one-shot product."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import assert_close_to_exact, assert_outputs, node_model, ours, reference, reference64

from onemodel.errors import EvaluationError
from onemodel.evaluate.kernels import conv as conv_module

RNG = np.random.default_rng(17)


def test_deform_conv_with_fractional_offsets_groups_and_mask_matches_both_oracles():
    x = RNG.standard_normal((2, 4, 7, 6)).astype(np.float32)
    w = RNG.standard_normal((4, 2, 3, 3)).astype(np.float32)
    off = RNG.uniform(-1.5, 1.5, (2, 2 * 9 * 2, 4, 2)).astype(np.float32)  # some land outside
    mask = RNG.uniform(0, 1, (2, 2 * 9, 4, 2)).astype(np.float32)
    b = RNG.standard_normal(4).astype(np.float32)
    feeds = {"x": x, "w": w, "off": off, "b": b, "mask": mask}
    model = node_model("DeformConv", feeds, ["x", "w", "off", "b", "mask"], ["y"], opset=22,
                       group=2, offset_group=2, strides=[2, 2], pads=[1, 1, 1, 1],
                       dilations=[1, 2])
    got = ours(model, feeds)
    # exact: the definition in float64. Each output sums 2 x 9 taps of 4 bilinear corners
    # (72 products of x, w, a weight and the mask); a term goes through about 6 float32
    # roundings (weights, products) and the sum through 72: 80 ulps of the sum of |terms|,
    # which is the same model on |x|, |w|, |b| (bilinear weights and mask are >= 0).
    mag = reference64(model, {**feeds, "x": np.abs(x), "w": np.abs(w), "b": np.abs(b)})
    assert_close_to_exact(got, reference64(model, feeds), ulps=80, scale=mag[0])
    assert_outputs(got, reference(model, feeds), rtol=1e-5, atol=1e-5)


def test_deform_conv_with_zero_offsets_is_conv():
    x = RNG.standard_normal((1, 3, 5, 5)).astype(np.float32)
    w = RNG.standard_normal((2, 3, 3, 3)).astype(np.float32)
    feeds = {"x": x, "w": w, "off": np.zeros((1, 18, 5, 5), np.float32)}
    deform = node_model("DeformConv", feeds, ["x", "w", "off"], ["y"], opset=19,
                        pads=[1, 1, 1, 1])
    plain = node_model("Conv", feeds, ["x", "w"], ["y"], opset=19, pads=[1, 1, 1, 1])
    np.testing.assert_allclose(ours(deform, feeds)[0], ours(plain, {"x": x, "w": w})[0],
                               rtol=1e-5, atol=1e-6)


def test_deform_conv_offset_of_the_wrong_shape_is_refused():
    feeds = {"x": np.zeros((1, 1, 4, 4), np.float32), "w": np.zeros((1, 1, 2, 2), np.float32),
             "off": np.zeros((1, 8, 2, 2), np.float32)}
    model = node_model("DeformConv", feeds, ["x", "w", "off"], ["y"], opset=22)
    with pytest.raises(EvaluationError, match="offset shape"):
        ours(model, feeds)


def _causal(feeds, inputs, **attrs):
    model = node_model("CausalConvWithState", feeds, inputs, ["y", "state"], opset=27,
                       ir_version=11, **attrs)
    return ours(model, feeds)


@pytest.mark.parametrize("activation", ["none", "silu"])
def test_causal_conv_in_two_steps_equals_one_step(activation):
    x = RNG.standard_normal((2, 3, 9)).astype(np.float32)
    w = RNG.standard_normal((3, 1, 4)).astype(np.float32)
    b = RNG.standard_normal(3).astype(np.float32)
    y, state = _causal({"x": x, "w": w, "b": b}, ["x", "w", "b"], activation=activation)
    y1, s1 = _causal({"x": x[:, :, :5], "w": w, "b": b}, ["x", "w", "b"], activation=activation)
    y2, s2 = _causal({"x": x[:, :, 5:], "w": w, "b": b, "p": s1}, ["x", "w", "b", "p"],
                     activation=activation)
    np.testing.assert_allclose(np.concatenate([y1, y2], axis=2), y, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(s2, state)
    np.testing.assert_array_equal(state, x[:, :, -3:])
    # the definition, written out: a depthwise correlation over the zero-padded input
    padded = np.concatenate([np.zeros((2, 3, 3), np.float32), x], axis=2)
    want = np.stack([(padded[:, :, t:t + 4] * w[:, 0]).sum(-1) for t in range(9)], -1) \
        + b[:, None]
    if activation == "silu":
        want = want / (1 + np.exp(-want))
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_causal_conv_state_of_a_short_input_keeps_the_old_state():
    x = RNG.standard_normal((1, 2, 1)).astype(np.float32)
    w = RNG.standard_normal((2, 1, 4)).astype(np.float32)
    past = RNG.standard_normal((1, 2, 3)).astype(np.float32)
    _, state = _causal({"x": x, "w": w, "p": past}, ["x", "w", "", "p"])
    np.testing.assert_array_equal(state, np.concatenate([past[:, :, 1:], x], axis=2))


def test_conv_in_batch_chunks_equals_one_product(monkeypatch):
    x = RNG.standard_normal((5, 4, 9, 9)).astype(np.float32)
    w = RNG.standard_normal((6, 2, 3, 3)).astype(np.float32)
    feeds = {"x": x, "w": w}
    model = node_model("Conv", feeds, ["x", "w"], ["y"], opset=22, group=2, pads=[1, 0, 1, 2],
                       strides=[2, 1])
    whole = ours(model, feeds)[0]
    monkeypatch.setattr(conv_module, "_COLUMN_BYTES", 1)  # one sample at a time
    chunked = ours(model, feeds)[0]
    # exact: Conv in float64; each output sums 18 products, so each result is within 18 ulps
    # of the sum of |terms| (the same Conv on |x|, |w|); chunks and the whole product alike
    exact = reference64(model, feeds)
    mag = reference64(model, {"x": np.abs(x), "w": np.abs(w)})[0]
    assert_close_to_exact([whole], exact, ulps=18, scale=mag)
    assert_close_to_exact([chunked], exact, ulps=18, scale=mag)
