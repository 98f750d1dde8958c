"""Assorted operators of the default domain: Dropout, LRN, random generators, signal processing
(DFT, STFT, window functions, MelWeightMatrix), strings (StringNormalizer, StringConcat,
StringSplit, RegexFullMatch), TfIdfVectorizer and Col2Im.

The random operators (Bernoulli, RandomUniform(Like), RandomNormal(Like), Multinomial, Dropout
in training mode) are not deterministic across implementations: ONNX does not define the
generator. With a ``seed`` attribute this evaluator draws from ``numpy.random.default_rng(seed)``
(so the same seed gives the same values here, not the values onnxruntime draws); without one,
from a fresh unseeded generator.
"""

from __future__ import annotations

import math
import re

import numpy as np

from ...errors import EvaluationError, InvalidModelError, UnsupportedError
from ...ir.dtypes import INFO
from ...operators import kernel
from ..memory import check_array


def _rng(ctx) -> np.random.Generator:
    seed = ctx.attr("seed", None)
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng(np.frombuffer(np.float32(seed).tobytes(), np.uint32)[0])


def _dtype(code: int, default) -> np.dtype:
    if not code:
        return np.dtype(default)
    info = INFO.get(int(code))
    if info is None:
        raise UnsupportedError(f"element type {code} is not in Table 5")
    return info.dtype


def _scalar(v, what: str, cast=float):
    arr = np.asarray(v)
    if arr.size != 1:
        raise EvaluationError(f"{what} must be a scalar, not shape {list(arr.shape)}")
    return cast(arr.reshape(-1)[0])


# -- Dropout ----------------------------------------------------------------------------------

@kernel("Dropout")
def dropout_old(ctx, x):
    """Dropout before opset 12: inference only, the output is the input and the mask all ones
    (bool from opset 10, the input's type before)."""
    x = np.asarray(x)
    mask = np.ones(x.shape, dtype=np.bool_ if ctx.opset >= 10 else x.dtype)
    return x, mask


@kernel("Dropout", since=12)
def dropout(ctx, x, ratio=None, training_mode=None):
    """Dropout (opset 12+): identity with an all-true mask unless ``training_mode`` is true;
    then each element is kept with probability ``1 - ratio`` (default 0.5) and scaled by
    ``1 / (1 - ratio)``; the mask (bool) marks kept elements. Random: see the module doc."""
    x = np.asarray(x)
    training = training_mode is not None and bool(np.asarray(training_mode).reshape(-1)[0])
    r = 0.5 if ratio is None else _scalar(ratio, "Dropout ratio")
    if not training or r == 0:
        return x, np.ones(x.shape, dtype=np.bool_)
    if not 0 <= r < 1:
        raise EvaluationError(f"Dropout ratio {r} is outside [0, 1)")
    mask = _rng(ctx).random(x.shape) >= r
    return (x * mask / (1 - r)).astype(x.dtype), mask


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


# -- random generators ------------------------------------------------------------------------

@kernel("Bernoulli")
def bernoulli(ctx, p):
    """Bernoulli: 1 with probability ``p`` per element (``dtype``, default p's type)."""
    p = np.asarray(p)
    out = _rng(ctx).random(p.shape) < p
    return out.astype(_dtype(ctx.attr("dtype", 0), p.dtype))


@kernel("RandomUniform")
def random_uniform(ctx):
    """RandomUniform: values in [low, high) of shape ``shape``, type ``dtype`` (float)."""
    shape = check_array(ctx.attrs["shape"], 16, "the RandomUniform output")  # (float64, cast)
    low, high = float(ctx.attr("low")), float(ctx.attr("high"))
    return _rng(ctx).uniform(low, high, shape).astype(_dtype(ctx.attr("dtype"), np.float32))


@kernel("RandomUniformLike")
def random_uniform_like(ctx, x):
    """RandomUniformLike: RandomUniform with X's shape (and type unless ``dtype``)."""
    x = np.asarray(x)
    low, high = float(ctx.attr("low")), float(ctx.attr("high"))
    return _rng(ctx).uniform(low, high, x.shape).astype(_dtype(ctx.attr("dtype", 0), x.dtype))


@kernel("RandomNormal")
def random_normal(ctx):
    """RandomNormal: normal values (``mean``, ``scale``) of shape ``shape``, type ``dtype``."""
    shape = check_array(ctx.attrs["shape"], 16, "the RandomNormal output")  # (float64, cast)
    mean, scale = float(ctx.attr("mean")), float(ctx.attr("scale"))
    return _rng(ctx).normal(mean, scale, shape).astype(_dtype(ctx.attr("dtype"), np.float32))


@kernel("RandomNormalLike")
def random_normal_like(ctx, x):
    """RandomNormalLike: RandomNormal with X's shape (and type unless ``dtype``)."""
    x = np.asarray(x)
    mean, scale = float(ctx.attr("mean")), float(ctx.attr("scale"))
    return _rng(ctx).normal(mean, scale, x.shape).astype(_dtype(ctx.attr("dtype", 0), x.dtype))


@kernel("Multinomial")
def multinomial(ctx, x):
    """Multinomial: ``sample_size`` class indices per batch row drawn from the distribution
    whose unnormalized log-probabilities are the row. Output [batch, sample_size], ``dtype``
    int32 (default) or int64."""
    logits = np.asarray(x, dtype=np.float64)
    if logits.ndim != 2:
        raise EvaluationError("Multinomial input must be [batch_size, class_size]")
    n = int(ctx.attr("sample_size"))
    # (uniform draws in float64, then a comparison of each with every class's bound)
    check_array((logits.shape[0], n, logits.shape[1]), 1, "the Multinomial comparisons")
    check_array((logits.shape[0], n), 8, "the Multinomial draws")
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    cdf = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)
    u = _rng(ctx).random((logits.shape[0], n))
    idx = np.minimum((u[:, :, None] > cdf[:, None, :]).sum(axis=2), logits.shape[1] - 1)
    return idx.astype(_dtype(ctx.attr("dtype"), np.int32))


# -- signal processing ------------------------------------------------------------------------

def _window(ctx, size, kind: str) -> np.ndarray:
    n = _scalar(size, f"{kind} size", int)
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
    return w.astype(_dtype(ctx.attr("output_datatype"), np.float32))


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
    """DFT, opset 17: ``axis`` attribute (default 1) over a signal [batch, ..., 1|2]."""
    x = np.asarray(x)
    axis = int(ctx.attr("axis"))
    rank = x.ndim - 1
    if not -rank <= axis < rank:
        raise EvaluationError(f"DFT axis {axis} is outside the signal rank {rank}")
    n = None if dft_length is None else _scalar(dft_length, "dft_length", int)
    return dft(x, axis % rank, n, bool(ctx.attr("inverse")), bool(ctx.attr("onesided")))


@kernel("DFT", since=20)
def dft20(ctx, x, dft_length=None, axis=None):
    """DFT, opset 20: ``axis`` input (default -2, counted on the input including its last
    real/imaginary axis)."""
    x = np.asarray(x)
    a = -2 if axis is None else _scalar(axis, "DFT axis", int)
    if not -x.ndim <= a < x.ndim - 1 or a == -1:
        raise EvaluationError(f"DFT axis {a} does not name a signal axis of rank {x.ndim}")
    a = a % x.ndim
    n = None if dft_length is None else _scalar(dft_length, "dft_length", int)
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
    step = _scalar(frame_step, "frame_step", int)
    length = x.shape[1]
    if window is not None:
        w = np.asarray(window).astype(np.float64).reshape(-1)
        flen = w.size if frame_length is None else _scalar(frame_length, "frame_length", int)
        if w.size != flen:
            raise EvaluationError(f"window has {w.size} values, frame_length is {flen}")
    else:
        flen = length if frame_length is None else _scalar(frame_length, "frame_length", int)
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
    bins = _scalar(num_mel_bins, "num_mel_bins", int)
    n_dft = _scalar(dft_length, "dft_length", int)
    rate = _scalar(sample_rate, "sample_rate", int)
    lo = _scalar(lower_edge_hertz, "lower_edge_hertz")
    hi = _scalar(upper_edge_hertz, "upper_edge_hertz")
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
    return out.astype(_dtype(ctx.attr("output_datatype"), np.float32))


# -- strings ----------------------------------------------------------------------------------

def _strings(x) -> np.ndarray:
    """An object array of str (bytes are decoded as UTF-8)."""
    arr = np.asarray(x, dtype=object)
    flat = [v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)
            for v in arr.reshape(-1)]
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(arr.shape)


@kernel("StringNormalizer")
def string_normalizer(ctx, x):
    """StringNormalizer: drop ``stopwords`` (case-insensitively unless ``is_case_sensitive``),
    then LOWER / UPPER / NONE (``case_change_action``). X is [C] or [1, C]; when every element
    is dropped the output is [""] ([1] or [1, 1])."""
    s = _strings(x)
    if s.ndim not in (1, 2) or (s.ndim == 2 and s.shape[0] != 1):
        raise EvaluationError(f"StringNormalizer takes [C] or [1, C], not {list(s.shape)}")
    stop = list(ctx.attr("stopwords", None) or [])
    sensitive = int(ctx.attr("is_case_sensitive"))
    if sensitive:
        stopset = set(stop)
        kept = [v for v in s.reshape(-1) if v not in stopset]
    else:
        stopset = {w.lower() for w in stop}
        kept = [v for v in s.reshape(-1) if v.lower() not in stopset]
    action = ctx.attr("case_change_action")
    if action == "LOWER":
        kept = [v.lower() for v in kept]
    elif action == "UPPER":
        kept = [v.upper() for v in kept]
    elif action != "NONE":
        raise UnsupportedError(f"case_change_action {action!r} is not LOWER, UPPER or NONE")
    if not kept:
        kept = [""]
    out = np.empty(len(kept), dtype=object)
    out[:] = kept
    return out if s.ndim == 1 else out.reshape(1, -1)


@kernel("StringConcat")
def string_concat(ctx, x, y):
    """StringConcat: element-wise ``x + y`` with numpy broadcasting."""
    a, b = np.broadcast_arrays(_strings(x), _strings(y))
    out = np.empty(a.shape, dtype=object)
    for idx in np.ndindex(a.shape):
        out[idx] = a[idx] + b[idx]
    return out


@kernel("StringSplit")
def string_split(ctx, x):
    """StringSplit: each string split on ``delimiter`` (runs of whitespace when it is absent or
    empty) at most ``maxsplit`` times. Outputs Y [..., max parts] padded with "" and Z [...]
    int64, the number of parts of each element."""
    s = _strings(x)
    delim = ctx.attr("delimiter", "") or None
    maxsplit = ctx.attr("maxsplit", None)
    maxsplit = -1 if maxsplit is None else int(maxsplit)
    parts = [v.split(delim, maxsplit) for v in s.reshape(-1)]
    width = max((len(p) for p in parts), default=0)
    y = np.empty((len(parts), width), dtype=object)
    y[:] = ""
    for i, p in enumerate(parts):
        y[i, :len(p)] = p
    z = np.array([len(p) for p in parts], dtype=np.int64).reshape(s.shape)
    return y.reshape(s.shape + (width,)), z


@kernel("RegexFullMatch")
def regex_full_match(ctx, x):
    """RegexFullMatch: true where the whole string matches ``pattern`` (Python ``re``, which
    reads the RE2 syntax ONNX names except for RE2-only constructs)."""
    try:
        pattern = re.compile(ctx.attrs["pattern"])
    except re.error as e:
        raise InvalidModelError(f"RegexFullMatch pattern: {e}") from None
    s = _strings(x)
    out = np.array([pattern.fullmatch(v) is not None for v in s.reshape(-1)], dtype=np.bool_)
    return out.reshape(s.shape)


# -- TfIdfVectorizer --------------------------------------------------------------------------

@kernel("TfIdfVectorizer")
def tfidf_vectorizer(ctx, x):
    """TfIdfVectorizer: counts of the pooled n-grams (``min_gram_length`` to
    ``max_gram_length``, items ``max_skip_count`` apart at most) in each row of X ([C] or
    [N, C]); ``mode`` TF (counts), IDF (1 or 0 times ``weights``) or TFIDF (counts times
    ``weights``). Output float32 [max(ngram_indexes) + 1] or [N, max(ngram_indexes) + 1]."""
    a = ctx.attrs
    arr = np.asarray(x)
    is_str = arr.dtype == object or arr.dtype.kind in "US"
    pool = list(a.get("pool_strings") or []) if is_str else [int(v) for v in
                                                               a.get("pool_int64s") or []]
    counts = list(a.get("ngram_counts") or [])
    indexes = list(a.get("ngram_indexes") or [])
    min_n, max_n = int(a.get("min_gram_length", 1)), int(a.get("max_gram_length", 1))
    skip = int(a.get("max_skip_count", 0))
    mode = a.get("mode", "TF")
    weights = list(a.get("weights") or [])
    table: dict[tuple, int] = {}
    k = 0
    for n in range(1, len(counts) + 1):
        start = counts[n - 1]
        end = counts[n] if n < len(counts) else len(pool)
        for i in range(start, end, n):
            table[tuple(pool[i:i + n])] = indexes[k] if k < len(indexes) else k
            k += 1
    width = max(indexes) + 1 if indexes else 0
    rows = arr.reshape(1, -1) if arr.ndim <= 1 else arr
    rows = _strings(rows) if is_str else rows.astype(np.int64)
    out = np.zeros((rows.shape[0], width), dtype=np.float32)
    for r, row in enumerate(rows):
        items = [v if is_str else int(v) for v in row]
        for n in range(min_n, max_n + 1):
            for gap in range(0, skip + 1 if n > 1 else 1):
                span = (n - 1) * (gap + 1)
                for s0 in range(0, len(items) - span):
                    gram = tuple(items[s0 + j * (gap + 1)] for j in range(n))
                    col = table.get(gram)
                    if col is not None:
                        out[r, col] += 1
    if mode == "IDF":
        out = (out > 0).astype(np.float32)
        if weights:
            out *= np.asarray(weights[:width], np.float32)
    elif mode == "TFIDF":
        if weights:
            out *= np.asarray(weights[:width], np.float32)
    elif mode != "TF":
        raise UnsupportedError(f"TfIdfVectorizer mode {mode!r} is not TF, IDF or TFIDF")
    return out.reshape(-1) if arr.ndim <= 1 else out


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
    counts = [(padded[i] - (dil[i] * (blk[i] - 1) + 1)) // strides[i] + 1 for i in range(nd)]
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
