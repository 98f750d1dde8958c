"""Quantization kernels (onemodel/evaluate/kernels/quant.py) against exact integer (int64) and
float32-definition computations, the onnx reference evaluator, and onnxruntime only where its
result is exact by construction (each call says why)."""

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
    assert_outputs([y], ort(model, feeds, relies_on="x / 1 is exact; rounding half to even "
                                                    "and saturation to uint8 are exact"))


@pytest.mark.parametrize("zp_dtype", [np.uint8, np.int8, np.int16, np.uint16])
def test_quantize_per_axis_matches_onnxruntime(zp_dtype):
    x = (RNG.standard_normal((2, 3, 4)) * 50).astype(np.float32)
    feeds = {"x": x, "s": np.array([0.5, 1.0, 2.0], np.float32),
             "zp": np.array([1, 2, 3], zp_dtype)}
    model = node_model("QuantizeLinear", feeds, ["x", "s", "zp"], ["y"], opset=21, axis=1)
    (y,) = ours(model, feeds)
    info = np.iinfo(zp_dtype)
    want = np.clip(np.rint(x / feeds["s"].reshape(1, 3, 1)) + feeds["zp"].reshape(1, 3, 1)
                   .astype(np.int64), info.min, info.max).astype(zp_dtype)
    np.testing.assert_array_equal(y, want)
    assert_outputs([y], ort(model, feeds, relies_on="scales are powers of two: x / s (or x * "
                                                    "(1 / s)) is exact, so the rounding is too"))


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
    np.testing.assert_array_equal(y, want)  # small integers times 0.5, 1.5, 0.25: exact
    assert_outputs([y], ort(model, feeds, relies_on="(x - zp) * s of small integers and "
                                                    "scales 0.5, 1.5, 0.25 is exact in float32"))


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
    y, s, zp = ours(model, feeds)
    # The definition in float32 (IEEE division rounds once, the same on every CPU):
    hi, lo = np.float32(max(0.0, x.max())), np.float32(min(0.0, x.min()))
    scale = np.float32((hi - lo) / np.float32(255)) if hi != lo else np.float32(1)
    want_zp = np.clip(np.rint(-lo / scale), 0, 255)
    want = np.clip(np.rint(x / scale) + want_zp, 0, 255).astype(np.uint8)
    assert s.dtype == np.float32 and s == scale
    assert zp.dtype == np.uint8 and zp == want_zp
    np.testing.assert_array_equal(y, want)


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
    np.testing.assert_array_equal(y, want.astype(np.int32))  # exact int64 product
    assert y.dtype == np.int32


#: float32 epsilon: the scales are float32, so a product of scales carries a relative error of a
#: few eps32 (onemodel rounds the multiplier to float32, as the operator definitions allow).
EPS32 = float(np.finfo(np.float32).eps)


def _assert_requantized(got: np.ndarray, real: np.ndarray, zp, low: int, high: int) -> None:
    """``got`` is ``saturate(round_half_even(real) + zp)`` with ``real`` the exact (float64)
    value before rounding. Where ``real`` lies within ``4 * eps32 * |real|`` of a rounding
    tie (x.5), a float32 multiplier may round either way: there ``got`` may differ by 1."""
    want = np.clip(np.rint(real) + np.int64(zp), low, high)
    near_tie = np.abs(np.abs(real - np.floor(real)) - 0.5) <= 4 * EPS32 * np.abs(real)
    diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
    assert diff.max(initial=0) <= 1
    assert not np.any(diff[~near_tie]), f"{np.count_nonzero(diff[~near_tie])} values differ"
    # the comparison is not vacuous: most values are far from a tie and checked exactly
    assert np.count_nonzero(~near_tie) >= 0.9 * real.size


def _conv2d_int64(x: np.ndarray, w: np.ndarray, pads: list[int]) -> np.ndarray:
    """Exact 2-D convolution (strides 1, one group) of int64 x [N, C, H, W] and w [M, C, kh,
    kw] with zero padding ``pads`` = [top, left, bottom, right], by direct summation."""
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    xp = np.zeros((n, c, h + pads[0] + pads[2], wd + pads[1] + pads[3]), np.int64)
    xp[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + wd] = x
    oh, ow = xp.shape[2] - kh + 1, xp.shape[3] - kw + 1
    out = np.zeros((n, m, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + oh, j:j + ow]  # [N, C, oh, ow]
            out += np.einsum("nchw,mc->nmhw", patch, w[:, :, i, j])
    return out


def test_qlinear_matmul_is_the_exact_requantized_product():
    # uint8 x uint8 with zero points: int64 product, then the multiplier a_s * b_s / y_s.
    a = RNG.integers(0, 255, (2, 3, 4)).astype(np.uint8)
    b = RNG.integers(0, 255, (4, 5)).astype(np.uint8)
    feeds = {"a": a, "as": np.array(0.02, np.float32), "azp": np.array(128, np.uint8),
             "b": b, "bs": np.array(0.05, np.float32), "bzp": np.array(100, np.uint8),
             "ys": np.array(0.3, np.float32), "yzp": np.array(120, np.uint8)}
    model = node_model("QLinearMatMul", feeds, ["a", "as", "azp", "b", "bs", "bzp", "ys", "yzp"],
                       ["y"], opset=21)
    (y,) = ours(model, feeds)
    assert y.dtype == np.uint8 and y.shape == (2, 3, 5)
    acc = (a.astype(np.int64) - 128) @ (b.astype(np.int64) - 100)
    real = acc * (float(feeds["as"]) * float(feeds["bs"]) / float(feeds["ys"]))
    _assert_requantized(y, real, 120, 0, 255)


@pytest.mark.parametrize("attrs", [
    {},
    {"pads": [1, 1, 1, 1], "strides": [2, 2]},
    {"pads": [2, 0, 1, 1], "dilations": [2, 1]},
    {"auto_pad": "SAME_UPPER"},
    {"group": 2, "auto_pad": "SAME_LOWER", "strides": [2, 1]},
])
def test_conv_integer_matches_reference(attrs):
    # onnx.reference computes ConvInteger on int32 numpy arrays (integer sums far below 2**31):
    # exact by construction. onnxruntime is no oracle here (its u8 kernels may saturate).
    x = RNG.integers(0, 255, (1, 4, 6, 5)).astype(np.uint8)
    w = RNG.integers(0, 255, (6, 4 // attrs.get("group", 1), 3, 2)).astype(np.uint8)
    feeds = {"x": x, "w": w, "xzp": np.array(120, np.uint8), "wzp": np.array(7, np.uint8)}
    model = node_model("ConvInteger", feeds, ["x", "w", "xzp", "wzp"], ["y"], opset=10, **attrs)
    assert_outputs(ours(model, feeds), reference(model, feeds))
    if not attrs:
        (y,) = ours(model, feeds)
        want = _conv2d_int64(x.astype(np.int64) - 120, w.astype(np.int64) - 7, [0, 0, 0, 0])
        np.testing.assert_array_equal(y, want.astype(np.int32))


def test_qlinear_conv_per_channel_is_the_exact_requantized_convolution():
    # uint8 x int8 with products up to 127 * 255: onnxruntime's AVX2 kernel (pmaddubsw) saturates
    # pair sums to int16 and is off by up to 65 here, so the oracle is an int64 computation.
    x = RNG.integers(0, 255, (1, 3, 7, 7)).astype(np.uint8)
    w = RNG.integers(-127, 127, (4, 3, 3, 3)).astype(np.int8)
    ws = np.array([0.01, 0.02, 0.005, 0.03], np.float32)
    bias = np.array([100, -200, 0, 5000], np.int32)
    feeds = {"x": x, "xs": np.array(0.01, np.float32), "xzp": np.array(128, np.uint8),
             "w": w, "ws": ws, "wzp": np.zeros(4, np.int8), "ys": np.array(0.05, np.float32),
             "yzp": np.array(110, np.uint8), "b": bias}
    model = node_model("QLinearConv", feeds, ["x", "xs", "xzp", "w", "ws", "wzp", "ys", "yzp",
                                              "b"], ["y"], opset=10, pads=[1, 1, 1, 1])
    (y,) = ours(model, feeds)
    assert y.dtype == np.uint8 and y.shape == (1, 4, 7, 7)
    # padding is zero in the real domain: x - x_zero_point is padded with 0
    acc = _conv2d_int64(x.astype(np.int64) - 128, w.astype(np.int64), [1, 1, 1, 1])
    acc += bias.astype(np.int64).reshape(1, 4, 1, 1)
    mult = float(feeds["xs"]) * ws.astype(np.float64) / float(feeds["ys"])
    real = acc * mult.reshape(1, 4, 1, 1)
    _assert_requantized(y, real, 110, 0, 255)
    assert_outputs([y], reference(model, feeds))
