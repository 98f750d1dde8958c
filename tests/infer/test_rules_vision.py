"""Inference rules of the detection and sampling operators (onemodel/inference/rules/
vision.py): NonMaxSuppression's [unknown, 3] int64, RoiAlign's [R, C, oh, ow], GridSample's
[N, C, *grid spatial], AffineGrid from the elements of size; contradictions; the evaluator
agreeing (``sound``) and onnx's inference agreeing where it has an answer."""

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

F, I64 = T.FLOAT, T.INT64
N = Expr.var("N")


def test_every_kernel_has_a_rule_at_its_versions():
    assert check_family_registered("vision") == 4


def test_unknown_inputs_never_raise():
    assert check_unknown_inputs("vision") >= 24


@pytest.mark.parametrize("opset", [10, 11])
def test_non_max_suppression(opset):
    m = node_model("NonMaxSuppression", [("b", F, ["B", "S", 4]), ("s", F, ["B", 2, "S"]),
                                         ("k", np.array([2], np.int64))], opset=opset)
    v = expect(m, [None, 3], I64)
    assert v.shape == (None, 3)
    contradicts(node_model("NonMaxSuppression", [("b", F, [1, 5, 4]), ("s", F, [1, 2, 6])],
                           opset=opset), "box counts", "5 and 6")
    contradicts(node_model("NonMaxSuppression", [("b", F, [1, 5, 3]), ("s", F, [1, 2, 5])],
                           opset=opset), "box coordinates")


@pytest.mark.parametrize("opset", [10, 16])
def test_roi_align(opset):
    rois = np.array([[0, 0, 3, 3], [1, 1, 4, 5], [0, 2, 2, 4]], np.float32)
    m = node_model("RoiAlign", [("x", F, ["N", 3, 6, 7]), ("r", rois),
                                ("i", np.array([0, 0, 0], np.int64))], opset=opset,
                   output_height=2, output_width=4)
    expect(m, [3, 3, 2, 4], F)
    v = inferred(node_model("RoiAlign", [("x", F, ["N", "C", 6, 7]), ("r", F, ["R", 4]),
                                         ("i", I64, ["R"])], opset=opset))["y"]
    assert v.shape == (Expr.var("R"), Expr.var("C"), 1, 1)
    contradicts(node_model("RoiAlign", [("x", F, [1, 3, 6]), ("r", F, [2, 4]),
                                        ("i", I64, [2])], opset=opset), "X", "rank 4")
    contradicts(node_model("RoiAlign", [("x", F, [1, 3, 6, 6]), ("r", F, [2, 4]),
                                        ("i", I64, [3])], opset=opset), "roi counts")


@pytest.mark.parametrize("opset", [16, 20, 22])
def test_grid_sample(opset):
    m = node_model("GridSample", [("x", F, ["N", 3, 5, 6]), ("g", F, ["N", 7, 2, 2])],
                   opset=opset)
    v = inferred(m)["y"]
    assert v.shape == (N, 3, 7, 2) and v.elem == F
    assert sound(m) > 0
    contradicts(node_model("GridSample", [("x", F, [1, 3, 5, 6]), ("g", F, [1, 7, 2, 3])],
                           opset=opset), "grid coordinates")
    contradicts(node_model("GridSample", [("x", F, [2, 3, 5, 6]), ("g", F, [1, 7, 2, 2])],
                           opset=opset), "batch")
    assert inferred(node_model("GridSample", [("x", F, None), ("g", F, None)],
                               opset=opset))["y"].shape is None


def test_grid_sample_3d():
    m = node_model("GridSample", [("x", F, [1, 2, 3, 4, 5]), ("g", F, [1, 2, 3, 4, 3])],
                   opset=22)
    expect(m, [1, 2, 2, 3, 4], F)


def test_affine_grid():
    th = np.zeros((2, 2, 3), np.float32)
    m = node_model("AffineGrid", [("t", th), ("s", np.array([2, 3, 4, 5], np.int64))],
                   opset=20)
    expect(m, [2, 4, 5, 2], F)
    m = node_model("AffineGrid", [("t", F, ["N", 3, 4]),
                                  ("s", np.array([3, 1, 2, 3, 4], np.int64))], opset=20)
    v = inferred(m)["y"]
    assert v.shape == (3, 2, 3, 4, 3)
    v = inferred(node_model("AffineGrid", [("t", F, ["N", 2, 3]), ("s", I64, [4])],
                            opset=20))["y"]
    assert v.shape == (N, None, None, 2)
    contradicts(node_model("AffineGrid", [("t", th), ("s", np.array([2, 3, 4, 5, 6],
                                                                     np.int64))], opset=20),
                "theta extent 1")
    contradicts(node_model("AffineGrid", [("t", th), ("s", np.array([2, 3, 4], np.int64))],
                           opset=20), "4 or 5")
