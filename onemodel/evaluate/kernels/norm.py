"""Normalizations (ONNX 1-2): Batch (inference and training mode), Layer, Instance, Group, Lp,
MeanVariance and RMS normalization, and local response normalization (LRN-1 and 13, across
channels).

Statistics of float16 and bfloat16 inputs are computed in float32 (the definitions' ``stash_type``
default, and what BatchNormalization states for float16), results rounded back once.
LayerNormalization of float32 (or stashed float32) rows runs in the compiled kernel of
:mod:`..ckernels` when it is built.
"""

from __future__ import annotations

import numpy as np

from ...errors import EvaluationError, UnsupportedError
from ...operators import kernel
from .. import ckernels
from ._util import axis_index, back, wide


def _channel(v, ndim):
    return v.reshape((1, -1) + (1,) * (ndim - 2))


@kernel("BatchNormalization")
def batch_norm(ctx, x, scale, bias, mean, var):
    eps = ctx.attr("epsilon")
    momentum = ctx.attr("momentum")
    if ctx.opset >= 14:
        training = bool(ctx.attr("training_mode"))
    elif ctx.opset >= 7:
        training = ctx.num_outputs > 1
    else:
        training = not ctx.attr("is_test") and ctx.num_outputs > 1
    w, dt = wide(x)
    s, b, m, v = (np.asarray(a, dtype=w.dtype) for a in (scale, bias, mean, var))
    if ctx.opset < 6 and not ctx.attr("spatial"):
        raise UnsupportedError("BatchNormalization with spatial=0 is not implemented")
    if not training:
        inv = s / np.sqrt(v + np.asarray(eps, w.dtype))
        y = w * _channel(inv, w.ndim)
        y += _channel(b - m * inv, w.ndim)  # in place: one array allocated, not two
        return back(y, dt)
    axes = tuple(i for i in range(w.ndim) if i != 1)
    cur_mean = np.mean(w, axis=axes)
    cur_var = np.var(w, axis=axes)
    y = (w - _channel(cur_mean, w.ndim)) / np.sqrt(_channel(cur_var, w.ndim) + eps)
    y = y * _channel(s, w.ndim) + _channel(b, w.ndim)
    run_mean = m * momentum + cur_mean * (1 - momentum)
    run_var = v * momentum + cur_var * (1 - momentum)
    outs = [back(y, dt), back(run_mean, mean.dtype), back(run_var, var.dtype)]
    if ctx.opset < 14:  # saved_mean, saved_var
        outs += [back(cur_mean, mean.dtype), back(cur_var, var.dtype)]
    return tuple(outs)


def _stash(ctx, x):
    st = ctx.attr("stash_type")
    if st == 1 and x.dtype != np.float64:
        return x.astype(np.float32, copy=False)
    if st == 11:
        return x.astype(np.float64, copy=False)
    if st not in (1, 11):
        raise UnsupportedError(f"stash_type {st} is not float (1) or double (11)")
    return x


@kernel("LayerNormalization")
def layer_norm(ctx, x, scale, bias=None):
    eps = ctx.attr("epsilon")
    axis = ctx.attr("axis")
    r = x.ndim
    axis = axis_index(axis, r, "LayerNormalization axis")
    axes = tuple(range(axis, r))
    w = _stash(ctx, x)
    done = ckernels.layer_norm(w, scale, bias, axis, eps)
    if done is not None:  # the compiled kernel applies
        return done[0].astype(x.dtype, copy=False), done[1], done[2]
    n = 1
    for a in axes:
        n *= w.shape[a]
    count = np.asarray(max(n, 1), w.dtype)
    if n > 1 and w.size and w.dtype in (np.float32, np.float64) and w.flags.c_contiguous:
        # sums over the trailing axes as BLAS products with a vector of ones: numpy's reduction
        # over a short innermost axis is several times slower
        ones = np.ones(n, w.dtype)
        stat = w.shape[:axis] + (1,) * len(axes)
        rows = w.reshape(-1, n)
        mean = (np.matmul(rows, ones) / count).reshape(stat)
        d = w - mean
        var = (np.matmul(np.square(d).reshape(-1, n), ones) / count).reshape(stat)
    else:
        mean = np.add.reduce(w, axis=axes, keepdims=True) / count
        d = w - mean
        var = np.add.reduce(d * d, axis=axes, keepdims=True) / count
    inv = 1 / np.sqrt(var + np.asarray(eps, w.dtype))
    y = d
    y *= inv
    y *= scale.astype(w.dtype, copy=False)
    if bias is not None:
        y += bias.astype(w.dtype, copy=False)
    return y.astype(x.dtype, copy=False), mean, inv


def add_layer_norm(ctx, a, b, scale, bias=None):
    """``LayerNormalization(Add(a, b), scale, bias)`` (the plan-time fusion of :mod:`..fusion`;
    ``ctx`` the LayerNormalization's): float32 operands of one shape go to the compiled kernel,
    which forms each row's sum as it normalizes it (the sum as Add rounds it, never a whole
    tensor); otherwise Add's numpy sum, then :func:`layer_norm`. The same values as the nodes."""
    if (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
            == np.float32 and a.shape == b.shape and a.ndim and ctx.attr("stash_type") == 1
            and (a.flags.c_contiguous or b.flags.c_contiguous)):
        axis = axis_index(ctx.attr("axis"), a.ndim, "LayerNormalization axis")
        if not a.flags.c_contiguous:  # the packed one as x, the other as the residual (a view
            a, b = b, a  # read in place): the same sums, float32 addition commutes
        done = ckernels.layer_norm(a, scale, bias, axis, ctx.attr("epsilon"), residual=b)
        if done is not None:
            return done
    return layer_norm(ctx, np.add(a, b), scale, bias)


@kernel("RMSNormalization")
def rms_norm(ctx, x, scale):
    # Returns (Y, inverse RMS): the second entry, of the stash type with X's extents before
    # axis and 1 from it on, is past RMSNormalization's one output (ignored there); the
    # com.microsoft SimplifiedLayerNormalization kernels (ms_fused.py) give it as inv_std_var.
    eps = ctx.attr("epsilon")
    axis = ctx.attr("axis")
    r = x.ndim
    axis = axis_index(axis, r, "RMSNormalization axis")
    w = _stash(ctx, x)
    ms = np.mean(w * w, axis=tuple(range(axis, r)), keepdims=True)
    rms = np.sqrt(ms + eps)
    y = w / rms * scale.astype(w.dtype, copy=False)
    return y.astype(x.dtype, copy=False), 1 / rms


@kernel("InstanceNormalization")
def instance_norm(ctx, x, scale, bias):
    eps = ctx.attr("epsilon")
    w, dt = wide(x)
    axes = tuple(range(2, w.ndim))
    mean = np.mean(w, axis=axes, keepdims=True)
    var = np.var(w, axis=axes, keepdims=True)
    y = (w - mean) / np.sqrt(var + np.asarray(eps, w.dtype))
    y = y * _channel(scale.astype(w.dtype), w.ndim) + _channel(bias.astype(w.dtype), w.ndim)
    return back(y, dt)


@kernel("GroupNormalization")
def group_norm(ctx, x, scale, bias):
    eps = ctx.attr("epsilon")
    G = ctx.attr("num_groups")
    N, C = x.shape[:2]
    if not G or C % G:
        raise EvaluationError(f"GroupNormalization: {C} channels do not divide into "
                              f"{G} groups")
    w = _stash(ctx, x) if ctx.opset >= 21 else wide(x)[0]
    g = w.reshape(N, G, -1)
    mean = np.mean(g, axis=2, keepdims=True)
    var = np.var(g, axis=2, keepdims=True)
    y = ((g - mean) / np.sqrt(var + eps)).reshape(x.shape)
    s = scale.astype(w.dtype)
    b = bias.astype(w.dtype)
    if ctx.opset < 21:  # one scale and bias per group
        s = np.repeat(s, C // G)
        b = np.repeat(b, C // G)
    y = y * _channel(s, x.ndim) + _channel(b, x.ndim)
    return y.astype(x.dtype, copy=False)


@kernel("LpNormalization")
def lp_norm(ctx, x):
    axis = ctx.attr("axis")
    p = ctx.attr("p")
    w, dt = wide(x)
    if p == 1:
        norm = np.sum(np.abs(w), axis=axis, keepdims=True)
    elif p == 2:
        norm = np.sqrt(np.sum(w * w, axis=axis, keepdims=True))
    else:
        raise UnsupportedError(f"LpNormalization p={p} is neither 1 nor 2")
    safe = np.where(norm == 0, 1, norm)
    return back(np.where(norm == 0, 0, w / safe).astype(w.dtype, copy=False), dt)


@kernel("MeanVarianceNormalization")
def mean_variance_norm(ctx, x):
    axes = tuple(ctx.attr("axes"))
    w, dt = wide(x)
    mean = np.mean(w, axis=axes, keepdims=True)
    var = np.mean(w * w, axis=axes, keepdims=True) - mean * mean
    y = (w - mean) / (np.sqrt(np.maximum(var, 0)) + np.asarray(1e-9, w.dtype))
    return back(y, dt)



# -- LRN --------------------------------------------------------------------------------------

@kernel("LRN")
def lrn(ctx, x):
    """LRN: ``y = x / (bias + alpha / size * sum of x^2 over nearby channels) ^ beta``.

    The channel window of c is ``[c - floor((size - 1) / 2), c + ceil((size - 1) / 2)]``.
    X: [N, C, D1, ...]."""
    x = np.asarray(x)
    size = int(ctx.attrs["size"])
    alpha = float(ctx.attr("alpha"))
    beta = float(ctx.attr("beta"))
    bias = float(ctx.attr("bias"))
    sq = x.astype(np.float64) ** 2
    c = x.shape[1]
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    pad = [(0, 0), (lo, hi)] + [(0, 0)] * (x.ndim - 2)
    csum = np.cumsum(np.pad(sq, pad), axis=1)
    csum = np.concatenate([np.zeros_like(csum[:, :1]), csum], axis=1)
    window = csum[:, size:size + c] - csum[:, :c]
    return (x / (bias + alpha / size * window) ** beta).astype(x.dtype)
