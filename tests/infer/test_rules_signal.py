"""Inference rules of signal processing (onemodel/inference/rules/signal.py): windows (size from
data), DFT (opset 17 attribute axis, 20 input axis; onesided, inverse), STFT, MelWeightMatrix;
contradictions; the evaluator agreeing (``sound``) and onnx agreeing where it has an answer."""

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

from onemodel.inference import Expr
from tests.infer.harness import inferred, node_model, sound
from tests.infer.rules_check import (
    check_family_registered,
    check_unknown_inputs,
    contradicts,
    expect,
)
from tests.infer.test_rules_shape import graph_model

F, D64 = T.FLOAT, T.DOUBLE
N, S = Expr.var("N"), Expr.var("S")


def i64(v):
    return np.array(v, dtype=np.int64)


def test_every_kernel_has_a_rule_at_its_versions():
    assert check_family_registered("signal") == 6


def test_unknown_inputs_never_raise():
    assert check_unknown_inputs("signal") >= 21


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
def test_windows(op):
    expect(node_model(op, [("n", np.array(7, np.int64))], opset=17), [7], F)
    expect(node_model(op, [("n", np.array(4, np.int32))], opset=17, output_datatype=D64),
           [4], D64)
    # the size from a shape's data: symbolic
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=0, end=1),
             helper.make_node("Squeeze", ["s", "z"], ["n"]),
             helper.make_node(op, ["n"], ["y"], periodic=0)]
    m = graph_model(nodes, [("x", F, ["N", 2])], inits={"z": i64([0])}, opset=17)
    v = inferred(m)["y"]
    assert v.shape == (N,) and v.elem == F
    assert sound(m) > 0
    contradicts(node_model(op, [("n", np.array(-1, np.int64))], opset=17), "negative")


@pytest.mark.parametrize("opset", [17, 20])
def test_dft(opset):
    x = [("x", F, ["N", 8, 1])]
    expect(node_model("DFT", x, opset=opset), ["N", 8, 2], F)
    expect(node_model("DFT", x, opset=opset, onesided=1), ["N", 5, 2], F)
    expect(node_model("DFT", x + [("n", i64(6))], opset=opset), ["N", 6, 2], F)
    x2 = [("x", F, ["N", 5, 2])]
    expect(node_model("DFT", x2, opset=opset, inverse=1, onesided=1), ["N", 8, 1], F)
    expect(node_model("DFT", x2 + [("n", i64(7))], opset=opset, inverse=1, onesided=1),
           ["N", 7, 1], F)
    contradicts(node_model("DFT", [("x", F, ["N", 8, 3])], opset=opset), "last extent is 3")


def test_dft_symbolic_and_axes():
    from onemodel.inference import dims as D
    m = node_model("DFT", [("x", F, [2, "S", 1])], opset=17, onesided=1)
    expect(m, [2, D.add(D.floordiv(S, 2), 1), 2], F)
    m = node_model("DFT", [("x", F, [2, "S", 2])], opset=20, inverse=1, onesided=1)
    v = inferred(m)["y"]
    assert v.shape == (2, D.mul(2, D.sub(S, 1)), 1) and v.elem == F
    assert sound(m, low=2) > 0   # S = 1 gives no samples: the kernel refuses
    # the axis (17: attribute, 20: input) counted on the whole rank, -2 the last signal axis
    expect(node_model("DFT", [("x", F, [3, 4, 5, 1])], opset=17, axis=2), [3, 4, 5, 2], F)
    expect(node_model("DFT", [("x", F, [3, 4, 6, 1])], opset=17, axis=-2, onesided=1),
           [3, 4, 4, 2], F)
    expect(node_model("DFT", [("x", F, [3, 4, 6, 1])], opset=17, axis=-3, onesided=1),
           [3, 3, 6, 2], F)
    contradicts(node_model("DFT", [("x", F, [3, 4, 1])], opset=17, axis=-1), "axis -1")
    expect(node_model("DFT", [("x", F, [3, 4, 5, 1]), ("", ), ("a", i64(1))], opset=20),
           [3, 4, 5, 2], F)
    contradicts(node_model("DFT", [("x", F, [3, 4, 1])], opset=17, axis=2), "axis 2")
    contradicts(node_model("DFT", [("x", F, [3, 4, 1]), ("", ), ("a", i64(-1))], opset=20),
                "axis -1")


def test_stft():
    sig = [("x", F, ["N", 16, 1]), ("st", i64(4))]
    # onnx's inference gives 8 bins here, ignoring onesided's default of 1; the kernel (and
    # the conformance vectors) have floor(8 / 2) + 1
    expect(node_model("STFT", sig + [("w", np.hanning(8).astype(np.float32))], opset=17),
           ["N", 3, 5, 2], F, check_onnx=False)
    expect(node_model("STFT", sig + [("", ), ("fl", i64(6))], opset=17, onesided=0),
           ["N", 3, 6, 2], F)
    from onemodel.inference import dims as D
    m = node_model("STFT", [("x", F, ["N", "S", 1]), ("st", i64(2)), ("", ), ("fl", i64(1))],
                   opset=17)
    expect(m, ["N", D.add(D.floordiv(D.sub(S, 1), 2), 1), 1, 2], F)
    contradicts(node_model("STFT", [("x", F, ["N", 16]), ("st", i64(4))], opset=17), "rank 2")


def test_mel_weight_matrix():
    ins = [("b", np.array(8, np.int64)), ("n", np.array(16, np.int64)),
           ("r", np.array(8000, np.int64)), ("lo", np.array(0, np.float32)),
           ("hi", np.array(4000, np.float32))]
    expect(node_model("MelWeightMatrix", ins, opset=17), [9, 8], F)
    expect(node_model("MelWeightMatrix", ins, opset=17, output_datatype=D64), [9, 8], D64)

