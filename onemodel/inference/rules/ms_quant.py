"""Inference rules of onnxruntime's quantized com.microsoft operators (the kernels of
``onemodel/evaluate/kernels/ms_quant.py``, same keys and versions).

These operators are not in ONNX Part 2 (their definitions are onnxruntime's contrib operator
schemas), so no type constraints bind their outputs: each rule states the element type.

* MatMulNBits: ``A.shape[:-1] + [N]`` in A's element type; A's last extent is unified with K.
* DynamicQuantizeMatMul, MatMulIntegerToFloat: MatMul's shape (:func:`.linalg.matmul_shape`),
  float32 for the first, the scales' element type for the second.
* GatherBlockQuantized: ``data.shape[:g] + indices.shape + data.shape[g+1:]`` (``g`` the
  ``gather_axis``, default 0), the last extent times ``8 / bits`` for uint8 data (packed
  codes), in the scales' element type.
"""

from __future__ import annotations

from .. import dims as D
from ..registry import rule
from .linalg import matmul_shape

MS = "com.microsoft"


def _shape(v):
    return list(v.shape) if v is not None and v.shape is not None else None


@rule("MatMulNBits", since=1, domain=MS)
def matmul_nbits(ctx, a, b, scales, zero_points=None, g_idx=None, bias=None):
    """MatMulNBits: ``[..., N]`` in A's element type (module doc)."""
    n, k = ctx.attr("N", None), ctx.attr("K", None)
    shape = _shape(a)
    if shape is not None:
        if not shape:
            ctx.contradiction("A is a scalar; it needs a last axis of K extents")
            return ctx.tensor(None, elem=a.elem)
        if k is not None:
            ctx.unify(shape[-1], int(k), "A's last extent and K")
        shape = shape[:-1] + [int(n) if n is not None else None]
    return ctx.tensor(shape, elem=a.elem)


_UINT8 = 2


@rule("GatherBlockQuantized", since=1, domain=MS)
def gather_block_quantized(ctx, data, indices, scales, zero_points=None):
    """GatherBlockQuantized: the gathered shape in the scales' element type (module doc)."""
    elem = scales.elem if scales is not None else None
    ds, ix = _shape(data), _shape(indices)
    if ds is None or ix is None:
        return ctx.tensor(None, elem=elem)
    g = ctx.axis(ctx.attr("gather_axis", 0), len(ds), "gather_axis")
    if g is None:
        return ctx.tensor(None, elem=elem)
    out = ds[:g] + ix + ds[g + 1:]
    bits = int(ctx.attr("bits", 4) or 4)
    if data.elem == _UINT8 and bits in (2, 4) and g != len(ds) - 1:
        out[-1] = D.mul(out[-1], 8 // bits)
    return ctx.tensor(out, elem=elem)


_FLOAT = 1


@rule("DynamicQuantizeMatMul", since=1, domain=MS)
def dynamic_quantize_matmul(ctx, a, b, b_scale, b_zero_point=None, bias=None):
    """DynamicQuantizeMatMul: MatMul's shape, float32."""
    return ctx.tensor(matmul_shape(ctx, a, b), elem=_FLOAT)


@rule("MatMulIntegerToFloat", since=1, domain=MS)
def matmul_integer_to_float(ctx, a, b, a_scale, b_scale, a_zero_point=None, b_zero_point=None,
                            bias=None):
    """MatMulIntegerToFloat: MatMul's shape in the scales' element type."""
    elem = a_scale.elem if a_scale is not None else None
    return ctx.tensor(matmul_shape(ctx, a, b), elem=elem)
