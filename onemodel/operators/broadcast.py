"""Broadcasting, written once for the evaluator and the inference rules.

Multidirectional broadcasting (ONNX Part 1, Clause 6.6; the operators' definitions say which
inputs broadcast): the shapes are aligned at their last axis, the result has the largest rank,
and at each position the extents other than 1 must agree, the result being that extent (1 when
there is none). :func:`columns` gives each position's extents, :func:`int_shape` the result for
int extents (the evaluator's allocation checks; numpy broadcasts the arrays themselves). The
inference context walks the same columns with symbolic extents and reports what cannot
broadcast. Before opset 7, a binary operator with ``broadcast=1`` aligns its second input inside
the first at ``axis`` (:func:`legacy_start`). Pure Python; imports nothing of the package.
"""

from __future__ import annotations

__all__ = ["columns", "int_shape", "legacy_start"]


def columns(shapes) -> list[list]:
    """Per position of the broadcast of ``shapes`` (sequences of extents; the result's rank is
    the largest), the extents the shapes have there, aligned at the last axis: a shape of a
    smaller rank has none at the leading positions. ``[]`` for no shapes."""
    rank = max((len(s) for s in shapes), default=0)
    return [[s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0]
            for k in range(rank)]


def int_shape(shapes) -> list[int] | None:
    """The broadcast shape of ``shapes`` of int extents: per position the extent other than 1
    (1 when none; 0 stays 0), None when two extents other than 1 differ (no broadcast)."""
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:  # (the columns of :func:`columns`, walked shape by shape: no lists made)
        off = rank - len(s)
        for i, d in enumerate(s):
            o = out[off + i]
            if d != 1 and d != o:
                if o != 1:
                    return None
                out[off + i] = d
    return out


def legacy_start(axis: int | None, rank_a: int, rank_b: int) -> int:
    """The axis of the first input (rank ``rank_a``) at which the second's (rank ``rank_b``)
    first axis lies for a binary operator before opset 7 with ``broadcast=1``: ``axis``
    (negative from the end), or ``rank_a - rank_b`` (aligned at the end) when None. The
    second input fits when ``0 <= start`` and ``start + rank_b <= rank_a`` (the caller
    checks)."""
    if axis is None:
        return rank_a - rank_b
    return axis + rank_a if axis < 0 else axis
