"""Inference rules of the assorted operators (the kernels of
``onemodel/evaluate/kernels/misc.py``, same keys and versions): Dropout, LRN, the random
generators, signal processing, strings, TfIdfVectorizer and Col2Im.

Shapes and element types (ONNX Part 1, operator definitions of Clause 14.3):

* ``Dropout``: output and mask of X's shape; the mask is bool from opset 10 (X's type before).
  ``LRN``: X's shape.
* ``RandomNormal``/``RandomUniform``: the ``shape`` attribute, element type ``dtype`` (default
  float); the ``*Like`` forms and ``Bernoulli``: the input's shape, ``dtype`` or the input's
  type. ``Multinomial``: ``[batch, sample_size]``, ``dtype`` (default int32).
* ``HannWindow``/``HammingWindow``/``BlackmanWindow``: ``[size]`` from the size input's element
  (symbolic when it is), ``output_datatype`` (default float).
* ``DFT``: the signal's shape with the DFT axis of extent ``n`` (``dft_length``'s element, else
  the axis's extent), ``floor(n / 2) + 1`` when ``onesided``, and the last axis 2; an inverse
  one-sided DFT gives ``n`` (default ``2 * (m - 1)``) real samples, last axis 1. The axis is
  the attribute (default 1) counted on the signal rank at opset 17, the input (default -2)
  counted on the whole rank from 20.
* ``STFT``: ``[batch, frames, bins, 2]``, ``frames = floor((length - frame_length) /
  frame_step) + 1``, bins ``floor(frame_length / 2) + 1`` (onesided) or ``frame_length``;
  frame_length from the window's extent, the input, or the signal length.
* ``MelWeightMatrix``: ``[floor(dft_length / 2) + 1, num_mel_bins]``, ``output_datatype``.
* ``StringConcat``: the broadcast (Clause 6.6). ``StringSplit``: Y ``[..., ?]`` (the largest
  number of parts is data; 0 when X has no elements), Z X's shape (int64).
  ``RegexFullMatch``: X's shape, bool.
  ``StringNormalizer``: ``[C]`` or ``[1, C]`` kept without stopwords (at least 1), unknown
  with them.
* ``TfIdfVectorizer``: ``[max(ngram_indexes) + 1]`` for a 1-D X, ``[N, ...]`` for 2-D, float.
* ``Col2Im``: ``[N, C, *image_shape]`` with ``C = X[1] / prod(block_shape)``; X's last extent
  ``L`` is the number of sliding blocks, the product over the spatial axes of
  ``floor((image + p_begin + p_end - d*(block - 1) - 1) / s) + 1``.

Contradictions (Clause 9.4): ranks the definitions exclude, a DFT axis out of range or a
signal's last extent other than 1 or 2; for Col2Im a channel extent the block does not divide,
``image_shape`` and ``block_shape`` of different lengths, a block extent, stride or dilation
below 1, a negative image extent, ``strides``/``dilations``/``pads`` without one value (two for
pads) per spatial axis, a dilated block larger than the padded image, and an int ``L`` other than
the count of sliding blocks (onnxruntime refuses these models).
"""

from __future__ import annotations

from ...operators import rule
from .. import dims as D
from ._util import int_attr, list_attr, lower

_FLOAT, _BOOL, _INT32 = 1, 9, 6


def _shape(v):
    return None if v is None or v.shape is None else list(v.shape)


def _scalar(ctx, i):
    """The single element of input ``i`` (an extent or int), or None."""
    got = ctx.ints(i)
    return got[0] if got is not None and len(got) == 1 else None


# -- Dropout, LRN ---------------------------------------------------------------------------
@rule("Dropout")
def dropout_old(ctx, x):
    """Dropout before opset 12: output and mask of X's shape (mask bool from opset 10)."""
    s = _shape(x)
    mask_elem = _BOOL if ctx.opset >= 10 else x.elem
    return s, ctx.tensor(list(s) if s is not None else None, elem=mask_elem, i=1)


@rule("Dropout", since=12)
def dropout(ctx, x, ratio=None, training_mode=None):
    """Dropout: output of X's shape, bool mask of X's shape."""
    s = _shape(x)
    return s, ctx.tensor(list(s) if s is not None else None, elem=_BOOL, i=1)


@rule("LRN")
def lrn(ctx, x):
    """LRN: X's shape ([N, C, D1, ...])."""
    s = _shape(x)
    if s is not None and len(s) < 2:
        ctx.contradiction(f"X has rank {len(s)}; at least 2 is needed")
    return s


# -- random generators ------------------------------------------------------------------------
def _dtype(ctx, default):
    code = int_attr(ctx, "dtype", 0)
    return code or default


@rule("Bernoulli")
def bernoulli(ctx, p):
    """Bernoulli: p's shape, ``dtype`` or p's type."""
    return ctx.tensor(_shape(p), elem=_dtype(ctx, p.elem))


@rule("RandomUniform")
def random_uniform(ctx):
    """RandomUniform: the ``shape`` attribute, ``dtype`` (default float)."""
    return _random(ctx)


@rule("RandomNormal")
def random_normal(ctx):
    """RandomNormal: the ``shape`` attribute, ``dtype`` (default float)."""
    return _random(ctx)


def _random(ctx):
    shape = list_attr(ctx, "shape", int) if ctx.has_attr("shape") else None
    out = None
    if shape is not None and any(d < 0 for d in shape):
        ctx.contradiction(f"shape {shape} has a negative extent")
    elif shape is not None and (shape or type(ctx.attr("shape")) is list):
        out = shape
    return ctx.tensor(out, elem=_dtype(ctx, _FLOAT))


@rule("RandomUniformLike")
def random_uniform_like(ctx, x):
    """RandomUniformLike: X's shape, ``dtype`` or X's type."""
    return ctx.tensor(_shape(x), elem=_dtype(ctx, x.elem))


@rule("RandomNormalLike")
def random_normal_like(ctx, x):
    """RandomNormalLike: X's shape, ``dtype`` or X's type."""
    return ctx.tensor(_shape(x), elem=_dtype(ctx, x.elem))


@rule("Multinomial")
def multinomial(ctx, x):
    """Multinomial: [batch, sample_size], ``dtype`` (default int32)."""
    s = _shape(x)
    batch = None
    if s is not None:
        if len(s) != 2:
            ctx.contradiction(f"the input has rank {len(s)}; [batch, class] is needed")
        else:
            batch = s[0]
    n = int_attr(ctx, "sample_size", 1)
    return ctx.tensor([batch, n if n is not None and n >= 0 else None],
                      elem=_dtype(ctx, _INT32))


# -- signal processing ------------------------------------------------------------------------
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
    """DFT, opset 17: the ``axis`` attribute counted on the signal rank (module doc)."""
    if x.shape is None:
        return None
    rank = len(x.shape) - 1
    if rank < 1:
        ctx.contradiction(f"the input has rank {rank + 1}; at least 2 is needed")
        return None
    a = ctx.axis(int_attr(ctx, "axis", 1), rank, "DFT axis")
    return None if a is None else _dft(ctx, x, a, dft_length is not None)


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
    if not -r <= a < r - 1 or a == -1:
        ctx.contradiction(f"DFT axis {a} does not name a signal axis of rank {r}")
        return None
    return _dft(ctx, x, a % r, dft_length is not None)


@rule("STFT")
def stft(ctx, signal, frame_step, window=None, frame_length=None):
    """STFT: [batch, frames, bins, 2] (module doc)."""
    s = _shape(signal)
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
    ws = _shape(window)
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


# -- strings ----------------------------------------------------------------------------------
@rule("StringNormalizer")
def string_normalizer(ctx, x):
    """StringNormalizer: [C] or [1, C] (module doc)."""
    s = _shape(x)
    if s is None:
        return None
    if len(s) not in (1, 2) or (len(s) == 2 and D.differ(s[0], 1)):
        ctx.contradiction(f"X has shape {D.shape_text(s)}; [C] or [1, C] is needed")
        return None
    c = s[-1]
    if list_attr(ctx, "stopwords"):
        c = None
    elif c == 0:
        c = 1
    elif c is not None and not ((lo := lower(c)) is not None and lo >= 1):
        c = None
    return [c] if len(s) == 1 else [1, c]


@rule("StringConcat")
def string_concat(ctx, x, y):
    """StringConcat: the broadcast of X and Y."""
    return ctx.broadcast(x, y)


@rule("StringSplit")
def string_split(ctx, x):
    """StringSplit: Y [..., ?] (0 for an X of no elements), Z X's shape (int64)."""
    s = _shape(x)
    if s is None:
        return None, None
    return s + [0 if 0 in s else None], s


@rule("RegexFullMatch")
def regex_full_match(ctx, x):
    """RegexFullMatch: X's shape, bool."""
    return _shape(x)


@rule("TfIdfVectorizer")
def tfidf_vectorizer(ctx, x):
    """TfIdfVectorizer: [max(ngram_indexes) + 1] or [N, max(ngram_indexes) + 1], float."""
    idx = list_attr(ctx, "ngram_indexes", int)
    width = max(idx) + 1 if idx else (0 if ctx.attr("ngram_indexes") in (None, []) else None)
    s = _shape(x)
    if s is None:
        return None
    if len(s) <= 1:
        return [width]
    if len(s) != 2:
        ctx.contradiction(f"X has rank {len(s)}; [C] or [N, C] is needed")
        return None
    return [s[0], width]


# -- Col2Im -----------------------------------------------------------------------------------
def _col2im_attr(ctx, name: str, n: int, fill: int, per: int = 1):
    """Col2Im's INTS attribute ``name`` as ``per * n`` ints (``fill`` each when unset); None,
    and a contradiction, when it has another length."""
    v = list_attr(ctx, name, int)
    if not v:
        return [fill] * (per * n)
    if len(v) != per * n:
        ctx.contradiction(f"{name} {v} does not have {per * n} values, "
                          f"{'two' if per == 2 else 'one'} per spatial axis")
        return None
    return v


def _col2im_blocks(ctx, img, blk, L) -> None:
    """Check Col2Im's block count ``L`` (X's last extent) against the sliding blocks of
    ``block_shape`` ``blk`` over ``image_shape`` ``img`` (lists of ints of one length) with the
    node's pads, strides and dilations: per axis ``floor((i + p_begin + p_end - d*(b-1) - 1) /
    s) + 1``, at least 1 (the dilated block fits the padded image), their product ``L``."""
    n = len(img)
    strides = _col2im_attr(ctx, "strides", n, 1)
    dilations = _col2im_attr(ctx, "dilations", n, 1)
    pads = _col2im_attr(ctx, "pads", n, 0, per=2)
    if strides is None or dilations is None or pads is None:
        return
    bad = [v for v in strides + dilations if v < 1]
    if bad:
        ctx.contradiction(f"strides {strides} and dilations {dilations} have values that are "
                          f"not positive: {bad}")
        return
    counts = [(img[i] + pads[i] + pads[n + i] - dilations[i] * (blk[i] - 1) - 1) // strides[i]
              + 1 for i in range(n)]
    geometry = (f"image_shape {img}, block_shape {blk}, pads {pads}, strides {strides}, "
                f"dilations {dilations}")
    if any(c < 1 for c in counts):
        ctx.contradiction(f"the dilated block does not fit the padded image: {counts} blocks "
                          f"per axis ({geometry})")
        return
    total = 1
    for c in counts:
        total *= c
    if type(L) is int and L != total:
        ctx.contradiction(f"X has {L} blocks on its last axis; {geometry} give {total} "
                          f"({' x '.join(map(str, counts))})")
    elif L is not None and type(L) is not int:
        ctx.unify(L, total, "X's block count and the sliding blocks")


@rule("Col2Im")
def col2im(ctx, x, image_shape, block_shape):
    """Col2Im: [N, C, *image_shape], C = X[1] / prod(block_shape); X's last extent L the
    number of sliding blocks (module doc)."""
    img = ctx.ints(1)
    blk = ctx.ints(2)
    s = _shape(x)
    n = c = None
    if s is not None:
        if len(s) != 3:
            ctx.contradiction(f"X has rank {len(s)}; [N, C * prod(block), L] is needed")
            s = None
        else:
            n = s[0]
    if img is not None and blk is not None and len(img) != len(blk):
        ctx.contradiction(f"image_shape {D.shape_text(img)} and block_shape "
                          f"{D.shape_text(blk)} have different lengths")
        return [n, None] + [None] * len(img)
    if blk is not None and any(type(b) is int and b < 1 for b in blk):
        ctx.contradiction(f"block_shape {D.shape_text(blk)} has values that are not positive")
        blk = None
    if img is not None and any(type(i) is int and i < 0 for i in img):
        ctx.contradiction(f"image_shape {D.shape_text(img)} has negative extents")
        img = [None if type(i) is int and i < 0 else i for i in img]
    if s is not None and blk is not None and all(type(b) is int for b in blk):
        size = 1
        for b in blk:
            size *= b
        if type(s[1]) is int and s[1] % size:
            ctx.contradiction(f"X's extent {s[1]} is not a multiple of the block size {size}")
        elif s[1] is not None:
            c = D.floordiv(s[1], size)
        if img is not None and all(type(i) is int for i in img):
            _col2im_blocks(ctx, img, blk, s[2])
    if img is None:
        spatial = image_shape.shape if image_shape is not None else None
        if spatial is None or len(spatial) != 1 or type(spatial[0]) is not int:
            return None
        return [n, c] + [None] * spatial[0]
    return [n, c] + list(img)
