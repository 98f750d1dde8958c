"""RNN, GRU and LSTM kernels (onemodel/evaluate/kernels/rnn.py) against the float64 definitions
of exact_rnn.recurrent64, within the float32 rounding bound it carries through the steps."""

from __future__ import annotations

import numpy as np
import pytest
from exact_rnn import recurrent64, roundings_per_step
from oracle import EPS32, assert_close_to_exact, bound_ratio, node_model, ours, reference64

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
ACTS = {"RNN": ["Relu"], "GRU": ["HardSigmoid", "Softsign"],
        "LSTM": ["HardSigmoid", "Tanh", "Softsign"]}
S, B, I, H = 4, 3, 5, 6
# Per step, a gate's pre-activation sums I + H + 2 terms (X W^T, H R^T, two biases) and a
# peephole (LSTM) or reset (GRU) product: any of its terms is rounded at most I + H + 3 times
# (its product or two, the sums it goes through), so it is within (I + H + 3) u sum|terms|;
# activations (<= 6 roundings, libm within a few ulps) and the gate products and sums (<= 3)
# round less. recurrent64's scale is sum|terms| per rounded quantity plus the previous step's
# error carried through |R|, |P|, the activations' slopes and the gate products, so the float32
# result is within (I + H + 3) u scale to first order. ULPS * EPS32 = 2 (I + H + 3) u: the
# factor 2 covers the second-order terms (4 steps: < 1e-5 relative).
ULPS = roundings_per_step(I, H)


def _case(op, direction="forward", layout=0, lens=None, peephole=True, seed=0, **attrs):
    rng = np.random.default_rng(seed)
    nd = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    feeds = {
        "X": rng.standard_normal((S, B, I) if layout == 0 else (B, S, I)).astype(np.float32),
        "W": (rng.standard_normal((nd, g * H, I)) * 0.5).astype(np.float32),
        "R": (rng.standard_normal((nd, g * H, H)) * 0.5).astype(np.float32),
        "B": (rng.standard_normal((nd, 2 * g * H)) * 0.5).astype(np.float32),
    }
    ins = ["X", "W", "R", "B"]
    if lens is not None:
        feeds["L"] = np.array(lens, dtype=np.int32)
        ins.append("L")
    else:
        ins.append("")
    state = (nd, B, H) if layout == 0 else (B, nd, H)
    feeds["h0"] = rng.standard_normal(state).astype(np.float32)
    ins.append("h0")
    outs = ["Y", "Y_h"]
    if op == "LSTM":
        feeds["c0"] = rng.standard_normal(state).astype(np.float32)
        ins.append("c0")
        if peephole:
            feeds["P"] = rng.standard_normal((nd, 3 * H)).astype(np.float32)
            ins.append("P")
        outs.append("Y_c")
    if layout:
        attrs["layout"] = layout
    model = node_model(op, feeds, ins, outs, opset=22, hidden_size=H, direction=direction,
                       **attrs)
    return model, feeds


def _assert_exact(got, model, feeds):
    """Each output of ``got`` within ULPS * EPS32 * scale of the exact definition; and that bound
    is below 0.1% of the outputs' magnitude, so a wrong formula could not hide in it."""
    exact, scales = recurrent64(model, feeds, ulps=ULPS)
    assert len(got) == len(exact)
    for k, (g, e, s) in enumerate(zip(got, exact, scales)):
        assert_close_to_exact(g, e, ulps=ULPS, scale=s, path=f"output {k}")
        assert ULPS * EPS32 * s.max() < 1e-3 * max(1.0, np.abs(e).max()), f"output {k} bound"
    return exact


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("lens", [None, [4, 2, 3]])
def test_directions_and_sequence_lens_match_the_definition(op, direction, lens):
    model, feeds = _case(op, direction, lens=lens)
    got = ours(model, feeds)
    _assert_exact(got, model, feeds)
    if lens is not None:  # past a sequence's length Y is exactly 0
        assert not got[0][2:, :, 1].any() and not got[0][3:, :, 2].any()


@pytest.mark.parametrize("op, extra", [
    (op, extra) for op in ("RNN", "GRU", "LSTM")
    for extra in ("clip", "activations", "no_bias")] + [("GRU", "linear_before_reset")])
def test_clip_activations_and_variants_match_the_definition(op, extra):
    attrs = {}
    if extra == "clip":
        attrs["clip"] = 0.5
    elif extra == "activations":
        attrs["activations"] = ACTS[op] * 2
    elif extra == "linear_before_reset":
        attrs["linear_before_reset"] = 1
    model, feeds = _case(op, "bidirectional", seed=1, **attrs)
    if extra == "no_bias":
        del feeds["B"]
        model.graph.node[0].input[3] = ""
        model.graph.input.remove(model.graph.input[3])
    _assert_exact(ours(model, feeds), model, feeds)


def test_activation_alpha_beta_are_consumed_in_order():
    # LeakyRelu takes alpha, Tanh takes none, ScaledTanh takes alpha and beta
    model, feeds = _case("GRU", "forward", seed=2, activations=["LeakyRelu", "ScaledTanh"],
                         activation_alpha=[0.2, 1.5], activation_beta=[0.7])
    got = ours(model, feeds)
    _assert_exact(got, model, feeds)
    # the alphas the other way round give another result, far outside the bound
    swapped, _ = _case("GRU", "forward", seed=2, activations=["LeakyRelu", "ScaledTanh"],
                       activation_alpha=[1.5, 0.2], activation_beta=[0.7])
    exact, scales = recurrent64(swapped, feeds, ulps=ULPS)
    assert bound_ratio(got[0], exact[0], ulps=ULPS, scale=scales[0]) > 100


@pytest.mark.parametrize("name, alpha, beta", [
    ("Relu", None, None), ("Tanh", None, None), ("Sigmoid", None, None),
    ("Affine", 0.75, -0.25), ("Affine", None, None), ("LeakyRelu", 0.125, None),
    ("LeakyRelu", None, None), ("ThresholdedRelu", 0.5, None), ("ThresholdedRelu", None, None),
    ("ScaledTanh", 1.5, 0.75), ("HardSigmoid", 0.25, 0.375), ("HardSigmoid", None, None),
    ("Elu", 0.75, None), ("Elu", None, None), ("Softsign", None, None), ("Softplus", None, None)])
def test_every_activation_function_of_the_definition(name, alpha, beta):
    # the forward direction uses the function (alpha and beta given, or their defaults), the
    # reverse direction Tanh
    attrs = {"activations": [name, "Tanh"]}
    if alpha is not None:
        attrs["activation_alpha"] = [alpha]
    if beta is not None:
        attrs["activation_beta"] = [beta]
    model, feeds = _case("RNN", "bidirectional", seed=5, **attrs)
    _assert_exact(ours(model, feeds), model, feeds)


def test_lstm_activations_f_g_h_take_alpha_and_beta_across_directions():
    # alphas: Affine, Elu (forward), HardSigmoid, ScaledTanh (reverse); betas: Affine,
    # HardSigmoid, ScaledTanh
    model, feeds = _case("LSTM", "bidirectional", seed=6,
                         activations=["Sigmoid", "Affine", "Elu", "HardSigmoid", "Softplus",
                                      "ScaledTanh"],
                         activation_alpha=[0.5, 0.75, 0.25, 1.25],
                         activation_beta=[0.125, 0.5, 0.5])
    _assert_exact(ours(model, feeds), model, feeds)


def test_lstm_input_forget_matches_the_definition():
    model, feeds = _case("LSTM", "forward", seed=3, input_forget=1)
    _assert_exact(ours(model, feeds), model, feeds)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_batch_first_layout_matches_the_definition(op, direction):
    model, feeds = _case(op, direction, layout=1, peephole=False, seed=4)
    got = ours(model, feeds)
    assert got[0].shape == (B, S, 2 if direction == "bidirectional" else 1, H)
    _assert_exact(got, model, feeds)


@pytest.mark.parametrize("op, direction, layout, attrs", [
    *[(op, d, 0, {}) for op in ("RNN", "GRU", "LSTM")
      for d in ("forward", "reverse", "bidirectional")],
    *[(op, "bidirectional", 1, {}) for op in ("RNN", "GRU", "LSTM")],
    ("GRU", "bidirectional", 0, {"linear_before_reset": 1})])
def test_exact_oracle_is_onnx_reference_in_float64(op, direction, layout, attrs):
    # the oracle itself, where onnx.reference implements the definition (no sequence_lens,
    # clip, activations or input_forget): the same float64 formula, summed in another order
    model, feeds = _case(op, direction, layout=layout, seed=7, **attrs)
    exact, _ = recurrent64(model, feeds, ulps=ULPS)
    for e, r in zip(exact, reference64(model, feeds), strict=True):
        np.testing.assert_allclose(e, r, rtol=0, atol=1e-12)


def test_thresholded_relu_keeps_its_threshold():
    # definition: ThresholdedRelu(x) = x if x >= alpha else 0; 2 * 0.5 = 1 exactly in float32
    feeds = {"X": np.array([[[2.0]]], np.float32), "W": np.array([[[0.5]]], np.float32),
             "R": np.array([[[0.0]]], np.float32)}
    model = node_model("RNN", feeds, ["X", "W", "R"], ["Y", "Y_h"], opset=22, hidden_size=1,
                       activations=["ThresholdedRelu"], activation_alpha=[1.0])
    y, yh = ours(model, feeds)
    assert y.reshape(-1).tolist() == [1.0] and yh.reshape(-1).tolist() == [1.0]


def test_rnn_single_step_by_hand():
    x = np.array([[[1.0, 2.0]]], np.float32)  # seq 1, batch 1, input 2
    feeds = {"X": x, "W": np.array([[[0.5, -1.0]]], np.float32),
             "R": np.array([[[2.0]]], np.float32), "B": np.array([[0.1, 0.2]], np.float32),
             "h0": np.array([[[0.25]]], np.float32)}
    model = node_model("RNN", feeds, ["X", "W", "R", "B", "", "h0"], ["Y", "Y_h"], opset=14,
                       hidden_size=1)
    y, yh = ours(model, feeds)
    want = np.tanh(0.5 * 1 - 1.0 * 2 + 2.0 * 0.25 + 0.1 + 0.2)
    np.testing.assert_allclose(y.reshape(-1), [want], rtol=1e-6)
    np.testing.assert_allclose(yh.reshape(-1), [want], rtol=1e-6)


def test_wrong_weight_shape_is_an_evaluation_error():
    from onemodel.errors import EvaluationError

    model, feeds = _case("GRU")
    feeds["W"] = feeds["W"][:, :-1]
    model.graph.input[1].type.tensor_type.shape.dim[1].dim_value -= 1
    with pytest.raises(EvaluationError):
        ours(model, feeds)
