"""Kernels of onemodel/evaluate/kernels/training.py (Adagrad, Adam, Momentum of the
ai.onnx.preview.training domain) against the pseudo code of their definitions, written out in
numpy here, and against onnx.reference."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import assert_outputs, node_model, ours, reference

from onemodel.errors import UnsupportedError

DOMAIN = "ai.onnx.preview.training"
RNG = np.random.default_rng(8)


def _feeds(groups: int, n: int = 2):
    """R, T and ``groups`` groups of ``n`` tensors each (X..., G..., then states)."""
    feeds = {"R": np.array(0.1, np.float32), "T": np.array(3, np.int64)}
    names = ["R", "T"]
    for g in range(groups):
        for i in range(n):
            name = f"v{g}_{i}"
            feeds[name] = RNG.standard_normal((3, 2 + i)).astype(np.float32)
            if g == groups - 1 and groups > 2:  # squared-gradient states are non-negative
                feeds[name] = np.abs(feeds[name])
            names.append(name)
    return feeds, names


def test_adagrad_two_tensors_follows_the_pseudo_code():
    feeds, names = _feeds(3)
    outs = ["x0", "x1", "h0", "h1"]
    model = node_model("Adagrad", feeds, names, outs, opset=1, domain=DOMAIN,
                       norm_coefficient=0.01, decay_factor=0.1, epsilon=1e-6)
    got = ours(model, feeds)
    r = 0.1 / (1 + 3 * 0.1)
    for i in range(2):
        x, g, h = feeds[f"v0_{i}"], feeds[f"v1_{i}"], feeds[f"v2_{i}"]
        g_reg = 0.01 * x + g
        h_new = h + g_reg * g_reg
        np.testing.assert_allclose(got[i], x - r * g_reg / (np.sqrt(h_new) + 1e-6), rtol=1e-5)
        np.testing.assert_allclose(got[2 + i], h_new, rtol=1e-6)
    assert_outputs(got, reference(model, feeds), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("step", [0, 3])
def test_adam_follows_the_pseudo_code(step):
    feeds, names = _feeds(4, n=1)
    feeds["T"] = np.array(step, np.int64)
    model = node_model("Adam", feeds, names, ["x", "v", "h"], opset=1, domain=DOMAIN,
                       alpha=0.9, beta=0.99, epsilon=1e-5, norm_coefficient=0.02,
                       norm_coefficient_post=0.01)
    x, g, v, h = (feeds[f"v{k}_0"] for k in range(4))
    g_reg = 0.02 * x + g
    v_new = 0.9 * v + 0.1 * g_reg
    h_new = 0.99 * h + 0.01 * g_reg * g_reg
    r = 0.1 * np.sqrt(1 - 0.99 ** step) / (1 - 0.9 ** step) if step > 0 else 0.1
    x_new = (1 - 0.01) * (x - r * v_new / (np.sqrt(h_new) + 1e-5))
    got = ours(model, feeds)
    for a, b in zip(got, (x_new, v_new, h_new)):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("mode", ["standard", "nesterov"])
@pytest.mark.parametrize("step", [0, 5])
def test_momentum_matches_the_reference(mode, step):
    feeds, names = _feeds(3)
    feeds["T"] = np.array(step, np.int64)
    model = node_model("Momentum", feeds, names, ["x0", "x1", "v0", "v1"], opset=1,
                       domain=DOMAIN, alpha=0.9, beta=0.5, norm_coefficient=0.01, mode=mode)
    got = ours(model, feeds)
    beta = 0.5 if step > 0 else 1.0
    x, g, v = feeds["v0_0"], feeds["v1_0"], feeds["v2_0"]
    g_reg = 0.01 * x + g
    v_new = 0.9 * v + beta * g_reg
    want = x - 0.1 * (g_reg + 0.9 * v_new if mode == "nesterov" else v_new)
    np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got[2], v_new, rtol=1e-6)
    assert_outputs(got, reference(model, feeds), rtol=1e-5, atol=1e-6)


def test_momentum_unknown_mode_is_refused():
    feeds, names = _feeds(3, n=1)
    model = node_model("Momentum", feeds, names, ["x", "v"], opset=1, domain=DOMAIN,
                       alpha=0.9, beta=0.5, norm_coefficient=0.0, mode="heavy")
    with pytest.raises(UnsupportedError, match="heavy"):
        ours(model, feeds)
