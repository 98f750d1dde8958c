"""Inference rules of linear algebra (onemodel/inference/rules/linalg.py): MatMul's 1-D
promotion and batch broadcasting, Gemm with transA/transB and C broadcast, Einsum (explicit and
implicit outputs, ellipsis, repeated labels, extent-1 stretching), Det; contradictions (inner
extents that differ); the evaluator agreeing (``sound``) and onnx's inference agreeing where it
has an answer."""

import numpy as np
import pytest
from onnx import TensorProto as T

from onemodel.inference import Expr, Value
from tests.infer.harness import inferred, node_model, sound
from tests.infer.rules_check import (
    check_family_registered,
    check_unknown_inputs,
    contradicts,
    expect,
    infer_values,
)

F, I32, D64 = T.FLOAT, T.INT32, T.DOUBLE


def test_every_kernel_has_a_rule_at_its_versions():
    assert check_family_registered("linalg") == 4


def test_unknown_inputs_never_raise():
    assert check_unknown_inputs("linalg") >= 39


def _np_shape(fn, *shapes):
    """The shape numpy computes for int shapes (the oracle)."""
    return list(fn(*[np.ones(s) for s in shapes]).shape)


@pytest.mark.parametrize("opset", [1, 9, 13])
@pytest.mark.parametrize("a,b", [
    ([3, 4], [4, 5]), ([4], [4, 5]), ([3, 4], [4]), ([4], [4]), ([2, 1, 3, 4], [5, 4, 6]),
    ([7, 3, 4], [4, 2]), ([4], [2, 4, 3]), ([2, 3, 4], [4]),
])
def test_matmul_int(opset, a, b):
    elem = I32 if opset >= 9 else F
    expect(node_model("MatMul", [("a", elem, a), ("b", elem, b)], opset=opset),
           _np_shape(np.matmul, a, b), elem)


def test_matmul_symbolic():
    m = node_model("MatMul", [("a", F, ["B", "S", 64]), ("b", F, [64, "D"])], opset=13)
    expect(m, ["B", "S", "D"], F)
    m = node_model("MatMul", [("a", F, ["B", 1, "S", "K"]), ("b", F, ["H", "K", "T"])],
                   opset=13)
    v = inferred(m)["y"]
    assert v.shape == (Expr.var("B"), Expr.var("H"), Expr.var("S"), Expr.var("T"))
    assert sound(m) > 0
    v = inferred(node_model("MatMul", [("a", F, None), ("b", F, [4, 5])], opset=13))["y"]
    assert v.shape is None and v.elem == F


@pytest.mark.parametrize("a,b,words", [
    ([3, 4], [5, 6], ("inner extents", "4 and 5")),
    ([2, 3, 4], [5, 4, 6], ("batch axes", "2, 5")),
    ([], [3], ("rank 0",)),
])
def test_matmul_contradictions(a, b, words):
    contradicts(node_model("MatMul", [("a", F, a), ("b", F, b)], opset=13), *words)


def test_matmul_symbolic_inner_extents_that_differ():
    k = Expr.var("K")
    _, msgs = infer_values("MatMul", [Value.tensor(F, (2, k)), Value.tensor(F, (k + 1, 3))],
                           opset=13)
    assert any("inner extents" in m and "K + 1" in m for m in msgs), msgs


@pytest.mark.parametrize("opset", [1, 6, 7, 9, 11, 13])
@pytest.mark.parametrize("ta,tb,c", [(0, 0, [5]), (1, 0, [3, 1]), (0, 1, [3, 5]), (1, 1, [1])])
def test_gemm(opset, ta, tb, c):
    a = [4, 3] if ta else [3, 4]
    b = [5, 4] if tb else [4, 5]
    if opset < 7:
        c = [3, 5]  # before opset 7, C must have the output's shape without broadcast=1
    m = node_model("Gemm", [("a", F, a), ("b", F, b), ("c", F, c)], opset=opset, transA=ta,
                   transB=tb)
    expect(m, [3, 5], F)


def test_gemm_symbolic_and_without_c():
    m = node_model("Gemm", [("a", F, ["M", "K"]), ("b", F, ["N", "K"])], opset=13, transB=1)
    expect(m, ["M", "N"], F)
    v = inferred(node_model("Gemm", [("a", F, [None, "K"]), ("b", F, ["K", None]),
                                     ("c", F, [7, 9])], opset=13))["y"]
    assert v.shape == (7, 9)          # C's extents other than 1 are the output's
    contradicts(node_model("Gemm", [("a", F, [3, 4]), ("b", F, [5, 6])], opset=13), "4 and 5")
    contradicts(node_model("Gemm", [("a", F, [3, 4]), ("b", F, [4, 6]), ("c", F, [2, 6])],
                           opset=13), "3 and 2")
    contradicts(node_model("Gemm", [("a", F, [3, 4, 1]), ("b", F, [4, 6])], opset=13),
                "rank 2")


@pytest.mark.parametrize("opset", [12, 28])
@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [[2, 3], [3, 4]]), ("ij,jk", [[2, 3], [3, 4]]), ("ba", [[3, 2]]),
    ("ii->i", [[3, 3]]), ("ii", [[3, 3]]), ("bij,bjk->bik", [[5, 2, 3], [5, 3, 4]]),
    ("...ij,...jk->...ik", [[7, 2, 3], [3, 4]]), ("...ij,...jk", [[2, 1, 2, 3], [5, 3, 4]]),
    ("i,i->", [[4], [4]]), ("i,j->ij", [[2], [3]]), ("i,i->i", [[1], [3]]),
    ("ij->", [[2, 3]]), ("b i j , b j k -> b k", [[2, 3, 4], [2, 4, 5]]),
])
def test_einsum(opset, eq, shapes):
    m = node_model("Einsum", [(f"x{i}", F, s) for i, s in enumerate(shapes)], opset=opset,
                   equation=eq)
    want = list(np.einsum(eq.replace(" ", ""), *[np.ones(s) for s in shapes]).shape)
    expect(m, want, F, check_onnx=opset == 12 and eq != "i,i->i")


def test_einsum_symbolic():
    m = node_model("Einsum", [("q", F, ["B", "H", "S", 64]), ("k", F, ["B", "H", "T", 64])],
                   opset=12, equation="bhsd,bhtd->bhst")
    expect(m, ["B", "H", "S", "T"], F)
    m = node_model("Einsum", [("x", F, ["N", "S", 4])], opset=12, equation="...d->d...")
    expect(m, [4, "N", "S"], F, check_onnx=False)
    v = inferred(node_model("Einsum", [("x", F, None), ("y", F, [3, 4])], opset=12,
                            equation="ij,jk->ik"))["y"]
    assert v.shape == (None, 4)
    v = inferred(node_model("Einsum", [("x", F, None), ("y", F, [3, 4])], opset=12,
                            equation="...j,jk->...k"))["y"]
    assert v.shape is None


@pytest.mark.parametrize("eq,shapes,words", [
    ("ij,jk->ik", [[2, 3], [4, 5]], ("label 'j'",)),
    ("ij->ik", [[2, 3]], ("'k'",)),
    ("ijk->i", [[2, 3]], ("rank 2",)),
    ("ij,jk->ik", [[2, 3]], ("2 terms", "1 inputs")),
    ("i1->i", [[2, 3]], ("not an Einsum equation",)),
])
def test_einsum_contradictions(eq, shapes, words):
    contradicts(node_model("Einsum", [(f"x{i}", F, s) for i, s in enumerate(shapes)],
                           opset=12, equation=eq), *words)


@pytest.mark.parametrize("opset", [11, 22])
def test_det(opset):
    expect(node_model("Det", [("x", F, ["N", 3, 3])], opset=opset), ["N"], F)
    expect(node_model("Det", [("x", D64, [3, 3])], opset=opset), [], D64)
    assert inferred(node_model("Det", [("x", F, ["N", None, 3])], opset=opset))["y"].shape == \
        (Expr.var("N"),)
    contradicts(node_model("Det", [("x", F, [2, 3])], opset=opset), "matrix extents")
    contradicts(node_model("Det", [("x", F, [3])], opset=opset), "rank 2")
