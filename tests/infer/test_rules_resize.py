"""Inference rules of Resize and Upsample (onemodel/inference/rules/resize.py): extents from
constant scales (``floor(x * scale)``, float32 from opset 11) or sizes (stretch, not_larger,
not_smaller), ``axes``, empty inputs as absent, sizes known as extents through data inference,
symbolic extents only where entailed (an integral scale); contradictions; the evaluator agreeing
(``sound``) and onnx's inference agreeing where it has an answer."""

import math

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

import onemodel
from onemodel.inference import Expr
from tests.infer.harness import inferred, node_model, sound
from tests.infer.rules_check import (
    check_family_registered,
    check_unknown_inputs,
    contradicts,
    expect,
)

F = T.FLOAT
EMPTY = np.zeros(0, np.float32)
N, H, W = Expr.var("N"), Expr.var("H"), Expr.var("W")


def test_every_kernel_has_a_rule_at_its_versions():
    assert check_family_registered("resize") == 2


def test_unknown_inputs_never_raise():
    assert check_unknown_inputs("resize") >= 21


def _f(*v):
    return np.array(v, np.float32)


def _i(*v):
    return np.array(v, np.int64)


@pytest.mark.parametrize("opset", [11, 13, 18, 19])
@pytest.mark.parametrize("scales,x", [
    ((1.0, 1.0, 2.0, 2.0), [2, 3, 4, 5]), ((1.0, 1.0, 0.5, 1.5), [2, 3, 5, 7]),
    ((1.0, 1.0, 0.3, 2.7), [1, 1, 7, 3]), ((1.0, 2.0, 1.0, 0.6), [1, 3, 2, 6]),
])
def test_resize_scales(opset, scales, x):
    m = node_model("Resize", [("x", F, x), ("roi", EMPTY), ("s", _f(*scales))], opset=opset)
    want = [int(math.floor(np.float32(d) * np.float32(s))) for d, s in zip(x, scales)]
    expect(m, want, F)


@pytest.mark.parametrize("opset", [11, 13, 18, 19])
def test_resize_sizes(opset):
    m = node_model("Resize", [("x", F, ["N", 3, 4, 5]), ("roi", EMPTY), ("s", EMPTY),
                              ("z", _i(2, 3, 7, 9))], opset=opset, mode="linear")
    expect(m, [2, 3, 7, 9], F)
    if opset >= 13:  # roi and scales omitted
        m = node_model("Resize", [("x", F, [1, 3, 4, 5]), None, None, ("z", _i(1, 3, 2, 8))],
                       opset=opset)
        expect(m, [1, 3, 2, 8], F)


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
def test_resize_keep_aspect_ratio_and_axes(policy):
    m = node_model("Resize", [("x", F, [1, 3, 4, 6]), None, None, ("z", _i(8, 9))], opset=19,
                   axes=[2, 3], keep_aspect_ratio_policy=policy)
    ratios = [8 / 4, 9 / 6]
    if policy == "stretch":
        want = [8, 9]
    else:
        r = min(ratios) if policy == "not_larger" else max(ratios)
        want = [int(math.floor(r * d + 0.5)) for d in (4, 6)]
    expect(m, [1, 3] + want, F)
    m = node_model("Resize", [("x", F, ["N", 3, "H", 6]), None, ("s", _f(3.0, 0.5))], opset=18,
                   axes=[-2, 3])
    assert inferred(m)["y"].shape == (N, 3, 3 * H, 3)
    assert sound(m) > 0


def test_resize_symbolic_only_where_entailed():
    m = node_model("Resize", [("x", F, ["N", 3, "H", "W"]), ("roi", EMPTY),
                              ("s", _f(1.0, 1.0, 2.0, 1.5))], opset=13)
    assert inferred(m)["y"].shape == (N, 3, 2 * H, None)
    assert sound(m) > 0
    # non-constant scales: the rank only
    m = node_model("Resize", [("x", F, ["N", 3, "H", "W"]), ("roi", EMPTY), ("s", F, [4])],
                   opset=13)
    assert inferred(m)["y"].shape == (None, None, None, None)


def test_resize_sizes_from_data_inference():
    """Concat(Shape(x)[0:2], [64, 64]) as sizes: [N, 3, 64, 64]."""
    nodes = [helper.make_node("Shape", ["x"], ["sh"], start=0, end=2),
             helper.make_node("Concat", ["sh", "hw"], ["z"], axis=0),
             helper.make_node("Resize", ["x", "", "", "z"], ["y"], mode="nearest")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, ["N", 3, "H", "W"])],
                          [helper.make_empty_tensor_value_info("y")],
                          [helper.make_tensor("hw", T.INT64, [2], [64, 64])])
    mp = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    m = onemodel.load(mp.SerializeToString())
    assert inferred(m)["y"].shape == (N, 3, 64, 64)
    assert sound(m) > 0


def test_resize10_and_upsample():
    expect(node_model("Resize", [("x", F, [1, 2, 3, 5]), ("s", _f(1, 1, 2.5, 0.5))], opset=10),
           [1, 2, 7, 2], F)
    m = node_model("Resize", [("x", F, ["N", 2, "H", 5]), ("s", _f(1, 1, 2, 1))], opset=10)
    assert inferred(m)["y"].shape == (N, 2, 2 * H, 5)
    assert sound(m) > 0
    expect(node_model("Upsample", [("x", F, [1, 2, 3, 4])], opset=7, scales=[1.0, 1.0, 2.0, 1.5]),
           [1, 2, 6, 6], F, check_onnx=False)
    m = node_model("Upsample", [("x", F, ["N", 2, 3, "W"]), ("s", _f(1, 1, 3, 2))], opset=9)
    assert inferred(m)["y"].shape == (N, 2, 9, 2 * W)
    assert sound(m) > 0


def test_unknown_rank():
    m = node_model("Resize", [("x", F, None), None, None, ("z", _i(1, 3, 2, 8))], opset=13)
    assert inferred(m)["y"].shape == (1, 3, 2, 8)
    m = node_model("Resize", [("x", F, None), ("roi", EMPTY), ("s", _f(1, 1, 2, 2))], opset=13)
    assert inferred(m)["y"].shape == (None, None, None, None)   # the rank from the scales
    m = node_model("Resize", [("x", F, None), None, None, ("z", _i(8, 9))], opset=19, axes=[2, 3])
    assert inferred(m)["y"].shape is None


@pytest.mark.parametrize("inputs,attrs,words", [
    ([("x", F, [1, 3, 4, 4]), ("roi", EMPTY), ("s", _f(1, 2, 2))], {}, ("3 values", "4 axes")),
    ([("x", F, [1, 3, 4, 4]), ("roi", EMPTY), ("s", _f(1, 1, 2, 2)), ("z", _i(1, 3, 8, 8))],
     {}, ("both",)),
    ([("x", F, [1, 3, 4, 4]), ("roi", EMPTY), ("s", _f(1, 1, -2, 2))], {}, ("not positive",)),
    ([("x", F, [1, 3, 4, 4]), None, None, ("z", _i(8, 8))], {"axes": [2, 4]}, ("axis 4",)),
    ([("x", F, [1, 3, 4, 4]), None, None, ("z", _i(8, 8))], {"axes": [2, -2]}, ("repeat",)),
])
def test_resize_contradictions(inputs, attrs, words):
    contradicts(node_model("Resize", inputs, opset=19, **attrs), *words)
