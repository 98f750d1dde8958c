"""Inference rules of the poolings (onemodel/inference/rules/pool.py): window extents with
pads, strides, dilations (by version), ceil_mode (a last window starting in the end padding
dropped), SAME/VALID, symbolic extents as floor/ceil expressions, MaxPool's int64 Indices,
global poolings, MaxUnpool with and without output_shape; contradictions; the evaluator agreeing
(``sound``) and onnx's inference agreeing where it has an answer."""

import math

import numpy as np
import pytest
from onnx import TensorProto as T

from onemodel.inference import Expr
from onemodel.inference import dims as D
from tests.infer.harness import inferred, node_model, sound
from tests.infer.rules_check import (
    check_family_registered,
    check_unknown_inputs,
    contradicts,
    expect,
)

F, I64 = T.FLOAT, T.INT64
H = Expr.var("H")


def test_every_kernel_has_a_rule_at_its_versions():
    assert check_family_registered("pool") == 7


def test_unknown_inputs_never_raise():
    assert check_unknown_inputs("pool") >= 81


def _out(x, k, s, d, b, e, ceil):
    """The pooled extent, computed from the definition (float division, then floor/ceil)."""
    dk = (k - 1) * d + 1
    q = (x + b + e - dk) / s
    o = (math.ceil(q) if ceil else math.floor(q)) + 1
    if ceil and (o - 1) * s >= x + b:
        o -= 1
    return o


CASES = [
    (9, 3, 1, 1, 0, 0, 0), (9, 3, 2, 1, 0, 0, 0), (10, 3, 2, 1, 1, 1, 1), (10, 2, 3, 1, 0, 1, 1),
    (7, 3, 2, 2, 1, 0, 1), (8, 2, 2, 1, 0, 0, 1), (6, 3, 3, 1, 2, 2, 1), (5, 2, 2, 2, 1, 1, 0),
]


@pytest.mark.parametrize("op,opset", [("MaxPool", 12), ("MaxPool", 22), ("AveragePool", 19),
                                      ("AveragePool", 22), ("LpPool", 18), ("LpPool", 22)])
@pytest.mark.parametrize("x,k,s,d,b,e,ceil", CASES)
def test_pools_int_extents(op, opset, x, k, s, d, b, e, ceil):
    m = node_model(op, [("x", F, ["N", 3, x, x + 2])], opset=opset, kernel_shape=[k, 2],
                   strides=[s, 1], dilations=[d, 1], pads=[b, 0, e, 0], ceil_mode=ceil)
    # onnx's inference before opset 22 keeps a last window that starts in the end padding
    # (7/3 -> 4 for x=6, k=3, s=3, pads 2+2); the kernel (and the later definitions) drop it
    dropped = ceil and math.ceil((x + b + e - (k - 1) * d - 1) / s) * s >= x + b
    expect(m, ["N", 3, _out(x, k, s, d, b, e, ceil), x + 1], F,
           check_onnx=not (dropped and opset < 22))


@pytest.mark.parametrize("op,opset", [("MaxPool", 1), ("MaxPool", 8), ("MaxPool", 10),
                                      ("AveragePool", 1), ("AveragePool", 7),
                                      ("AveragePool", 10), ("AveragePool", 11), ("LpPool", 2),
                                      ("LpPool", 11)])
def test_pools_older_versions(op, opset):
    attrs = {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}
    if opset >= 10 and op != "LpPool":
        attrs["ceil_mode"] = 1
    m = node_model(op, [("x", F, [2, 3, 8])], opset=opset, **attrs)
    expect(m, [2, 3, _out(8, 3, 2, 1, 1, 1, attrs.get("ceil_mode", 0))], F)


@pytest.mark.parametrize("auto_pad,s,want", [
    ("SAME_UPPER", 2, [D.ceildiv(H, 2)]), ("SAME_LOWER", 3, [D.ceildiv(H, 3)]),
    ("VALID", 2, [D.floordiv(H - 3, 2) + 1]), ("NOTSET", 1, [H - 2]),
])
def test_pool_symbolic_extents(auto_pad, s, want):
    m = node_model("AveragePool", [("x", F, ["N", 3, "H"])], opset=22, kernel_shape=[3],
                   strides=[s], auto_pad=auto_pad)
    assert inferred(m)["y"].shape == (Expr.var("N"), 3, *want)
    assert sound(m, low=3, high=12) > 0


@pytest.mark.parametrize("k,s,b,e,want", [
    # e >= dilated kernel: the ceiling's last window always starts in the end pads
    (2, 2, 0, 2, D.ceildiv(H, 2) + 1 - 1),
    # e + s <= dilated kernel: it never does
    (3, 2, 1, 1, D.ceildiv(H - 1, 2) + 1),
    (3, 2, 0, 0, D.ceildiv(H - 3, 2) + 1),
    (3, 3, 1, 1, None),                          # depends on H
])
def test_ceil_mode_symbolic(k, s, b, e, want):
    m = node_model("MaxPool", [("x", F, ["N", 2, "H"])], opset=12, kernel_shape=[k],
                   strides=[s], pads=[b, e], ceil_mode=1)
    assert inferred(m)["y"].shape == (Expr.var("N"), 2, want)
    assert sound(m, draws=6, low=3, high=12) > 0


def test_max_pool_indices():
    m = node_model("MaxPool", [("x", F, ["N", 3, 8, 9])], 2, opset=12, kernel_shape=[2, 3],
                   strides=[2, 2], storage_order=1)
    v = inferred(m)
    assert v["y0"].shape == v["y1"].shape == (Expr.var("N"), 3, 4, 4)
    assert v["y0"].elem == F and v["y1"].elem == I64
    assert sound(m) > 0
    expect(m, ["N", 3, 4, 4], I64, out="y1")


@pytest.mark.parametrize("op,opset", [("GlobalAveragePool", 1), ("GlobalAveragePool", 22),
                                      ("GlobalMaxPool", 1), ("GlobalMaxPool", 22),
                                      ("GlobalLpPool", 2), ("GlobalLpPool", 22)])
def test_global_pools(op, opset):
    expect(node_model(op, [("x", F, ["N", "C", 5, "W"])], opset=opset), ["N", "C", 1, 1], F)
    expect(node_model(op, [("x", F, ["N", 4, 5])], opset=opset), ["N", 4, 1], F)
    assert inferred(node_model(op, [("x", F, None)], opset=opset))["y"].shape is None
    contradicts(node_model(op, [("x", F, [4])], opset=opset), "rank 1")


@pytest.mark.parametrize("opset", [9, 11, 22])
def test_max_unpool(opset):
    m = node_model("MaxUnpool", [("x", F, ["N", 2, 3, 4]), ("i", I64, ["N", 2, 3, 4])],
                   opset=opset, kernel_shape=[2, 2], strides=[2, 2])
    assert inferred(m)["y"].shape == (Expr.var("N"), 2, 6, 8)
    m = node_model("MaxUnpool", [("x", F, [1, 2, "H", 4]), ("i", I64, [1, 2, "H", 4])],
                   opset=opset, kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 0, 1])
    assert inferred(m)["y"].shape == (1, 2, 2 * H, 7)
    if opset >= 11:
        m = node_model("MaxUnpool", [("x", F, [1, 1, 2, 2]), ("i", np.array(
            [[[[5, 7], [13, 15]]]], np.int64)), ("s", np.array([1, 1, 5, 5], np.int64))],
            opset=opset, kernel_shape=[2, 2], strides=[2, 2])
        expect(m, [1, 1, 5, 5], F)
        v = inferred(node_model("MaxUnpool", [("x", F, [1, 1, 2, 2]), ("i", I64, [1, 1, 2, 2]),
                                              ("s", I64, [4])], opset=opset,
                                kernel_shape=[2, 2]))["y"]
        assert v.shape == (None, None, None, None)


@pytest.mark.parametrize("op,inputs,attrs,words", [
    ("MaxPool", [("x", F, [1, 3])], {"kernel_shape": [2]}, ("rank 2",)),
    ("MaxPool", [("x", F, [1, 3, 4, 4])], {"kernel_shape": [2]}, ("kernel_shape", "2 values")),
    ("AveragePool", [("x", F, [1, 3, 4])], {}, ("kernel_shape is required",)),
    ("LpPool", [("x", F, [1, 3, 4])], {"kernel_shape": [2], "strides": [1, 1]}, ("strides",)),
    ("MaxUnpool", [("x", F, [1, 3, 4, 4]), ("i", I64, [1, 3, 4])], {"kernel_shape": [2, 2]},
     ("indices",)),
])
def test_pool_contradictions(op, inputs, attrs, words):
    contradicts(node_model(op, inputs, opset=22, **attrs), *words)


def test_unknown_rank():
    v = inferred(node_model("MaxPool", [("x", F, None)], 2, opset=12, kernel_shape=[2, 2]))
    assert v["y0"].shape == (None, None, None, None) and v["y1"].elem == I64
