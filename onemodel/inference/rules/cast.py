"""Inference rules of Cast, CastLike and BitCast (the kernels of
``onemodel/evaluate/kernels/cast.py``, same keys and versions).

The output has the input's shape (ONNX 1-2). Its element type is the ``to`` attribute (Cast,
BitCast) or the second input's (CastLike, through the type constraint ``T2``, Clause 10.4).
BitCast needs the two element types to have the same width in bits, and no string: otherwise a
contradiction (Clause 9.4).

Data (Clause 9, partial data propagation): known elements are converted as Cast converts them
(Clause 6.3): integers to an integer type wrap to its range, and an extent expression is kept
where the target holds every extent (32 and 64-bit integer types; the unsigned ones only for
an expression known to be non-negative); a float to an integer type
truncates toward zero (known only when finite and in range); anything to bool is ``x != 0``
(an extent expression known to be >= 1 is true); integers, bools and floats to float, double
and float16 are rounded to the target's precision.
"""

from __future__ import annotations

import math

from ...operators import rule
from ._util import INT_RANGE, int_attr, lower, same_shape

_BOOL = 9
_STRING = 8
_FLOATS = {1: "float32", 10: "float16", 11: "float64"}
_WIDE_INTS = frozenset((6, 7, 12, 13))  # int32 int64 uint32 uint64: any extent fits
_EXACT = 2 ** 53  # integers float64 holds exactly


def _to_int(x, to):
    lo, hi = INT_RANGE[to]
    t = type(x)
    if t is bool:
        return int(x)
    if t is int:
        return x if lo <= x <= hi else (x - lo) % (hi - lo + 1) + lo
    if t is float:
        if not math.isfinite(x):
            return None
        q = math.trunc(x)
        return q if lo <= q <= hi else None
    if x is not None and to in _WIDE_INTS:  # an extent expression; unsigned: if never < 0
        if lo == 0 and (lower(x) is None or lower(x) < 0):
            return None
        return x
    return None


def _to_bool(x):
    if type(x) in (int, float, bool):
        return x != 0
    lo = lower(x)
    return True if lo is not None and lo >= 1 else None


def cast_data(data, to: int):
    """The elements ``data`` (of any numeric or bool type, extents included) cast to element
    type ``to`` by the rules of Cast, or None when they are not all known after the cast
    (integer targets may hold None elements)."""
    if data is None:
        return None
    if to in INT_RANGE:
        return tuple(_to_int(x, to) for x in data)
    if to == _BOOL:
        got = tuple(_to_bool(x) for x in data)
        return None if None in got else got
    dt = _FLOATS.get(to)
    if dt is None or not all(type(x) in (float, bool) or (type(x) is int and -_EXACT <= x <= _EXACT)
                             for x in data):
        return None  # an int beyond 2**53 would be rounded twice through float64
    import numpy as np

    with np.errstate(over="ignore", invalid="ignore"):
        return tuple(np.array(data, dtype=np.float64).astype(dt).astype(np.float64).tolist())


def _cast(ctx, x, to):
    """The output of a cast of ``x`` to ``to``: ``x``'s shape, elements when known."""
    if to is None:
        return same_shape(ctx, x)
    data = None
    if x.shape is not None and x.elem not in (None, _STRING) and to != _STRING:
        if to in INT_RANGE or to == _BOOL or to in _FLOATS:
            data = cast_data(x.data, to)
    return ctx.tensor(x.shape, elem=to, data=data)


def _to_attr(ctx):
    from ...ir.dtypes import INFO, code_of_name

    v = ctx.attr("to")
    if isinstance(v, (str, bytes)) and ctx.opset < 6:  # Cast-1: the type's name, a STRING
        to = code_of_name(v)
        if to is None:
            ctx.contradiction(f"'to' is {v!r}, which names no element type of Table 5")
        return to
    to = int_attr(ctx, "to")
    if to is None and ctx.has_attr("to"):
        return None  # not an int: reported
    if to is None or to not in INFO:
        ctx.contradiction(f"'to' is {to!r}, not an element type of Table 5")
        return None
    return int(to)


@rule("Cast")
def cast(ctx, x):
    """Cast: ``x``'s shape, element type ``to`` (a contradiction when it is missing or not in
    Table 5); known elements converted (module doc)."""
    return _cast(ctx, x, _to_attr(ctx))


@rule("CastLike")
def cast_like(ctx, x, like):
    """CastLike: ``x``'s shape, the element type of ``target_type``; known elements
    converted."""
    return _cast(ctx, x, ctx.elem(0))


@rule("BitCast")
def bitcast(ctx, x):
    """BitCast: ``x``'s shape, element type ``to``; a contradiction when ``to`` and the input's
    type differ in width, or either is a string."""
    from ...ir.dtypes import INFO

    to = _to_attr(ctx)
    if to is None:
        return same_shape(ctx, x)
    src = x.elem
    if _STRING in (to, src):
        ctx.contradiction("BitCast takes no string type")
    elif src in INFO and INFO[src].bits != INFO[to].bits:
        ctx.contradiction(f"from {INFO[src].name} ({INFO[src].bits} bits) to "
                          f"{INFO[to].name} ({INFO[to].bits} bits): the widths differ")
    return ctx.tensor(x.shape, elem=to)
