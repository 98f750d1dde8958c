"""Convolutions (ONNX 1-2): Conv and ConvTranspose, 1-D to N-D, with groups, dilations, strides,
explicit pads or ``auto_pad``.

Conv gathers the receptive fields as a strided view of the padded input and copies it once into
columns [N, group, C/group * kernel, output positions] (im2col), then multiplies the weights with
them in one batched matrix product, which leaves the result in NCHW order; a 1x1 convolution with
unit strides is a plain matrix product. ConvTranspose multiplies first and then adds each kernel
tap's contribution into the output (col2im), one vectorized addition per kernel position.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ... import limits
from ...errors import InvalidModelError, UnsupportedError
from ..registry import op
from .linalg import _back, _wide


def conv_pads(auto_pad: str, in_shape, kernel, strides, dilations, pads):
    """(begin pads, end pads, output extents) of a windowed operator over ``in_shape``.

    ``auto_pad`` NOTSET uses ``pads`` ([b1, b2, ..., e1, e2, ...]); SAME_UPPER/SAME_LOWER pad so
    that the output extent is ceil(in / stride), the odd pad at the end (UPPER) or the beginning
    (LOWER); VALID pads nothing.
    """
    n = len(in_shape)
    dk = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = [-(-i // s) for i, s in zip(in_shape, strides)]
        total = [max((o - 1) * s + k - i, 0) for o, s, k, i in zip(out, strides, dk, in_shape)]
        if auto_pad == "SAME_UPPER":
            begin = [t // 2 for t in total]
        else:
            begin = [t - t // 2 for t in total]
        end = [t - b for t, b in zip(total, begin)]
        return begin, end, out
    if auto_pad == "VALID":
        begin = [0] * n
        end = [0] * n
    elif auto_pad in ("NOTSET", ""):
        pads = list(pads) if pads else [0] * (2 * n)
        if len(pads) != 2 * n:
            raise InvalidModelError(f"pads {pads} has not 2 x {n} values")
        begin, end = pads[:n], pads[n:]
    else:
        raise UnsupportedError(f"auto_pad {auto_pad!r} is not NOTSET, SAME_UPPER, SAME_LOWER or "
                               f"VALID")
    out = [(i + b + e - k) // s + 1 for i, b, e, k, s in zip(in_shape, begin, end, dk, strides)]
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
        raise InvalidModelError(f"the window does not fit: output extents {out}")
    if math.prod(x.shape[:2]) * math.prod(out) * math.prod(kernel) > limits.MAX_ELEMENT_COUNT:
        raise UnsupportedError("the receptive fields have more than 2^60 elements")
    needed = [(o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip(out, strides, kernel, dilations)]
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
        raise InvalidModelError(f"kernel_shape, strides or dilations do not have {n} values")
    if any(s < 1 for s in strides) or any(d < 1 for d in dilations):
        raise InvalidModelError("strides and dilations must be positive")
    return strides, dilations


@op("Conv", since=(1, 11, 22))
def conv(ctx, x, w, b=None):
    if x.ndim < 3:
        raise InvalidModelError(f"Conv input has rank {x.ndim}; at least 3 expected")
    group = ctx.attr("group", 1)
    kernel = list(ctx.attr("kernel_shape") or w.shape[2:])
    if tuple(kernel) != tuple(w.shape[2:]):
        raise InvalidModelError(f"kernel_shape {kernel} does not match the weights {w.shape}")
    strides, dilations = _geometry(ctx, x, kernel)
    begin, end, out = conv_pads(ctx.attr("auto_pad", "NOTSET"), x.shape[2:], kernel, strides,
                                dilations, ctx.attr("pads"))
    N, C = x.shape[:2]
    M = w.shape[0]
    if C != w.shape[1] * group or M % group:
        raise InvalidModelError(f"Conv: {C} input channels, weights {w.shape}, group {group}")
    args, dt = _wide(x, w) if b is None else _wide(x, w, b)
    x, w = args[0], args[1]
    Cg, Mg, K, P = C // group, M // group, math.prod(kernel), math.prod(out)
    if (K == 1 and all(s == 1 for s in strides) and not any(begin) and not any(end)):
        cols = x.reshape(N, group, Cg, P)
    else:
        # im2col: [N, C, *k, *out] -> [N, g, Cg*K, P], one copy with contiguous inner rows
        cols = windows(x, kernel, strides, dilations, begin, out).reshape(N, group, Cg * K, P)
    y = np.matmul(w.reshape(group, Mg, Cg * K), cols)  # [N, g, Mg, P]
    y = y.reshape((N, M) + tuple(out))
    if b is not None:
        y = y + args[2].reshape((1, M) + (1,) * len(out))
    return _back(np.ascontiguousarray(y), dt)


@op("ConvTranspose", since=(1, 11, 22))
def conv_transpose(ctx, x, w, b=None):
    if x.ndim < 3:
        raise InvalidModelError(f"ConvTranspose input has rank {x.ndim}; at least 3 expected")
    group = ctx.attr("group", 1)
    N, C = x.shape[:2]
    if w.shape[0] != C or C % group:
        raise InvalidModelError(f"ConvTranspose: {C} input channels, weights {w.shape}, "
                                f"group {group}")
    Mg = w.shape[1]
    M = Mg * group
    kernel = list(ctx.attr("kernel_shape") or w.shape[2:])
    strides, dilations = _geometry(ctx, x, kernel)
    n = len(kernel)
    in_sp = x.shape[2:]
    out_pad = ctx.attr("output_padding") or [0] * n
    dk = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    out_shape = ctx.attr("output_shape")
    if out_shape:
        out_shape = list(out_shape)[-n:]
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out_shape = [i * s for i, s in zip(in_sp, strides)]
    if out_shape:
        total = [s * (i - 1) + op_ + k - o for s, i, op_, k, o in
                 zip(strides, in_sp, out_pad, dk, out_shape)]
        if auto_pad == "SAME_UPPER":
            begin = [t // 2 for t in total]
        else:
            begin = [t - t // 2 for t in total]
        out = list(out_shape)
    else:
        pads = ctx.attr("pads") or [0] * (2 * n)
        if len(pads) != 2 * n:
            raise InvalidModelError(f"pads {pads} has not 2 x {n} values")
        begin, end = list(pads[:n]), list(pads[n:])
        out = [s * (i - 1) + op_ + k - pb - pe for s, i, op_, k, pb, pe in
               zip(strides, in_sp, out_pad, dk, begin, end)]
    if any(o <= 0 for o in out):
        raise InvalidModelError(f"ConvTranspose output extents {out} are not positive")
    if N * M * math.prod(out) > limits.MAX_ELEMENT_COUNT:
        raise UnsupportedError("ConvTranspose output has more than 2^60 elements")
    args, dt = _wide(x, w) if b is None else _wide(x, w, b)
    x, w = args[0], args[1]
    Cg, K, P = C // group, math.prod(kernel), math.prod(in_sp)
    xs = x.reshape(N, group, Cg, P)
    wg = w.reshape(group, Cg, Mg * K)
    # cols[n, g, Mg*K, P] = sum_c w[g, c, :] * x[n, g, c, P]
    cols = np.matmul(wg.transpose(0, 2, 1), xs)
    cols = cols.reshape((N, M) + tuple(kernel) + tuple(in_sp))
    full = [max((i - 1) * s + d + op_, pb + o) for i, s, d, op_, pb, o in
            zip(in_sp, strides, dk, out_pad, begin, out)]
    lead = [max(-pb, 0) for pb in begin]  # negative pads extend the output at the front
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
    return _back(np.ascontiguousarray(y), dt)
