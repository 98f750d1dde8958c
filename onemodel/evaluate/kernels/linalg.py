"""Linear algebra (ONNX 1-2): MatMul, Gemm, Einsum, Det.

Products of float16, bfloat16 and the other narrow float types are computed in float32 (numpy has
no BLAS path for them) and rounded back once; integer products stay in their own type.
"""

from __future__ import annotations

import numpy as np

from ...errors import InvalidModelError
from ..registry import op


def _wide(*xs):
    dt = xs[0].dtype
    if dt in (np.float32, np.float64) or dt.kind in "iub" or dt.kind == "c":
        return xs, dt
    return tuple(x.astype(np.float32) for x in xs), dt


def _back(y, dt):
    return y if y.dtype == dt else y.astype(dt)


def matmul_array(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy.matmul with narrow floats computed in float32 (the semantics of ONNX MatMul)."""
    (a, b), dt = _wide(a, b)
    return _back(np.matmul(a, b), dt)


@op("MatMul", since=(1, 9, 13))
def matmul(ctx, a, b):
    return matmul_array(a, b)


@op("Gemm", since=(1, 6, 7, 9, 11, 13))
def gemm(ctx, a, b, c=None):
    alpha = ctx.attr("alpha", 1.0)
    beta = ctx.attr("beta", 1.0)
    if a.ndim != 2 or b.ndim != 2:
        raise InvalidModelError(f"Gemm inputs must be 2-D, not {a.shape} and {b.shape}")
    if ctx.attr("transA", 0):
        a = a.T
    if ctx.attr("transB", 0):
        b = b.T
    args, dt = _wide(a, b) if c is None else _wide(a, b, c)
    y = np.matmul(args[0], args[1])
    if alpha != 1.0:
        y = y * np.asarray(alpha, y.dtype)
    if c is not None and beta != 0.0:
        cc = args[2]
        if beta != 1.0:
            cc = cc * np.asarray(beta, cc.dtype)
        y = y + cc
    return _back(y, dt)


@op("Einsum", since=(12, 28))
def einsum(ctx, *xs):
    eq = ctx.attr("equation", "").replace(" ", "")
    if not eq:
        raise InvalidModelError("Einsum needs the equation attribute")
    args, dt = _wide(*xs)
    return _back(np.asarray(np.einsum(eq, *args, optimize=len(args) > 2)), dt)


@op("Det", since=(11, 22))
def det(ctx, x):
    (w,), dt = _wide(x)
    return _back(np.asarray(np.linalg.det(w)), dt)
