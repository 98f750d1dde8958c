"""Inference rules of onnxruntime's quantized com.microsoft operators (the kernels of
``onemodel/evaluate/kernels/ms_quant.py``, same keys and versions).

These operators are not in ONNX Part 2 (their definitions are onnxruntime's contrib operator
schemas), so no type constraints bind their outputs: each rule states the element type.

* MatMulNBits: ``A.shape[:-1] + [N]`` in A's element type; A's last extent is unified with K.
* DynamicQuantizeMatMul, MatMulIntegerToFloat: MatMul's shape (:func:`.linalg.matmul_shape`),
  float32 for the first, the scales' element type for the second.
* QLinearAdd, QLinearMul: the broadcast of A and B (Clause 6.6) in A's element type.
* QLinearSigmoid: X's shape and element type.
* QLinearGlobalAveragePool: X's shape with every spatial extent 1 (axes 2.. of ``[N, C, D...]``,
  or 1..r-2 with ``channels_last``), X's element type; rank < 3 is a contradiction.
* QLinearConcat: Concat's shape of the tensors of the (tensor, scale, zero point) triples
  along ``axis``, Y_zero_point's element type.
* GatherBlockQuantized: ``data.shape[:g] + indices.shape + data.shape[g+1:]`` (``g`` the
  ``gather_axis``, default 0), the last extent times ``8 / bits`` for uint8 data (packed
  codes), in the scales' element type.
"""

from __future__ import annotations

from ...operators import rule
from .. import dims as D
from ..value import Value
from .linalg import matmul_shape
from .shape import concat

MS = "com.microsoft"


def _shape(v):
    return list(v.shape) if v is not None and v.shape is not None else None


def _elem(v):
    return v.elem if v is not None else None


def _matmul(ctx, a, b):
    return matmul_shape(ctx, a, b) if a is not None and b is not None else None


@rule("MatMulNBits", domain=MS)
def matmul_nbits(ctx, a, b, scales, zero_points=None, g_idx=None, bias=None):
    """MatMulNBits: ``[..., N]`` in A's element type (module doc)."""
    n, k = ctx.attr("N", None), ctx.attr("K", None)
    shape = _shape(a)
    if shape is not None:
        if not shape:
            ctx.contradiction("A is a scalar; it needs a last axis of K extents")
            return ctx.tensor(None, elem=_elem(a))
        if k is not None:
            ctx.unify(shape[-1], int(k), "A's last extent and K")
        shape = shape[:-1] + [int(n) if n is not None else None]
    return ctx.tensor(shape, elem=_elem(a))


_UINT8 = 2


@rule("GatherBlockQuantized", domain=MS)
def gather_block_quantized(ctx, data, indices, scales, zero_points=None):
    """GatherBlockQuantized: the gathered shape in the scales' element type (module doc)."""
    elem = _elem(scales)
    ds, ix = _shape(data), _shape(indices)
    if ds is None or ix is None:
        return ctx.tensor(None, elem=elem)
    g = ctx.axis(ctx.attr("gather_axis", 0), len(ds), "gather_axis")
    if g is None:
        return ctx.tensor(None, elem=elem)
    out = ds[:g] + ix + ds[g + 1:]
    bits = int(ctx.attr("bits", 4) or 4)
    if _elem(data) == _UINT8 and bits in (2, 4) and g != len(ds) - 1:
        out[-1] = D.mul(out[-1], 8 // bits)
    return ctx.tensor(out, elem=elem)


_FLOAT = 1


@rule("DynamicQuantizeMatMul", domain=MS)
def dynamic_quantize_matmul(ctx, a, b, b_scale, b_zero_point=None, bias=None):
    """DynamicQuantizeMatMul: MatMul's shape, float32."""
    return ctx.tensor(_matmul(ctx, a, b), elem=_FLOAT)


@rule("MatMulIntegerToFloat", domain=MS)
def matmul_integer_to_float(ctx, a, b, a_scale, b_scale, a_zero_point=None, b_zero_point=None,
                            bias=None):
    """MatMulIntegerToFloat: MatMul's shape in the scales' element type."""
    elem = _elem(a_scale)
    return ctx.tensor(_matmul(ctx, a, b), elem=elem)


@rule("QLinearAdd", domain=MS)
def qlinear_add(ctx, a, a_scale, a_zero_point, b, b_scale, b_zero_point, c_scale,
                c_zero_point=None):
    """QLinearAdd: the broadcast shape, A's element type."""
    return ctx.tensor(ctx.broadcast(a, b), elem=_elem(a))


@rule("QLinearMul", domain=MS)
def qlinear_mul(ctx, a, a_scale, a_zero_point, b, b_scale, b_zero_point, c_scale,
                c_zero_point=None):
    """QLinearMul: the broadcast shape, A's element type."""
    return ctx.tensor(ctx.broadcast(a, b), elem=_elem(a))


@rule("QLinearSigmoid", domain=MS)
def qlinear_sigmoid(ctx, x, x_scale, x_zero_point=None, y_scale=None, y_zero_point=None):
    """QLinearSigmoid: X's shape and element type."""
    return ctx.tensor(_shape(x), elem=_elem(x))


@rule("QLinearGlobalAveragePool", domain=MS)
def qlinear_global_average_pool(ctx, x, x_scale, x_zero_point, y_scale, y_zero_point):
    """QLinearGlobalAveragePool: spatial extents 1 (module doc)."""
    shape = _shape(x)
    if shape is not None:
        if len(shape) < 3:
            ctx.contradiction(f"X has rank {len(shape)}; 3 or more is needed")
            return ctx.tensor(None, elem=_elem(x))
        if ctx.attr("channels_last", 0):
            shape = [shape[0]] + [1] * (len(shape) - 2) + [shape[-1]]
        else:
            shape = shape[:2] + [1] * (len(shape) - 2)
    return ctx.tensor(shape, elem=_elem(x))


@rule("QLinearConcat", domain=MS)
def qlinear_concat(ctx, y_scale=None, y_zero_point=None, *inputs):
    """QLinearConcat: Concat's shape of the triples' tensors, Y_zero_point's element type."""
    elem = _elem(y_zero_point)
    if len(inputs) % 3:
        ctx.contradiction(f"{len(inputs)} inputs after Y's parameters are not triples")
        return ctx.tensor(None, elem=elem)
    if ctx.attr("axis", None) is None:
        ctx.contradiction("QLinearConcat needs the axis attribute")
        return ctx.tensor(None, elem=elem)
    tensors = [x for x in inputs[::3] if x is not None]
    joined = concat(ctx, *tensors) if tensors else None
    shape = joined.shape if isinstance(joined, Value) else None
    return ctx.tensor(None if shape is None else list(shape), elem=elem)
