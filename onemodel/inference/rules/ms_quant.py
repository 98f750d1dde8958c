"""Inference rules of onnxruntime's quantized com.microsoft operators (the kernels of
``onemodel/evaluate/kernels/ms_quant.py``, same keys and versions).

These operators are not in ONNX Part 2 (their definitions are onnxruntime's contrib operator
schemas), so no type constraints bind their outputs: each rule states the element type.

* MatMulNBits: ``A.shape[:-1] + [N]`` in A's element type; A's last extent is unified with K.
"""

from __future__ import annotations

from ..registry import rule

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
