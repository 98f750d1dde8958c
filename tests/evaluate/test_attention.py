"""Attention and RotaryEmbedding kernels (onemodel/evaluate/kernels/attention.py) against the
onnx reference evaluator and a direct numpy computation."""

from __future__ import annotations

import numpy as np
import pytest

from oracle import assert_outputs, node_model, ours, reference

RNG = np.random.default_rng(9)


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_attention_4d_by_hand():
    q, k, v = _rand(1, 2, 3, 4), _rand(1, 2, 5, 4), _rand(1, 2, 5, 6)
    feeds = {"Q": q, "K": k, "V": v}
    model = node_model("Attention", feeds, ["Q", "K", "V"], ["Y"], opset=23)
    (y,) = ours(model, feeds)
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2) / 2.0
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(y, p @ v, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("attrs, extra", [
    ({"is_causal": 1}, {}),
    ({"softcap": 2.0, "scale": 0.3, "qk_matmul_output_mode": 1}, {}),
    ({}, {"mask": "bool"}),
    ({}, {"mask": "float"}),
    ({"is_causal": 1}, {"past": True}),
    ({"qk_matmul_output_mode": 2}, {"mask": "float"}),
    ({"qk_matmul_output_mode": 3, "is_causal": 1}, {}),
])
def test_attention_4d_gqa_matches_reference(attrs, extra):
    q, k, v = _rand(2, 4, 3, 8), _rand(2, 2, 5, 8), _rand(2, 2, 5, 8)
    feeds = {"Q": q, "K": k, "V": v}
    ins = ["Q", "K", "V"]
    total = 5
    if extra.get("past"):
        feeds["pk"], feeds["pv"] = _rand(2, 2, 4, 8), _rand(2, 2, 4, 8)
        total = 9
    if extra.get("mask") == "bool":
        feeds["M"] = RNG.random((3, total)) > 0.3
    elif extra.get("mask") == "float":
        feeds["M"] = _rand(2, 1, 3, total)
    ins.append("M" if "M" in feeds else "")
    if extra.get("past"):
        ins += ["pk", "pv"]
    outs = ["Y", "pk_out", "pv_out", "qk"] if extra.get("past") else ["Y", "", "", "qk"]
    model = node_model("Attention", feeds, ins, outs, opset=23, **attrs)
    assert_outputs(ours(model, feeds), reference(model, feeds), rtol=1e-4, atol=1e-5)


def test_attention_3d_with_heads_matches_reference():
    q, k, v = _rand(2, 3, 12), _rand(2, 4, 6), _rand(2, 4, 6)
    feeds = {"Q": q, "K": k, "V": v}
    model = node_model("Attention", feeds, ["Q", "K", "V"], ["Y"], opset=23, q_num_heads=4,
                       kv_num_heads=2)
    (y,) = ours(model, feeds)
    assert y.shape == (2, 3, 12)
    assert_outputs([y], reference(model, feeds), rtol=1e-4, atol=1e-5)


def test_fully_masked_row_gives_zeros():
    q, k, v = _rand(1, 1, 2, 4), _rand(1, 1, 3, 4), _rand(1, 1, 3, 4)
    mask = np.array([[False, False, False], [True, False, True]])
    feeds = {"Q": q, "K": k, "V": v, "M": mask}
    model = node_model("Attention", feeds, ["Q", "K", "V", "M"], ["Y"], opset=23)
    (y,) = ours(model, feeds)
    np.testing.assert_array_equal(y[0, 0, 0], np.zeros(4, np.float32))
    assert np.isfinite(y).all()


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("partial", [0, 4])
def test_rotary_embedding_matches_reference(interleaved, partial):
    x = _rand(2, 3, 5, 8)  # [B, H, S, D]
    half = (partial or 8) // 2
    feeds = {"X": x, "cos": _rand(10, half), "sin": _rand(10, half),
             "pos": RNG.integers(0, 10, (2, 5)).astype(np.int64)}
    model = node_model("RotaryEmbedding", feeds, ["X", "cos", "sin", "pos"], ["Y"], opset=23,
                       interleaved=interleaved, rotary_embedding_dim=partial)
    assert_outputs(ours(model, feeds), reference(model, feeds), rtol=1e-5, atol=1e-6)


def test_rotary_embedding_3d_without_position_ids():
    x = _rand(2, 5, 12)
    feeds = {"X": x, "cos": _rand(2, 5, 3), "sin": _rand(2, 5, 3)}
    model = node_model("RotaryEmbedding", feeds, ["X", "cos", "sin"], ["Y"], opset=23,
                       num_heads=2)
    assert_outputs(ours(model, feeds), reference(model, feeds), rtol=1e-5, atol=1e-6)
