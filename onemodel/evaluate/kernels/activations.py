"""Activation functions and the softmax family (ONNX 1-2).

Element types narrower than float32 (float16, bfloat16) are computed in float32 and rounded
back once, so the result is the correctly rounded value of the float32 computation; Softmax and
LogSoftmax are the exception: they round each step to the input's type, as the ONNX test vectors
for float16 and bfloat16 attention expect.
Softmax, LogSoftmax and Hardmax before opset 13 work on the input coerced to 2-D at ``axis``
(default 1); from opset 13 on they work along the single ``axis`` (default -1).
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import UnsupportedError
from ...operators import kernel
from .. import ckernels
from ._util import back, wide
from .elementwise import erf_array


def _sigmoid(x):
    # 1/(1+exp(-x)) with exp only of non-positive arguments: no overflow.
    y = ckernels.sigmoid(x)  # float32: one SIMD pass
    if y is not None:
        return y
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


@kernel("Relu")
def relu(ctx, x):
    y = ckernels.bias_relu(x, None, True)  # float32: one SIMD pass (numpy's has none on AVX2)
    return y if y is not None else np.maximum(x, np.zeros((), x.dtype))


@kernel("LeakyRelu")
def leaky_relu(ctx, x):
    alpha = ctx.attr("alpha")
    w, dt = wide(x)
    return back(np.where(w >= 0, w, w * np.asarray(alpha, w.dtype)), dt)


@kernel("PRelu")
def prelu(ctx, x, slope):
    w, dt = wide(x)
    s = slope.astype(w.dtype, copy=False)
    if ctx.opset < 7 and s.ndim == 1 and w.ndim > 2 and s.shape[0] == w.shape[1]:
        s = s.reshape((-1,) + (1,) * (w.ndim - 2))  # opset 6: one slope per channel
    return back(np.where(w < 0, w * s, w), dt)


@kernel("Elu")
def elu(ctx, x):
    alpha = ctx.attr("alpha")
    w, dt = wide(x)
    return back(np.where(w > 0, w, np.asarray(alpha, w.dtype) * np.expm1(np.minimum(w, 0))), dt)


@kernel("Selu")
def selu(ctx, x):
    # the definitions' defaults: Selu-1 1.6732 and 1.0507, Selu-6 on the paper's constants
    alpha = ctx.attr("alpha")
    gamma = ctx.attr("gamma")
    w, dt = wide(x)
    a = np.asarray(alpha, w.dtype)
    g = np.asarray(gamma, w.dtype)
    return back(np.where(w > 0, g * w, g * (a * np.exp(np.minimum(w, 0)) - a)), dt)


@kernel("Celu")
def celu(ctx, x):
    alpha = ctx.attr("alpha")
    w, dt = wide(x)
    a = np.asarray(alpha, w.dtype)
    neg = a * np.expm1(np.minimum(w, 0) / a)
    return back(np.maximum(w, 0) + np.minimum(0, neg), dt)


def sigmoid_values(x):
    """What the Sigmoid kernel gives for ``x`` (any float dtype): computed in float32 or wider,
    rounded back once."""
    w, dt = wide(x)
    return back(_sigmoid(w), dt)


@kernel("Sigmoid")
def sigmoid(ctx, x):
    w, dt = wide(x)
    return back(_sigmoid(w), dt)


@kernel("HardSigmoid")
def hard_sigmoid(ctx, x):
    alpha = ctx.attr("alpha")
    beta = ctx.attr("beta")
    w, dt = wide(x)
    y = np.asarray(alpha, w.dtype) * w + np.asarray(beta, w.dtype)
    return back(np.clip(y, 0, 1).astype(w.dtype, copy=False), dt)


@kernel("HardSwish")
def hard_swish(ctx, x):
    w, dt = wide(x)
    y = w * np.asarray(1 / 6, w.dtype) + np.asarray(0.5, w.dtype)
    return back(w * np.clip(y, 0, 1).astype(w.dtype, copy=False), dt)


@kernel("Softplus")
def softplus(ctx, x):
    w, dt = wide(x)
    return back(np.logaddexp(np.zeros((), w.dtype), w), dt)


@kernel("Softsign")
def softsign(ctx, x):
    w, dt = wide(x)
    return back(w / (1 + np.abs(w)), dt)


@kernel("Gelu")
def gelu(ctx, x):
    approximate = ctx.attr("approximate")
    w, dt = wide(x)
    half = np.asarray(0.5, w.dtype)
    if approximate == "tanh":
        c = np.asarray(math.sqrt(2 / math.pi), w.dtype)
        inner = c * (w + np.asarray(0.044715, w.dtype) * w * w * w)
        return back(half * w * (1 + np.tanh(inner)), dt)
    if approximate != "none":
        raise UnsupportedError(f"Gelu approximate={approximate!r} is neither 'none' nor 'tanh'")
    return back(half * w * (1 + erf_array(w * np.asarray(1 / math.sqrt(2), w.dtype))), dt)


@kernel("Mish")
def mish(ctx, x):
    w, dt = wide(x)
    return back(w * np.tanh(np.logaddexp(np.zeros((), w.dtype), w)), dt)


@kernel("ThresholdedRelu")
def thresholded_relu(ctx, x):
    alpha = ctx.attr("alpha")
    return np.where(x > np.asarray(alpha, x.dtype), x, np.zeros((), x.dtype))


@kernel("Swish")
def swish(ctx, x):
    alpha = ctx.attr("alpha")
    w, dt = wide(x)
    return back(w * _sigmoid(w * np.asarray(alpha, w.dtype)), dt)


@kernel("Shrink")
def shrink(ctx, x):
    bias = ctx.attr("bias")
    lambd = ctx.attr("lambd")
    w, dt = wide(x)
    if w.dtype.kind in "iu":
        w = w.astype(np.float64)
    y = np.where(w < -lambd, w + bias, np.where(w > lambd, w - bias, 0))
    return y.astype(dt)


# -- softmax family -------------------------------------------------------------------------
def _along_axis(ctx, x, fn):
    """Apply ``fn(array, axis)`` with the axis semantics of the node's opset."""
    if ctx.opset >= 13:
        axis = ctx.attr("axis")
        return fn(x, axis if axis >= 0 else axis + x.ndim)
    axis = ctx.attr("axis")
    if axis < 0:
        axis += x.ndim
    n = math.prod(x.shape[:axis])
    flat = x.reshape(n, -1) if x.size else x.reshape(n, math.prod(x.shape[axis:]))
    return fn(flat, 1).reshape(x.shape)


#: Largest spread max - min of a float32 / float64 tensor for which ``exp(x - max)`` stays a
#: normal number everywhere (e^-80 > 1.2e-38, e^-700 > 2.2e-308).
_SPREAD = {np.dtype(np.float32): 80.0, np.dtype(np.float64): 700.0}


#: Elements of a block of rows :func:`_softmax_last` computes at once (512 KiB of float32: the
#: block stays in the cache through its five passes).
_SOFTMAX_BLOCK = 1 << 17


def _softmax_last(x):
    """Softmax along the last axis of a float32 / float64 tensor, a block of rows at a time
    (``_SOFTMAX_BLOCK`` elements, so that the shift, exponential, row sums and division run in
    the cache); the exponentials of each block as :func:`shifted_exp_rows` computes them, divided
    by their row sums."""
    n = x.shape[-1]
    rows = x.reshape(-1, n)
    out = np.empty(x.shape, dtype=x.dtype)
    flat = out.reshape(-1, n)
    step = max(1, _SOFTMAX_BLOCK // n)
    for r in range(0, rows.shape[0], step):
        e, sums = shifted_exp_rows(rows[r:r + step], flat[r:r + step])
        e /= sums[:, None]
    return out


def shifted_exp_rows(a, out):
    """``exp(a - shift)`` into ``out`` (rows of the last axis of a float32 / float64 array, the
    shape of ``a``) and its row sums: ``(out, sums)``; ``out / sums[..., None]`` is the softmax
    of each row. When ``a`` spans at most ``_SPREAD`` the shift is its maximum (no exponential
    overflows, none underflows past the normal range), which saves a per-row maximum; each
    probability is then within spread x 2^-24 (float32) of the exact value, relative, as the
    smallest probabilities of a row are with the row maximum. Otherwise each row is shifted by
    its maximum. The row sums are a BLAS product with a vector of ones. With the compiled
    kernels (:mod:`..ckernels`), float32 rows are shifted by each row's own maximum and their
    exponentials and sums computed in one pass."""
    done = ckernels.exp_rows(a, out)
    if done is not None:
        return done
    hi, lo = float(np.max(a)), float(np.min(a))
    if math.isfinite(hi) and math.isfinite(lo) and hi - lo <= _SPREAD[a.dtype]:
        np.subtract(a, np.asarray(hi, a.dtype), out=out)
    else:
        np.subtract(a, np.max(a, axis=-1, keepdims=True), out=out)
    np.exp(out, out=out)
    return out, np.matmul(out, np.ones(a.shape[-1], a.dtype))


def _softmax(x, axis):
    if x.size and axis == x.ndim - 1 and x.dtype in _SPREAD:
        return _softmax_last(x)
    e = x - np.max(x, axis=axis, keepdims=True) if x.size else x.copy()
    np.exp(e, out=e)
    e /= np.add.reduce(e, axis=axis, keepdims=True)
    return e


def _log_softmax(x, axis):
    m = np.max(x, axis=axis, keepdims=True) if x.size else 0
    s = x - m
    return s - np.log(np.sum(np.exp(s), axis=axis, keepdims=True))


def _hardmax(x, axis):
    idx = np.expand_dims(np.argmax(x, axis=axis), axis)
    out = np.zeros_like(x)
    np.put_along_axis(out, idx, 1, axis=axis)
    return out


@kernel("Softmax")
def softmax(ctx, x):
    # In the input's own type, each step rounded (as the ONNX test vectors for float16 and
    # bfloat16 attention are computed), not widened to float32.
    return _along_axis(ctx, x, _softmax)


@kernel("LogSoftmax")
def log_softmax(ctx, x):
    return _along_axis(ctx, x, _log_softmax)


@kernel("Hardmax")
def hardmax(ctx, x):
    return _along_axis(ctx, x, _hardmax)

