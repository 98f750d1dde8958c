"""Inference rules of signal processing (the kernels of ``onemodel/evaluate/kernels/signal.py``,
same keys and versions).

Shapes and element types (ONNX Part 1, operator definitions of Clause 14.3: HannWindow-17,
HammingWindow-17, BlackmanWindow-17, DFT-17 and 20, STFT-17, MelWeightMatrix-17):

* ``HannWindow``/``HammingWindow``/``BlackmanWindow``: ``[size]`` from the size input's element
  (symbolic when it is), ``output_datatype`` (default float).
* ``DFT``: the signal's shape with the DFT axis of extent ``n`` (``dft_length``'s element, else
  the axis's extent), ``floor(n / 2) + 1`` when ``onesided``, and the last axis 2; an inverse
  one-sided DFT gives ``n`` (default ``2 * (m - 1)``) real samples, last axis 1. The axis is
  the attribute (default 1) at opset 17, the input (default -2) from 20, a negative one counted
  from the back of the whole input in both (``operators.axes.signal_axis``).
* ``STFT``: ``[batch, frames, bins, 2]``, ``frames = floor((length - frame_length) /
  frame_step) + 1``, bins ``floor(frame_length / 2) + 1`` (onesided) or ``frame_length``;
  frame_length from the window's extent, the input, or the signal length.
* ``MelWeightMatrix``: ``[floor(dft_length / 2) + 1, num_mel_bins]``, ``output_datatype``.

Contradictions (Clause 9.4): ranks the definitions exclude, a negative window size, a DFT axis
out of range, a signal's last extent other than 1 or 2, a ``dft_length`` or ``frame_step`` that
is not positive.
"""

from __future__ import annotations

from ...operators import rule
from ...operators.axes import AxisError, signal_axis
from .. import dims as D
from ._util import int_attr, shape_list

_FLOAT = 1


def _scalar(ctx, i):
    """The single element of input ``i`` (an extent or int), or None."""
    got = ctx.ints(i)
    return got[0] if got is not None and len(got) == 1 else None


def _window(ctx):
    n = _scalar(ctx, 0)
    if type(n) is int and n < 0:
        ctx.contradiction(f"window size {n} is negative")
        n = None
    code = int_attr(ctx, "output_datatype", _FLOAT) or _FLOAT
    return ctx.tensor([n], elem=code)


@rule("HannWindow")
def hann_window(ctx, size):
    """HannWindow: [size], ``output_datatype``."""
    return _window(ctx)


@rule("HammingWindow")
def hamming_window(ctx, size):
    """HammingWindow: [size], ``output_datatype``."""
    return _window(ctx)


@rule("BlackmanWindow")
def blackman_window(ctx, size):
    """BlackmanWindow: [size], ``output_datatype``."""
    return _window(ctx)


def _dft(ctx, x, axis, length_given):
    """The DFT output shape of signal ``x`` along full-rank axis index ``axis``."""
    s = list(x.shape)
    last = s[-1]
    if type(last) is int and last not in (1, 2):
        ctx.contradiction(f"the signal's last extent is {last}; 1 or 2 is needed")
    n = _scalar(ctx, 1) if length_given else None
    if type(n) is int and n <= 0:
        ctx.contradiction(f"dft_length {n} is not positive")
        n = None
    inverse = int_attr(ctx, "inverse", 0)
    onesided = int_attr(ctx, "onesided", 0)
    m = s[axis]
    if inverse and onesided:
        if n is None and not length_given and m is not None:
            n = D.mul(2, D.sub(m, 1))
        s[axis], s[-1] = n, 1
        return s
    if n is None and not length_given:
        n = m
    s[axis] = D.add(D.floordiv(n, 2), 1) if onesided and n is not None else n
    s[-1] = 2
    return s


@rule("DFT")
def dft17(ctx, x, dft_length=None):
    """DFT, opset 17: the ``axis`` attribute (module doc)."""
    if x.shape is None:
        return None
    if len(x.shape) < 2:
        ctx.contradiction(f"the input has rank {len(x.shape)}; at least 2 is needed")
        return None
    return _dft_at(ctx, x, int_attr(ctx, "axis", 1), dft_length)


@rule("DFT", since=20)
def dft20(ctx, x, dft_length=None, axis=None):
    """DFT, opset 20: the ``axis`` input (default -2) counted on the whole rank."""
    if x.shape is None:
        return None
    r = len(x.shape)
    if axis is None:
        a = -2
    else:
        a = _scalar(ctx, 2)
        if type(a) is not int:
            return [None] * r
    return _dft_at(ctx, x, a, dft_length)


def _dft_at(ctx, x, axis: int, dft_length):
    """The DFT output shape along ``axis`` as both definitions count it (``signal_axis``)."""
    try:
        a = signal_axis(axis, len(x.shape))
    except AxisError as e:
        ctx.contradiction(str(e))
        return None
    return _dft(ctx, x, a, dft_length is not None)


@rule("STFT")
def stft(ctx, signal, frame_step, window=None, frame_length=None):
    """STFT: [batch, frames, bins, 2] (module doc)."""
    s = shape_list(signal)
    batch = length = None
    if s is not None:
        if len(s) != 3:
            ctx.contradiction(f"the signal has rank {len(s)}; [batch, length, 1|2] is needed")
        else:
            batch, length = s[0], s[1]
            if type(s[2]) is int and s[2] not in (1, 2):
                ctx.contradiction(f"the signal's last extent is {s[2]}; 1 or 2 is needed")
    step = _scalar(ctx, 1)
    flen = _scalar(ctx, 3) if frame_length is not None else None
    ws = shape_list(window)
    if ws is not None and len(ws) == 1:
        flen = ctx.unify(flen, ws[0], "frame_length and window extents") \
            if flen is not None else ws[0]
    elif window is None and frame_length is None:
        flen = length
    frames = None
    if step is not None and flen is not None and length is not None:
        if type(step) is int and step <= 0:
            ctx.contradiction(f"frame_step {step} is not positive")
        elif type(step) is int:
            frames = D.add(D.floordiv(D.sub(length, flen), step), 1)
    bins = None
    if flen is not None:
        bins = D.add(D.floordiv(flen, 2), 1) if int_attr(ctx, "onesided", 1) else flen
    return [batch, frames, bins, 2]


@rule("MelWeightMatrix")
def mel_weight_matrix(ctx, num_mel_bins, dft_length, sample_rate, lower_edge_hertz,
                      upper_edge_hertz):
    """MelWeightMatrix: [floor(dft_length / 2) + 1, num_mel_bins], ``output_datatype``."""
    bins, n = _scalar(ctx, 0), _scalar(ctx, 1)
    code = int_attr(ctx, "output_datatype", _FLOAT) or _FLOAT
    return ctx.tensor([D.add(D.floordiv(n, 2), 1) if n is not None else None, bins], elem=code)

