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


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter_writes_at_each_batch_index(mode):
    cache = _rand(2, 3, 6, 4)
    update = _rand(2, 3, 3, 4)
    idx = np.array([1, 4 if mode == "circular" else 3], np.int64)
    feeds = {"c": cache, "u": update, "i": idx}
    model = node_model("TensorScatter", feeds, ["c", "u", "i"], ["y"], opset=24, mode=mode)
    (y,) = ours(model, feeds)
    want = cache.copy()
    for b in range(2):
        for s in range(3):
            want[b, :, (idx[b] + s) % 6] = update[b, :, s]
    np.testing.assert_array_equal(y, want)
    assert_outputs([y], reference(model, feeds))


def test_swiglu_by_hand():
    a, b = _rand(3, 4), _rand(3, 4)
    model = node_model("SwiGLU", {"a": a, "b": b}, ["a", "b"], ["y"], opset=28, alpha=1.5)
    (y,) = ours(model, {"a": a, "b": b})
    np.testing.assert_allclose(y, a / (1 + np.exp(-1.5 * a)) * b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
def test_linear_attention_step_by_step_equals_one_call(rule):
    """Running T tokens at once equals running them one by one with the state carried."""
    b, t, hq, hkv, dk, dv = 2, 4, 4, 2, 3, 5
    feeds = {"q": _rand(b, t, hq * dk), "k": _rand(b, t, hkv * dk), "v": _rand(b, t, hkv * dv),
             "s": _rand(b, hkv, dk, dv) * 0.1,
             "g": -np.abs(_rand(b, t, hkv * dk)), "beta": RNG.random((b, t, hkv), np.float32)}
    ins = ["q", "k", "v", "s", "g" if "gated" in rule else "", "beta" if "delta" in rule else ""]
    model = node_model("LinearAttention", feeds, ins, ["o", "st"], opset=27, q_num_heads=hq,
                       kv_num_heads=hkv, update_rule=rule)
    out, state = ours(model, {k: v for k, v in feeds.items() if k in ins})
    steps, s = [], feeds["s"]
    for i in range(t):
        one = {"q": feeds["q"][:, i:i + 1], "k": feeds["k"][:, i:i + 1],
               "v": feeds["v"][:, i:i + 1], "s": s, "g": feeds["g"][:, i:i + 1],
               "beta": feeds["beta"][:, i:i + 1]}
        step = node_model("LinearAttention", one, ins, ["o", "st"], opset=27, q_num_heads=hq,
                          kv_num_heads=hkv, update_rule=rule)
        o, s = ours(step, {k: v for k, v in one.items() if k in ins})
        steps.append(o)
    np.testing.assert_allclose(np.concatenate(steps, axis=1), out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(s, state, rtol=1e-5, atol=1e-6)
    if rule == "linear":  # no decay, no delta: S = S0 + sum_t k_t v_t^T
        k4 = feeds["k"].reshape(b, t, hkv, dk)
        v4 = feeds["v"].reshape(b, t, hkv, dv)
        want = feeds["s"] + np.einsum("bthk,bthv->bhkv", k4, v4)
        np.testing.assert_allclose(state, want, rtol=1e-5, atol=1e-6)


def test_flex_attention_with_score_and_prob_modifiers():
    from onnx import TensorProto as TP
    from onnx import helper

    def mod(name, op_type, const):
        return helper.make_graph(
            [helper.make_node(op_type, ["x", "c"], ["y"])], name,
            [helper.make_tensor_value_info("x", TP.FLOAT, None)],
            [helper.make_tensor_value_info("y", TP.FLOAT, None)],
            initializer=[helper.make_tensor("c", TP.FLOAT, [], [const])])

    q, k, v = _rand(1, 4, 3, 8), _rand(1, 2, 5, 8), _rand(1, 2, 5, 6)
    feeds = {"Q": q, "K": k, "V": v}
    model = node_model("FlexAttention", feeds, ["Q", "K", "V"], ["Y"], opset=1,
                       domain="ai.onnx.preview", score_mod=mod("s", "Mul", 2.0),
                       prob_mod=mod("p", "Mul", 0.5))
    (y,) = ours(model, feeds)
    kr, vr = np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1)
    s = 2.0 * (q.astype(np.float64) @ np.swapaxes(kr, -1, -2)) / np.sqrt(8)
    p = np.exp(s - s.max(-1, keepdims=True))
    p = 0.5 * p / p.sum(-1, keepdims=True)
    np.testing.assert_allclose(y, p @ vr, rtol=1e-5, atol=1e-6)
