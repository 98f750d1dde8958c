"""Helpers shared by the rule modules: shapes, known elements broadcast to a shape, integer
ranges, and bounds of extent expressions (extents are >= 0, Clause 6.5.2)."""

from __future__ import annotations

from .. import dims as D
from ..value import MAX_DATA, Value, _count

#: Integer element types (Table 5 codes) -> (lowest, highest) value.
INT_RANGE = {2: (0, 255), 3: (-128, 127), 4: (0, 65535), 5: (-32768, 32767),
             6: (-2 ** 31, 2 ** 31 - 1), 7: (-2 ** 63, 2 ** 63 - 1), 12: (0, 2 ** 32 - 1),
             13: (0, 2 ** 64 - 1)}


def same_shape(ctx, x: Value, i: int = 0) -> Value:
    """Output ``i`` with ``x``'s shape and the constrained element type (unary operators)."""
    return ctx.tensor(x.shape, i=i)


def shape_list(v: Value | None) -> list | None:
    """``v``'s shape as a new list of extents; None when ``v`` is absent (an omitted optional
    input) or its rank is unknown."""
    return None if v is None or v.shape is None else list(v.shape)


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


def lower(x) -> int | None:
    """A lower bound of ``x`` (an int, an :class:`~..dims.Expr` of extents, or None): the int
    itself; for an expression whose terms all have positive coefficients over non-negative
    atoms (variables are extents, so >= 0; ``floor``/``ceil``/``mod`` of non-negative
    arguments), its constant plus the coefficient of each term made only of variables taken to
    be at least 1 (:data:`~..dims.POSITIVE`: the main graph's input dimensions); else None (no
    bound known)."""
    if x is None or type(x) is int:
        return x
    if not isinstance(x, D.Expr):
        return None
    positive = D.POSITIVE.get()
    total = x.const
    for mono, c in x.terms:
        if c <= 0:
            return None
        at_least_one = True
        for atom in mono:
            if isinstance(atom, str):
                at_least_one = at_least_one and atom in positive
            else:
                if not all(nonneg(a) for a in atom.args):
                    return None
                at_least_one = False
        if at_least_one:
            total += c
    return total


def nonneg(x) -> bool:
    """Whether extent expression (or int) ``x`` is known to be >= 0 (:func:`lower`)."""
    lo = lower(x)
    return lo is not None and lo >= 0


def at_least(a, b, k: int = 0) -> bool | None:
    """Whether ``a - b >= k`` for extents ``a`` and ``b``, where their bounds decide it: True,
    False, or None (either unknown, or an expression whose value varies across it)."""
    if a is None or b is None:
        return None
    d = D.sub(a, b)
    if type(d) is int:
        return d >= k
    lo = lower(d)
    if lo is not None and lo >= k:
        return True
    lo = lower(D.mul(d, -1))  # -d >= lo, so d <= -lo
    if lo is not None and -lo < k:
        return False
    return None


def int_attr(ctx, name: str, default=None, report: bool = True):
    """Attribute ``name`` of the node as an int (``ctx.attr``; ``default`` when the node does not
    set it and the definition gives none). A value of another type (a float, a string, a list:
    the definition says INT) gives None, so a rule never computes with it, and is reported as
    a contradiction unless ``report`` is false."""
    v = ctx.attr(name)
    if v is None:
        return default
    if type(v) is bool or type(v) is int:
        return int(v)
    if report:
        ctx.contradiction(f"attribute {name} is {v!r}, not an int")
    return None


def list_attr(ctx, name: str, kind=None) -> list:
    """Attribute ``name`` of the node as a list (``ctx.attr``; [] when neither the node nor the
    definition gives it). A value that is not a list (an INTS, FLOATS or STRINGS attribute
    given as one value), or, with ``kind`` (a type or tuple of types), one with elements of
    other types, is reported as a contradiction and gives [], so a rule never computes with
    it."""
    v = ctx.attr(name)
    if v is None:
        return []
    if isinstance(v, (list, tuple)) and (kind is None or all(
            isinstance(x, kind) and type(x) is not bool for x in v)):
        return list(v)
    ctx.contradiction(f"attribute {name} is {v!r}, not a list"
                      + (f" of {getattr(kind, '__name__', kind)}" if kind else ""))
    return []
