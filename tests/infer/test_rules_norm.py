"""Inference rules of the normalizations (onemodel/inference/rules/norm.py): Y keeps X's shape
and type; BatchNormalization's statistics outputs [C] (training mode, saved mean/var before
opset 14), LayerNormalization's Mean/InvStdDev with axis and stash_type, GroupNormalization's
parameters by version, axes checked, LRN; contradictions; the evaluator agreeing (``sound``) and
onnx's inference agreeing where it has an answer."""

import numpy as np
import pytest
from onnx import TensorProto as T

from onemodel.inference import Expr
from tests.infer.harness import inferred, node_model, sound
from tests.infer.rules_check import (
    check_family_registered,
    check_unknown_inputs,
    contradicts,
    expect,
)

F, D64, F16 = T.FLOAT, T.DOUBLE, T.FLOAT16
N, C = Expr.var("N"), Expr.var("C")


def test_every_kernel_has_a_rule_at_its_versions():
    assert check_family_registered("norm") == 8


def test_unknown_inputs_never_raise():
    assert check_unknown_inputs("norm") >= 57


def _p(c, dt=np.float32):
    return [(n, np.linspace(0.5, 1.5, c).astype(dt)) for n in ("s", "b", "m", "v")]


@pytest.mark.parametrize("opset", [6, 7, 9, 14, 15])
def test_batch_normalization_inference_mode(opset):
    m = node_model("BatchNormalization", [("x", F, ["N", 3, "H", 5])] + _p(3), opset=opset)
    expect(m, ["N", 3, "H", 5], F)


@pytest.mark.parametrize("opset,n_out", [(7, 5), (9, 5), (14, 3), (15, 3)])
def test_batch_normalization_training_outputs(opset, n_out):
    attrs = {"training_mode": 1} if opset >= 14 else {}
    m = node_model("BatchNormalization", [("x", F, ["N", 3, 4])] + _p(3), n_out, opset=opset,
                   **attrs)
    v = inferred(m)
    assert v["y0"].shape == (N, 3, 4) and v["y0"].elem == F
    for k in range(1, n_out):
        assert v[f"y{k}"].shape == (3,) and v[f"y{k}"].elem == F
    assert sound(m) > 0
    # C from the parameters when X's channel extent is unknown
    m = node_model("BatchNormalization", [("x", F, ["N", None, 4])] + _p(3), opset=opset)
    assert inferred(m)["y"].shape == (N, None, 4)


def test_batch_normalization_contradictions():
    contradicts(node_model("BatchNormalization", [("x", F, ["N", 4, 4])] + _p(3), opset=15),
                "channels", "4 and 3")
    contradicts(node_model("BatchNormalization", [("x", F, [4])] + _p(4), opset=15), "rank 1")


@pytest.mark.parametrize("axis,stat", [(-1, ["N", "S", 1]), (1, ["N", 1, 1]), (0, [1, 1, 1])])
def test_layer_normalization(axis, stat):
    m = node_model("LayerNormalization", [("x", F, ["N", "S", 8]), ("g", np.ones(8, np.float32)),
                                          ("b", np.zeros(8, np.float32))], 3, opset=17,
                   axis=axis)
    expect(m, ["N", "S", 8], F, out="y0")
    expect(m, stat, F, out="y1")
    expect(m, stat, F, out="y2")
    # stash_type double: the statistics in float64
    m = node_model("LayerNormalization", [("x", F16, ["N", 8]), ("g", F16, [8])], 3, opset=17,
                   stash_type=11)
    v = inferred(m)
    assert v["y0"].elem == F16 and v["y1"].elem == D64 and v["y1"].shape == (N, 1)
    assert sound(m) > 0


def test_layer_normalization_contradictions():
    contradicts(node_model("LayerNormalization", [("x", F, ["N", 8]), ("g", F, [8])], opset=17,
                           axis=2), "axis 2")
    contradicts(node_model("LayerNormalization", [("x", F, ["N", 8]), ("g", F, [7])], opset=17),
                "scale", "broadcast")


def test_rms_normalization():
    m = node_model("RMSNormalization", [("x", F, ["N", "S", 8]), ("g", np.ones(8, np.float32))],
                   opset=23)
    expect(m, ["N", "S", 8], F, check_onnx=False)
    contradicts(node_model("RMSNormalization", [("x", F, [2, 8]), ("g", F, [8])], opset=23,
                           axis=-3), "axis -3")


@pytest.mark.parametrize("opset", [1, 6, 22])
def test_instance_normalization(opset):
    m = node_model("InstanceNormalization", [("x", F, ["N", None, "H", 4]), ("s", F, [3]),
                                             ("b", F, [3])], opset=opset)
    assert inferred(m)["y"].shape == (N, 3, Expr.var("H"), 4)
    m = node_model("InstanceNormalization", [("x", F, ["N", 3, 4]),
                                             ("s", np.ones(3, np.float32)),
                                             ("b", np.ones(3, np.float32))], opset=opset)
    expect(m, ["N", 3, 4], F)
    contradicts(node_model("InstanceNormalization", [("x", F, ["N", 3, 4]), ("s", F, [2]),
                                                     ("b", F, [3])], opset=opset), "3 and 2")


@pytest.mark.parametrize("opset", [18, 21])
def test_group_normalization(opset):
    k = 2 if opset == 18 else 6
    m = node_model("GroupNormalization", [("x", F, ["N", 6, "H"]),
                                          ("s", np.ones(k, np.float32)),
                                          ("b", np.zeros(k, np.float32))], opset=opset,
                   num_groups=2)
    expect(m, ["N", 6, "H"], F)
    contradicts(node_model("GroupNormalization", [("x", F, ["N", 6, 3]), ("s", F, [6]),
                                                  ("b", F, [6])], opset=opset, num_groups=4),
                "6 channels", "4 groups")
    bad = 6 if opset == 18 else 2
    contradicts(node_model("GroupNormalization", [("x", F, ["N", 6, 3]), ("s", F, [bad]),
                                                  ("b", F, [bad])], opset=opset, num_groups=2),
                "parameter extents")


@pytest.mark.parametrize("opset", [1, 22])
def test_lp_normalization(opset):
    expect(node_model("LpNormalization", [("x", F, ["N", 3, 4])], opset=opset, axis=1, p=1),
           ["N", 3, 4], F)
    contradicts(node_model("LpNormalization", [("x", F, ["N", 3])], opset=opset, axis=2),
                "axis 2")


@pytest.mark.parametrize("opset", [9, 13])
def test_mean_variance_normalization(opset):
    expect(node_model("MeanVarianceNormalization", [("x", F, ["N", 3, 4, 5])], opset=opset),
           ["N", 3, 4, 5], F)
    expect(node_model("MeanVarianceNormalization", [("x", F, ["N", 3])], opset=opset,
                      axes=[0]), ["N", 3], F)
    contradicts(node_model("MeanVarianceNormalization", [("x", F, ["N", 3, 4])], opset=opset),
                "axis 3")


def test_unknown_rank():
    v = inferred(node_model("LayerNormalization", [("x", F, None), ("g", F, [8])], 3,
                            opset=17))
    assert v["y0"].shape is None and v["y1"].shape is None and v["y1"].elem == F
    v = inferred(node_model("BatchNormalization", [("x", F, None)] + _p(3), 3, opset=15,
                            training_mode=1))
    assert v["y0"].shape is None and v["y1"].shape == (3,)


@pytest.mark.parametrize("opset", [1, 13])
def test_lrn(opset):
    expect(node_model("LRN", [("x", F, ["N", 3, "S"])], opset=opset, size=3), ["N", 3, "S"], F)

