"""Convolutions (ONNX 1-2): Conv and ConvTranspose, 1-D to N-D, with groups, dilations, strides,
explicit pads or ``auto_pad``.

Conv of one group, float32 (float16 and bfloat16 widened to it), 1-D or 2-D with a kernel of
more than one element, runs in the compiled kernel of :mod:`..ckernels` when it is built, and so
does the depthwise Conv (as many groups as input and output channels). Otherwise
Conv gathers the receptive fields as a strided view of the padded input and copies it once into
columns [N, group, C/group * kernel, output positions] (im2col), then multiplies the weights with
them in one batched matrix product, which leaves the result in NCHW order; a 1x1 convolution with
unit strides is a plain matrix product. With unit strides and non-negative pads (most
convolutions), the columns are instead contiguous slices of the padded input, one per kernel tap
(:func:`_shifted_conv`), which copies several times faster than gathering a strided view; the
products and sums are the same. With one group the product is taken transposed and the result
is a channels-last strided view (:func:`_shifted_conv_last`). ConvTranspose multiplies first
and then adds each kernel tap's contribution into the output (col2im), one vectorized addition
per kernel position.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ... import limits
from ...errors import EvaluationError, InvalidModelError, UnsupportedError
from ...operators import geometry, kernel
from .. import ckernels
from ..memory import check_allocation, check_array
from ._util import back, wide_all
from .linalg import column_blocks_product

#: Bytes of im2col columns gathered at once by Conv (about a level-2 cache).
_COLUMN_BYTES = 1 << 20


def conv_pads(auto_pad: str, in_shape, kernel, strides, dilations, pads,
              ceil_mode: bool = False):
    """(begin pads, end pads, output extents) of a windowed operator over ``in_shape``
    (:mod:`onemodel.operators.geometry`).

    ``auto_pad`` NOTSET uses ``pads`` ([b1, b2, ..., e1, e2, ...]); SAME_UPPER/SAME_LOWER pad so
    that the output extent is ceil(in / stride), the odd pad at the end (UPPER) or the beginning
    (LOWER); VALID pads nothing. ``ceil_mode`` (the poolings, with NOTSET) takes the ceiling.
    """
    n = len(in_shape)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        return geometry.same_pads(auto_pad, in_shape, kernel, strides, dilations)
    if auto_pad == "VALID":
        begin = [0] * n
        end = [0] * n
    elif auto_pad in ("NOTSET", ""):
        pads = list(pads) if pads else [0] * (2 * n)
        if len(pads) != 2 * n:
            raise EvaluationError(f"pads {pads} has not 2 x {n} values")
        begin, end = pads[:n], pads[n:]
    else:
        raise UnsupportedError(f"auto_pad {auto_pad!r} is not NOTSET, SAME_UPPER, SAME_LOWER or "
                               f"VALID")
    out = geometry.window_counts(auto_pad, in_shape, kernel, strides, dilations, begin, end,
                                 ceil_mode)
    return begin, end, out


def _pad_to(x, begin, needed, fill):
    """Pad (or crop) the spatial axes of x [N, C, ...] to ``begin`` leading and ``needed`` total."""
    sp = x.shape[2:]
    n = len(sp)
    crop = [slice(None), slice(None)]
    width = [(0, 0), (0, 0)]
    for i in range(n):
        b = begin[i]
        e = needed[i] - sp[i] - b
        crop.append(slice(max(-b, 0), sp[i] - max(-e, 0) if e < 0 else None))
        width.append((max(b, 0), max(e, 0)))
    x = x[tuple(crop)]
    if any(w != (0, 0) for w in width):
        if fill == 0:
            x = np.pad(x, width)
        else:
            x = np.pad(x, width, constant_values=fill)
    return x


def padded(x, kernel, strides, dilations, begin, out, fill=0):
    """x [N, C, *spatial] padded with ``fill`` (``begin`` leading pads) or cropped so that its
    spatial extents are exactly what ``out`` windows need. Raises InvalidModelError when no
    window fits, UnsupportedError past ``limits.MAX_ELEMENT_COUNT`` elements."""
    if any(o <= 0 for o in out):
        raise EvaluationError(f"the window does not fit: output extents {out}")
    if math.prod(x.shape[:2]) * math.prod(out) * math.prod(kernel) > limits.MAX_ELEMENT_COUNT:
        raise UnsupportedError("the receptive fields have more than 2^60 elements")
    needed = [geometry.span(o, k, s, d) for o, s, k, d in zip(out, strides, kernel, dilations)]
    if tuple(needed) != x.shape[2:] or any(begin):
        check_array(x.shape[:2] + tuple(needed), x.itemsize, "the padded input")
    return _pad_to(x, begin, needed, fill)


def windows(x, kernel, strides, dilations, begin, out, fill=0):
    """A strided view [N, C, *kernel, *out] of the receptive fields of x [N, C, *spatial]:
    element ``[n, c, k..., o...]`` is the input at ``o * stride + k * dilation - begin``.

    ``begin`` pads lead each spatial axis; the end is padded (or cropped) to what ``out`` needs.
    Padding uses ``fill``.
    """
    xp = np.ascontiguousarray(padded(x, kernel, strides, dilations, begin, out, fill))
    st = xp.strides
    shape = xp.shape[:2] + tuple(kernel) + tuple(out)
    strides_v = st[:2] + tuple(st[2 + i] * d for i, d in enumerate(dilations)) + \
        tuple(st[2 + i] * s for i, s in enumerate(strides))
    return as_strided(xp, shape=shape, strides=strides_v, writeable=False)


def taps(xp, kernel, strides, dilations, out):
    """For each kernel position (in row-major order), the view [N, C, *out] of the padded input
    ``xp`` (see :func:`padded`) that this position reads."""
    for kidx in np.ndindex(*kernel):
        sl = (slice(None), slice(None)) + tuple(
            slice(k * d, k * d + (o - 1) * s + 1, s)
            for k, d, o, s in zip(kidx, dilations, out, strides))
        yield kidx, xp[sl]


def _geometry(ctx, x, kernel):
    n = x.ndim - 2
    strides = ctx.attr("strides") or [1] * n
    dilations = ctx.attr("dilations") or [1] * n
    if len(strides) != n or len(dilations) != n or len(kernel) != n:
        raise EvaluationError(f"kernel_shape, strides or dilations do not have {n} values")
    if any(s < 1 for s in strides) or any(d < 1 for d in dilations):
        raise InvalidModelError("strides and dilations must be positive")
    return strides, dilations


@kernel("Conv")
def conv(ctx, x, w, b=None):
    return _conv(ctx, x, w, b, relu=False)


def conv_relu(ctx, x, w, b=None):
    """``Relu(Conv(x, w, b))`` (the plan-time fusion of :mod:`..fusion`; ``ctx`` the Conv's):
    the compiled kernel applies the Relu to each output while it is in a register; elsewhere
    the Relu kernel's ``max(y, 0)`` follows the Conv. The same values as the two nodes."""
    return _conv(ctx, x, w, b, relu=True)


def conv_silu(ctx, x, w, b=None):
    """``Mul(y, Sigmoid(y))`` of ``y = Conv(x, w, b)`` (SiLU, the plan-time fusion of
    :mod:`..fusion`; ``ctx`` the Conv's): the compiled kernels apply it to each output while it
    is in a register, with the Sigmoid kernel's bits and the product Mul rounds; elsewhere
    the Sigmoid and Mul kernels' computations follow the Conv. The same values as the three
    nodes."""
    return _conv(ctx, x, w, b, relu=False, silu=True)


def _conv(ctx, x, w, b, relu: bool, silu: bool = False):
    """Conv, then max(y, 0) when ``relu``, y * sigmoid(y) when ``silu``."""
    if silu and x.dtype != np.float32:  # each step rounded to the type, as the nodes do
        from .activations import sigmoid_values
        y = _conv(ctx, x, w, b, relu=False)
        return y * sigmoid_values(y)
    if x.ndim < 3:
        raise EvaluationError(f"Conv input has rank {x.ndim}; at least 3 expected")
    group = ctx.attr("group")
    kernel = list(ctx.attr("kernel_shape") or w.shape[2:])
    if tuple(kernel) != tuple(w.shape[2:]):
        raise EvaluationError(f"kernel_shape {kernel} does not match the weights {w.shape}")
    strides, dilations = _geometry(ctx, x, kernel)
    begin, end, out = conv_pads(ctx.attr("auto_pad"), x.shape[2:], kernel, strides,
                                dilations, ctx.attr("pads"))
    N, C = x.shape[:2]
    M = w.shape[0]
    if C != w.shape[1] * group or M % group:
        raise EvaluationError(f"Conv: {C} input channels, weights {w.shape}, group {group}")
    if any(o <= 0 for o in out):  # (before any path: each would fail its own way)
        raise EvaluationError(f"the window does not fit: output extents {out} (input "
                              f"{list(x.shape[2:])}, kernel {kernel}, pads {begin + end}, "
                              f"strides {strides}, dilations {dilations})")
    if b is not None and b.shape != (M,):
        raise EvaluationError(f"Conv bias of shape {list(b.shape)} is not [{M}] (one value a "
                              f"output channel)")
    args, dt = wide_all(x, w) if b is None else wide_all(x, w, b)
    x, w = args[0], args[1]
    check_array((N, M) + tuple(out), x.itemsize, "the Conv output")
    # (a padded copy of one sample: the compiled kernel's scratch, the shifted products' buffer)
    check_allocation(C * math.prod(i + max(p, 0) + max(e, 0) for i, p, e in
                                   zip(x.shape[2:], begin, end)) * x.itemsize,
                     "the padded copy of one sample")
    if group == 1:
        y = ckernels.conv2d(x, w, args[2] if b is not None else None, begin, out, strides,
                            dilations, relu=relu, silu=silu)
        if y is not None:  # the compiled kernel applies
            return back(y, dt)
    elif group == C == M:  # depthwise
        y = ckernels.dwconv2d(x, w, args[2] if b is not None else None, begin, out, strides,
                              dilations, relu=relu, silu=silu)
        if y is not None:
            return back(y, dt)
    y = _conv_numpy(x, w, args, dt, group, kernel, strides, dilations, begin, end, out)
    if silu:  # (the Sigmoid and Mul kernels' computations)
        from .activations import sigmoid_values
        return y * sigmoid_values(y)
    return np.maximum(y, np.zeros((), y.dtype), out=y) if relu else y


def _conv_numpy(x, w, args, dt, group, kernel, strides, dilations, begin, end, out):
    """Conv by numpy products (the module docstring says how); ``args`` the widened operands
    (x, w[, b]), ``dt`` the type to return."""
    N, C = x.shape[:2]
    M = w.shape[0]
    b = args[2] if len(args) > 2 else None
    Cg, Mg, K, P = C // group, M // group, math.prod(kernel), math.prod(out)
    wg = w.reshape(group, Mg, Cg * K)
    unit = all(s == 1 for s in strides)
    if K == 1 and unit and not any(begin) and not any(end):
        y = column_blocks_product(wg, x.reshape(N, group, Cg, P))  # [N, g, Mg, P]
    elif (unit and min(begin) >= 0 and min(end) >= 0
          and _shifted_waste(out, begin, end, x.shape[2:]) <= _SHIFTED_WASTE):
        if group == 1:
            y = _shifted_conv_last(x, w, b, kernel, dilations, begin, end, out)
        else:
            y = _shifted_conv(x, w, b, group, kernel, dilations, begin, end, out)
        return back(y, dt)
    else:
        # im2col: [N, C, *k, *out] -> [N, g, Cg*K, P], copied a few samples at a time so that
        # the columns stay in the cache while they are multiplied
        win = windows(x, kernel, strides, dilations, begin, out)
        step = max(1, _COLUMN_BYTES // max(C * K * P * x.itemsize, 1))
        check_allocation(min(step, N) * C * K * P * x.itemsize, "the Conv columns")
        if step >= N:
            y = column_blocks_product(wg, win.reshape(N, group, Cg * K, P))
        else:
            y = np.empty((N, group, Mg, P), dtype=np.result_type(wg, x))
            for s in range(0, N, step):
                column_blocks_product(wg, win[s:s + step].reshape(-1, group, Cg * K, P),
                                      out=y[s:s + step])
    y = y.reshape((N, M) + tuple(out))
    if b is not None:
        y = y + b.reshape((1, M) + (1,) * len(out))
    return back(np.ascontiguousarray(y), dt)


#: Conv with unit strides runs as shifted products (:func:`_shifted_conv`) when the padded rows it
#: computes and drops are at most this fraction more than the output positions.
_SHIFTED_WASTE = 0.5


def _shifted_waste(out, begin, end, spatial) -> float:
    """Fraction of extra output positions :func:`_shifted_conv` computes: it computes whole
    padded rows (every axis but the first at its padded extent)."""
    padded_rows = math.prod(i + b + e for i, b, e in zip(spatial[1:], begin[1:], end[1:]))
    return padded_rows / max(math.prod(out[1:]), 1) - 1


def _shifted_conv(x, w, b, group, kernel, dilations, begin, end, out):
    """Conv with unit strides and non-negative pads: y [N, M, *out], C-contiguous, the bias
    ``b`` (or None) added.

    The input is padded into a flat buffer per sample ``[C, prod(padded extents) + tail]``; with
    unit strides the receptive field of output position ``o`` at kernel tap ``k`` is the padded
    input at flat index ``o . pitch + k . dilation . pitch`` (``pitch``: the padded extents'
    row-major strides), so the columns of one tap are a contiguous slice of the buffer, shifted
    by the tap's offset. Columns ``[g, K, Cg, L]`` (L: the first axis's output extent times the
    padded rows) are copied as K contiguous slices, a few samples at a time so that they stay in
    the cache while they are multiplied (im2col through a strided view gathers element by
    element and is several times slower); each chunk's product is copied to the output with the
    bias while it is in the cache, the padded rows' extra positions dropped. Each output sums
    the same products as im2col (taps in row-major order, channels within each tap), in float32
    or float64 as given. (The product taken transposed, columns^T by weights^T, is faster in
    OpenBLAS for 16 output channels, but putting its rows back in channel order costs as much as
    it saves, measured.)
    """
    N, C = x.shape[:2]
    M = w.shape[0]
    Cg, Mg = C // group, M // group
    sp = x.shape[2:]
    ext = [i + p + e for i, p, e in zip(sp, begin, end)]
    pitch = [math.prod(ext[i + 1:]) for i in range(len(ext))]
    L = out[0] * pitch[0]
    offsets = [sum(k * d * p for k, d, p in zip(kidx, dilations, pitch))
               for kidx in np.ndindex(*kernel)]
    K = len(offsets)
    size = math.prod(ext) + offsets[-1]
    # weights [M, Cg, *k] -> [g, Mg, K * Cg]: tap-major, as the columns are laid out
    wt = np.ascontiguousarray(w.reshape(group, Mg, Cg, K).transpose(0, 1, 3, 2))
    wt = wt.reshape(group, Mg, K * Cg)
    step = max(1, min(N, _COLUMN_BYTES // max(C * K * L * x.itemsize, 1)))
    check_allocation(step * C * (size + K * L) * x.itemsize, "the Conv columns")
    buf = np.zeros((step, C, size), dtype=x.dtype)
    inner = buf[:, :, :math.prod(ext)].reshape((step, C) + tuple(ext))
    inner = inner[(slice(None), slice(None)) + tuple(slice(p, p + i) for p, i in zip(begin, sp))]
    cols = np.empty((step, group, K, Cg, L), dtype=x.dtype)
    part = np.empty((step, group, Mg, L), dtype=np.result_type(x, w))
    y = np.empty((N, M) + tuple(out), dtype=part.dtype)
    # [n, g, Mg, out0 * padded rows] -> [n, M, out0, *padded rows], extra positions dropped
    view = part.reshape((step, M, out[0]) + tuple(ext[1:]))
    view = view[(slice(None),) * 3 + tuple(slice(0, o) for o in out[1:])]
    bias = None if b is None else b.reshape((1, M) + (1,) * len(out))
    for s in range(0, N, step):
        n = min(step, N - s)
        inner[:n] = x[s:s + n]
        src = buf[:n].reshape(n, group, Cg, size)
        for t, off in enumerate(offsets):
            cols[:n, :, t] = src[..., off:off + L]
        np.matmul(wt, cols[:n].reshape(n, group, K * Cg, L), out=part[:n])
        if bias is None:  # to the output while the product is in the cache
            np.copyto(y[s:s + n], view[:n])
        else:
            np.add(view[:n], bias, out=y[s:s + n])
    return y


def _shifted_conv_last(x, w, b, kernel, dilations, begin, end, out):
    """Conv of one group as :func:`_shifted_conv`, the result channels-last in memory.

    Returns y [N, M, *out] (the bias ``b`` or None added) as a strided view of an array
    [N, out0, *padded rows, M]: the product is taken transposed, columns^T [L, K*C] by
    weights^T [K*C, M] (the columns laid out as in :func:`_shifted_conv`, read transposed),
    which OpenBLAS computes faster than weights by columns for few output channels (about 1.3x
    for 16, measured), and needs no reordering afterwards; the elementwise kernels that follow
    keep the layout (numpy's K order). A channels-last input is moved into the channels-first
    padded buffer a few samples at a time, in the cache (columns^T gathered from a
    channels-last buffer copy rows of C values and multiply more slowly, measured). Each output
    sums the same products as im2col (taps in row-major order, channels within each tap).
    """
    N, C = x.shape[:2]
    M = w.shape[0]
    nd = len(out)
    sp = x.shape[2:]
    ext = [i + p + e for i, p, e in zip(sp, begin, end)]
    pitch = [math.prod(ext[i + 1:]) for i in range(nd)]
    L = out[0] * pitch[0]
    offsets = [sum(k * d * p for k, d, p in zip(kidx, dilations, pitch))
               for kidx in np.ndindex(*kernel)]
    K = len(offsets)
    size = math.prod(ext) + offsets[-1]
    # weights [M, C, *k] -> [K * C, M]: tap-major rows, as the columns^T are laid out
    wt = np.ascontiguousarray(w.reshape(M, C, K).transpose(2, 1, 0)).reshape(K * C, M)
    step = max(1, min(N, _COLUMN_BYTES // max(C * K * L * x.itemsize, 1)))
    check_allocation(step * C * (size + K * L) * x.itemsize, "the Conv columns")
    buf = np.zeros((step, C, size), dtype=x.dtype)
    inner = buf[:, :, :math.prod(ext)].reshape((step, C) + tuple(ext))
    inner = inner[(slice(None), slice(None)) + tuple(slice(p, p + i) for p, i in zip(begin, sp))]
    cols = np.empty((step, K, C, L), dtype=x.dtype)
    yt = np.empty((N, L, M), dtype=np.result_type(x, w))
    for s in range(0, N, step):
        n = min(step, N - s)
        inner[:n] = x[s:s + n]  # from either layout, in the cache
        for t, off in enumerate(offsets):
            cols[:n, t] = buf[:n, :, off:off + L]
        np.matmul(cols[:n].reshape(n, K * C, L).transpose(0, 2, 1), wt, out=yt[s:s + n])
        if b is not None:  # while the product is in the cache
            yt[s:s + n] += b
    # [N, out0 * padded rows, M] -> [N, out0, *padded rows, M], extra positions dropped,
    # channels moved to axis 1 (a view)
    y = yt.reshape((N, out[0]) + tuple(ext[1:]) + (M,))
    y = y[(slice(None),) * 2 + tuple(slice(0, o) for o in out[1:])]
    return np.moveaxis(y, -1, 1)


@kernel("ConvTranspose")
def conv_transpose(ctx, x, w, b=None):
    if x.ndim < 3:
        raise EvaluationError(f"ConvTranspose input has rank {x.ndim}; at least 3 expected")
    group = ctx.attr("group")
    N, C = x.shape[:2]
    if w.shape[0] != C or C % group:
        raise EvaluationError(f"ConvTranspose: {C} input channels, weights {w.shape}, "
                              f"group {group}")
    Mg = w.shape[1]
    M = Mg * group
    kernel = list(ctx.attr("kernel_shape") or w.shape[2:])
    strides, dilations = _geometry(ctx, x, kernel)
    n = len(kernel)
    in_sp = x.shape[2:]
    out_pad = ctx.attr("output_padding") or [0] * n
    auto_pad = ctx.attr("auto_pad")
    out_shape = ctx.attr("output_shape")
    if out_shape:
        out_shape = list(out_shape)[-n:]
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out_shape = [geometry.transposed_same_extent(i, s) for i, s in zip(in_sp, strides)]
    if out_shape:
        # the pads that give out_shape: the extent without pads less the one asked for
        total = [geometry.transposed_extent(i, k, s, d, op_, 0, 0) - o for i, k, s, d, op_, o in
                 zip(in_sp, kernel, strides, dilations, out_pad, out_shape)]
        begin = geometry.split_pads(total, auto_pad)[0]
        out = list(out_shape)
    else:
        pads = ctx.attr("pads") or [0] * (2 * n)
        if len(pads) != 2 * n:
            raise EvaluationError(f"pads {pads} has not 2 x {n} values")
        begin, end = list(pads[:n]), list(pads[n:])
        out = [geometry.transposed_extent(i, k, s, d, op_, pb, pe) for i, k, s, d, op_, pb, pe
               in zip(in_sp, kernel, strides, dilations, out_pad, begin, end)]
    if any(o <= 0 for o in out):
        raise EvaluationError(f"ConvTranspose output extents {out} are not positive")
    if N * M * math.prod(out) > limits.MAX_ELEMENT_COUNT:
        raise UnsupportedError("ConvTranspose output has more than 2^60 elements")
    args, dt = wide_all(x, w) if b is None else wide_all(x, w, b)
    x, w = args[0], args[1]
    Cg, K, P = C // group, math.prod(kernel), math.prod(in_sp)
    # (the extent every tap writes into, before the pads are cropped)
    full = [max(geometry.transposed_extent(i, k, s, d, op_, 0, 0), pb + o) for
            i, k, s, d, op_, pb, o in zip(in_sp, kernel, strides, dilations, out_pad, begin, out)]
    lead = [max(-pb, 0) for pb in begin]  # negative pads extend the output at the front
    check_allocation(N * M * (K * P + math.prod(f + l for f, l in zip(full, lead)))
                     * x.itemsize, "the ConvTranspose columns and output")
    xs = x.reshape(N, group, Cg, P)
    wg = w.reshape(group, Cg, Mg * K)
    # cols[n, g, Mg*K, P] = sum_c w[g, c, :] * x[n, g, c, P]
    cols = np.matmul(wg.transpose(0, 2, 1), xs)
    cols = cols.reshape((N, M) + tuple(kernel) + tuple(in_sp))
    buf = np.zeros((N, M) + tuple(f + l for f, l in zip(full, lead)), dtype=cols.dtype)
    for kidx in np.ndindex(*kernel):
        sl = [slice(None), slice(None)]
        for i in range(n):
            start = lead[i] + kidx[i] * dilations[i]
            sl.append(slice(start, start + (in_sp[i] - 1) * strides[i] + 1, strides[i]))
        buf[tuple(sl)] += cols[(slice(None), slice(None)) + kidx]
    crop = (slice(None), slice(None)) + tuple(
        slice(lead[i] + begin[i], lead[i] + begin[i] + out[i]) for i in range(n))
    y = buf[crop]
    if b is not None:
        y = y + args[2].reshape((1, M) + (1,) * n)
    return back(np.ascontiguousarray(y), dt)


@kernel("CausalConvWithState")
def causal_conv_with_state(ctx, x, w, b=None, past_state=None):
    """CausalConvWithState: a causal depthwise 1-D convolution that carries its state.

    ``x`` [N, C, L], ``w`` [C, 1, k], ``b`` [C] (optional), ``past_state`` [N, C, k-1]
    (optional, zeros when absent). With ``padded = concat(past_state, x)`` on the last axis,
    ``y[n, c, t] = b[c] + sum_j w[c, 0, j] * padded[n, c, t + j]``, then SiLU (``y *
    sigmoid(y)``) when ``activation`` is ``silu`` or ``swish``; ``present_state`` is the last
    k-1 positions of ``padded``. Outputs ``(y [N, C, L], present_state [N, C, k-1])``.
    float16 and bfloat16 are computed in float32 and rounded once per output.
    """
    activation = ctx.attr("activation")
    if activation not in ("none", "silu", "swish"):
        raise UnsupportedError(f"CausalConvWithState activation {activation!r} is not none, "
                               f"silu or swish")
    if x.ndim != 3 or w.ndim != 3 or w.shape[1] != 1 or w.shape[0] != x.shape[1]:
        raise EvaluationError(f"CausalConvWithState: input {x.shape} and weight {w.shape} "
                              f"are not [N, C, L] and [C, 1, k]")
    N, C, L = x.shape
    k = w.shape[2]
    if k < 1:
        raise EvaluationError("CausalConvWithState kernel size is 0")
    if past_state is None:
        past_state = np.zeros((N, C, k - 1), dtype=x.dtype)
    elif past_state.shape != (N, C, k - 1):
        raise EvaluationError(f"CausalConvWithState past_state {past_state.shape} is not "
                              f"{(N, C, k - 1)}")
    if b is not None and b.shape != (C,):
        raise EvaluationError(f"CausalConvWithState bias {b.shape} is not ({C},)")
    padded_x = np.concatenate([past_state, x], axis=2)
    args, dt = wide_all(padded_x, w) if b is None else wide_all(padded_x, w, b)
    p, wk = args[0], args[1][:, 0, :]
    y = np.zeros((N, C, L), dtype=p.dtype)
    for j in range(k):
        y += wk[None, :, j:j + 1] * p[:, :, j:j + L]
    if b is not None:
        y += args[2][None, :, None]
    y = back(y, dt)
    if activation != "none":
        z = y.astype(np.float32) if y.dtype != np.float64 else y
        y = back((z / (1 + np.exp(-z))).astype(z.dtype), dt)
    return y, np.ascontiguousarray(padded_x[:, :, L:])


@kernel("DeformConv")
def deform_conv(ctx, x, w, offset, b=None, mask=None):
    """DeformConv: Conv whose kernel taps sample the input at learned offsets, N-D.

    ``x`` [N, C, *in], ``w`` [M, C/group, *k], ``offset`` [N, offset_group * K * n, *out]
    (K = prod(k), n spatial axes; for each offset group and kernel position, in row-major kernel
    order, the n displacements along the spatial axes), ``b`` [M], ``mask`` [N, offset_group *
    K, *out] (ones when absent). Tap ``k`` of output position ``o`` reads the input at
    ``o * stride - pad_begin + k * dilation + offset``, interpolated linearly between the 2^n
    neighbouring elements; a neighbour outside the input counts as 0. The sampled value is
    multiplied by ``mask``, then the taps are combined with ``w`` as Conv does (groups included).
    ``out`` follows Conv's explicit-pads formula and must equal ``offset``'s spatial shape.
    float16 and bfloat16 are computed in float32. Raises InvalidModelError on shapes that do not
    fit together.
    """
    if x.ndim < 3:
        raise EvaluationError(f"DeformConv input has rank {x.ndim}; at least 3 expected")
    N, C = x.shape[:2]
    sp = x.shape[2:]
    nd = len(sp)
    M = w.shape[0]
    group = ctx.attr("group")
    og = ctx.attr("offset_group")
    kernel = list(ctx.attr("kernel_shape") or w.shape[2:])
    if tuple(kernel) != tuple(w.shape[2:]):
        raise EvaluationError(f"kernel_shape {kernel} does not match the weights {w.shape}")
    strides, dilations = _geometry(ctx, x, kernel)
    begin, end, out = conv_pads("NOTSET", sp, kernel, strides, dilations, ctx.attr("pads"))
    if group < 1 or og < 1 or C != w.shape[1] * group or M % group or C % og:
        raise EvaluationError(f"DeformConv: {C} input channels, weights {w.shape}, group "
                              f"{group}, offset_group {og}")
    K, P = math.prod(kernel), math.prod(out)
    if any(o <= 0 for o in out) or offset.shape != (N, og * K * nd) + tuple(out):
        raise EvaluationError(f"DeformConv offset shape {offset.shape} is not "
                              f"{(N, og * K * nd) + tuple(out)}")
    if mask is not None and mask.shape != (N, og * K) + tuple(out):
        raise EvaluationError(f"DeformConv mask shape {mask.shape} is not "
                              f"{(N, og * K) + tuple(out)}")
    if N * C * K * P > limits.MAX_ELEMENT_COUNT:
        raise UnsupportedError("DeformConv samples more than 2^60 elements")
    args, dt = wide_all(x, w) if b is None else wide_all(x, w, b)
    xw, ww = args[0], args[1]
    # sampling positions [N, og, K, P] per spatial axis, in float64
    off = offset.astype(np.float64).reshape(N, og, K, nd, P)
    kidx = np.array(list(np.ndindex(*kernel)), dtype=np.float64).reshape(K, nd)
    oidx = np.array(list(np.ndindex(*out)), dtype=np.float64).reshape(P, nd)
    pos = [oidx[None, :, d] * strides[d] - begin[d] + kidx[:, d, None] * dilations[d]
           + off[:, :, :, d, :] for d in range(nd)]
    lower = [np.floor(p) for p in pos]
    xg = xw.reshape(N, og, C // og, math.prod(sp))
    sampled = np.zeros((N, og, C // og, K * P), dtype=xw.dtype)
    for corner in np.ndindex(*([2] * nd)):
        flat = np.zeros((N, og, K, P), dtype=np.int64)
        weight = np.ones((N, og, K, P), dtype=np.float64)
        for d in range(nd):
            idx = lower[d] + corner[d]
            weight *= (1.0 - np.abs(pos[d] - idx)) * ((idx >= 0) & (idx <= sp[d] - 1))
            flat = flat * sp[d] + np.clip(idx, 0, sp[d] - 1).astype(np.int64)
        vals = np.take_along_axis(xg, flat.reshape(N, og, 1, K * P), axis=3)
        sampled += vals * weight.reshape(N, og, 1, K * P).astype(xw.dtype)
    if mask is not None:
        sampled *= mask.astype(xw.dtype).reshape(N, og, 1, K * P)
    cols = sampled.reshape(N, C, K, P).reshape(N, group, (C // group) * K, P)
    y = np.matmul(ww.reshape(group, M // group, (C // group) * K), cols)
    y = y.reshape((N, M) + tuple(out))
    if b is not None:
        y = y + args[2].reshape((1, M) + (1,) * nd)
    return back(np.ascontiguousarray(y), dt)


# -- Col2Im -----------------------------------------------------------------------------------

@kernel("Col2Im")
def col2im(ctx, x, image_shape, block_shape):
    """Col2Im: sum the column blocks of X [N, C * prod(block), L] back into images
    [N, C, *image_shape] (``dilations``, ``pads`` [begin..., end...], ``strides``)."""
    x = np.asarray(x)
    img = [int(v) for v in np.asarray(image_shape).reshape(-1)]
    blk = [int(v) for v in np.asarray(block_shape).reshape(-1)]
    nd = len(img)
    dil = list(ctx.attr("dilations", None) or [1] * nd)
    strides = list(ctx.attr("strides", None) or [1] * nd)
    pads = list(ctx.attr("pads", None) or [0] * (2 * nd))
    bsize = math.prod(blk)
    if x.ndim != 3 or x.shape[1] % bsize:
        raise EvaluationError(f"Col2Im input {list(x.shape)} does not fit block {blk}")
    n, c = x.shape[0], x.shape[1] // bsize
    padded = [img[i] + pads[i] + pads[nd + i] for i in range(nd)]
    counts = [geometry.window_count(img[i], blk[i], strides[i], dil[i], pads[i], pads[nd + i])
              for i in range(nd)]
    if math.prod(counts) != x.shape[2]:
        raise EvaluationError(f"Col2Im: {x.shape[2]} blocks, the geometry gives "
                              f"{math.prod(counts)}")
    out = np.zeros(check_array((n, c) + tuple(padded), 8, "the Col2Im output"), dtype=np.float64)
    cols = x.reshape((n, c) + tuple(blk) + tuple(counts)).astype(np.float64)
    for bidx in np.ndindex(*blk):
        sl = tuple(slice(bidx[i] * dil[i], bidx[i] * dil[i] + strides[i] * (counts[i] - 1) + 1,
                         strides[i]) for i in range(nd))
        out[(slice(None), slice(None)) + sl] += cols[(slice(None), slice(None)) + bidx]
    crop = tuple(slice(pads[i], pads[i] + img[i]) for i in range(nd))
    return out[(slice(None), slice(None)) + crop].astype(x.dtype)
