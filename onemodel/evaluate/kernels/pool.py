"""Pooling (ONNX 1-2): MaxPool (with Indices), AveragePool, LpPool and their global forms.

Each pooling combines, for every kernel position, the strided view of the padded input that
position reads (see :func:`.conv.taps`): one vectorized maximum or sum per kernel position.
Output extents follow the definitions: with explicit pads,
``floor`` (or ``ceil`` with ``ceil_mode=1``) of ``(in + pads - dilated kernel) / stride + 1``,
dropping a last window that would start in the end padding; with ``SAME_*``, ``ceil(in/stride)``;
with ``VALID``, ``ceil((in - dilated kernel + 1) / stride)``. An extent of 0 (a window that
does not fit the padded input) gives an empty output, as the formula does; a negative one is
refused. The formulas are :mod:`onemodel.operators.geometry`'s, shared with the inference rules.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import EvaluationError, UnsupportedError
from ...ir.tensor import element_count
from ...operators import geometry, kernel
from ..memory import check_allocation
from ._util import back, wide
from .conv import conv_pads, padded, taps


def _window(ctx, x, what: str):
    """``(n, kernel_shape, strides)`` of a windowed op on ``x`` of shape (N, C, n spatial
    axes); InvalidModelError for a rank under 3 or attributes without n values."""
    if x.ndim < 3:
        raise EvaluationError(f"{what} input has rank {x.ndim}; at least 3 expected")
    n = x.ndim - 2
    kernel = ctx.attr("kernel_shape")
    if not kernel or len(kernel) != n:
        raise EvaluationError(f"kernel_shape {kernel} does not have {n} values")
    strides = ctx.attr("strides") or [1] * n
    if len(strides) != n:
        raise EvaluationError(f"strides {strides} do not have {n} values")
    return n, kernel, strides


def _pool_geometry(ctx, x, with_dilations: bool):
    n, kernel, strides = _window(ctx, x, "pooling")
    dilations = (ctx.attr("dilations") if with_dilations else None) or [1] * n
    if len(dilations) != n:
        raise EvaluationError(f"dilations {dilations} do not have {n} values")
    auto_pad = ctx.attr("auto_pad")
    begin, end, out = conv_pads(auto_pad, x.shape[2:], kernel, strides, dilations,
                                ctx.attr("pads"), bool(ctx.attr("ceil_mode", 0)))
    if any(o < 0 for o in out):
        raise EvaluationError(f"the window does not fit: output extents {out} (input "
                              f"{list(x.shape[2:])}, kernel {list(kernel)}, pads "
                              f"{list(begin) + list(end)}, strides {list(strides)})")
    return kernel, strides, dilations, begin, end, out


def _empty(x, out, dtype=None):
    """The pooled output [N, C, *out] when an extent of ``out`` is 0 (a window that does not
    fit the padded input: the definition's formula gives 0, an empty tensor); else None."""
    if 0 not in out:
        return None
    return np.empty(tuple(x.shape[:2]) + tuple(out), dtype or x.dtype)


def _lowest(dt):
    if dt.kind == "f":
        return -np.inf
    if dt.kind in "iu":
        return np.iinfo(dt).min
    return -np.inf


@kernel("MaxPool")
def max_pool(ctx, x):
    kernel, strides, dilations, begin, end, out = _pool_geometry(ctx, x, ctx.opset >= 10)
    if (y := _empty(x, out)) is not None:
        return y, _empty(x, out, np.int64)
    w, dt = wide(x)
    xp = padded(w, kernel, strides, dilations, begin, out, fill=_lowest(w.dtype))
    want_idx = ctx.num_outputs > 1 and ctx.output_used(1)
    best = None
    best_k = None
    for kidx, view in taps(xp, kernel, strides, dilations, out):
        if best is None:
            best = np.array(view, copy=True)
            if want_idx:
                best_k = np.zeros(best.shape, dtype=np.int64)
            continue
        if want_idx:
            gt = view > best  # strict: the first maximum in window order wins
            best = np.where(gt, view, best)
            best_k[gt] = np.ravel_multi_index(kidx, kernel)
        else:
            np.maximum(best, view, out=best)
    y = back(best, dt)
    if not want_idx:
        return y, None
    # Indices: the flat position of each maximum in x, row-major (or column-major with
    # storage_order=1), counting N and C too.
    nd = len(out)
    kpos = np.unravel_index(best_k, kernel)
    sp = x.shape[2:]
    N, C = x.shape[:2]
    grids = np.meshgrid(*[np.arange(o) for o in out], indexing="ij")
    coords = [grids[i] * strides[i] + kpos[i] * dilations[i] - begin[i] for i in range(nd)]
    flat = np.zeros_like(coords[0])
    if ctx.attr("storage_order", 0):
        mult = 1
        for i in range(nd):
            flat = flat + coords[i] * mult
            mult *= sp[i]
    else:
        for i in range(nd):
            flat = flat * sp[i] + coords[i]
    base = (np.arange(N).reshape(N, 1) * C + np.arange(C).reshape(1, C)) * math.prod(sp)
    idx = flat + base.reshape((N, C) + (1,) * nd)
    return y, idx.astype(np.int64)


def _window_sum(w, kernel, strides, dilations, begin, out):
    xp = padded(w, kernel, strides, dilations, begin, out)
    total = None
    for _, view in taps(xp, kernel, strides, dilations, out):
        total = np.array(view, copy=True) if total is None else np.add(total, view, out=total)
    return total


@kernel("AveragePool")
def average_pool(ctx, x):
    kernel, strides, dilations, begin, end, out = _pool_geometry(ctx, x, ctx.opset >= 19)
    if (y := _empty(x, out)) is not None:
        return y
    w, dt = wide(x)
    total = _window_sum(w, kernel, strides, dilations, begin, out)
    # the count of each window: positions inside x, or inside x and its pads
    ones = np.ones((1, 1) + x.shape[2:], dtype=w.dtype)
    if ctx.attr("count_include_pad") if ctx.opset >= 7 else False:
        ones = np.pad(ones, [(0, 0), (0, 0)] + [(max(b, 0), max(e, 0))
                                                 for b, e in zip(begin, end)],
                      constant_values=1)
        b2 = [b - max(b, 0) for b in begin]
    else:
        b2 = begin
    count = _window_sum(ones, kernel, strides, dilations, b2, out)
    return back(total / count, dt)


@kernel("LpPool")
def lp_pool(ctx, x):
    kernel, strides, dilations, begin, end, out = _pool_geometry(ctx, x, ctx.opset >= 18)
    if (y := _empty(x, out)) is not None:
        return y
    p = ctx.attr("p")
    w, dt = wide(x)
    total = _window_sum(np.power(np.abs(w), p), kernel, strides, dilations, begin, out)
    return back(np.power(total, 1.0 / p).astype(w.dtype), dt)


def _spatial(x):
    if x.ndim < 2:
        raise EvaluationError(f"global pooling input has rank {x.ndim}; at least 2 expected")
    return tuple(range(2, x.ndim))


@kernel("GlobalAveragePool")
def global_average_pool(ctx, x):
    w, dt = wide(x)
    axes = _spatial(x)
    # (the sum over the count, not np.mean: over an empty pooled tensor that warns; 0/0 is NaN)
    count = math.prod(x.shape[a] for a in axes)
    return back(np.sum(w, axis=axes, keepdims=True) / w.dtype.type(count), dt)


@kernel("GlobalMaxPool")
def global_max_pool(ctx, x):
    return np.max(x, axis=_spatial(x), keepdims=True)


@kernel("GlobalLpPool")
def global_lp_pool(ctx, x):
    p = ctx.attr("p")
    if p <= 0:
        raise UnsupportedError(f"GlobalLpPool p={p} is not positive")
    w, dt = wide(x)
    s = np.sum(np.power(np.abs(w), p), axis=_spatial(x), keepdims=True)
    return back(np.power(s, 1.0 / p).astype(w.dtype), dt)


@kernel("MaxUnpool")
def max_unpool(ctx, x, indices, output_shape=None):
    """MaxUnpool: zeros of the unpooled shape with ``x``'s values put at ``indices``.

    The unpooled shape is ``[N, C]`` and per spatial axis ``(in - 1) * stride + kernel -
    pad_begin - pad_end``; ``indices`` are flat positions in a tensor of that shape (N and C
    counted, as MaxPool's Indices give them). With ``output_shape`` (``pads`` then ignored), the
    unpooled tensor is placed at the start of each axis of a zero tensor of that shape, as the
    ONNX test vector ``test_maxunpool_export_with_output_shape`` has it (the definition does not
    say which shape the indices count in; onnxruntime 1.32 counts them in ``output_shape`` and
    fails that vector). Raises InvalidModelError for indices of another shape than ``x``
    or outside the unpooled tensor, or an ``output_shape`` smaller than the unpooled shape.
    """
    n, kernel, strides = _window(ctx, x, "MaxUnpool")
    pads = ctx.attr("pads") or [0] * (2 * n)
    if len(pads) != 2 * n:
        raise EvaluationError(f"pads {pads} do not have {2 * n} values")
    if indices.shape != x.shape:
        raise EvaluationError(f"MaxUnpool indices shape {indices.shape} is not X's {x.shape}")
    inferred = x.shape[:2] + tuple(geometry.transposed_extent(i, k, s, 1, 0, b, e) for
                                   i, s, k, b, e in
                                   zip(x.shape[2:], strides, kernel, pads[:n], pads[n:]))
    shape = inferred
    if output_shape is not None:
        shape = tuple(int(v) for v in np.asarray(output_shape).reshape(-1))
        if len(shape) != x.ndim or any(o < i for o, i in zip(shape, inferred)):
            raise EvaluationError(f"MaxUnpool output_shape {list(shape)} is smaller than the "
                                  f"unpooled shape {list(inferred)}")
    if any(d < 0 for d in inferred):
        raise EvaluationError(f"MaxUnpool output shape {list(inferred)} is not valid")
    # UnsupportedError at 2^60 elements or more; the unpooled and the output arrays
    check_allocation((element_count(shape) + math.prod(inferred)) * x.itemsize,
                     "the MaxUnpool output")
    total = math.prod(inferred)
    flat = indices.reshape(-1).astype(np.int64)
    if flat.size and (flat.min() < 0 or flat.max() >= total):
        raise EvaluationError(f"a MaxUnpool index is outside the {total} unpooled elements")
    y = np.zeros(total, dtype=x.dtype)
    y[flat] = x.reshape(-1)
    if shape == inferred:
        return y.reshape(shape)
    out = np.zeros(shape, dtype=x.dtype)
    out[tuple(slice(0, d) for d in inferred)] = y.reshape(inferred)
    return out
