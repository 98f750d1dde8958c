"""Exact (float64) results of operators that onnx.reference does not implement as the ONNX
definition states: the softmax family before opset 13 (coerced to 2-D), LRN, LpNormalization,
MeanVarianceNormalization, grouped ConvTranspose and 2-D GridSample. Each function is written
from the operator's definition (its doc in the onnx package), in float64 numpy; the tests
compare onemodel's float32 outputs with it through ``oracle.assert_close_to_exact``.

Test helper only. Float attributes are passed as the float32 values the model stores (the
values the model defines).
"""

from __future__ import annotations

import itertools
import math

import numpy as np


def coerced_2d(x: np.ndarray, axis: int) -> np.ndarray:
    """``x`` as float64 of shape ``[a_0 * ... * a_{axis-1}, a_axis * ... * a_{n-1}]``, the 2-D
    view of the softmax family before opset 13 (negative ``axis`` counts from the back)."""
    axis = axis + x.ndim if axis < 0 else axis
    return np.asarray(x, np.float64).reshape(math.prod(x.shape[:axis]), -1)


def softmax_2d(x: np.ndarray, axis: int) -> np.ndarray:
    """Softmax-1/11: ``exp(v) / sum(exp(v))`` over each row of :func:`coerced_2d`, in float64,
    shaped like ``x``. The row maximum is subtracted first (the same value mathematically)."""
    v = coerced_2d(x, axis)
    e = np.exp(v - v.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).reshape(x.shape)


def log_softmax_2d(x: np.ndarray, axis: int) -> np.ndarray:
    """LogSoftmax-1/11: ``v - log(sum(exp(v)))`` over each row of :func:`coerced_2d`, computed
    as ``(v - max) - log(sum(exp(v - max)))``, in float64, shaped like ``x``."""
    v = coerced_2d(x, axis)
    s = v - v.max(axis=1, keepdims=True)
    return (s - np.log(np.exp(s).sum(axis=1, keepdims=True))).reshape(x.shape)


def hardmax_2d(x: np.ndarray, axis: int) -> np.ndarray:
    """Hardmax-1/11: 1 at the first maximum of each row of :func:`coerced_2d` (the lowest
    index among equal maxima, as the definition says), 0 elsewhere; dtype and shape of ``x``."""
    v = coerced_2d(x, axis)
    out = np.zeros(v.shape, x.dtype)
    first = np.argmax(v == v.max(axis=1, keepdims=True), axis=1)
    out[np.arange(v.shape[0]), first] = 1
    return out.reshape(x.shape)


def lrn(x: np.ndarray, *, size: int, alpha: float, beta: float, bias: float) -> np.ndarray:
    """LRN (ONNX 1-2): ``x / (bias + alpha / size * square_sum) ** beta``, ``square_sum`` over
    channels ``max(0, c - floor((size-1)/2)) <= i <= min(C-1, c + ceil((size-1)/2))``.
    X [N, C, ...]; float64 result."""
    v = np.asarray(x, np.float64)
    channels = v.shape[1]
    down, up = (size - 1) // 2, math.ceil((size - 1) / 2)
    out = np.empty_like(v)
    for c in range(channels):
        lo, hi = max(0, c - down), min(channels - 1, c + up)
        square_sum = (v[:, lo:hi + 1] ** 2).sum(axis=1)
        out[:, c] = v[:, c] / (bias + alpha / size * square_sum) ** beta
    return out


def lp_normalization(x: np.ndarray, *, axis: int, p: int) -> np.ndarray:
    """LpNormalization: ``x / ||x||_p`` along ``axis`` (p 1: sum of |x|; p 2: the square root
    of the sum of squares), 0 where the norm is 0; float64 result."""
    v = np.asarray(x, np.float64)
    if p == 1:
        norm = np.abs(v).sum(axis=axis, keepdims=True)
    elif p == 2:
        norm = np.sqrt((v * v).sum(axis=axis, keepdims=True))
    else:
        raise ValueError(f"p={p}")
    return np.where(norm == 0, 0.0, v / np.where(norm == 0, 1.0, norm))


#: MeanVarianceNormalization-13's ``Epsilon`` constant (a float32 tensor in its function body).
MVN_EPSILON = float(np.float32(1e-9))


def mean_variance_normalization(x: np.ndarray, axes=(0, 2, 3)) -> np.ndarray:
    """MeanVarianceNormalization: ``(X - E[X]) / (sqrt(E[(X - E[X])^2]) + 1e-9)``, the
    expectations over ``axes`` (the function body adds its float32 Epsilon to the standard
    deviation); float64 result."""
    v = np.asarray(x, np.float64)
    mean = v.mean(axis=tuple(axes), keepdims=True)
    var = ((v - mean) ** 2).mean(axis=tuple(axes), keepdims=True)
    return (v - mean) / (np.sqrt(var) + MVN_EPSILON)


def mvn_error_scale(x: np.ndarray, axes=(0, 2, 3)) -> np.ndarray:
    """The magnitude, per element, that the float32 rounding error of MeanVarianceNormalization
    is proportional to: ``|y| * E[x^2] / var + E[|x|] / std + |y|``.

    A float32 kernel that forms ``var = E[x^2] - E[x]^2`` (the function body) over n elements
    errs in ``E[x^2]`` by (n + 1) u E[x^2], in ``E[x]`` by n u E[|x|] (so in ``E[x]^2`` by
    2n u E[x^2], as |E[x]| E[|x|] <= E[x^2]), in all by (3n + 3) u E[x^2] on ``var``: half that
    relative to ``var`` on ``std``, the cancellation's factor ``E[x^2] / var``. ``y`` takes
    that relative error, n u E[|x|] / std from the mean and 4 u |y| from its own roundings:
    (0.75 (n + 1), n / 2, 2) ulps (EPS32 = 2u) of the three terms, so ``n + 3`` ulps of this
    scale bound any summation order (a kernel that sums (x - E[x])^2 errs less).
    """
    v = np.asarray(x, np.float64)
    ax = tuple(axes)
    m2 = (v * v).mean(axis=ax, keepdims=True)
    mean = v.mean(axis=ax, keepdims=True)
    var = m2 - mean * mean
    y = np.abs(mean_variance_normalization(x, axes))
    return y * m2 / var + np.abs(v).mean(axis=ax, keepdims=True) / np.sqrt(var) + y


def conv_transpose(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *,
                   group: int = 1, strides=None, dilations=None, pads=None,
                   output_padding=None) -> np.ndarray:
    """ConvTranspose (explicit pads, no auto_pad or output_shape): input position ``i`` of
    channel ``c`` (group ``g = c // (C / group)``) adds ``x[n, c, i] * w[c, m, k]`` to output
    channel ``g * M/group + m`` at ``i * stride + k * dilation - pad_begin``; output extent
    ``stride * (in - 1) + output_padding + (kernel - 1) * dilation + 1 - pad_begin - pad_end``.
    X [N, C, *in], W [C, M/group, *kernel], B [M]; float64 result.

    Called with ``|x|, |w|, |b|`` it gives ``sum |terms|`` per output (the error scale).
    """
    v = np.asarray(x, np.float64)
    k = np.asarray(w, np.float64)
    nd = v.ndim - 2
    strides = strides or [1] * nd
    dilations = dilations or [1] * nd
    pads = pads or [0] * (2 * nd)
    output_padding = output_padding or [0] * nd
    n, c_in = v.shape[:2]
    per_in, per_out = c_in // group, k.shape[1]
    ins, kern = v.shape[2:], k.shape[2:]
    full = [strides[d] * (ins[d] - 1) + output_padding[d] + (kern[d] - 1) * dilations[d] + 1
            for d in range(nd)]
    out = np.zeros((n, group * per_out, *full))
    for g in range(group):
        xg = v[:, g * per_in:(g + 1) * per_in]                     # [N, C/g, *in]
        wg = k[g * per_in:(g + 1) * per_in]                        # [C/g, M/g, *kernel]
        for tap in itertools.product(*(range(s) for s in kern)):
            contrib = np.einsum("nc...,cm->nm...", xg, wg[(slice(None), slice(None)) + tap])
            where = tuple(slice(tap[d] * dilations[d],
                                tap[d] * dilations[d] + strides[d] * (ins[d] - 1) + 1,
                                strides[d]) for d in range(nd))
            out[(slice(None), slice(g * per_out, (g + 1) * per_out)) + where] += contrib
    crop = tuple(slice(pads[d], full[d] - pads[nd + d]) for d in range(nd))
    out = out[(slice(None), slice(None)) + crop]
    if b is not None:
        out += np.asarray(b, np.float64).reshape((1, -1) + (1,) * nd)
    return out


# -- GridSample (2-D) -------------------------------------------------------------------------

def _unnormalize(g: np.ndarray, size: int, align: bool) -> np.ndarray:
    """Grid value in [-1, 1] -> pixel coordinate: -1 and 1 are the centers of the corner pixels
    (align_corners) or their outer edges."""
    return (g + 1) * (size - 1) / 2 if align else ((g + 1) * size - 1) / 2


def _reflected(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``v`` reflected by the borders ``lo`` and ``hi`` until it is within them (a period of
    ``2 (hi - lo)``: -3.5 by [-1, 1] -> 1.5 -> 0.5)."""
    span = hi - lo
    if span == 0:
        return np.full_like(v, lo)
    t = np.mod(v - lo, 2 * span)
    return lo + np.where(t <= span, t, 2 * span - t)


def _padded(v: np.ndarray, size: int, padding: str, align: bool) -> np.ndarray:
    """A coordinate after the padding mode: border clips to [0, size - 1]; reflection reflects
    by the borders (pixel centers 0 and size - 1 with align_corners, else the edges -0.5 and
    size - 0.5), then clips; zeros leaves it."""
    if padding == "border":
        return np.clip(v, 0, size - 1)
    if padding == "reflection":
        lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
        return np.clip(_reflected(v, lo, hi), 0, size - 1)
    return v


def _keys_cubic(d: np.ndarray, a: float = -0.75) -> np.ndarray:
    """Keys' cubic convolution kernel with A = -0.75 at distance ``d``."""
    d = np.abs(d)
    near = (a + 2) * d ** 3 - (a + 3) * d ** 2 + 1
    far = a * d ** 3 - 5 * a * d ** 2 + 8 * a * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def grid_sample_2d(x: np.ndarray, grid: np.ndarray, *, mode: str, padding: str,
                   align: bool) -> np.ndarray:
    """GridSample of X [N, C, H, W] at grid [N, Ho, Wo, 2] ((x, y) normalized to [-1, 1]):
    [N, C, Ho, Wo], float64, as torch.nn.functional.grid_sample (which the ONNX definition
    refers to) samples.

    ``nearest`` (half to even) and ``linear`` sample at the coordinate after the padding mode
    (:func:`_padded`), reading 0 outside the image; ``cubic`` (Keys, A = -0.75) takes the 4 x 4
    pixels around the unpadded coordinate and applies the padding mode to each pixel's index
    (border: the nearest edge pixel; reflection: the reflected pixel; zeros: 0). onnx.reference
    clips the coordinate itself first under border padding, which moves cubic samples within
    a pixel of the edges.
    """
    v = np.asarray(x, np.float64)
    g = np.asarray(grid, np.float64)
    n_, _, height, width = v.shape
    cx = _unnormalize(g[..., 0], width, align)                     # [N, Ho, Wo]
    cy = _unnormalize(g[..., 1], height, align)
    batch = np.arange(n_).reshape(-1, 1, 1)

    def read(iy, ix):
        """Pixels [N, C, Ho, Wo] at integer (float-valued) indices; 0 outside the image."""
        iy, ix = iy.astype(np.int64), ix.astype(np.int64)
        inside = (iy >= 0) & (iy < height) & (ix >= 0) & (ix < width)
        got = v[batch, :, np.clip(iy, 0, height - 1), np.clip(ix, 0, width - 1)]
        return np.where(inside[:, None], np.moveaxis(got, -1, 1), 0.0)

    if mode == "nearest":
        return read(np.rint(_padded(cy, height, padding, align)),
                    np.rint(_padded(cx, width, padding, align)))
    if mode == "linear":
        py, px = _padded(cy, height, padding, align), _padded(cx, width, padding, align)
        y0, x0 = np.floor(py), np.floor(px)
        out = 0.0
        for dy, dx in itertools.product((0, 1), (0, 1)):
            weight = (1 - np.abs(py - (y0 + dy))) * (1 - np.abs(px - (x0 + dx)))
            out = out + weight[:, None] * read(y0 + dy, x0 + dx)
        return out
    if mode == "cubic":
        y0, x0 = np.floor(cy), np.floor(cx)
        out = 0.0
        for dy, dx in itertools.product((-1, 0, 1, 2), (-1, 0, 1, 2)):
            weight = _keys_cubic(cy - (y0 + dy)) * _keys_cubic(cx - (x0 + dx))
            out = out + weight[:, None] * read(_padded(y0 + dy, height, padding, align),
                                               _padded(x0 + dx, width, padding, align))
        return out
    raise ValueError(f"mode {mode!r}")
