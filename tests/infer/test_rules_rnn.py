"""Inference rules of the recurrent operators (onemodel/inference/rules/rnn.py): RNN, GRU and
LSTM outputs Y [seq, num_directions, batch, hidden] (layout 1: [batch, seq, num_directions,
hidden]), Y_h and LSTM's Y_c, hidden from hidden_size or R, weight/bias/state extents checked;
contradictions; the evaluator agreeing (``sound``) and onnx agreeing where it has an answer."""

import numpy as np
import pytest
from onnx import TensorProto as T

from onemodel.inference import Expr
from tests.infer.harness import inferred, node_model, sound
from tests.infer.rules_check import (
    check_family_registered,
    check_unknown_inputs,
    contradicts,
    onnx_output,
)

F, D64 = T.FLOAT, T.DOUBLE
S, N = Expr.var("S"), Expr.var("N")
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
VERSIONS = {"RNN": (1, 7, 14, 22), "GRU": (1, 3, 7, 14, 22), "LSTM": (1, 7, 14, 22)}


def test_every_kernel_has_a_rule_at_its_versions():
    assert check_family_registered("rnn") == 3


def test_unknown_inputs_never_raise():
    assert check_unknown_inputs("rnn") >= 39


def _weights(op, nd, hidden, inp, dt=np.float32):
    g = GATES[op]
    rng = np.random.default_rng(0)
    return [("w", (rng.random((nd, g * hidden, inp)) * 0.2).astype(dt)),
            ("r", (rng.random((nd, g * hidden, hidden)) * 0.2).astype(dt)),
            ("b", np.zeros((nd, 2 * g * hidden), dt))]


@pytest.mark.parametrize("op,opset", [(op, v) for op, vs in VERSIONS.items() for v in vs])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_outputs_layout0(op, opset, direction):
    nd = 2 if direction == "bidirectional" else 1
    n_out = 3 if op == "LSTM" else 2
    m = node_model(op, [("x", F, ["S", "N", 3])] + _weights(op, nd, 5, 3), n_out, opset=opset,
                   hidden_size=5, direction=direction)
    v = inferred(m)
    assert v["y0"].shape == (S, nd, N, 5) and v["y0"].elem == F
    for k in range(1, n_out):
        assert v[f"y{k}"].shape == (nd, N, 5) and v[f"y{k}"].elem == F
    assert sound(m) > 0
    for k in range(n_out):
        o = onnx_output(m, f"y{k}")
        if o is not None and o[1] is not None:
            assert all(a is None or a == b for a, b in zip(o[1], v[f"y{k}"].shape)), (k, o)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_layout1_and_hidden_from_r(op):
    n_out = 3 if op == "LSTM" else 2
    m = node_model(op, [("x", D64, ["N", "S", 4])] + _weights(op, 1, 2, 4, np.float64), n_out,
                   opset=14, layout=1)
    v = inferred(m)
    assert v["y0"].shape == (N, S, 1, 2) and v["y0"].elem == D64
    for k in range(1, n_out):
        assert v[f"y{k}"].shape == (N, 1, 2)
    assert sound(m) > 0


def test_batch_from_initial_state_and_lengths():
    m = node_model("GRU", [("x", F, ["S", None, 3])] + _weights("GRU", 1, 2, 3) +
                   [("l", T.INT32, [4]), ("h", F, [1, None, 2])], 2, opset=22)
    v = inferred(m)
    assert v["y0"].shape == (S, 1, 4, 2) and v["y1"].shape == (1, 4, 2)


def test_contradictions():
    w = _weights("LSTM", 1, 5, 3)
    contradicts(node_model("LSTM", [("x", F, ["S", "N"])] + w, 3, opset=22), "rank 2")
    contradicts(node_model("LSTM", [("x", F, ["S", "N", 4])] + w, 3, opset=22), "W", "4 and 3")
    contradicts(node_model("LSTM", [("x", F, ["S", "N", 3])] + w, 3, opset=22, hidden_size=6),
                "W")
    contradicts(node_model("RNN", [("x", F, ["S", "N", 3])] + _weights("RNN", 1, 5, 3), 2,
                           opset=22, direction="bidirectional"), "W", "2 and 1")
    contradicts(node_model("RNN", [("x", F, ["S", "N", 3])] + _weights("RNN", 1, 5, 3), 2,
                           opset=22, direction="sideways"), "direction")
    contradicts(node_model("GRU", [("x", F, ["S", 3, 3])] + _weights("GRU", 1, 2, 3) +
                           [("", ), ("h", F, [1, 4, 2])], 2, opset=22), "initial state")


def test_random_recurrences_agree_with_the_evaluator():
    """Random RNN/GRU/LSTM nodes (directions, layouts, hidden_size given or from R, optional
    bias and initial state; a fixed seed): the evaluator computes each, and inference finds
    no contradiction and agrees with it."""
    import random

    from tests.infer.test_rules_reduce import evaluator_agrees

    rng = random.Random(3)
    for _ in range(40):
        op = rng.choice(["RNN", "GRU", "LSTM"])
        nd, hd, inp = rng.choice([1, 2]), rng.randint(1, 3), rng.randint(1, 3)
        seq, batch, layout = rng.randint(1, 3), rng.randint(1, 3), rng.randint(0, 1)
        ins = [("x", F, [batch, seq, inp] if layout else [seq, batch, inp])]
        ins += [w if k != 2 or rng.random() < 0.5 else ("",)
                for k, w in enumerate(_weights(op, nd, hd, inp))]
        ins.append(("",))
        if rng.random() < 0.5:
            ins.append(("h", F, [batch, nd, hd] if layout else [nd, batch, hd]))
        attrs = dict(layout=layout, direction="bidirectional" if nd == 2 else
                     rng.choice(["forward", "reverse"]))
        if rng.random() < 0.5:
            attrs["hidden_size"] = hd
        assert evaluator_agrees(node_model(op, ins, 3 if op == "LSTM" else 2, opset=22,
                                           **attrs))
