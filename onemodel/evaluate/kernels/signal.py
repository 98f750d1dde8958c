"""Signal processing (ONNX 1-2, operator definitions HannWindow-17, HammingWindow-17,
BlackmanWindow-17, DFT-17 and 20, STFT-17, MelWeightMatrix-17): window functions, discrete
Fourier transforms of real or complex signals (the last axis 1 or 2: real, or real and
imaginary), short-time Fourier transforms and mel filter banks.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import EvaluationError
from ...operators import kernel
from ...operators.axes import AxisError, signal_axis
from ._util import dtype_of, scalar_of


def _window(ctx, size, kind: str) -> np.ndarray:
    n = scalar_of(size, f"{kind} size", int)
    if n < 0:
        raise EvaluationError(f"window size {n} is negative")
    periodic = int(ctx.attr("periodic"))
    denom = n if periodic else n - 1
    k = np.arange(n, dtype=np.float64)
    t = 2 * math.pi * k / denom if denom > 0 else np.zeros(n)
    if kind == "hann":
        w = 0.5 - 0.5 * np.cos(t)
    elif kind == "hamming":
        w = 25 / 46 - (1 - 25 / 46) * np.cos(t)
    else:
        w = 0.42 - 0.5 * np.cos(t) + 0.08 * np.cos(2 * t)
    return w.astype(dtype_of(ctx.attr("output_datatype"), np.float32))


@kernel("HannWindow")
def hann_window(ctx, size):
    """HannWindow: ``0.5 - 0.5 cos(2 pi n / N)``, N = size (periodic) or size - 1."""
    return _window(ctx, size, "hann")


@kernel("HammingWindow")
def hamming_window(ctx, size):
    """HammingWindow: ``25/46 - 21/46 cos(2 pi n / N)``."""
    return _window(ctx, size, "hamming")


@kernel("BlackmanWindow")
def blackman_window(ctx, size):
    """BlackmanWindow: ``0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)``."""
    return _window(ctx, size, "blackman")


def _as_complex(x: np.ndarray) -> np.ndarray:
    """[..., 1] real or [..., 2] (real, imaginary) -> complex array [...]: complex64 for
    float32 and narrower input (numpy's FFT then works in single precision, as the ONNX test
    vectors were made), complex128 for float64."""
    ctype = np.complex128 if x.dtype == np.float64 else np.complex64
    if x.shape[-1] == 1:
        return x[..., 0].astype(ctype)
    if x.shape[-1] == 2:
        c = np.empty(x.shape[:-1], dtype=ctype)
        c.real, c.imag = x[..., 0], x[..., 1]
        return c
    raise EvaluationError(f"the last axis of a signal must be 1 or 2, not {x.shape[-1]}")


def _from_complex(c: np.ndarray, dtype) -> np.ndarray:
    return np.stack([c.real, c.imag], axis=-1).astype(dtype)


def dft(signal: np.ndarray, axis: int, length: int | None, inverse: bool, onesided: bool):
    """DFT of ``signal`` [..., 1|2] along ``axis`` (of the complex view); returns [..., 2]."""
    x = np.asarray(signal)
    c = _as_complex(x)
    dtype = x.dtype if x.dtype.kind == "f" else np.float32
    if inverse and onesided:  # IRFFT: one-sided spectrum in, real signal out
        n = 2 * (c.shape[axis] - 1) if length is None else length
        if n <= 0:
            raise EvaluationError(f"dft_length {n} must be positive")
        return np.fft.irfft(c, n=n, axis=axis)[..., None].astype(dtype)
    n = c.shape[axis] if length is None else length
    if n <= 0:
        raise EvaluationError(f"dft_length {n} must be positive")
    if inverse:
        out = np.fft.ifft(c, n=n, axis=axis)
    else:
        out = np.fft.fft(c, n=n, axis=axis)
    if onesided:
        out = np.take(out, np.arange(n // 2 + 1), axis=axis)
    return _from_complex(out, dtype)


@kernel("DFT")
def dft17(ctx, x, dft_length=None):
    """DFT, opset 17: ``axis`` attribute (default 1) over a signal [batch, ..., 1|2], a
    negative one counted from the back of the whole input as at 20 (-2: the last signal
    axis)."""
    x = np.asarray(x)
    return _dft_at(ctx, x, int(ctx.attr("axis")), dft_length)


@kernel("DFT", since=20)
def dft20(ctx, x, dft_length=None, axis=None):
    """DFT, opset 20: ``axis`` input (default -2, counted on the input including its last
    real/imaginary axis)."""
    x = np.asarray(x)
    return _dft_at(ctx, x, -2 if axis is None else scalar_of(axis, "DFT axis", int),
                   dft_length)


def _dft_at(ctx, x, axis: int, dft_length):
    """DFT of ``x`` along ``axis`` as both definitions count it (:func:`signal_axis`)."""
    try:
        a = signal_axis(axis, x.ndim)
    except AxisError as e:
        raise EvaluationError(str(e)) from None
    n = None if dft_length is None else scalar_of(dft_length, "dft_length", int)
    return dft(x, a, n, bool(ctx.attr("inverse")), bool(ctx.attr("onesided")))


@kernel("STFT")
def stft(ctx, signal, frame_step, window=None, frame_length=None):
    """STFT: frames of ``frame_length`` every ``frame_step`` samples, times ``window``, DFT.

    signal [batch, length, 1|2]; output [batch, frames, bins, 2] with ``frames = floor((length
    - frame_length) / frame_step) + 1`` and bins ``frame_length // 2 + 1`` when ``onesided``
    (default 1), else ``frame_length``.
    """
    x = np.asarray(signal)
    if x.ndim != 3:
        raise EvaluationError("STFT signal must be [batch, length, 1 or 2]")
    step = scalar_of(frame_step, "frame_step", int)
    length = x.shape[1]
    if window is not None:
        w = np.asarray(window).astype(np.float64).reshape(-1)
        flen = w.size if frame_length is None else scalar_of(frame_length, "frame_length", int)
        if w.size != flen:
            raise EvaluationError(f"window has {w.size} values, frame_length is {flen}")
    else:
        flen = length if frame_length is None else scalar_of(frame_length, "frame_length", int)
        w = np.ones(flen)
    if step <= 0 or flen <= 0 or flen > length:
        raise EvaluationError(f"frame_step {step} / frame_length {flen} do not fit a signal of "
                              f"{length}")
    frames = (length - flen) // step + 1
    c = _as_complex(x)
    idx = np.arange(frames)[:, None] * step + np.arange(flen)[None, :]
    framed = c[:, idx] * w  # [batch, frames, flen]
    out = np.fft.fft(framed, axis=-1)
    if int(ctx.attr("onesided")):
        out = out[..., :flen // 2 + 1]
    return _from_complex(out, x.dtype if x.dtype.kind == "f" else np.float32)


@kernel("MelWeightMatrix")
def mel_weight_matrix(ctx, num_mel_bins, dft_length, sample_rate, lower_edge_hertz,
                      upper_edge_hertz):
    """MelWeightMatrix: [dft_length // 2 + 1, num_mel_bins] triangular filters, peak 1, on
    ``mel(f) = 2595 log10(1 + f / 700)``: the num_mel_bins + 2 filter edges are
    ``lower_mel + k * (upper_mel - lower_mel) / (num_mel_bins + 2)`` (the spacing of the ONNX
    reference and test vectors), each mapped to the spectrogram bin
    ``floor((dft_length + 1) * f / sample_rate)``."""
    bins = scalar_of(num_mel_bins, "num_mel_bins", int)
    n_dft = scalar_of(dft_length, "dft_length", int)
    rate = scalar_of(sample_rate, "sample_rate", int)
    lo = scalar_of(lower_edge_hertz, "lower_edge_hertz")
    hi = scalar_of(upper_edge_hertz, "upper_edge_hertz")
    if bins <= 0 or n_dft <= 0 or rate <= 0:
        raise EvaluationError("num_mel_bins, dft_length and sample_rate must be positive")
    n_spec = n_dft // 2 + 1
    mel_lo = 2595 * math.log10(1 + lo / 700)
    mel_hi = 2595 * math.log10(1 + hi / 700)
    step = (mel_hi - mel_lo) / (bins + 2)  # as the ONNX reference: bins + 2 points, not + 1
    mels = np.arange(bins + 2) * step + mel_lo
    hz = 700 * (np.power(10, mels / 2595) - 1)
    edges = np.floor((n_dft + 1) * hz / rate).astype(np.int64)
    out = np.zeros((n_spec, bins), dtype=np.float64)
    for i in range(bins):
        a, b, c = int(edges[i]), int(edges[i + 1]), int(edges[i + 2])
        if b == a:
            if 0 <= b < n_spec:
                out[b, i] = 1
        else:
            for j in range(max(a, 0), min(b, n_spec - 1) + 1):
                out[j, i] = (j - a) / (b - a)
        if c > b:
            for j in range(max(b, 0), min(c, n_spec)):
                out[j, i] = (c - j) / (c - b)
    return out.astype(dtype_of(ctx.attr("output_datatype"), np.float32))
