"""Axis normalization, written once for the evaluator's kernels and the inference rules.

The operator definitions (ONNX Part 1, Clause 14.3, the operators' definitions of the default
domain) give an ``axis`` of a tensor of rank ``r`` in ``[-r, r-1]``, a negative one counting
from the end (``axis + r``); Flatten's in ``[-r, r]``; Unsqueeze's ``axes`` index the output,
of rank ``r + len(axes)``, and may not repeat an axis. Out of range is an error of the model:
the functions here raise :class:`AxisError` with the message, which a kernel raises as an
EvaluationError and a rule reports as a contradiction (Clause 9.4), so both say the same.
Pure Python; imports nothing of the package.
"""

from __future__ import annotations

__all__ = ["AxisError", "axis_index", "distinct_axes", "flatten_axis", "signal_axis",
           "unsqueeze_axes"]


class AxisError(ValueError):
    """An axis outside its range, or repeated; ``str()`` is the message."""


def axis_index(axis: int, rank: int, what: str = "axis") -> int:
    """``axis`` of a tensor of rank ``rank`` as an index in ``[0, rank)``; negative values
    count from the end (accepted range ``[-rank, rank - 1]``). Raises AxisError "``{what}
    {axis}`` is out of range for rank ``{rank}``" outside it (always for rank 0)."""
    if not -rank <= axis < rank:
        raise AxisError(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def signal_axis(axis: int, rank: int) -> int:
    """DFT's ``axis`` (the attribute at opset 17, the input from 20) of an input of rank
    ``rank`` (its last axis the real/imaginary one) as an index in ``[0, rank - 2]``: the
    accepted range is ``[-rank, -2]`` and ``[0, rank - 2]``, a negative one counting from the
    back of the whole input (-2: the last signal axis). Raises AxisError outside it."""
    if not -rank <= axis < rank - 1 or axis == -1:
        raise AxisError(f"DFT axis {axis} does not name a signal axis of rank {rank}")
    return axis + rank if axis < 0 else axis


def flatten_axis(axis: int, rank: int) -> int | None:
    """Flatten's ``axis`` (accepted range ``[-rank, rank]``) as an index in ``[0, rank]``;
    None outside that range (the callers' messages differ in wording)."""
    a = axis + rank if axis < 0 else axis
    return a if 0 <= a <= rank else None


def distinct_axes(axes, rank: int, what: str = "axis", plural: str = "axes") -> list[int]:
    """A list of axes (ints) of a tensor of rank ``rank`` as indices, in their order (Resize's
    ``axes``; Unsqueeze's). Raises AxisError for the first axis out of range
    (:func:`axis_index`, ``what`` naming it) or "``{plural} {axes}`` repeat an axis"."""
    norm = [axis_index(a, rank, what) for a in axes]
    if len(set(norm)) != len(norm):
        raise AxisError(f"{plural} {list(axes)} repeat an axis")
    return norm


def unsqueeze_axes(axes, rank: int, what: str = "axis") -> list[int]:
    """Unsqueeze's ``axes`` (ints) of an input of rank ``rank``, as sorted indices of the
    output (rank ``rank + len(axes)``): :func:`distinct_axes`, the repeat named "Unsqueeze
    axes ``{axes}`` repeat an axis"."""
    return sorted(distinct_axes(axes, rank + len(axes), what, "Unsqueeze axes"))
