"""Helpers shared by the rule modules."""

from __future__ import annotations

from ..value import MAX_DATA, Value, _count


def same_shape(ctx, x: Value, i: int = 0) -> Value:
    """Output ``i`` with ``x``'s shape and the constrained element type (unary operators)."""
    return ctx.tensor(x.shape, i=i)


def int_shape(shape) -> bool:
    """Whether ``shape`` (a tuple/list of extents, or None) is known with every extent an
    int."""
    return shape is not None and all(type(d) is int for d in shape)


def count(shape) -> int | None:
    """The element count of a shape whose extents are all ints, else None."""
    return None if shape is None else _count(shape)


def expand_data(data, shape, out_shape) -> tuple | None:
    """The row-major elements of a tensor of ``shape`` with elements ``data`` broadcast to
    ``out_shape`` (Clause 6.6, multidirectional: ``shape`` right-aligned against
    ``out_shape``, an extent 1 repeated), elements kept as they are (ints, Expr, None, floats,
    bools). None when ``data`` is None, a shape is not all ints, the shapes do not broadcast
    that way, or the result would hold more than :data:`~..value.MAX_DATA` elements. Never
    raises."""
    if data is None or not int_shape(shape) or not int_shape(out_shape):
        return None
    shape, out_shape = tuple(shape), tuple(out_shape)
    if shape == out_shape:
        return tuple(data)
    n = count(out_shape)
    if n is None or n > MAX_DATA or len(shape) > len(out_shape):
        return None
    shape = (1,) * (len(out_shape) - len(shape)) + shape
    strides = []
    s = 1
    for d, o in zip(reversed(shape), reversed(out_shape)):
        if d != o and d != 1:
            return None
        strides.append(s if d != 1 else 0)
        s *= d
    strides.reverse()
    if len(data) != s:
        return None
    index = [0]
    for o, st in zip(out_shape, strides):
        index = [b + k * st for b in index for k in range(o)]
    return tuple(data[i] for i in index)
