"""Strings and text features (ONNX 1-2, operator definitions StringNormalizer-10,
StringConcat-20, StringSplit-20, RegexFullMatch-20, TfIdfVectorizer-9): string tensors are object
arrays of Python ``str`` (bytes decoded as UTF-8); TfIdfVectorizer counts the n-grams of string or
integer rows.
"""

from __future__ import annotations

import re

import numpy as np

from ...errors import EvaluationError, InvalidModelError, UnsupportedError
from ...operators import kernel


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
