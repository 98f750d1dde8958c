"""Inference rules of the quantization operators (onemodel/inference/rules/quant.py): element
types of QuantizeLinear (zero point, output_dtype, uint8) and DequantizeLinear (output_dtype,
the scale's type), per-tensor / per-axis / blocked scales checked against X, DynamicQuantize-
Linear's three outputs, ConvInteger/QLinearConv with Conv's shapes, MatMulInteger/QLinearMatMul
with MatMul's; contradictions; the evaluator agreeing (``sound``) and onnx's inference agreeing
where it has an answer."""

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

F, F16, U8, I8, I32 = T.FLOAT, T.FLOAT16, T.UINT8, T.INT8, T.INT32
N = Expr.var("N")


def test_every_kernel_has_a_rule_at_its_versions():
    assert check_family_registered("quant") == 7


def test_unknown_inputs_never_raise():
    assert check_unknown_inputs("quant") >= 60


def _s(*shape, dt=np.float32):
    return np.full(shape, 0.5, dt)


@pytest.mark.parametrize("opset", [10, 13, 19, 21, 23, 24, 25])
def test_quantize_linear_element_types(opset):
    x = ("x", F, ["N", 3, 4])
    expect(node_model("QuantizeLinear", [x, ("s", _s())], opset=opset), ["N", 3, 4], U8)
    expect(node_model("QuantizeLinear", [x, ("s", _s()), ("z", np.zeros((), np.int8))],
                      opset=opset), ["N", 3, 4], I8)
    if opset >= 21:
        expect(node_model("QuantizeLinear", [x, ("s", _s())], opset=opset, output_dtype=I8),
               ["N", 3, 4], I8)
        contradicts(node_model("QuantizeLinear", [x, ("s", _s()), ("z", np.zeros((), np.uint8))],
                               opset=opset, output_dtype=I8), "output_dtype")
    if opset >= 13:  # per axis
        m = node_model("QuantizeLinear", [x, ("s", _s(4)), ("z", np.zeros(4, np.uint8))],
                       opset=opset, axis=2)
        expect(m, ["N", 3, 4], U8)
        contradicts(node_model("QuantizeLinear", [x, ("s", _s(3))], opset=opset, axis=2),
                    "scale and axis extents", "3 and 4")


@pytest.mark.parametrize("opset", [10, 13, 19, 21, 23, 24, 25])
def test_dequantize_linear_element_types(opset):
    x = ("x", I8, ["N", 3, 4])
    expect(node_model("DequantizeLinear", [x, ("s", _s())], opset=opset), ["N", 3, 4], F)
    if opset >= 19:
        expect(node_model("DequantizeLinear", [x, ("s", _s(dt=np.float16)),
                                               ("z", np.zeros((), np.int8))], opset=opset),
               ["N", 3, 4], F16)
    if opset >= 23:
        m = node_model("DequantizeLinear", [x, ("s", _s())], opset=opset, output_dtype=F16)
        expect(m, ["N", 3, 4], F16, check_onnx=False)
    if opset >= 13:
        expect(node_model("DequantizeLinear", [x, ("s", _s(3))], opset=opset, axis=1),
               ["N", 3, 4], F)


@pytest.mark.parametrize("opset", [21, 25])
def test_blocked_scales(opset):
    x = ("x", F, ["N", 6, 5])
    m = node_model("QuantizeLinear", [x, ("s", _s(1, 6, 3)), ("z", np.zeros((1, 6, 3), np.int8))],
                   opset=opset, axis=2, block_size=2)
    v = inferred(m)["y"]
    assert v.shape == (N, 6, 5) and v.elem == I8
    assert sound(m, fixed={"N": 1}) > 0
    m = node_model("DequantizeLinear", [("x", I8, [2, 6, 5]), ("s", _s(2, 2, 5))], opset=opset,
                   axis=1, block_size=4)
    expect(m, [2, 6, 5], F)
    contradicts(node_model("QuantizeLinear", [x, ("s", _s(1, 6, 2))], opset=opset, axis=2,
                           block_size=2), "scale extents", "2 and 3")
    contradicts(node_model("QuantizeLinear", [x, ("s", _s(6, 3))], opset=opset, axis=2,
                           block_size=2), "rank")


def test_dynamic_quantize_linear():
    m = node_model("DynamicQuantizeLinear", [("x", F, ["N", 3])], 3, opset=11)
    v = inferred(m)
    assert v["y0"].shape == (N, 3) and v["y0"].elem == U8
    assert v["y1"].shape == () and v["y1"].elem == F
    assert v["y2"].shape == () and v["y2"].elem == U8
    assert sound(m) > 0
    expect(m, [], U8, out="y2")


def test_conv_integer_and_qlinear_conv():
    w = np.ones((4, 3, 3, 3), np.int8)
    m = node_model("ConvInteger", [("x", U8, ["N", 3, 8, 9]), ("w", w),
                                   ("xz", np.array(1, np.uint8))], opset=10, pads=[1, 1, 1, 1],
                   strides=[2, 2])
    expect(m, ["N", 4, 4, 5], I32)
    m = node_model("QLinearConv", [("x", U8, ["N", 3, 8, 9]), ("xs", _s()),
                                   ("xz", np.array(1, np.uint8)), ("w", w), ("ws", _s(4)),
                                   ("wz", np.zeros(4, np.int8)), ("ys", _s()),
                                   ("yz", np.array(3, np.int8)),
                                   ("b", np.zeros(4, np.int32))], opset=10)
    expect(m, ["N", 4, 6, 7], I8)
    contradicts(node_model("ConvInteger", [("x", U8, ["N", 2, 8, 9]), ("w", w)], opset=10),
                "channels", "2 and 3")


@pytest.mark.parametrize("opset", [10, 21])
def test_matmul_integer_and_qlinear_matmul(opset):
    m = node_model("MatMulInteger", [("a", U8, ["N", 3, 4]), ("b", np.ones((4, 5), np.int8))],
                   opset=10)
    expect(m, ["N", 3, 5], I32)
    m = node_model("QLinearMatMul", [("a", U8, ["N", 3, 4]), ("as", _s()),
                                     ("az", np.array(2, np.uint8)),
                                     ("b", np.ones((4, 5), np.uint8)), ("bs", _s()),
                                     ("bz", np.array(1, np.uint8)), ("ys", _s()),
                                     ("yz", np.array(0, np.uint8))], opset=opset)
    expect(m, ["N", 3, 5], U8)
    contradicts(node_model("MatMulInteger", [("a", U8, [3, 4]), ("b", I8, [5, 4])], opset=10),
                "inner extents")
