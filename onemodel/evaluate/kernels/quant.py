"""Quantization operators (ONNX operators, default domain).

QuantizeLinear and DequantizeLinear (opsets 10 to 25: per-tensor, per-axis and blocked scales,
8/16-bit integers, int4/uint4/int2/uint2, float8 with ``saturate``, float4e2m1, ``output_dtype``
and ``precision``), DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul and
QLinearConv. Narrow element types are the ml_dtypes types of :data:`onemodel.ir.dtypes.INFO`.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import EvaluationError, InvalidModelError, UnsupportedError
from ...ir.dtypes import INFO, DataType, code_of_dtype
from ...lazy import ml_dtypes  # imported when a narrow type is used (0.5 s in 0.7.0)
from ...operators import kernel
from ._util import axis_index
from .conv import conv_pads, windows

D = DataType

#: Integer quantized types -> (low, high) saturation bounds.
INT_RANGE = {
    D.UINT8: (0, 255), D.INT8: (-128, 127), D.UINT16: (0, 65535), D.INT16: (-32768, 32767),
    D.UINT4: (0, 15), D.INT4: (-8, 7), D.UINT2: (0, 3), D.INT2: (-2, 1),
}
#: Float8 types, which QuantizeLinear converts with the ``saturate`` rule.
FLOAT8 = (D.FLOAT8E4M3FN, D.FLOAT8E4M3FNUZ, D.FLOAT8E5M2, D.FLOAT8E5M2FNUZ)
#: Narrow float types without infinity or NaN: they always saturate.
FLOAT_SMALL = (D.FLOAT4E2M1, D.FLOAT6E2M3, D.FLOAT6E3M2)


def code_of(dtype) -> int:
    """The Table 5 tag of a numpy / ml_dtypes dtype; UnsupportedError when there is none."""
    code = code_of_dtype(np.dtype(dtype))
    if code is None:
        raise UnsupportedError(f"no ONNX element type for numpy dtype {np.dtype(dtype)}")
    return code


def saturate_cast(x: np.ndarray, dtype, saturate: bool = True) -> np.ndarray:
    """Convert floats to a float8/float4/float6 dtype, rounding to nearest even.

    ``saturate`` true clips values (and infinities) beyond the largest finite value to it; NaN
    stays NaN (for types with a NaN). False leaves the conversion to the type's own rules:
    infinity for E5M2, NaN for the types without infinity (ONNX Cast, saturation table).
    """
    dtype = np.dtype(dtype)
    x = np.asarray(x, dtype=np.float32)
    if saturate or code_of(dtype) in FLOAT_SMALL:
        big = float(ml_dtypes.finfo(dtype).max)
        x = np.clip(x, -big, big)
    return x.astype(dtype)


def expand_param(value: np.ndarray, shape: tuple, axis: int, block_size: int,
                 what: str) -> np.ndarray:
    """A scale or zero point made broadcastable to an input of ``shape``.

    A scalar (or one-element tensor) is per-tensor; with ``block_size`` 0 a 1-D tensor of length
    ``shape[axis]`` is per-axis; with ``block_size`` B > 0 the parameter has the input's rank and
    ``ceil(shape[axis] / B)`` entries on ``axis``, each repeated B times (blocked quantization).
    Raises InvalidModelError when the shapes do not fit.
    """
    value = np.asarray(value)
    if value.size == 1 and (value.ndim <= 1 or not block_size):
        return value.reshape(())
    rank = len(shape)
    if not block_size:
        if value.ndim != 1:
            raise EvaluationError(f"{what} of shape {list(value.shape)} must be a scalar or "
                                  "1-D without block_size")
        a = axis_index(axis, rank, f"{what} axis")
        if value.shape[0] != shape[a]:
            raise EvaluationError(f"{what} has {value.shape[0]} entries for axis {a} of "
                                  f"length {shape[a]}")
        dims = [1] * rank
        dims[a] = value.shape[0]
        return value.reshape(dims)
    if block_size < 0:
        raise InvalidModelError(f"block_size {block_size} must be positive")
    a = axis_index(axis, rank, f"{what} axis")
    want = list(shape)
    want[a] = -(-shape[a] // block_size)
    if value.ndim != rank or list(value.shape) != want:
        raise EvaluationError(f"{what} of shape {list(value.shape)} does not fit blocked "
                              f"quantization of shape {list(shape)} (expected {want})")
    return np.repeat(value, block_size, axis=a).take(np.arange(shape[a]), axis=a)


def quantize(x: np.ndarray, scale: np.ndarray, zero_point, out_code: int, saturate: bool = True,
             precision=None) -> np.ndarray:
    """``saturate(round_half_even(x / scale) + zero_point)`` into element type ``out_code``.

    ``scale`` and ``zero_point`` are already broadcastable to ``x``. The division is done in
    ``precision`` (a dtype) or, by default, in the scale's dtype (float32 for an integer or
    float8e8m0 scale). Raises UnsupportedError for an output type that is not a quantized type.
    """
    scale = np.asarray(scale)
    if precision is None:
        precision = scale.dtype
        if precision.kind != "f" and code_of(precision) != D.BFLOAT16:
            precision = np.dtype(np.float32)
    q = np.asarray(x).astype(precision) / scale.astype(precision)
    out_dtype = INFO[out_code].dtype
    if out_code in INT_RANGE:
        low, high = INT_RANGE[out_code]
        q = np.rint(q.astype(np.float64))
        if zero_point is not None:
            q = q + np.asarray(zero_point).astype(np.float64)
        return np.clip(q, low, high).astype(out_dtype)
    if out_code in FLOAT8 or out_code in FLOAT_SMALL:
        q = q.astype(np.float32)
        if zero_point is not None:
            q = q + np.asarray(zero_point).astype(np.float32)
        return saturate_cast(q, out_dtype, saturate)
    raise UnsupportedError(f"QuantizeLinear to {D(out_code).name} is not a quantized type")


@kernel("QuantizeLinear")
def quantize_linear(ctx, x, y_scale, y_zero_point=None):
    """QuantizeLinear: ``y = saturate(round(x / y_scale) + y_zero_point)``.

    Inputs: x (float, float16, bfloat16 or int32), y_scale (scalar, 1-D per ``axis`` or blocked
    with ``block_size``), y_zero_point (same shape; its type is the output type). Without a zero
    point the output type is ``output_dtype`` (opset 21+) or uint8. Integers saturate to their
    range; float8 outputs follow ``saturate`` (opset 19+); float4e2m1 always saturates.
    ``precision`` (opset 23+) names the type the division is done in.
    """
    x = np.asarray(x)
    axis = int(ctx.attr("axis")) if ctx.opset >= 13 else 1
    block = int(ctx.attr("block_size")) if ctx.opset >= 21 else 0
    out_code = int(ctx.attr("output_dtype")) if ctx.opset >= 21 else 0
    if y_zero_point is not None:
        zp_code = code_of(np.asarray(y_zero_point).dtype)
        if out_code and out_code != zp_code:
            raise InvalidModelError(f"QuantizeLinear output_dtype {out_code} differs from the "
                                    f"zero point type {zp_code}")
        out_code = zp_code
    out_code = out_code or D.UINT8
    precision = int(ctx.attr("precision")) if ctx.opset >= 23 else 0
    prec = INFO[precision].dtype if precision else None
    scale = expand_param(y_scale, x.shape, axis, block, "QuantizeLinear y_scale")
    zp = (None if y_zero_point is None else
          expand_param(y_zero_point, x.shape, axis, block, "QuantizeLinear y_zero_point"))
    saturate = bool(ctx.attr("saturate")) if ctx.opset >= 19 else True
    return quantize(x, scale, zp, out_code, saturate, prec)


def dequantize(x: np.ndarray, scale: np.ndarray, zero_point, out_dtype) -> np.ndarray:
    """``(x - zero_point) * scale`` in float32 (float64 for int32 input), cast to ``out_dtype``."""
    x = np.asarray(x)
    work = np.float64 if x.dtype in (np.int32, np.uint16, np.int16) else np.float32
    dx = x.astype(work)
    if zero_point is not None:
        dx = dx - np.asarray(zero_point).astype(work)
    y = dx * np.asarray(scale).astype(np.float32)
    return y.astype(out_dtype)


@kernel("DequantizeLinear")
def dequantize_linear(ctx, x, x_scale, x_zero_point=None):
    """DequantizeLinear: ``y = (x - x_zero_point) * x_scale``.

    x is any quantized type (8/16/32-bit integers, int4/uint4/int2/uint2, float8, float4e2m1);
    x_scale a scalar, 1-D per ``axis`` or blocked with ``block_size`` (opset 21+). The output
    type is ``output_dtype`` (opset 23+) or the scale's type (float32, float16, bfloat16; float32
    for a float8e8m0 scale).
    """
    x = np.asarray(x)
    axis = int(ctx.attr("axis")) if ctx.opset >= 13 else 1
    block = int(ctx.attr("block_size")) if ctx.opset >= 21 else 0
    scale_arr = np.asarray(x_scale)
    out_code = int(ctx.attr("output_dtype")) if ctx.opset >= 23 else 0
    if out_code:
        out_dtype = INFO[out_code].dtype
    elif code_of(scale_arr.dtype) == D.FLOAT8E8M0:
        out_dtype = np.dtype(np.float32)
    else:
        out_dtype = scale_arr.dtype
    scale = expand_param(scale_arr, x.shape, axis, block, "DequantizeLinear x_scale")
    zp = None
    if x_zero_point is not None:
        zp = expand_param(x_zero_point, x.shape, axis, block, "DequantizeLinear x_zero_point")
    return dequantize(x, scale, zp, out_dtype)


@kernel("DynamicQuantizeLinear")
def dynamic_quantize_linear(ctx, x):
    """DynamicQuantizeLinear: uint8 quantization of a float32 tensor with a computed scale.

    ``scale = (max(0, max(x)) - min(0, min(x))) / 255`` (1 when that range is 0, as onnxruntime),
    ``zero_point = saturate(round(-min(0, min(x)) / scale))``,
    ``y = saturate(round(x / scale) + zero_point)``. Outputs: y (uint8, x's shape), y_scale
    (float32 scalar), y_zero_point (uint8 scalar).
    """
    x = np.asarray(x, dtype=np.float32)
    hi = np.float32(max(0.0, float(x.max()))) if x.size else np.float32(0)
    lo = np.float32(min(0.0, float(x.min()))) if x.size else np.float32(0)
    scale = np.float32(1.0) if hi == lo else np.float32(np.float32(hi - lo) / np.float32(255))
    zp = np.rint(np.clip(np.float32(0) - lo / scale, 0, 255))
    y = np.clip(np.rint(x / scale) + zp, 0, 255).astype(np.uint8)
    return y, np.array(scale, dtype=np.float32), np.array(zp, dtype=np.uint8)


def _per_row(zp, a: np.ndarray) -> np.ndarray:
    """A zero point of A: scalar, or per row (one entry for each of the M rows)."""
    zp = np.asarray(zp).astype(np.int64)
    if zp.size > 1 and zp.ndim == 1:
        return zp.reshape(-1, 1)
    if zp.size > 1 and zp.ndim == a.ndim:
        return zp
    return zp.reshape(())


@kernel("MatMulInteger")
def matmul_integer(ctx, a, b, a_zero_point=None, b_zero_point=None):
    """MatMulInteger: ``(A - a_zero_point) @ (B - b_zero_point)`` with numpy matmul broadcasting.

    A, B: int8 or uint8. a_zero_point: scalar or one per row of A; b_zero_point: scalar or one
    per column of B. Output: int32.
    """
    a64 = np.asarray(a).astype(np.int64)
    b64 = np.asarray(b).astype(np.int64)
    if a_zero_point is not None:
        a64 = a64 - _per_row(a_zero_point, a64)
    if b_zero_point is not None:
        b64 = b64 - np.asarray(b_zero_point).astype(np.int64)
    return _int_matmul(a64, b64)


def _int_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact integer matmul to int32, done in float64 (exact below 2**53) for BLAS speed."""
    k = a.shape[-1] if a.ndim else 1
    bound = float(np.abs(a).max(initial=0)) * float(np.abs(b).max(initial=0)) * max(k, 1)
    if bound < 2.0 ** 52:
        out = np.matmul(a.astype(np.float64), b.astype(np.float64))
        return np.rint(out).astype(np.int64).astype(np.int32)
    return np.matmul(a, b).astype(np.int32)


def _is_float(arr) -> bool:
    return np.asarray(arr).dtype.kind == "f" or code_of(np.asarray(arr).dtype) in FLOAT8


@kernel("QLinearMatMul")
def qlinear_matmul(ctx, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
                   y_zero_point):
    """QLinearMatMul: quantized matmul, ``y = quantize(dequant(a) @ dequant(b), y_scale, y_zp)``.

    Integer inputs (int8/uint8) multiply exactly in integers and requantize with the multiplier
    ``a_scale * b_scale / y_scale``, rounding half to even and saturating to y_zero_point's type.
    a_scale / a_zero_point may be per row of a, b_scale / b_zero_point per column of b. Float8
    inputs (opset 21) are dequantized, multiplied in float32 and quantized with saturation.
    """
    a = np.asarray(a)
    b = np.asarray(b)
    out_code = code_of(np.asarray(y_zero_point).dtype) if y_zero_point is not None \
        else code_of(a.dtype)
    a_s = np.asarray(a_scale, dtype=np.float32)
    a_s = a_s.reshape(-1, 1) if a_s.size > 1 and a_s.ndim == 1 else a_s
    b_s = np.asarray(b_scale, dtype=np.float32)
    y_s = np.asarray(y_scale, dtype=np.float32)
    if _is_float(a) or _is_float(b):
        da = a.astype(np.float32)
        if a_zero_point is not None:
            da = da - _per_row(a_zero_point, da).astype(np.float32)
        db = b.astype(np.float32)
        if b_zero_point is not None:
            db = db - np.asarray(b_zero_point).astype(np.float32)
        real = np.matmul(da * a_s, db * b_s)
        return quantize(real, y_s, y_zero_point, out_code)
    a64 = a.astype(np.int64)
    if a_zero_point is not None:
        a64 = a64 - _per_row(a_zero_point, a64)
    b64 = b.astype(np.int64)
    if b_zero_point is not None:
        b64 = b64 - np.asarray(b_zero_point).astype(np.int64)
    acc = _int_matmul(a64, b64).astype(np.float64)
    multiplier = (a_s * b_s / y_s).astype(np.float32)
    return _requantize(acc * multiplier, y_zero_point, out_code)


def _requantize(value: np.ndarray, zero_point, out_code: int) -> np.ndarray:
    """round_half_even(value) + zero_point, saturated to the integer type ``out_code``."""
    if out_code not in INT_RANGE:
        return quantize(value, np.float32(1), zero_point, out_code)
    low, high = INT_RANGE[out_code]
    q = np.rint(value)
    if zero_point is not None:
        q = q + np.asarray(zero_point).astype(np.float64)
    return np.clip(q, low, high).astype(INFO[out_code].dtype)


# -- integer convolution ----------------------------------------------------------------------

def _conv_exact(x: np.ndarray, w: np.ndarray, attrs: dict) -> np.ndarray:
    """Grouped N-D convolution of float64 x [N, C, *in] and w [M, C/group, *k] with the Conv
    attributes, by the Conv kernels' im2col (exact for integer values below 2**53)."""
    n_sp = x.ndim - 2
    if n_sp < 1:
        raise EvaluationError(f"the input has rank {x.ndim}; at least 3 expected")
    group = int(attrs.get("group", 1) or 1)
    kernel = list(w.shape[2:])
    if attrs.get("kernel_shape") and list(attrs["kernel_shape"]) != kernel:
        raise EvaluationError(f"kernel_shape {attrs['kernel_shape']} differs from the "
                              f"weight shape {kernel}")
    strides = list(attrs.get("strides") or [1] * n_sp)
    dil = list(attrs.get("dilations") or [1] * n_sp)
    if len(strides) != n_sp or len(dil) != n_sp or min(strides + dil) < 1:
        raise EvaluationError(f"strides {strides} / dilations {dil} do not fit {n_sp} axes")
    n, c = x.shape[:2]
    m = w.shape[0]
    if c != w.shape[1] * group or m % group:
        raise EvaluationError(f"{c} input channels, weights {list(w.shape)}, group {group}")
    begin, _, out = conv_pads(attrs.get("auto_pad", "NOTSET") or "NOTSET", x.shape[2:], kernel,
                              strides, dil, attrs.get("pads"))
    k = math.prod(kernel)
    cols = windows(x, kernel, strides, dil, begin, out).reshape(n, group, (c // group) * k, -1)
    y = np.matmul(w.reshape(group, m // group, (c // group) * k), cols)
    return y.reshape((n, m) + tuple(out))


def _conv_int(x, w, x_zero_point, w_zero_point, attrs) -> np.ndarray:
    """Integer convolution of (x - x_zp) with (w - w_zp) to exact int64 (in float64)."""
    xf = np.asarray(x).astype(np.float64)
    wf = np.asarray(w).astype(np.float64)
    if x_zero_point is not None:
        xzp = np.asarray(x_zero_point)
        if xzp.size != 1:
            raise UnsupportedError("a per-channel x_zero_point is not supported (ONNX allows a "
                                   "scalar only)")
        xf = xf - float(xzp.reshape(-1)[0])
    if w_zero_point is not None:
        wzp = np.asarray(w_zero_point).astype(np.float64)
        if wzp.size > 1:
            wzp = wzp.reshape((-1,) + (1,) * (wf.ndim - 1))
        wf = wf - wzp
    return np.rint(_conv_exact(xf, wf, attrs)).astype(np.int64)


@kernel("ConvInteger")
def conv_integer(ctx, x, w, x_zero_point=None, w_zero_point=None):
    """ConvInteger: integer convolution ``(x - x_zero_point) * (w - w_zero_point)`` to int32.

    x: [N, C, *spatial] int8/uint8; w: [M, C/group, *kernel] int8/uint8; w_zero_point scalar or
    one per output channel. Attributes as Conv (``auto_pad``, ``dilations``, ``group``,
    ``kernel_shape``, ``pads``, ``strides``).
    """
    return _conv_int(x, w, x_zero_point, w_zero_point, ctx.attrs).astype(np.int32)


@kernel("QLinearConv")
def qlinear_conv(ctx, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
                 y_zero_point, bias=None):
    """QLinearConv: quantized convolution with int32 bias, requantized to y_zero_point's type.

    ``acc = conv(x - x_zp, w - w_zp) + B``; ``y = saturate(round(acc * x_scale * w_scale /
    y_scale) + y_zp)``. w_scale and w_zero_point may be per output channel (1-D of length M).
    """
    acc = _conv_int(x, w, x_zero_point, w_zero_point, ctx.attrs).astype(np.float64)
    if bias is not None:
        acc = acc + np.asarray(bias).astype(np.float64).reshape((1, -1) + (1,) * (acc.ndim - 2))
    ws = np.asarray(w_scale, dtype=np.float32)
    if ws.size > 1:
        ws = ws.reshape((1, -1) + (1,) * (acc.ndim - 2))
    multiplier = (np.asarray(x_scale, dtype=np.float32) * ws
                  / np.asarray(y_scale, dtype=np.float32)).astype(np.float32)
    out_code = code_of(np.asarray(y_zero_point).dtype) if y_zero_point is not None \
        else code_of(np.asarray(x).dtype)
    return _requantize(acc * multiplier, y_zero_point, out_code)
