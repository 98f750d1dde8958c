"""Inference rules of the string operators and TfIdfVectorizer (the kernels of
``onemodel/evaluate/kernels/text.py``, same keys and versions).

Shapes and element types (ONNX Part 1, operator definitions of Clause 14.3: StringNormalizer-10,
StringConcat-20, StringSplit-20, RegexFullMatch-20, TfIdfVectorizer-9):

* ``StringConcat``: the broadcast (Clause 6.6). ``StringSplit``: Y ``[..., ?]`` (the largest
  number of parts is data; 0 when X has no elements), Z X's shape (int64).
  ``RegexFullMatch``: X's shape, bool.
  ``StringNormalizer``: ``[C]`` or ``[1, C]`` kept without stopwords (at least 1), unknown
  with them.
* ``TfIdfVectorizer``: ``[max(ngram_indexes) + 1]`` for a 1-D X, ``[N, ...]`` for 2-D, float.

Contradictions (Clause 9.4): a StringNormalizer input that is not ``[C]`` or ``[1, C]``, a
TfIdfVectorizer input of rank above 2.
"""

from __future__ import annotations

from ...operators import rule
from .. import dims as D
from ._util import list_attr, lower, shape_list


# -- strings ----------------------------------------------------------------------------------
@rule("StringNormalizer")
def string_normalizer(ctx, x):
    """StringNormalizer: [C] or [1, C] (module doc)."""
    s = shape_list(x)
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
    s = shape_list(x)
    if s is None:
        return None, None
    return s + [0 if 0 in s else None], s


@rule("RegexFullMatch")
def regex_full_match(ctx, x):
    """RegexFullMatch: X's shape, bool."""
    return shape_list(x)


@rule("TfIdfVectorizer")
def tfidf_vectorizer(ctx, x):
    """TfIdfVectorizer: [max(ngram_indexes) + 1] or [N, max(ngram_indexes) + 1], float."""
    idx = list_attr(ctx, "ngram_indexes", int)
    width = max(idx) + 1 if idx else (0 if ctx.attr("ngram_indexes") in (None, []) else None)
    s = shape_list(x)
    if s is None:
        return None
    if len(s) <= 1:
        return [width]
    if len(s) != 2:
        ctx.contradiction(f"X has rank {len(s)}; [C] or [N, C] is needed")
        return None
    return [s[0], width]

