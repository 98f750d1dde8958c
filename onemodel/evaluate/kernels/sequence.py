"""Sequence and optional operators (ONNX operators, default domain).

A sequence value is a Python ``list`` of numpy arrays (or of other values); kernels never change
a list they are given and return new lists. An optional value is its element, or ``None`` when
empty. A kernel whose single output is a sequence returns it wrapped in a one-element tuple, so the
runner never mistakes the list for a list of outputs.
"""

from __future__ import annotations

import numpy as np

from ...errors import EvaluationError, InvalidModelError
from ...operators import kernel
from .. import memory
from ..memory import check_allocation


def _seq(value, what: str) -> list:
    if not isinstance(value, list):
        raise EvaluationError(f"{what} must be a sequence, not {type(value).__name__}")
    return value


def _position(position, length: int, *, insert: bool, what: str) -> int:
    """A sequence index from an int32/int64 scalar tensor; negative counts from the end.

    Valid range: [-length, length - 1], and up to ``length`` when inserting.
    """
    p = int(np.asarray(position).reshape(-1)[0])
    high = length if insert else length - 1
    if not -length <= p <= high:
        raise EvaluationError(f"{what} position {p} is outside [{-length}, {high}]")
    return p + length if p < 0 else p


@kernel("SequenceConstruct")
def sequence_construct(ctx, *tensors):
    """SequenceConstruct: the sequence of its inputs, in order."""
    return (list(tensors),)


@kernel("SequenceEmpty")
def sequence_empty(ctx):
    """SequenceEmpty: an empty sequence (its element type, attribute ``dtype``, is not kept)."""
    return ([],)


@kernel("SequenceInsert")
def sequence_insert(ctx, sequence, tensor, position=None):
    """SequenceInsert: a new sequence with ``tensor`` inserted at ``position`` (default: end)."""
    seq = list(_seq(sequence, "SequenceInsert input"))
    at = len(seq) if position is None else _position(position, len(seq), insert=True,
                                                      what="SequenceInsert")
    seq.insert(at, tensor)
    return (seq,)


@kernel("SequenceErase")
def sequence_erase(ctx, sequence, position=None):
    """SequenceErase: a new sequence without the element at ``position`` (default: the last)."""
    seq = list(_seq(sequence, "SequenceErase input"))
    if not seq:
        raise EvaluationError("SequenceErase of an empty sequence")
    at = len(seq) - 1 if position is None else _position(position, len(seq), insert=False,
                                                          what="SequenceErase")
    del seq[at]
    return (seq,)


@kernel("SequenceAt")
def sequence_at(ctx, sequence, position):
    """SequenceAt: the element at ``position`` (negative counts from the end)."""
    seq = _seq(sequence, "SequenceAt input")
    return seq[_position(position, len(seq), insert=False, what="SequenceAt")]


@kernel("SequenceLength")
def sequence_length(ctx, sequence):
    """SequenceLength: the number of elements, an int64 scalar tensor."""
    return np.array(len(_seq(sequence, "SequenceLength input")), dtype=np.int64)


@kernel("ConcatFromSequence")
def concat_from_sequence(ctx, sequence):
    """ConcatFromSequence: concatenate the tensors along ``axis``, or stack them on a new axis.

    With ``new_axis`` = 1 the tensors are stacked on a new axis inserted at ``axis``, which may
    then range over [-r-1, r] for tensors of rank r. Raises InvalidModelError for an empty
    sequence or tensors whose shapes do not fit.
    """
    seq = [np.asarray(x) for x in _seq(sequence, "ConcatFromSequence input")]
    if not seq:
        raise EvaluationError("ConcatFromSequence of an empty sequence")
    axis = int(ctx.attrs["axis"])
    new_axis = int(ctx.attr("new_axis"))
    rank = seq[0].ndim + (1 if new_axis else 0)
    if not -rank <= axis < rank:
        raise EvaluationError(f"ConcatFromSequence axis {axis} is outside [{-rank}, {rank - 1}]")
    total = sum(x.nbytes for x in seq)
    if total >= memory._floor:  # (a sequence grown by a Loop: checked)
        check_allocation(total, "the ConcatFromSequence output")
    try:
        return np.stack(seq, axis=axis) if new_axis else np.concatenate(seq, axis=axis)
    except ValueError as e:
        raise EvaluationError(f"ConcatFromSequence: {e}") from None


@kernel("SplitToSequence")
def split_to_sequence(ctx, tensor, split=None):
    """SplitToSequence: split ``tensor`` along ``axis`` into a sequence.

    ``split`` absent: pieces of length 1, the split axis removed when ``keepdims`` is 0. A
    scalar ``split``: pieces of that length, the last one shorter if need be. A 1-D ``split``:
    the piece lengths, which must sum to the axis length.
    """
    x = np.asarray(tensor)
    axis = int(ctx.attr("axis"))
    if not -x.ndim <= axis < x.ndim:
        raise EvaluationError(f"SplitToSequence axis {axis} is outside the rank {x.ndim}")
    axis %= x.ndim
    dim = x.shape[axis]
    if split is None:
        pieces = [np.take(x, [i], axis=axis) for i in range(dim)]
        if not int(ctx.attr("keepdims")):
            pieces = [np.squeeze(p, axis=axis) for p in pieces]
        return (pieces,)
    s = np.asarray(split).astype(np.int64)
    if s.ndim == 0:
        step = int(s)
        if step <= 0:
            raise EvaluationError(f"SplitToSequence split {step} must be positive")
        lengths = [step] * (dim // step) + ([dim % step] if dim % step else [])
    else:
        lengths = [int(v) for v in s.reshape(-1)]
        if any(v < 0 for v in lengths) or sum(lengths) != dim:
            raise EvaluationError(f"SplitToSequence split {lengths} does not add up to {dim}")
    bounds = np.cumsum([0] + lengths)
    index = [slice(None)] * x.ndim
    pieces = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        index[axis] = slice(int(a), int(b))
        pieces.append(x[tuple(index)].copy())
    return (pieces,)


@kernel("SequenceMap")
def sequence_map(ctx, input_sequence, *additional):
    """SequenceMap: apply ``body`` to each element of ``input_sequence``.

    Each additional input is a sequence of the same length (its i-th element is passed) or a
    tensor (passed whole every time). Outputs: one sequence per body output.
    """
    seq = _seq(input_sequence, "SequenceMap input")
    n = len(seq)
    for extra in additional:
        if isinstance(extra, list) and len(extra) != n:
            raise EvaluationError(f"SequenceMap sequences have lengths {n} and {len(extra)}")
    body = ctx.attrs["body"]
    results: list[list] = [[] for _ in range(ctx.num_outputs)]
    for i in range(n):
        args = [seq[i]] + [e[i] if isinstance(e, list) else e for e in additional]
        outs = ctx.run_graph(body, args)
        if len(outs) != ctx.num_outputs:
            raise InvalidModelError(f"SequenceMap body gave {len(outs)} outputs, the node has "
                                    f"{ctx.num_outputs}")
        for acc, v in zip(results, outs):
            acc.append(v)
    return tuple(results)


@kernel("Optional")
def optional(ctx, value=None):
    """Optional: an optional holding ``value``, or an empty optional (``None``) without input."""
    return (value,)


@kernel("OptionalHasElement")
def optional_has_element(ctx, value=None):
    """OptionalHasElement: bool scalar, true when the optional (or, from opset 18, the tensor or
    sequence) holds a value; false for an empty optional or an omitted input."""
    return np.array(value is not None, dtype=np.bool_)


@kernel("OptionalGetElement")
def optional_get_element(ctx, value):
    """OptionalGetElement: the element of a non-empty optional; from opset 18 a tensor or
    sequence input is returned as it is. Raises InvalidModelError for an empty optional."""
    if value is None:
        raise EvaluationError("OptionalGetElement of an empty optional")
    return (value,)
