"""Inference rules of the convolutions (onemodel/inference/rules/conv.py): Conv's spatial
extents ``floor((h + p0 + p1 - d*(k-1) - 1)/s) + 1`` as expressions of symbolic inputs, SAME as
``ceil(h/s)``, VALID, groups, ConvTranspose with output_shape / output_padding / SAME,
DeformConv, CausalConvWithState, Col2Im; contradictions (channels, ranks, kernel_shape); the
evaluator agreeing (``sound``) and onnx's inference agreeing where it has an answer."""

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

F = T.FLOAT
H, W_ = Expr.var("H"), Expr.var("W")


def test_every_kernel_has_a_rule_at_its_versions():
    assert check_family_registered("conv") == 5


def test_unknown_inputs_never_raise():
    assert check_unknown_inputs("conv") >= 30


def _w(*shape):
    return np.ones(shape, np.float32)


def _conv_out(h, k, s=1, d=1, p0=0, p1=0):
    return (h + p0 + p1 - d * (k - 1) - 1) // s + 1


@pytest.mark.parametrize("opset", [1, 11, 22])
@pytest.mark.parametrize("h,w,k,attrs", [
    (9, 7, 3, {}),
    (9, 7, 3, {"strides": [2, 2]}),
    (10, 8, 3, {"strides": [2, 3], "pads": [1, 0, 2, 1], "dilations": [2, 1]}),
    (9, 6, 2, {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    (9, 6, 2, {"auto_pad": "SAME_LOWER", "strides": [3, 1]}),
    (9, 6, 2, {"auto_pad": "VALID", "strides": [2, 2]}),
])
def test_conv_int_extents(opset, h, w, k, attrs):
    m = node_model("Conv", [("x", F, ["N", 4, h, w]), ("w", _w(6, 4, k, k))], opset=opset,
                   **attrs)
    s = attrs.get("strides", [1, 1])
    d = attrs.get("dilations", [1, 1])
    p = attrs.get("pads", [0, 0, 0, 0])
    ap = attrs.get("auto_pad", "NOTSET")
    if ap.startswith("SAME"):
        want = [-(-h // s[0]), -(-w // s[1])]
    else:
        want = [_conv_out(h, k, s[0], d[0], p[0], p[2]), _conv_out(w, k, s[1], d[1], p[1], p[3])]
    expect(m, ["N", 6] + want, F)


@pytest.mark.parametrize("attrs,want", [
    ({}, [H - 2, W_ - 2]),
    ({"pads": [1, 1, 1, 1]}, [H, W_]),
    ({"strides": [2, 2], "pads": [1, 1, 1, 1]},
     [D.floordiv(H - 1, 2) + 1, D.floordiv(W_ - 1, 2) + 1]),
    ({"strides": [2, 3], "dilations": [2, 1]},
     [D.floordiv(H - 5, 2) + 1, D.floordiv(W_ - 3, 3) + 1]),
    ({"auto_pad": "SAME_UPPER", "strides": [2, 2]}, [D.ceildiv(H, 2), D.ceildiv(W_, 2)]),
    ({"auto_pad": "SAME_LOWER"}, [H, W_]),
    ({"auto_pad": "VALID", "strides": [2, 1]}, [D.floordiv(H - 3, 2) + 1, W_ - 2]),
])
def test_conv_symbolic_extents(attrs, want):
    m = node_model("Conv", [("x", F, ["N", 4, "H", "W"]), ("w", _w(6, 4, 3, 3)),
                            ("b", np.ones(6, np.float32))], **attrs)
    v = inferred(m)["y"]
    assert v.shape == (Expr.var("N"), 6, *want) and v.elem == F
    assert sound(m, low=6, high=11) > 0


def test_conv_groups_and_1d_and_3d():
    expect(node_model("Conv", [("x", F, ["N", 6, 10]), ("w", _w(9, 2, 3))], group=3),
           ["N", 9, 8], F)
    expect(node_model("Conv", [("x", F, [1, 2, 5, 6, 7]), ("w", _w(4, 2, 3, 1, 2))],
                      pads=[1, 0, 0, 1, 0, 0]), [1, 4, 5, 6, 6], F)
    # the channel count of X follows from W and group; W's M from the weight input
    v = inferred(node_model("Conv", [("x", F, ["N", None, 8, 8]), ("w", F, ["M", 2, 3, 3])],
                            group=2))["y"]
    assert v.shape == (Expr.var("N"), Expr.var("M"), 6, 6)


def test_conv_kernel_from_kernel_shape_with_unknown_weights():
    v = inferred(node_model("Conv", [("x", F, [1, 3, 8, 8]), ("w", F, None)],
                            kernel_shape=[3, 3], strides=[2, 2]))["y"]
    assert v.shape == (1, None, 3, 3) and v.elem == F


def test_conv_unknown_rank():
    v = inferred(node_model("Conv", [("x", F, None), ("w", F, None)]))["y"]
    assert v.shape is None and v.elem == F
    v = inferred(node_model("Conv", [("x", F, None), ("w", _w(5, 3, 3, 3))]))["y"]
    assert v.shape == (None, 5, None, None)


@pytest.mark.parametrize("inputs,attrs,words", [
    ([("x", F, ["N", 4, 8, 8]), ("w", _w(6, 3, 3, 3))], {}, ("channels", "differ", "4 and 3")),
    ([("x", F, ["N", 4, 8, 8]), ("w", _w(6, 4, 3, 3))], {"group": 2}, ("4 and 8",)),
    ([("x", F, ["N", 4, 8, 8]), ("w", _w(5, 2, 3, 3))], {"group": 2}, ("multiple of group",)),
    ([("x", F, ["N", 4, 8]), ("w", _w(6, 4, 3, 3))], {}, ("rank 3", "rank 4")),
    ([("x", F, ["N", 4]), ("w", _w(6, 4))], {}, ("rank 2",)),
    ([("x", F, ["N", 4, 8, 8]), ("w", _w(6, 4, 3, 3))], {"kernel_shape": [2, 2]},
     ("kernel_shape",)),
    ([("x", F, ["N", 4, 8, 8]), ("w", _w(6, 4, 3, 3))], {"strides": [1]}, ("strides",)),
    ([("x", F, ["N", 4, 8, 8]), ("w", _w(6, 4, 3, 3))], {"pads": [1, 1]}, ("pads",)),
    ([("x", F, ["N", 4, 8, 8]), ("w", _w(6, 4, 3, 3)), ("b", _w(5))], {}, ("bias", "6 and 5")),
])
def test_conv_contradictions(inputs, attrs, words):
    contradicts(node_model("Conv", inputs, **attrs), *words)


@pytest.mark.parametrize("opset", [1, 11, 22])
@pytest.mark.parametrize("h,attrs", [
    (5, {}),
    (5, {"strides": [2, 2]}),
    (5, {"strides": [2, 2], "pads": [1, 0, 1, 2], "output_padding": [1, 1]}),
    (4, {"strides": [2, 3], "dilations": [2, 1]}),
    (4, {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    (4, {"strides": [2, 2], "output_shape": [9, 10]}),
])
def test_conv_transpose(opset, h, attrs):
    m = node_model("ConvTranspose", [("x", F, ["N", 4, h, h + 1]), ("w", _w(4, 3, 3, 2))],
                   opset=opset, group=1, **attrs)
    s = attrs.get("strides", [1, 1])
    d = attrs.get("dilations", [1, 1])
    p = attrs.get("pads", [0, 0, 0, 0])
    op_ = attrs.get("output_padding", [0, 0])
    if "output_shape" in attrs:
        want = attrs["output_shape"]
    elif attrs.get("auto_pad", "").startswith("SAME"):
        want = [h * s[0], (h + 1) * s[1]]
    else:
        want = [s[i] * (x - 1) + op_[i] + d[i] * (k - 1) + 1 - p[i] - p[2 + i]
                for i, (x, k) in enumerate([(h, 3), (h + 1, 2)])]
    expect(m, ["N", 3] + want, F)


def test_conv_transpose_symbolic_and_groups():
    m = node_model("ConvTranspose", [("x", F, ["N", 4, "H", "W"]), ("w", _w(4, 3, 3, 3)),
                                     ("b", _w(6))], group=2, strides=[2, 2],
                   pads=[1, 1, 1, 1], output_padding=[1, 0])
    v = expect(m, ["N", 6, 2 * H, 2 * W_ - 1], F, check_onnx=False)
    assert str(v.shape[3]) == "2*W - 1"
    contradicts(node_model("ConvTranspose", [("x", F, ["N", 4, 5, 5]), ("w", _w(3, 3, 3, 3))]),
                "4 and 3")


def test_deform_conv():
    k, out = 3 * 3, [4, 5]
    m = node_model("DeformConv", [("x", F, ["N", 4, 6, 7]), ("w", _w(6, 2, 3, 3)),
                                  ("off", F, ["N", 2 * k * 2, 4, 5]),
                                  ("b", _w(6)), ("mask", F, ["N", 2 * k, 4, 5])],
                   opset=22, group=2, offset_group=2)
    expect(m, ["N", 6] + out, F)
    m = node_model("DeformConv", [("x", F, [1, 2, "H", "W"]), ("w", _w(3, 2, 2, 2)),
                                  ("off", F, [1, 8, None, None])], opset=19, pads=[0, 0, 1, 1])
    assert inferred(m)["y"].shape == (1, 3, H, W_)
    contradicts(node_model("DeformConv", [("x", F, [1, 2, 6, 6]), ("w", _w(3, 2, 3, 3)),
                                          ("off", F, [1, 18, 3, 4])], opset=19),
                "offset", "4 and 3")


def test_causal_conv_with_state():
    m = node_model("CausalConvWithState", [("x", F, ["N", 4, "L"]), ("w", _w(4, 1, 3)),
                                           ("b", _w(4)), ("s", F, ["N", 4, 2])], 2, opset=27,
                   activation="silu")
    v = inferred(m)
    assert v["y0"].shape == (Expr.var("N"), 4, Expr.var("L")) and v["y0"].elem == F
    assert v["y1"].shape == (Expr.var("N"), 4, 2) and v["y1"].elem == F
    assert sound(m) > 0
    v = inferred(node_model("CausalConvWithState", [("x", F, [2, "C", 9]),
                                                    ("w", F, ["C", 1, "K"])], 2, opset=27))
    assert v["y1"].shape == (2, Expr.var("C"), Expr.var("K") - 1)
    contradicts(node_model("CausalConvWithState", [("x", F, [2, 4, 9]), ("w", _w(4, 2, 3))],
                           2, opset=27), "weight extent 1")


def test_col2im():
    img, blk = np.array([4, 4], np.int64), np.array([2, 2], np.int64)
    m = node_model("Col2Im", [("x", F, ["N", 12, 9]), ("i", img), ("b", blk)], opset=18)
    expect(m, ["N", 3, 4, 4], F)
    contradicts(node_model("Col2Im", [("x", F, ["N", 10, 9]), ("i", img), ("b", blk)],
                           opset=18), "block size 4")
