"""Inference rules of the sequence and optional operators (the kernels of
``onemodel/evaluate/kernels/sequence.py``, same keys and versions).

A sequence's Value is ``Value.sequence(inner)``: ``inner`` is what every element is (ONNX Part
1, Clause 6: the elements of a sequence have one type); where elements may differ in an extent
or a rank, that extent or rank is unknown (the join of :func:`.control.join`). A sequence's
length is not followed. Elements of two element types in one sequence are a contradiction.

* ``SequenceConstruct``: the join of its inputs; ``SequenceEmpty``: elements of ``dtype``
  (default float), shape unknown; ``SequenceInsert``: the join of the elements and the
  inserted tensor; ``SequenceErase``: the input's type; ``SequenceAt``: the element;
  ``SequenceLength``: int64 ``[]``.
* ``ConcatFromSequence``: the element's shape with the ``axis`` extent unknown (the number of
  elements is not followed), or with a new axis of unknown extent (``new_axis`` 1; ``axis`` then
  in ``[-r-1, r]``).
* ``SplitToSequence``: pieces of extent 1 along ``axis`` (removed when ``keepdims`` is 0) without
  ``split``; with a scalar ``split`` k, pieces of k where the axis extent is a known multiple of
  k (any extent for k = 1), the extent itself where it is known to be less than k; with a 1-D
  ``split``, the common length where all are equal; else unknown.
* ``SequenceMap``: the body inferred once with each sequence input's element and each tensor
  input as it is; output k is a sequence of the body's output k.
* ``Optional``: an optional of its input, or of attribute ``type`` without one;
  ``OptionalHasElement``: bool ``[]`` (true for a tensor or sequence input, opset 18; false for
  an omitted one); ``OptionalGetElement``: the optional's element (a tensor or sequence input
  itself from opset 18).
"""

from __future__ import annotations

from ...operators import rule
from ..value import UNKNOWN, Value
from ._util import int_attr
from .control import join

_BOOL, _INT64, _FLOAT = 9, 7, 1


def _element(ctx, seq: Value | None, what: str = "input") -> Value:
    """The element Value of sequence ``seq`` (unknown when it is not known to be one; a
    contradiction when it is known to be something else)."""
    if seq is None or seq.kind is None:
        return UNKNOWN
    if seq.kind != "sequence":
        ctx.contradiction(f"{what} is {seq}, not a sequence")
        return UNKNOWN
    return seq.inner if seq.inner is not None else UNKNOWN


def _sequence(v: Value) -> Value:
    return Value.sequence(v if v.kind is not None else None)


def _scalar_position(ctx, v: Value | None) -> None:
    if v is not None and v.shape is not None and len(v.shape) not in (0, 1):
        ctx.contradiction(f"position has rank {len(v.shape)}, not a scalar")


@rule("SequenceConstruct")
def sequence_construct(ctx, *tensors):
    """SequenceConstruct: a sequence whose element is the join of the inputs."""
    if not tensors:
        return _sequence(UNKNOWN)
    inner = tensors[0] if tensors[0] is not None else UNKNOWN
    for k, t in enumerate(tensors[1:], 1):
        inner = join(ctx, inner, t, f"input {k} and the ones before it")
    return _sequence(inner)


@rule("SequenceEmpty")
def sequence_empty(ctx):
    """SequenceEmpty: a sequence of tensors of element type ``dtype`` (default float)."""
    elem = int_attr(ctx, "dtype", _FLOAT)
    return Value.sequence(Value.tensor(elem, None)) if elem else _sequence(UNKNOWN)


@rule("SequenceInsert")
def sequence_insert(ctx, sequence, tensor, position=None):
    """SequenceInsert: the join of the elements and the inserted tensor."""
    _scalar_position(ctx, position)
    inner = _element(ctx, sequence)
    if sequence is None or sequence.kind is None:
        return _sequence(UNKNOWN)
    return _sequence(join(ctx, inner, tensor, "the elements and the inserted tensor"))


@rule("SequenceErase")
def sequence_erase(ctx, sequence, position=None):
    """SequenceErase: the input sequence's type."""
    _scalar_position(ctx, position)
    return _sequence(_element(ctx, sequence))


@rule("SequenceAt")
def sequence_at(ctx, sequence, position):
    """SequenceAt: the element's Value."""
    _scalar_position(ctx, position)
    v = _element(ctx, sequence)
    return v if v.kind is not None else None


@rule("SequenceLength")
def sequence_length(ctx, sequence):
    """SequenceLength: int64 ``[]`` (the length is not followed)."""
    _element(ctx, sequence)
    return []


@rule("ConcatFromSequence")
def concat_from_sequence(ctx, sequence):
    """ConcatFromSequence: the element's shape, the ``axis`` extent unknown (or a new axis of
    unknown extent with ``new_axis`` 1); an axis out of range is a contradiction."""
    inner = _element(ctx, sequence)
    elem = inner.elem if inner.kind == "tensor" else None
    axis = int_attr(ctx, "axis")
    new_axis = int_attr(ctx, "new_axis", 0)
    if inner.kind != "tensor" or inner.shape is None or axis is None or new_axis is None:
        return Value.tensor(elem, None)
    shape = list(inner.shape)
    if new_axis:
        a = ctx.axis(axis, len(shape) + 1)
        if a is None:
            return Value.tensor(elem, None)
        shape.insert(a, None)
    else:
        a = ctx.axis(axis, len(shape))
        if a is None:
            return Value.tensor(elem, None)
        shape[a] = None
    return Value.tensor(elem, shape)


@rule("SplitToSequence")
def split_to_sequence(ctx, x, split=None):
    """SplitToSequence: a sequence of pieces of ``x`` along ``axis`` (see the module
    docstring for the piece extent)."""
    elem = x.elem if x.kind == "tensor" else None
    axis = int_attr(ctx, "axis", 0)
    if x.shape is None or axis is None:
        return Value.sequence(Value.tensor(elem, None))
    a = ctx.axis(axis, len(x.shape))
    if a is None:
        return Value.sequence(Value.tensor(elem, None))
    shape = list(x.shape)
    if split is None:
        if int_attr(ctx, "keepdims", 1) == 0:
            del shape[a]
        else:
            shape[a] = 1
        return Value.sequence(Value.tensor(elem, shape))
    lengths = ctx.ints(1)
    piece = None
    if split.rank == 0 and lengths is not None and type(lengths[0]) is int:
        k, d = lengths[0], shape[a]
        if k <= 0:
            ctx.contradiction(f"split {k} is not positive")
        elif k == 1 or (type(d) is int and d % k == 0):
            piece = k
        elif type(d) is int and d < k:
            piece = d
    elif split.rank == 1 and lengths:
        if all(s is not None and s == lengths[0] for s in lengths):
            piece = lengths[0]
        if all(type(s) is int for s in lengths) and type(shape[a]) is int \
                and sum(lengths) != shape[a]:
            ctx.contradiction(f"split {lengths} does not add up to extent {shape[a]}")
    elif split.rank is not None and split.rank > 1:
        ctx.contradiction(f"split has rank {split.rank}, not 0 or 1")
    shape[a] = piece
    return Value.sequence(Value.tensor(elem, shape))


@rule("SequenceMap")
def sequence_map(ctx, input_sequence, *additional):
    """SequenceMap: the body inferred with the elements of the sequence inputs and the tensor
    inputs; each output a sequence of the body's output."""
    args = [_element(ctx, input_sequence)]
    for v in additional:
        if v is not None and v.kind == "sequence":
            args.append(v.inner if v.inner is not None else UNKNOWN)
        else:
            args.append(v if v is not None else UNKNOWN)
    outs = ctx.infer_graph("body", args)
    return tuple(_sequence(outs[k] if k < len(outs) and outs[k] is not None else UNKNOWN)
                 for k in range(ctx.num_outputs))


@rule("Optional")
def optional(ctx, value=None):
    """Optional: an optional of the input, or of attribute ``type`` without one."""
    if value is not None:
        return Value.optional(value if value.kind is not None else None)
    t = ctx.attr("type", None)
    inner = Value.from_type(t) if t is not None else UNKNOWN
    return Value.optional(inner if inner.kind is not None else None)


def _has_element(ctx, value):
    if value is None:
        return Value.tensor(_BOOL, (), (False,))
    if value.kind in ("tensor", "sequence") and ctx.opset >= 18:
        return Value.tensor(_BOOL, (), (True,))
    return Value.tensor(_BOOL, ())


@rule("OptionalHasElement")
def optional_has_element(ctx, value=None):
    """OptionalHasElement: bool ``[]``; known false for an omitted input, true for a tensor or
    sequence (opset 18)."""
    return _has_element(ctx, value)


@rule("OptionalGetElement")
def optional_get_element(ctx, value):
    """OptionalGetElement: the optional's element; a tensor or sequence itself (opset 18)."""
    if value is None or value.kind is None:
        return None
    if value.kind == "optional":
        return value.inner
    if ctx.opset < 18:
        ctx.contradiction(f"the input is {value}, not an optional")
        return None
    return value
