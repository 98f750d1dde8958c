"""Quantization kernels (onemodel/evaluate/kernels/quant.py) against onnxruntime, the onnx
reference evaluator and hand-computed values."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as TP

from oracle import assert_outputs, node_model, ort, ours, reference

RNG = np.random.default_rng(7)


def test_quantize_rounds_half_to_even_and_saturates():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 1000, -1000, 3.49], dtype=np.float32)
    feeds = {"x": x, "s": np.array(1.0, np.float32), "zp": np.array(10, np.uint8)}
    model = node_model("QuantizeLinear", feeds, ["x", "s", "zp"], ["y"], opset=13)
    (y,) = ours(model, feeds)
    np.testing.assert_array_equal(y, np.array([10, 12, 12, 10, 8, 255, 0, 13], np.uint8))
    assert_outputs([y], ort(model, feeds))


@pytest.mark.parametrize("zp_dtype", [np.uint8, np.int8, np.int16, np.uint16])
def test_quantize_per_axis_matches_onnxruntime(zp_dtype):
    x = (RNG.standard_normal((2, 3, 4)) * 50).astype(np.float32)
    feeds = {"x": x, "s": np.array([0.5, 1.0, 2.0], np.float32),
             "zp": np.array([1, 2, 3], zp_dtype)}
    model = node_model("QuantizeLinear", feeds, ["x", "s", "zp"], ["y"], opset=21, axis=1)
    assert_outputs(ours(model, feeds), ort(model, feeds))


def test_quantize_blocked_matches_reference():
    x = (RNG.standard_normal((3, 5)) * 10).astype(np.float32)
    feeds = {"x": x, "s": np.array([[0.5, 2.0, 1.0]] * 3, np.float32),
             "zp": np.array([[1, -2, 3]] * 3, np.int8)}
    model = node_model("QuantizeLinear", feeds, ["x", "s", "zp"], ["y"], opset=21, axis=1,
                       block_size=2)
    (y,) = ours(model, feeds)
    assert_outputs([y], reference(model, feeds))
    # columns 0-1 use block 0, 2-3 block 1, 4 block 2
    want = np.clip(np.rint(x / np.repeat(feeds["s"], 2, axis=1)[:, :5])
                   + np.repeat(feeds["zp"], 2, axis=1)[:, :5], -128, 127).astype(np.int8)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("code, dtype", [(TP.INT4, ml_dtypes.int4), (TP.UINT4, ml_dtypes.uint4),
                                         (TP.INT2, ml_dtypes.int2), (TP.UINT2, ml_dtypes.uint2)])
def test_quantize_to_narrow_integers_with_output_dtype(code, dtype):
    x = np.array([-20, -3.4, -1, 0, 0.6, 1.5, 2.5, 7.2, 40], dtype=np.float32)
    feeds = {"x": x, "s": np.array(1.0, np.float32)}
    model = node_model("QuantizeLinear", feeds, ["x", "s"], ["y"], opset=25, output_dtype=code)
    (y,) = ours(model, feeds)
    assert y.dtype == np.dtype(dtype)
    info = ml_dtypes.iinfo(dtype)
    want = np.clip(np.rint(x), int(info.min), int(info.max))
    np.testing.assert_array_equal(y.astype(np.float32), want)


@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("dtype", [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                                   ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2fnuz])
def test_quantize_to_float8_saturate(dtype, saturate):
    x = np.array([0, 0.3, -1.7, 100, 1e6, -1e6, np.inf, -np.inf, np.nan], dtype=np.float32)
    feeds = {"x": x, "s": np.array(2.0, np.float32), "zp": np.zeros((), dtype)}
    model = node_model("QuantizeLinear", feeds, ["x", "s", "zp"], ["y"], opset=21,
                       saturate=saturate)
    (y,) = ours(model, feeds)
    assert y.dtype == np.dtype(dtype)
    big = float(ml_dtypes.finfo(dtype).max)
    got = y.astype(np.float32)
    if saturate:
        assert got[4] == big and got[5] == -big and got[6] == big and got[7] == -big
    else:
        assert not np.isfinite(got[4]) and not np.isfinite(got[6])
    assert np.isnan(got[8])
    np.testing.assert_allclose(got[:4], (x[:4] / 2).astype(dtype).astype(np.float32))


def test_quantize_float4e2m1_saturates():
    x = np.array([0.2, 0.8, 2.6, 7.0, -100.0], dtype=np.float32)
    feeds = {"x": x, "s": np.array(1.0, np.float32),
             "zp": np.zeros((), ml_dtypes.float4_e2m1fn)}
    model = node_model("QuantizeLinear", feeds, ["x", "s", "zp"], ["y"], opset=23)
    (y,) = ours(model, feeds)
    np.testing.assert_array_equal(y.astype(np.float32), [0.0, 1.0, 3.0, 6.0, -6.0])


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32])
def test_dequantize_per_tensor_and_per_axis(dtype):
    x = RNG.integers(-100 if dtype != np.uint8 else 0, 100, (2, 3, 4)).astype(dtype)
    zp = np.array([0, 0, 0], dtype) if dtype == np.int32 else np.array([1, 2, 3], dtype)
    feeds = {"x": x, "s": np.array([0.5, 1.5, 0.25], np.float32), "zp": zp}
    model = node_model("DequantizeLinear", feeds, ["x", "s", "zp"], ["y"], opset=21, axis=1)
    (y,) = ours(model, feeds)
    want = (x.astype(np.float32) - zp.reshape(1, 3, 1)) * feeds["s"].reshape(1, 3, 1)
    np.testing.assert_allclose(y, want)
    assert_outputs([y], ort(model, feeds))


def test_dequantize_blocked_int4_and_output_dtype():
    x = np.arange(-8, 8).astype(ml_dtypes.int4).reshape(2, 8)
    s = np.array([[1.0, 0.5, 2.0], [0.25, 4.0, 1.0]], np.float32)
    zp = np.array([[0, 1, -1], [2, 0, 0]], ml_dtypes.int4)
    feeds = {"x": x, "s": s, "zp": zp}
    model = node_model("DequantizeLinear", feeds, ["x", "s", "zp"], ["y"], opset=23, axis=1,
                       block_size=3, output_dtype=TP.FLOAT16)
    (y,) = ours(model, feeds)
    assert y.dtype == np.float16
    full_s = np.repeat(s, 3, axis=1)[:, :8]
    full_zp = np.repeat(zp.astype(np.float32), 3, axis=1)[:, :8]
    np.testing.assert_allclose(y.astype(np.float32), (x.astype(np.float32) - full_zp) * full_s)


def test_dequantize_float8_and_float16_scale():
    x = np.array([0.5, -2, 448], dtype=ml_dtypes.float8_e4m3fn)
    feeds = {"x": x, "s": np.array(2.0, np.float16)}
    model = node_model("DequantizeLinear", feeds, ["x", "s"], ["y"], opset=21)
    (y,) = ours(model, feeds)
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, np.array([1, -4, 896], np.float16))


def test_quantize_then_dequantize_roundtrip_in_one_graph():
    from onnx import helper
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TP.FLOAT, [5])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [5])],
                          initializer=[helper.make_tensor("s", TP.FLOAT, [], [0.1]),
                                       helper.make_tensor("zp", TP.INT8, [], [3])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    x = np.array([0.0, 0.123, -1.0, 5.0, 13.0], np.float32)
    (y,) = ours(model, {"x": x})
    np.testing.assert_allclose(y, [0.0, 0.1, -1.0, 5.0, 12.4], rtol=1e-6)


@pytest.mark.parametrize("x", [
    np.array([[1.0, -2.5, 3.3], [0.0, 7.1, -0.4]], np.float32),
    np.zeros((2, 2), np.float32),
    np.array([1.0, 2.0, 250.0], np.float32),
    np.array([-3.0, -1.0], np.float32),
])
def test_dynamic_quantize_linear_matches_onnxruntime(x):
    feeds = {"x": x}
    model = node_model("DynamicQuantizeLinear", feeds, ["x"], ["y", "s", "zp"], opset=11)
    assert_outputs(ours(model, feeds), ort(model, feeds))


@pytest.mark.parametrize("zps", [(None, None), ("scalar", "scalar"), ("row", "col")])
def test_matmul_integer_zero_points(zps):
    a = RNG.integers(0, 255, (3, 4)).astype(np.uint8)
    b = RNG.integers(-128, 127, (4, 5)).astype(np.int8)
    feeds = {"a": a, "b": b}
    ins = ["a", "b"]
    if zps[0] == "scalar":
        feeds.update(azp=np.array(12, np.uint8), bzp=np.array(-3, np.int8))
        ins += ["azp", "bzp"]
    elif zps[0] == "row":
        feeds.update(azp=np.array([1, 2, 3], np.uint8), bzp=np.array([1, -2, 3, 0, 5], np.int8))
        ins += ["azp", "bzp"]
    model = node_model("MatMulInteger", feeds, ins, ["y"], opset=10)
    (y,) = ours(model, feeds)
    azp = feeds.get("azp", np.zeros(()))
    azp = azp.reshape(-1, 1) if azp.ndim == 1 else azp
    want = (a.astype(np.int64) - azp.astype(np.int64)) @ (b.astype(np.int64)
                                                          - feeds.get("bzp", 0))
    np.testing.assert_array_equal(y, want.astype(np.int32))
    assert y.dtype == np.int32
    if zps[0] != "row":  # onnxruntime takes a scalar A zero point only
        assert_outputs([y], ort(model, feeds))


def test_qlinear_matmul_matches_onnxruntime():
    a = RNG.integers(0, 255, (2, 3, 4)).astype(np.uint8)
    b = RNG.integers(0, 255, (4, 5)).astype(np.uint8)
    feeds = {"a": a, "as": np.array(0.02, np.float32), "azp": np.array(128, np.uint8),
             "b": b, "bs": np.array(0.05, np.float32), "bzp": np.array(100, np.uint8),
             "ys": np.array(0.3, np.float32), "yzp": np.array(120, np.uint8)}
    model = node_model("QLinearMatMul", feeds, ["a", "as", "azp", "b", "bs", "bzp", "ys", "yzp"],
                       ["y"], opset=21)
    assert_outputs(ours(model, feeds), ort(model, feeds))


@pytest.mark.parametrize("attrs", [
    {},
    {"pads": [1, 1, 1, 1], "strides": [2, 2]},
    {"pads": [2, 0, 1, 1], "dilations": [2, 1]},
    {"auto_pad": "SAME_UPPER"},
    {"group": 2, "auto_pad": "SAME_LOWER", "strides": [2, 1]},
])
def test_conv_integer_matches_onnxruntime(attrs):
    x = RNG.integers(0, 255, (1, 4, 6, 5)).astype(np.uint8)
    w = RNG.integers(0, 255, (6, 4 // attrs.get("group", 1), 3, 2)).astype(np.uint8)
    feeds = {"x": x, "w": w, "xzp": np.array(120, np.uint8), "wzp": np.array(7, np.uint8)}
    model = node_model("ConvInteger", feeds, ["x", "w", "xzp", "wzp"], ["y"], opset=10, **attrs)
    assert_outputs(ours(model, feeds), ort(model, feeds))


def test_qlinear_conv_per_channel_matches_onnxruntime():
    x = RNG.integers(0, 255, (1, 3, 7, 7)).astype(np.uint8)
    w = RNG.integers(-127, 127, (4, 3, 3, 3)).astype(np.int8)
    feeds = {"x": x, "xs": np.array(0.01, np.float32), "xzp": np.array(128, np.uint8),
             "w": w, "ws": np.array([0.01, 0.02, 0.005, 0.03], np.float32),
             "wzp": np.zeros(4, np.int8), "ys": np.array(0.05, np.float32),
             "yzp": np.array(110, np.uint8), "b": np.array([100, -200, 0, 5000], np.int32)}
    model = node_model("QLinearConv", feeds, ["x", "xs", "xzp", "w", "ws", "wzp", "ys", "yzp",
                                              "b"], ["y"], opset=10, pads=[1, 1, 1, 1])
    assert_outputs(ours(model, feeds), ort(model, feeds))
