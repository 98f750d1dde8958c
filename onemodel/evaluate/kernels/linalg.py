"""Linear algebra (ONNX 1-2): MatMul, Gemm, Einsum, Det.

Products of float16, bfloat16 and the other narrow float types are computed in float32 (numpy has
no BLAS path for them) and rounded back once; integer products stay in their own type.
"""

from __future__ import annotations

import numpy as np

from ...errors import EvaluationError, InvalidModelError
from ...operators import kernel
from .. import ckernels
from ..memory import check_product
from ._util import back, wide, wide_all

#: OpenBLAS runs a product of at most this many multiply-adds (m * n * k) on one thread.
_ONE_THREAD = 1 << 18
#: Below this many multiply-adds, waking BLAS threads costs more than they give; on a busy
#: machine a wake-up can take milliseconds.
_SMALL = 1 << 23


def _scattered(x: np.ndarray) -> bool:
    """Whether the last two axes of ``x`` are neither a packed row-major nor a packed
    column-major matrix."""
    m, n = x.shape[-2:]
    s0, s1 = x.strides[-2:]
    item = x.itemsize
    return not ((s1 == item and (s0 == n * item or m == 1))
                or (s0 == item and (s1 == m * item or n == 1)))


def memory_order(a: np.ndarray):
    """``a`` ([..., k], 3-D or more, rows of k packed) with its leading axes in memory order, as
    a C-contiguous array, and the permutation that restores ``a``'s order; None when ``a`` is no
    permutation of a packed array with its last axis last (e.g. a Transpose's view of
    [batch, seq, d] as [seq, batch, d] is one, whatever the strides)."""
    if a.strides[-1] != a.itemsize:
        return None
    lead = sorted(range(a.ndim - 1), key=lambda i: -a.strides[i])
    t = a.transpose(lead + [a.ndim - 1])
    if not t.flags.c_contiguous:
        return None
    return t, [lead.index(i) for i in range(a.ndim - 1)] + [a.ndim - 1]


def _rows_product(flat: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``numpy.matmul(flat, b)`` of 2-D operands; a small product runs as a stack of products of
    at most ``_ONE_THREAD`` multiply-adds each, which BLAS computes without waking threads."""
    m, k = flat.shape
    n = b.shape[1]
    work = m * n * k
    if _ONE_THREAD < work <= _SMALL and n * k <= _ONE_THREAD:
        rows = _ONE_THREAD // (n * k)
        q = m // rows
        head = np.matmul(flat[: q * rows].reshape(q, rows, k), b).reshape(q * rows, n)
        if q * rows < m:
            head = np.concatenate([head, np.matmul(flat[q * rows:], b)])
        return head
    return np.matmul(flat, b)


def _product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``numpy.matmul(a, b)``. With a 2-D float ``b``, the rows of ``a`` are multiplied as one
    2-D product in ``a``'s memory order (numpy multiplies a 3-D ``a`` matrix by matrix: 0.84 ms
    against 0.81 for [32, 128, 64] by [64, 128], 1.42 against 1.17 for a transposed view of it
    by [64, 192]), the result laid out as ``a`` is (a transposed view where ``a`` is one); a
    scattered ``a`` is copied first (see :func:`_rows_product` for small products). When exactly
    one operand of a stacked (3-D or more) product by a stack has its matrices scattered through
    memory (neither rows nor columns packed back to back, e.g. attention values after a
    Transpose), it is copied once: numpy multiplies the stack matrix by matrix, and the scattered
    one takes about twice as long (measured; with both scattered the two copies cost more than
    they save)."""
    if (b.ndim == 2 and a.ndim >= 2 and a.dtype == b.dtype and a.dtype.kind == "f" and a.size
            and b.size):
        k, n = b.shape
        if a.ndim == 2:
            return _rows_product(a, b)
        packed = memory_order(a)
        t, back_axes = packed if packed is not None else (np.ascontiguousarray(a), None)
        y = _rows_product(t.reshape(-1, k), b).reshape(t.shape[:-1] + (n,))
        return y if back_axes is None else y.transpose(back_axes)
    if a.dtype.kind == "f" and (a.ndim > 2 or b.ndim > 2):
        sa = a.ndim > 2 and _scattered(a)
        sb = b.ndim > 2 and _scattered(b)
        if sa and not sb:
            a = np.ascontiguousarray(a)
        elif sb and not sa:
            b = np.ascontiguousarray(b)
    return np.matmul(a, b)


def column_blocks_product(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None):
    """``numpy.matmul(a, b, out=out)`` where each matrix product of the stack is small (more than
    ``_ONE_THREAD``, at most ``_SMALL`` multiply-adds): it then runs as blocks of ``b``'s columns
    of at most ``_ONE_THREAD`` multiply-adds each, which BLAS computes without waking threads
    (the blocks split columns, never the inner dimension, so no sum is split). For Conv's
    im2col products: weights ``[g, M, C*K]`` by columns ``[N, g, C*K, P]``, float32 or float64.
    """
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if (a.dtype.kind != "f" or b.dtype.kind != "f" or not _ONE_THREAD < m * n * k <= _SMALL
            or m * k > _ONE_THREAD):
        return np.matmul(a, b, out=out)
    if out is None:
        out = np.empty(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (m, n),
                       dtype=np.result_type(a, b))
    width = _ONE_THREAD // (m * k)
    for p in range(0, n, width):
        np.matmul(a, b[..., p:p + width], out=out[..., p:p + width])
    return out


def matmul_array(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy.matmul with narrow floats computed in float32 (the semantics of ONNX MatMul).
    The output is checked against the memory budget first (:func:`..memory.check_product`)."""
    check_product(a, b, max(a.itemsize, b.itemsize, 4), "the MatMul output")
    (a, b), dt = wide_all(a, b)
    return back(_product(a, b), dt)


@kernel("MatMul")
def matmul(ctx, a, b):
    return matmul_array(a, b)


@kernel("Gemm")
def gemm(ctx, a, b, c=None):
    alpha = ctx.attr("alpha")
    beta = ctx.attr("beta")
    if a.ndim != 2 or b.ndim != 2:
        raise EvaluationError(f"Gemm inputs must be 2-D, not {a.shape} and {b.shape}")
    if ctx.attr("transA"):
        a = a.T
    if ctx.attr("transB"):
        b = b.T
    check_product(a, b, max(a.itemsize, b.itemsize, 4), "the Gemm output")
    args, dt = wide_all(a, b) if c is None else wide_all(a, b, c)
    y = _product(args[0], args[1])  # a new array: scaled and summed in place
    if alpha != 1.0:
        y *= np.asarray(alpha, y.dtype)
    if c is not None and beta != 0.0:
        cc = args[2]
        if beta != 1.0:
            cc = cc * np.asarray(beta, cc.dtype)
        if ckernels.bias_relu(y, cc, False, out=y) is not None:  # float32 [n]: one pass
            pass
        elif cc.dtype == y.dtype and np.broadcast_shapes(y.shape, cc.shape) == y.shape:
            y += cc
        else:
            y = y + cc
    return back(y, dt)


@kernel("Einsum")
def einsum(ctx, *xs):
    eq = ctx.attr("equation", "").replace(" ", "")
    if not eq:
        raise InvalidModelError("Einsum needs the equation attribute")
    args, dt = wide_all(*xs)
    return back(np.asarray(np.einsum(eq, *args, optimize=len(args) > 2)), dt)


@kernel("Det")
def det(ctx, x):
    w, dt = wide(x)
    return back(np.asarray(np.linalg.det(w)), dt)
