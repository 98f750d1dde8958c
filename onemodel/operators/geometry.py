"""The geometry of the windowed operators, written once for the evaluator's kernels and the
inference rules: output extents of a window sliding over padded input (Conv, ConvInteger,
QLinearConv, DeformConv, the poolings, Col2Im's block count), of the transposed window
(ConvTranspose, MaxUnpool), and the padding ``auto_pad`` SAME_UPPER/SAME_LOWER implies.

The formulas are those of the operator definitions (ONNX Part 1, Clause 14.3, the operators'
definitions of the default domain): per spatial axis, with input extent ``x``, kernel extent
``k``, stride ``s``, dilation ``d`` and pads ``b`` (begin), ``e`` (end),

* the dilated kernel covers ``d*(k-1) + 1`` (:func:`dilated`);
* explicit pads (``auto_pad`` NOTSET) and VALID (no pads): ``floor((x + b + e - d*(k-1) - 1) /
  s) + 1`` windows (:func:`window_count`); with ``ceil_mode`` the ceiling, a last window that
  would start in the end padding dropped (:func:`pooled_count`);
* SAME_UPPER/SAME_LOWER: ``ceil(x / s)`` windows, the pads their total divided, the odd one at
  the end (UPPER) or the beginning (LOWER) (:func:`same_pads`);
* the transposed window: ``s*(x-1) + output_padding + d*(k-1) + 1 - b - e``
  (:func:`transposed_extent`; MaxUnpool's ``(x-1)*s + k - b - e`` is its case d=1, no output
  padding); with SAME_UPPER/SAME_LOWER ``x * s`` (:func:`transposed_same_extent`).

Each function computes with an *arithmetic*: :data:`INTS` (the default: Python ints, the
kernels' case, exact) or any namespace with the same functions ``add``, ``sub``, ``mul``,
``floordiv``, ``ceildiv`` — the inference rules pass :mod:`onemodel.inference.dims`, whose
functions take symbolic extents (ints, expressions of dimension variables, None for unknown;
Clause 9.3) and return them, so that the same formula gives an int for int extents and an
expression for symbolic ones. This module imports neither numpy nor the evaluator nor the
inference engine (the arithmetic is passed in: no import cycle between the packages).
Validation (ranks, attribute lengths, positive strides) and its messages stay with each caller,
which reports it its own way (an exception in the evaluator, a contradiction in inference).
"""

from __future__ import annotations

import operator
from types import SimpleNamespace

__all__ = ["INTS", "AUTO_PADS", "dilated", "window_count", "pooled_count", "window_counts",
           "same_pads", "split_pads", "span", "transposed_extent", "transposed_same_extent"]


def _ceildiv(a: int, b: int) -> int:
    """``ceil(a / b)`` of ints, exact."""
    return -(-a // b)


#: The arithmetic of Python ints (the kernels' extents): exact, no bound.
INTS = SimpleNamespace(add=operator.add, sub=operator.sub, mul=operator.mul,
                       floordiv=operator.floordiv, ceildiv=_ceildiv)

#: The values of the attribute ``auto_pad`` (``""`` read as NOTSET).
AUTO_PADS = ("NOTSET", "", "SAME_UPPER", "SAME_LOWER", "VALID")


def dilated(k, d, ar=INTS):
    """The extent ``d*(k-1) + 1`` a kernel extent ``k`` covers with dilation ``d``."""
    return ar.add(ar.mul(ar.sub(k, 1), d), 1)


def window_count(x, k, s, d, b, e, ar=INTS):
    """The number of windows of extent ``k`` (dilation ``d``) at stride ``s`` over an input
    extent ``x`` padded with ``b`` before and ``e`` after: ``floor((x + b + e - d*(k-1) - 1) /
    s) + 1``; ``s``, ``b`` and ``e`` are ints (attribute values). May be below 1 (no window
    fits); the caller decides what that means."""
    span_ = ar.sub(ar.add(x, b + e), dilated(k, d, ar))
    return ar.add(ar.floordiv(span_, s), 1)


def pooled_count(x, k, s, d, b, e, ar=INTS):
    """:func:`window_count` with ``ceil_mode`` (the poolings): ``ceil((x + b + e - d*(k-1) -
    1) / s) + 1``, less one when the last window would start in the end padding (at or past
    ``x + b``). ``b``, ``e`` and ``s`` are ints; with a symbolic ``x`` the count is an
    expression when the dilated kernel is an int and the last window always (``e >= d*(k-1) +
    1``) or never (``e + s <= d*(k-1) + 1``) starts in the padding, else None (unknown)."""
    dk = dilated(k, d, ar)
    o = ar.add(ar.ceildiv(ar.sub(ar.add(x, b + e), dk), s), 1)
    if type(o) is int and type(x) is int:
        return o - 1 if (o - 1) * s >= x + b else o
    if type(dk) is int and e >= dk:     # the last window always starts in the pads
        return ar.sub(o, 1)
    if type(dk) is int and e + s <= dk:  # it never does
        return o
    return None


def window_counts(auto_pad: str, spatial, kernel, strides, dilations, begin, end,
                  ceil_mode: bool = False, ar=INTS) -> list:
    """The output extents of a windowed operator, one per spatial axis (lists of one length):
    ``ceil(x / s)`` with ``auto_pad`` SAME_UPPER or SAME_LOWER (``begin``/``end`` unused), else
    :func:`window_count` with the pads ``begin``, ``end`` (zeros for VALID, given by the
    caller), or :func:`pooled_count` when ``ceil_mode`` and ``auto_pad`` is NOTSET (or ``""``).
    ``auto_pad`` is one of :data:`AUTO_PADS` (the caller checks)."""
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        return [ar.ceildiv(x, s) for x, s in zip(spatial, strides)]
    count = pooled_count if ceil_mode and auto_pad in ("NOTSET", "") else window_count
    return [count(x, k, s, d, b, e, ar)
            for x, k, s, d, b, e in zip(spatial, kernel, strides, dilations, begin, end)]


def split_pads(total, auto_pad: str) -> tuple[list, list]:
    """``(begin, end)`` pads of ints dividing each ``total`` as ``auto_pad`` says: half each,
    the odd one at the end with SAME_UPPER, at the beginning otherwise (SAME_LOWER)."""
    if auto_pad == "SAME_UPPER":
        begin = [t // 2 for t in total]
    else:
        begin = [t - t // 2 for t in total]
    return begin, [t - b for t, b in zip(total, begin)]


def same_pads(auto_pad: str, spatial, kernel, strides, dilations) -> tuple[list, list, list]:
    """``(begin, end, out)`` of ints for ``auto_pad`` SAME_UPPER or SAME_LOWER: ``out`` is
    ``ceil(x / s)`` per axis, the pads total ``max((out-1)*s + d*(k-1) + 1 - x, 0)``, divided
    by :func:`split_pads`."""
    out = [_ceildiv(x, s) for x, s in zip(spatial, strides)]
    total = [max(span(o, k, s, d) - x, 0)
             for o, k, s, d, x in zip(out, kernel, strides, dilations, spatial)]
    begin, end = split_pads(total, auto_pad)
    return begin, end, out


def span(o, k, s, d, ar=INTS):
    """The input extent ``(o-1)*s + d*(k-1) + 1`` that ``o`` windows of extent ``k``
    (dilation ``d``) at stride ``s`` cover, pads included."""
    return ar.add(ar.mul(ar.sub(o, 1), s), dilated(k, d, ar))


def transposed_extent(x, k, s, d, out_pad, b, e, ar=INTS):
    """The output extent of the transposed window (ConvTranspose; MaxUnpool with ``d`` 1 and
    ``out_pad`` 0): ``s*(x-1) + out_pad + d*(k-1) + 1 - b - e``, :func:`span` of ``x`` windows
    plus the output padding, less the pads; ``out_pad``, ``b`` and ``e`` are ints. May be
    below 1; the caller decides."""
    return ar.sub(ar.add(span(x, k, s, d, ar), out_pad), b + e)


def transposed_same_extent(x, s, ar=INTS):
    """The output extent of the transposed window with ``auto_pad`` SAME_UPPER or SAME_LOWER
    (ConvTranspose): ``x * s``."""
    return ar.mul(x, s)
