"""Reductions (ONNX 1-2): Reduce*, ArgMax/ArgMin, CumSum, CumProd, TopK.

The axes of a reduction are an attribute up to the version where they became the optional
second input (ReduceSum 13, the others 18). ``keepdims`` defaults to 1. With no axes the
reduction is over every axis, unless ``noop_with_empty_axes=1`` (input form only), which makes
the operator the identity. A reduction over an empty set gives the identity of the reduction
(0 for sums, 1 for products, -inf/+inf (the type's extremes for integers) for Max/Min).
Integer inputs accumulate in their own type; float16 and bfloat16 accumulate in float32.
"""

from __future__ import annotations

import numpy as np

from ...errors import EvaluationError
from ...operators import kernel
from ._util import axis_index, wide


def _axes(ctx, x, axes_input, input_form: bool):
    """Normalized tuple of axes, or None for all, or () for the identity (noop)."""
    if input_form:
        axes = None if axes_input is None else [int(a) for a in np.asarray(axes_input).reshape(-1)]
        if not axes:
            return () if ctx.attr("noop_with_empty_axes", 0) else None
    else:
        axes = ctx.attr("axes")
        if not axes:
            return None
    r = x.ndim
    out = []
    for a in axes:
        if not -r <= a < max(r, 1):
            raise EvaluationError(f"reduction axis {a} is out of range for rank {r}")
        out.append(a + r if a < 0 else a)
    return tuple(sorted(set(out)))


def _make(name, compute, axes_input: int):
    """Register the kernel of reduction ``name``: ``compute(w, axes, keepdims)``; ``axes`` is an
    attribute before opset ``axes_input``, an input from then on."""
    def fn(ctx, x, axes=None):
        form = ctx.opset >= axes_input
        ax = _axes(ctx, x, axes, form)
        if ax == ():
            return x
        keep = bool(ctx.attr("keepdims", 1))
        w, dt = wide(x)
        y = compute(w, ax, keep)
        y = np.asarray(y)
        return y if y.dtype == dt else y.astype(dt)

    fn.__name__ = name.lower()
    fn.__qualname__ = fn.__name__
    return kernel(name)(fn)


def _sum(w, ax, keep):
    return np.sum(w, axis=ax, keepdims=keep, dtype=w.dtype)


def _extreme(fn, w, ax, keep, high):
    if w.size and all(w.shape[a] for a in (ax if ax is not None else range(w.ndim))):
        return fn(w, axis=ax, keepdims=keep)
    if w.dtype.kind == "f":
        init = np.inf if high else -np.inf
    elif w.dtype.kind == "b":
        init = high
    else:
        info = np.iinfo(w.dtype)
        init = info.max if high else info.min
    return fn(w, axis=ax, keepdims=keep, initial=init)


def _log_sum_exp(w, ax, keep):
    if w.size == 0:
        return np.log(np.sum(np.exp(w), axis=ax, keepdims=keep))
    m = np.max(w, axis=ax, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    s = np.sum(np.exp(w - m), axis=ax, keepdims=True)
    y = np.log(s) + m
    if not keep:
        y = np.squeeze(y, axis=ax if ax is not None else tuple(range(w.ndim)))
    return y


def _floaty(w):
    return w if w.dtype.kind in "fc" else w.astype(np.float64)


_make("ReduceSum", _sum, 13)
_make("ReduceMean", lambda w, ax, k: np.mean(_floaty(w), axis=ax, keepdims=k), 18)
_make("ReduceMax", lambda w, ax, k: _extreme(np.max, w, ax, k, False), 18)
_make("ReduceMin", lambda w, ax, k: _extreme(np.min, w, ax, k, True), 18)
_make("ReduceProd", lambda w, ax, k: np.prod(w, axis=ax, keepdims=k, dtype=w.dtype), 18)
_make("ReduceL1", lambda w, ax, k: np.sum(np.abs(w), axis=ax, keepdims=k, dtype=w.dtype), 18)
_make("ReduceL2", lambda w, ax, k: np.sqrt(np.sum(_floaty(w) * _floaty(w), axis=ax,
                                                  keepdims=k)), 18)
_make("ReduceLogSum", lambda w, ax, k: np.log(np.sum(_floaty(w), axis=ax, keepdims=k)), 18)
_make("ReduceLogSumExp", lambda w, ax, k: _log_sum_exp(_floaty(w), ax, k), 18)
_make("ReduceSumSquare", lambda w, ax, k: np.sum(w * w, axis=ax, keepdims=k, dtype=w.dtype), 18)


# -- arg reductions -------------------------------------------------------------------------
def _arg(fn, ctx, x):
    axis = ctx.attr("axis")
    r = x.ndim
    if not -r <= axis < max(r, 1):
        raise EvaluationError(f"axis {axis} is out of range for rank {r}")
    axis = axis + r if axis < 0 else axis
    keep = bool(ctx.attr("keepdims"))
    if ctx.opset >= 12 and ctx.attr("select_last_index"):
        n = x.shape[axis]
        idx = n - 1 - fn(np.flip(x, axis=axis), axis=axis)
    else:
        idx = fn(x, axis=axis)
    idx = np.asarray(idx, dtype=np.int64)
    return np.expand_dims(idx, axis) if keep else idx


@kernel("ArgMax")
def arg_max(ctx, x):
    return _arg(np.argmax, ctx, x)


@kernel("ArgMin")
def arg_min(ctx, x):
    return _arg(np.argmin, ctx, x)


# -- CumSum, TopK -------------------------------------------------------------------------
def _cumulative(ctx, x, axis, ufunc, identity, name):
    a = axis_index(int(np.asarray(axis).reshape(-1)[0]), x.ndim, f"{name} axis")
    w, dt = wide(x)
    if ctx.attr("reverse"):
        w = np.flip(w, axis=a)
    y = ufunc.accumulate(w, axis=a, dtype=w.dtype)
    if ctx.attr("exclusive") and y.shape[a]:
        lead = np.full_like(np.take(y, [0], axis=a), identity)
        y = np.concatenate([lead, np.take(y, np.arange(y.shape[a] - 1), axis=a)], axis=a)
    if ctx.attr("reverse"):
        y = np.flip(y, axis=a)
    return y.astype(dt, copy=False)


@kernel("CumSum")
def cum_sum(ctx, x, axis):
    return _cumulative(ctx, x, axis, np.add, 0, "CumSum")


@kernel("CumProd")
def cum_prod(ctx, x, axis):
    return _cumulative(ctx, x, axis, np.multiply, 1, "CumProd")


@kernel("TopK")
def top_k_v1(ctx, x):
    return _top_k(x, ctx.attr("k"), ctx.attr("axis"), True)


@kernel("TopK", since=10)
def top_k(ctx, x, k):
    largest = ctx.attr("largest") if ctx.opset >= 11 else 1
    return _top_k(x, int(np.asarray(k).reshape(-1)[0]), ctx.attr("axis"), largest)


def _top_k(x, k, axis, largest):
    axis = axis_index(axis, x.ndim, "TopK axis")
    n = x.shape[axis]
    if k is None or not 0 <= k <= n:
        raise EvaluationError(f"TopK k={k} is not in [0, {n}]")
    if largest:
        # stable descending order: ties keep the lower index first
        rev = np.flip(x, axis=axis)
        order = np.argsort(rev, axis=axis, kind="stable")
        order = np.flip(order, axis=axis)
        order = n - 1 - order
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    vals = np.take_along_axis(x, idx, axis=axis)
    return vals, idx.astype(np.int64)
