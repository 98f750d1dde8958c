"""Inference rules of the loss family (onemodel/inference/rules/loss.py): the loss's shape by
``reduction`` (``none``: the target's ``[N, d1, ..., dk]``, else a scalar), SoftmaxCrossEntropy's
``log_prob`` of the scores' shape, the element type of the scores, contradictions between input,
target and weight, unknown ranks, the evaluator agreeing (``sound``) and onnx's inference
agreeing where it has an answer."""

import pytest
from onnx import TensorProto as T

from onemodel.inference import Expr
from tests.infer.harness import inferred, node_model
from tests.infer.rules_check import (
    check_family_registered,
    check_unknown_inputs,
    contradicts,
    expect,
)

F, D64, I64, I32 = T.FLOAT, T.DOUBLE, T.INT64, T.INT32
NLL, SCE = "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"


def test_every_kernel_has_a_rule_at_its_versions():
    assert check_family_registered("loss") == 2


def test_unknown_inputs_never_raise():
    assert check_unknown_inputs("loss") > 8


@pytest.mark.parametrize("op,opset", [(NLL, 12), (NLL, 13), (NLL, 22), (SCE, 12), (SCE, 13)])
@pytest.mark.parametrize("x,target,weight,reduction,shape", [
    (["N", 3], ["N"], None, "none", ["N"]),
    (["N", 3, "H", 2], ["N", "H", 2], [3], "none", ["N", "H", 2]),
    (["N", 3, "H"], ["N", "H"], None, "mean", []),
    (["N", 3, "H"], ["N", "H"], [3], "sum", []),
    ([2, 4], [2], None, None, []),                 # mean by default
])
def test_loss_shape_by_reduction(op, opset, x, target, weight, reduction, shape):
    ins = [("x", F, x), ("t", I64, target)] + ([("w", F, weight)] if weight else [])
    attrs = {} if reduction is None else {"reduction": reduction}
    if op == SCE:
        m = node_model(op, ins, 2, opset=opset, **attrs)
        expect(m, shape, F, out="y0")
        expect(m, x, F, out="y1")   # log_prob: the scores' shape
    else:
        expect(node_model(op, ins, opset=opset, **attrs), shape, F)


def test_loss_takes_the_scores_element_type_and_fills_extents():
    m = node_model(NLL, [("x", D64, [None, 5, "H"]), ("t", I32, ["N", None])],
                   reduction="none")
    v = inferred(m)["y"]
    assert v.elem == D64 and v.shape == (Expr.var("N"), Expr.var("H"))
    m = node_model(SCE, [("x", F, ["N", None]), ("t", I64, ["N"]), ("w", F, [7])], 2)
    assert inferred(m)["y1"].shape == (Expr.var("N"), 7)   # C from the weight


@pytest.mark.parametrize("op,ins,attrs,words", [
    (NLL, [("x", F, [2]), ("t", I64, [2])], {}, ("rank 1",)),
    (NLL, [("x", F, [2, 3, 4]), ("t", I64, [2])], {"reduction": "none"},
     ("does not match",)),
    (NLL, [("x", F, [2, 3, 4]), ("t", I64, [2, 5])], {"reduction": "none"}, ("4 and 5",)),
    (NLL, [("x", F, [2, 3, 4]), ("t", I64, [2, 5])], {"reduction": "mean"}, ("4 and 5",)),
    (NLL, [("x", F, [2, 3]), ("t", I64, [2]), ("w", F, [4])], {}, ("3 and 4",)),
    (NLL, [("x", F, [2, 3]), ("t", I64, [2]), ("w", F, [3, 1])], {}, ("[C]",)),
    (NLL, [("x", F, [2, 3]), ("t", I64, [2])], {"reduction": "max"}, ("'max'",)),
    (SCE, [("x", F, [2]), ("t", I64, [2])], {}, ("rank 1",)),
    (SCE, [("x", F, ["N", 3]), ("t", I64, ["N", 1])], {"reduction": "none"},
     ("does not match",)),
])
def test_contradictions(op, ins, attrs, words):
    contradicts(node_model(op, ins, 2 if op == SCE else 1, **attrs), *words)


def test_unknown_ranks():
    v = inferred(node_model(NLL, [("x", F, None), ("t", I64, ["N"])], reduction="none"))["y"]
    assert v.shape == (Expr.var("N"),) and v.elem == F
    v = inferred(node_model(NLL, [("x", F, ["N", 3, 2]), ("t", I64, None)],
                            reduction="none"))["y"]
    assert v.shape == (Expr.var("N"), 2)
    got = inferred(node_model(SCE, [("x", F, None), ("t", I64, None)], 2))
    assert got["y0"].shape == () and got["y1"].shape is None and got["y1"].elem == F
    v = inferred(node_model(NLL, [("x", F, None), ("t", I64, None)], reduction="none"))["y"]
    assert v.shape is None and v.elem == F
