"""The evaluator's compiled float32 kernels (``_ckernels.c``), and when they apply.

``_ckernels`` is an optional extension built at install where a C compiler is (like the wire
decoder's ``_cdecode``); without it, or with ``ONEMODEL_PURE_PYTHON=1`` in the environment (read
at each call), every function here returns None and the callers compute with numpy. The two
paths compute the same operators (ONNX Part 1, Clause 11); float32 results agree within float32
rounding, not bit for bit: sums are taken in another order, and exponentials are within 1.02 ulp
(1 ulp but at 14 float32 of [-110, 0] where the build with fused multiply-adds is 1.0103 off,
found by checking every float32 there).

* :func:`conv2d`: Conv of one group over 1 or 2 spatial axes (any strides and dilations,
  non-negative leading pads), optionally with Relu
  applied to the result; not for a 1x1 kernel, which is one matrix product that BLAS computes
  faster (measured: 256 -> 64 channels at 56x56, 1.6 ms against 3.0). It computes each block of 6
  output channels by 16 output columns in registers from a zero-padded copy of one sample, without
  im2col columns: 2-3x faster than columns and a BLAS product for the channel counts of small and
  mid-sized CNNs.
* :func:`layer_norm`: LayerNormalization of float32 rows in three passes over each row, in the
  cache (numpy takes six over the whole tensor).
* :func:`attention`: the fused attention chain MatMul -> Softmax -> MatMul, six query rows at
  a time with their scores in registers and the cache.
* :func:`bias_relu`: a MatMul's bias added and Relu applied in one pass (also Relu alone).
* :func:`exp_rows`: Softmax's exponentials shifted by each row's maximum, and their row sums, in
  one pass over a row (numpy takes three, and computes float32 ``exp`` without SIMD on CPUs
  without AVX-512).
"""

from __future__ import annotations

import os

import numpy as np

try:
    from . import _ckernels as _C
    C_ERROR = None
except ImportError as exc:  # not built (no compiler at install), or not loadable
    import importlib.util

    _C = None
    C_ERROR = (f"onemodel/evaluate/_ckernels is built but cannot be loaded: {exc}"
               if importlib.util.find_spec(f"{__package__}._ckernels") is not None else
               "onemodel/evaluate/_ckernels.c was not built at install (no C compiler, or its "
               "build failed: pip install -v shows why)")


def enabled() -> bool:
    """Whether the compiled kernels are built and not turned off by ``ONEMODEL_PURE_PYTHON=1``."""
    return _C is not None and os.environ.get("ONEMODEL_PURE_PYTHON") != "1"


def _f32(a) -> bool:
    return isinstance(a, np.ndarray) and a.dtype == np.float32


def _act(relu: bool, silu: bool) -> int:
    """The activation code of the compiled Conv kernels: 0 none, 1 relu, 2 SiLU."""
    return 2 if silu else 1 if relu else 0


#: Output columns below which :func:`conv2d` computes a taller-than-wide convolution transposed
#: (its register tiles are 8 or 16 output columns wide).
NARROW_OUTPUT = 8


def conv2d(x, w, b, begin, out, strides, dilations, relu: bool = False, silu: bool = False):
    """Conv of one group (ONNX Conv, Clause 11 operator semantics), or None where it does not
    apply (then the caller computes it).

    Args: ``x`` [N, C, *spatial] and ``w`` [M, C, *kernel] float32 (1 or 2 spatial axes), ``b``
    [M] float32 or None; ``begin``: the leading pads per spatial axis (>= 0; the trailing pads
    are implied by ``out``, the output extents); ``strides`` and ``dilations``
    per spatial axis; a kernel of more than one element. ``relu``: max(y, 0) applied to the
    result (NaN stays NaN); ``silu``: ``y * sigmoid(y)`` instead (:func:`sigmoid`'s bits,
    then the product: the values of Conv -> Sigmoid -> Mul). Returns y [N, M, *out]
    float32, C-contiguous. Sums over (channel, kernel row, kernel column) in that order,
    then the bias; for an output narrower than :data:`NARROW_OUTPUT` columns and taller
    than wide (a ``[5, 1]`` kernel over ``[512, 1]``: magika), the kernel computes the
    transposed convolution (height and width swapped, the sums over (channel, kernel
    column, kernel row)) and the result is transposed back: its tiles of 16 output columns
    would otherwise compute 8 columns to keep 1 (121 ms against 9 ms for numpy's products,
    measured; 1-wide axes transpose without a copy). Raises
    MemoryError when the padded copy of a sample cannot be allocated.
    """
    nd = len(out)
    if not (enabled() and nd in (1, 2) and _f32(x) and _f32(w) and (b is None or _f32(b))
            and x.ndim == nd + 2 and w.ndim == nd + 2 and x.shape[1] == w.shape[1]
            and (b is None or b.shape == (w.shape[0],))
            and min(begin) >= 0 and x.size and w.size
            and min(out) > 0 and w[0, 0].size > 1):
        return None
    N, C = x.shape[:2]
    M = w.shape[0]
    if nd == 1:  # a row of one
        sp, kernel = (1,) + x.shape[2:], (1,) + w.shape[2:]
        begin, out, strides, dilations = ((0,) + tuple(begin), (1,) + tuple(out),
                                          (1,) + tuple(strides), (1,) + tuple(dilations))
    elif out[1] < NARROW_OUTPUT and out[0] > out[1]:  # tall and narrow: the transpose
        y = conv2d(np.ascontiguousarray(x.transpose(0, 1, 3, 2)),
                   np.ascontiguousarray(w.transpose(0, 1, 3, 2)), b, begin[::-1], out[::-1],
                   strides[::-1], dilations[::-1], relu, silu)
        return np.ascontiguousarray(y.transpose(0, 1, 3, 2))
    else:
        sp, kernel = x.shape[2:], w.shape[2:]
    y = np.empty((N, M) + tuple(out[-nd:]), dtype=np.float32)
    dims = (N, C, sp[0], sp[1], M, kernel[0], kernel[1], begin[0], begin[1], out[0], out[1],
            strides[0], strides[1], dilations[0], dilations[1])
    _C.conv2d(np.ascontiguousarray(x), np.ascontiguousarray(w),
              None if b is None else np.ascontiguousarray(b), y, dims, _act(relu, silu))
    return y


def dwconv2d(x, w, b, begin, out, strides, dilations, relu: bool = False,
             silu: bool = False):
    """The depthwise Conv (``group`` = C = M: one filter ``w[c, 0]`` per channel), or None
    where it does not apply (then the caller computes it). Arguments as :func:`conv2d`'s, with
    ``w`` [C, 1, *kernel]; 1 or 2 spatial axes. Returns y [N, C, *out] float32,
    C-contiguous. Sums over (kernel row, kernel column), then the bias. The numpy path takes
    each channel as a group of one product (PP-OCRv4 det's 30 depthwise Convs: 38 ms a run)."""
    nd = len(out)
    if not (enabled() and nd in (1, 2) and _f32(x) and _f32(w) and (b is None or _f32(b))
            and x.ndim == nd + 2 and w.ndim == nd + 2 and w.shape[1] == 1
            and w.shape[0] == x.shape[1] and (b is None or b.shape == (w.shape[0],))
            and min(begin) >= 0 and x.size and w.size and min(out) > 0):
        return None
    N, C = x.shape[:2]
    if nd == 1:  # a row of one
        sp, kernel = (1,) + x.shape[2:], (1,) + w.shape[2:]
        begin, out, strides, dilations = ((0,) + tuple(begin), (1,) + tuple(out),
                                          (1,) + tuple(strides), (1,) + tuple(dilations))
    else:
        sp, kernel = x.shape[2:], w.shape[2:]
    y = np.empty((N, C) + tuple(out[-nd:]), dtype=np.float32)
    dims = (N, C, sp[0], sp[1], C, kernel[0], kernel[1], begin[0], begin[1], out[0], out[1],
            strides[0], strides[1], dilations[0], dilations[1])
    _C.dwconv2d(np.ascontiguousarray(x), np.ascontiguousarray(w),
                None if b is None else np.ascontiguousarray(b), y, dims, _act(relu, silu))
    return y


def exp_rows(a, out):
    """``exp(a - row maximum)`` into ``out`` and the row sums, for Softmax along the last axis;
    or None where it does not apply (then the caller computes it).

    Args: ``a`` float32 [..., n] and ``out`` float32 of its shape, both C-contiguous (``out``
    writable; it may be ``a``). Returns ``(out, sums)``, ``sums`` float32 [...]. As
    ``exp(a - max(a))``: a row holding NaN comes out NaN, one whose maximum is -inf NaN, one
    whose maximum is +inf NaN there and 0 elsewhere (its sum NaN, so Softmax's row is NaN).
    """
    if not (enabled() and _f32(a) and _f32(out) and a.shape == out.shape and a.ndim >= 1
            and a.shape[-1] and a.flags.c_contiguous and out.flags.c_contiguous
            and out.flags.writeable):
        return None
    n = a.shape[-1]
    sums = np.empty(a.shape[:-1], dtype=np.float32)
    _C.exp_rows(a, out, sums, a.size // n, n)
    return out, sums


def layer_norm(w, scale, bias, axis: int, epsilon: float, residual=None):
    """LayerNormalization (Clause 11 operator semantics, stash type float32) of ``w`` over its
    axes from ``axis`` on, or None where it does not apply (then the caller computes it).

    Args: ``w`` float32 [..., *normalized], C-contiguous; ``scale`` and ``bias`` (or None)
    float32 broadcasting to the normalized shape with as many elements (so their elements are
    the normalized shape's, in order). Returns ``(y, mean, inv_std_dev)``: y of ``w``'s shape,
    mean and inv_std_dev float32 of ``w``'s shape with the normalized axes 1. Per row: mean and
    variance by two passes (sums in double, each rounded to float32 once: a row whose float32
    sum would overflow stays finite), ``inv = 1 / sqrt(var + epsilon)``, ``y = (x - mean) * inv
    * scale + bias``. With ``residual`` (float32 of ``w``'s shape: C-contiguous, or with any
    strides but packed along the last axis when only the last axis is normalized, as a
    Transpose's view is) the rows normalized are ``w + residual`` rounded to float32 (Add's
    result), a row at a time: LayerNormalization(Add(w, residual)).
    """
    norm = w.shape[axis:]
    n = 1
    for d in norm:
        n *= d
    ok = (enabled() and _f32(w) and w.flags.c_contiguous and w.size and n > 1
          and (residual is None or (_f32(residual) and residual.shape == w.shape
                                    and (residual.flags.c_contiguous
                                         or (axis == w.ndim - 1 and residual.flags.aligned
                                             and residual.strides[-1] == 4))))
          and all(_f32(v) and v.size == n and v.ndim <= len(norm)
                  and all(d in (1, e) for d, e in zip(v.shape[::-1], norm[::-1]))
                  for v in ((scale,) if bias is None else (scale, bias))))
    if not ok:
        return None
    rows = w.size // n
    y = np.empty_like(w)
    stat = w.shape[:axis] + (1,) * len(norm)
    mean = np.empty(stat, dtype=np.float32)
    inv = np.empty(stat, dtype=np.float32)
    _C.layer_norm(w, np.ascontiguousarray(scale),
                  None if bias is None else np.ascontiguousarray(bias), y, mean, inv, rows, n,
                  float(epsilon),
                  residual.reshape(rows, n) if residual is not None and residual.flags.c_contiguous
                  else residual)
    return y, mean, inv


def attention(a, b, v, scale_a=None, scale_b=None, layout=None):
    """``MatMul(Softmax(MatMul(a, b), axis=-1), v)`` of float32 stacks (the attention chain of
    :mod:`.fusion`), or None where it does not apply (then the caller computes it).

    Args: ``a`` [..., m, d], ``b`` [..., d, n], ``v`` [..., n, dv] float32 of one batch shape
    (3 axes or more), dv <= 128, any strides (views are read in place: a head at a time, each
    operand is copied packed into a scratch buffer); ``scale_a``, ``scale_b``: None, or a
    float32 value (a Python float holding one) each element of ``a`` / ``b`` is multiplied by
    first, rounded to float32 as ``Mul`` rounds it (the scaling of q and k before their
    product); ``layout``: None, or a permutation of the result's axes with the last one last
    (a Transpose's ``perm``) in whose order the result is laid out in memory, so that that
    Transpose of it is a packed array (any other permutation: ignored). Returns [..., m, dv]
    float32, C-contiguous or laid out by ``layout``. Per head, six query rows at a time (in
    registers and the cache): the n scores (sums over d in order), exponentials of the scores
    shifted by the row's maximum (as :func:`exp_rows`), their sum, the probabilities (divided
    by it, as Softmax rounds them) and their products with ``v`` (each a sum over n in order);
    no score tensor is stored.
    """
    if not (enabled() and _f32(a) and _f32(b) and _f32(v) and a.ndim >= 3
            and a.ndim == b.ndim == v.ndim and a.shape[:-2] == b.shape[:-2] == v.shape[:-2]
            and a.shape[-1] == b.shape[-2] and b.shape[-1] == v.shape[-2]
            and 1 <= v.shape[-1] <= 128 and a.size and b.size and v.size
            and all(x.flags.aligned for x in (a, b, v))):
        return None
    shape = a.shape[:-1] + v.shape[-1:]
    if (layout is not None and sorted(layout) == list(range(a.ndim))
            and layout[-1] == a.ndim - 1):
        base = np.empty([shape[i] for i in layout], dtype=np.float32)
        out = base.transpose([list(layout).index(i) for i in range(a.ndim)])
    else:
        out = np.empty(shape, dtype=np.float32)
    _C.attention(a, b, v, out, scale_a, scale_b)
    return out


def sigmoid(x):
    """Sigmoid ``1 / (1 + exp(-x))`` of float32 ``x`` (any shape, C-contiguous), or None where
    it does not apply (then the caller computes it). Computed from ``e = exp(-|x|)`` (the
    exponential of :func:`exp_rows`, within 1 ulp) as ``1 / (1 + e)`` for x >= 0 and
    ``e / (1 + e)`` below, as the numpy path does, in one pass (numpy's takes four: 31 ms of
    nudenet's 168 ms); NaN stays NaN, -inf gives 0, +inf 1. Returns a new float32 array."""
    if not (enabled() and _f32(x) and x.flags.c_contiguous and x.size):
        return None
    y = np.empty_like(x)
    _C.sigmoid(x, y, x.size)
    return y


def bias_relu(x, bias, relu: bool, out=None):
    """``x + bias`` (Add, the bias broadcast over the last axis) and then, when ``relu``,
    ``max(., 0)`` (Relu: NaN stays NaN, -0 becomes +0, as ``numpy.maximum`` gives them), in one
    pass; or None where it does not apply (then the caller computes it).

    Args: ``x`` float32 C-contiguous, at least 1-D with a last axis of n >= 1; ``bias`` None or
    float32 of n values whose shape broadcasts to ``x`` along the last axis only ([n], [1, n],
    ...); ``out`` None (a new array) or ``x`` itself (in place). Returns the float32 array of
    ``x``'s shape. numpy's maximum with a scalar 0 has no SIMD loop on CPUs without AVX-512
    (0.39 ms for [4096, 128] on an AVX2 machine, 0.06 here with the Add).
    """
    if not (enabled() and _f32(x) and x.flags.c_contiguous and x.ndim and x.size
            and (out is None or out is x)
            and (bias is None or (_f32(bias) and bias.ndim <= x.ndim
                                  and bias.shape[-1:] == x.shape[-1:]
                                  and bias.size == x.shape[-1]))):
        return None
    n = x.shape[-1]
    y = np.empty_like(x) if out is None else out
    _C.bias_relu(x, None if bias is None else np.ascontiguousarray(bias).reshape(n), y,
                 x.size // n, n, bool(relu))
    return y
