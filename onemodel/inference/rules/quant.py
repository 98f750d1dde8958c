"""Inference rules of the quantization operators (the kernels of
``onemodel/evaluate/kernels/quant.py``, same keys and versions).

Shapes and element types (ONNX Part 1, operator definitions of Clause 14.3, Clause 10.4):

* QuantizeLinear: X's shape; the element type is the zero point's when it is given, else
  ``output_dtype`` (opset 21+) when set, else uint8. An ``output_dtype`` other than the zero
  point's type is a contradiction.
* DequantizeLinear: X's shape; the element type is ``output_dtype`` (opset 23+) when set, else
  the scale's (float32 for a float8e8m0 scale).
* Both: the scale (and zero point) is per tensor (one element), per axis (``[X.shape[axis]]``,
  ``axis`` from opset 13, 1 before) or blocked (``block_size`` from 21: X's rank with
  ``ceil(X.shape[axis] / block_size)`` on ``axis``); extents that differ are contradictions.
* DynamicQuantizeLinear: ``(y uint8 of X's shape, y_scale float32 [], y_zero_point uint8 [])``.
* ConvInteger, QLinearConv: Conv's shape function (:func:`.conv.conv_shape`), int32 and the
  output zero point's type.
* MatMulInteger, QLinearMatMul: MatMul's shape (:func:`.linalg.matmul_shape`).
"""

from __future__ import annotations

from ...operators import rule
from .. import dims as D
from .conv import conv_shape
from .linalg import matmul_shape

_UINT8, _FLOAT, _FLOAT8E8M0 = 2, 1, 24


def _param(ctx, x, p, axis: int, block: int, what: str) -> None:
    """Check that scale or zero point ``p`` fits X per tensor, per axis or blocked."""
    if p is None or p.shape is None or x.shape is None:
        return
    ps, xs = p.shape, x.shape
    if all(d == 1 for d in ps) and (len(ps) <= 1 or not block):
        return  # per tensor
    if block:
        a = ctx.axis(axis, len(xs))
        if a is None:
            return
        if len(ps) != len(xs):
            ctx.contradiction(f"the {what} {D.shape_text(ps)} does not have X's rank "
                              f"{len(xs)} (block_size {block})")
            return
        for k, (d, e) in enumerate(zip(xs, ps)):
            ctx.unify(e, D.ceildiv(d, block) if k == a else d, f"{what} extents")
        return
    if len(ps) != 1:
        ctx.contradiction(f"the {what} {D.shape_text(ps)} is neither a scalar nor 1-D")
        return
    a = ctx.axis(axis, len(xs))
    if a is not None:
        ctx.unify(ps[0], xs[a], f"{what} and axis extents")


def _check_params(ctx, x, scale, zero_point) -> list | None:
    """Check scale and zero point against X (``axis`` from opset 13, 1 before; ``block_size``
    from 21); X's shape as a list (None when the rank is unknown)."""
    axis = ctx.attr("axis") if ctx.opset >= 13 else 1
    block = (ctx.attr("block_size") if ctx.opset >= 21 else 0) or 0
    axis = 1 if axis is None else axis
    _param(ctx, x, scale, axis, block, "scale")
    _param(ctx, x, zero_point, axis, block, "zero point")
    return list(x.shape) if x.shape is not None else None


@rule("QuantizeLinear")
def quantize_linear(ctx, x, y_scale, y_zero_point=None):
    """QuantizeLinear: X's shape, the element type of the module doc."""
    shape = _check_params(ctx, x, y_scale, y_zero_point)
    out = ctx.attr("output_dtype") if ctx.opset >= 21 else 0
    elem = out or _UINT8
    if y_zero_point is not None:
        zp = y_zero_point.elem
        if out and zp is not None and out != zp:
            ctx.contradiction(f"output_dtype {out} differs from the zero point's type {zp}")
        elem = zp
    return shape if elem is None else ctx.tensor(shape, elem=elem)


@rule("DequantizeLinear")
def dequantize_linear(ctx, x, x_scale, x_zero_point=None):
    """DequantizeLinear: X's shape, the element type of the module doc."""
    shape = _check_params(ctx, x, x_scale, x_zero_point)
    out = ctx.attr("output_dtype") if ctx.opset >= 23 else 0
    if not out:
        out = x_scale.elem if x_scale is not None else None
        if out == _FLOAT8E8M0:
            out = _FLOAT
    if out is None:
        return shape
    return ctx.tensor(shape, elem=out)


@rule("DynamicQuantizeLinear")
def dynamic_quantize_linear(ctx, x):
    """DynamicQuantizeLinear: ``(y, y_scale, y_zero_point)`` (module doc)."""
    return (list(x.shape) if x.shape is not None else None), [], []


@rule("MatMulInteger")
def matmul_integer(ctx, a, b, a_zero_point=None, b_zero_point=None):
    """MatMulInteger: MatMul's shape, int32."""
    return matmul_shape(ctx, a, b)


@rule("QLinearMatMul")
def qlinear_matmul(ctx, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
                   y_zero_point):
    """QLinearMatMul: MatMul's shape, the output zero point's element type."""
    return matmul_shape(ctx, a, b)


@rule("ConvInteger")
def conv_integer(ctx, x, w, x_zero_point=None, w_zero_point=None):
    """ConvInteger: Conv's shape, int32."""
    return conv_shape(ctx, x, w)


@rule("QLinearConv")
def qlinear_conv(ctx, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
                 y_zero_point, bias=None):
    """QLinearConv: Conv's shape with the bias ``[M]``, the output zero point's type."""
    return conv_shape(ctx, x, w, bias)
