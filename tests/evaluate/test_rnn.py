"""RNN, GRU and LSTM kernels (onemodel/evaluate/kernels/rnn.py) against onnxruntime (layout 0)
and the onnx reference evaluator (layout 1, which onnxruntime does not implement)."""

from __future__ import annotations

import numpy as np
import pytest

from oracle import F32_ORACLE as F32
from oracle import assert_outputs, node_model, ort, ours, reference

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
ACTS = {"RNN": ["Relu"], "GRU": ["HardSigmoid", "Softsign"],
        "LSTM": ["HardSigmoid", "Tanh", "Softsign"]}
S, B, I, H = 4, 3, 5, 6


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


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("lens", [None, [4, 2, 3]])
def test_directions_and_sequence_lens_match_onnxruntime(op, direction, lens):
    model, feeds = _case(op, direction, lens=lens)
    assert_outputs(ours(model, feeds), ort(model, feeds,
        relies_on=F32.format(what="RNN/GRU/LSTM gates: sums of at most 8 products and sigmoid/tanh "
                                  "per step, 4 steps")), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op, extra", [
    (op, extra) for op in ("RNN", "GRU", "LSTM")
    for extra in ("clip", "activations", "no_bias")] + [("GRU", "linear_before_reset")])
def test_clip_activations_and_variants_match_onnxruntime(op, extra):
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
    assert_outputs(ours(model, feeds), ort(model, feeds,
        relies_on=F32.format(what="RNN/GRU/LSTM gates: sums of at most 8 products and sigmoid/tanh "
                                  "per step, 4 steps")), rtol=1e-4, atol=1e-5)


def test_activation_alpha_beta_are_consumed_in_order():
    # LeakyRelu takes alpha, Tanh takes none, ScaledTanh takes alpha and beta
    model, feeds = _case("GRU", "forward", seed=2, activations=["LeakyRelu", "ScaledTanh"],
                         activation_alpha=[0.2, 1.5], activation_beta=[0.7])
    assert_outputs(ours(model, feeds), ort(model, feeds,
        relies_on=F32.format(what="RNN/GRU/LSTM gates: sums of at most 8 products and sigmoid/tanh "
                                  "per step, 4 steps")), rtol=1e-4, atol=1e-5)


def test_lstm_input_forget_matches_onnxruntime():
    model, feeds = _case("LSTM", "forward", seed=3, input_forget=1)
    assert_outputs(ours(model, feeds), ort(model, feeds,
        relies_on=F32.format(what="RNN/GRU/LSTM gates: sums of at most 8 products and sigmoid/tanh "
                                  "per step, 4 steps")), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_batch_first_layout_matches_reference(op, direction):
    model, feeds = _case(op, direction, layout=1, peephole=False, seed=4)
    got = ours(model, feeds)
    assert got[0].shape == (B, S, 2 if direction == "bidirectional" else 1, H)
    assert_outputs(got, reference(model, feeds), rtol=1e-4, atol=1e-5)


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
