"""Element-wise operators: unary and binary arithmetic, logic, comparison, bitwise, selection.

Each kernel follows the ONNX operator definition (ONNX 1-2) for the versions it is registered
with; the versions only differ in the types they admit or in broadcasting (multidirectional,
numpy-style, from opset 7 on; opset 1 to 6 ``broadcast``/``axis`` attributes are honoured where
the operator had them). Outputs keep the element type of the inputs.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import UnsupportedError
from ...operators import broadcast, kernel
from .. import memory
from ..memory import check_broadcast, check_broadcast_all


def _legacy_broadcast(ctx, a, b):
    """Opset < 7 binary operators: ``broadcast=1`` with ``axis`` aligns ``b`` inside ``a``."""
    if ctx.opset >= 7 or not ctx.attr("broadcast") or b.ndim == 0 or a.shape == b.shape:
        return b
    axis = ctx.attr("axis", None)
    if axis is None:
        return b
    tail = a.ndim - broadcast.legacy_start(axis, a.ndim, b.ndim) - b.ndim
    return b.reshape(b.shape + (1,) * tail) if tail > 0 else b


def _binary(name, ufunc):
    what = f"the {name} output"

    def fn(ctx, a, b):
        b = _legacy_broadcast(ctx, a, b)
        if a.size * b.size * a.itemsize >= memory._floor:  # (the budget's fast path, inline)
            check_broadcast(a, b, a.itemsize, what)
        return ufunc(a, b)

    fn.__name__ = name.lower()
    fn.__qualname__ = fn.__name__
    return kernel(name)(fn)


_binary("Add", np.add)
_binary("Sub", np.subtract)
_binary("Mul", np.multiply)


def _int_div(a, b):
    """Integer division truncating toward zero, as C and the ONNX reference do."""
    q = np.floor_divide(a, b)
    if a.dtype.kind == "i":
        fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
        q = q + fix.astype(q.dtype)
    return q


@kernel("Div")
def div(ctx, a, b):
    b = _legacy_broadcast(ctx, a, b)
    check_broadcast(a, b, a.itemsize, "the Div output")
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        return _int_div(a, b)
    return np.divide(a, b)


@kernel("Pow")
def pow_(ctx, x, y):
    """Pow: the output has the type of ``x`` (opset 12 on allows a different type for ``y``)."""
    y = _legacy_broadcast(ctx, x, y)
    check_broadcast(x, y, 8, "the Pow output")  # (integers computed through float64)
    if x.dtype.kind in "iu":
        if y.dtype.kind in "iu":
            return np.power(x, y.astype(x.dtype, copy=False))
        return np.power(x.astype(np.float64), y).astype(x.dtype)
    if y.dtype != x.dtype:
        y = y.astype(x.dtype)
    return np.power(x, y)


@kernel("Mod")
def mod(ctx, a, b):
    """Mod: ``fmod=1`` ``A - trunc(A/B)*B`` (sign of A), else ``A - floor(A/B)*B`` (sign of B)."""
    check_broadcast(a, b, a.itemsize, "the Mod output")
    if ctx.attr("fmod"):
        return np.fmod(a, b)
    return np.mod(a, b)


# -- variadic -------------------------------------------------------------------------------
def _fold(ufunc, xs):
    xs = [x for x in xs if x is not None]
    check_broadcast_all(xs, xs[0].itemsize if xs else 1, "the broadcast output")
    out = xs[0]
    for x in xs[1:]:
        out = ufunc(out, x)
    return out


@kernel("Sum")
def sum_(ctx, *xs):
    return _fold(np.add, xs)


@kernel("Mean")
def mean(ctx, *xs):
    xs = [x for x in xs if x is not None]
    total = _fold(np.add, xs)
    return (total / np.asarray(len(xs), dtype=total.dtype)).astype(total.dtype, copy=False)


@kernel("Max")
def max_(ctx, *xs):
    return _fold(np.maximum, xs)


@kernel("Min")
def min_(ctx, *xs):
    return _fold(np.minimum, xs)


# -- unary math -----------------------------------------------------------------------------
def _unary(name, ufunc):
    def fn(ctx, x):
        return ufunc(x)

    fn.__name__ = name.lower()
    fn.__qualname__ = fn.__name__
    kernel(name)(fn)


_unary("Abs", np.abs)
_unary("Neg", np.negative)
_unary("Floor", np.floor)
_unary("Ceil", np.ceil)
_unary("Sqrt", np.sqrt)
_unary("Exp", np.exp)
_unary("Tanh", np.tanh)
_unary("Log", np.log)
_unary("Round", np.round)  # round half to even, as numpy
_unary("Sin", np.sin)
_unary("Cos", np.cos)
_unary("Tan", np.tan)
_unary("Asin", np.arcsin)
_unary("Acos", np.arccos)
_unary("Atan", np.arctan)
_unary("Sinh", np.sinh)
_unary("Cosh", np.cosh)
_unary("Asinh", np.arcsinh)
_unary("Acosh", np.arccosh)
_unary("Atanh", np.arctanh)
_unary("Sign", np.sign)
_unary("Not", np.logical_not)
_unary("BitwiseNot", np.invert)


@kernel("Reciprocal")
def reciprocal(ctx, x):
    return np.divide(np.ones((), dtype=x.dtype), x)


@kernel("IsNaN")
def isnan(ctx, x):
    return np.isnan(x)


@kernel("IsInf")
def isinf(ctx, x):
    pos = ctx.attr("detect_positive")
    neg = ctx.attr("detect_negative")
    if pos and neg:
        return np.isinf(x)
    if pos:
        return np.isposinf(x)
    if neg:
        return np.isneginf(x)
    return np.zeros(x.shape, dtype=bool)


# -- erf --------------------------------------------------------------------------------------
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def erf_array(x: np.ndarray) -> np.ndarray:
    """The error function, element-wise, accurate to about 1 ulp of float64, in x's dtype.

    For |x| < 3: erf(x) = 2/sqrt(pi) exp(-x^2) sum_n 2^n x^(2n+1) / (1*3*...*(2n+1)), a series of
    positive terms (no cancellation). For 3 <= |x| < 6: 1 - erfc(x) with erfc from its continued
    fraction. For |x| >= 6: +-1 (erfc(6) is below float64 resolution of 1).
    """
    dt = x.dtype
    xd = np.asarray(x, dtype=np.float64)
    ax = np.abs(xd)
    out = np.empty_like(xd)
    small = ax < 3.0
    if small.any():
        s = xd[small] if not small.all() else xd
        s2 = s * s
        term = s.copy()
        total = s.copy()
        terms = 60 if dt == np.float64 else 40
        for n in range(1, terms):
            term = term * (2.0 * s2 / (2 * n + 1))
            total += term
        val = _TWO_OVER_SQRT_PI * np.exp(-s2) * total
        if small.all():
            out = val
        else:
            out[small] = val
    mid = (ax >= 3.0) & (ax < 6.0)
    if mid.any():
        m = ax[mid]
        # erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + 2/(x + ...)))))
        frac = m.copy()
        for k in range(60, 0, -1):
            frac = m + (k / 2.0) / frac
        erfc = np.exp(-m * m) / math.sqrt(math.pi) / frac
        out[mid] = np.sign(xd[mid]) * (1.0 - erfc)
    big = ax >= 6.0
    if big.any():
        out[big] = np.sign(xd[big])
    nan = np.isnan(xd)
    if nan.any():
        out[nan] = np.nan
    return out.astype(dt, copy=False)


@kernel("Erf")
def erf(ctx, x):
    return erf_array(x)


# -- logic and comparison -------------------------------------------------------------------
def _compare(name, ufunc):
    what = f"the {name} output"

    def fn(ctx, a, b):
        b = _legacy_broadcast(ctx, a, b)
        if a.size * b.size >= memory._floor:  # (booleans: one byte an element)
            check_broadcast(a, b, 1, what)
        if a.dtype == object or b.dtype == object:
            return np.asarray(ufunc(a, b), dtype=bool)
        return ufunc(a, b)

    fn.__name__ = name.lower()
    fn.__qualname__ = fn.__name__
    kernel(name)(fn)


_compare("And", np.logical_and)
_compare("Or", np.logical_or)
_compare("Xor", np.logical_xor)
_compare("Equal", np.equal)
_compare("Greater", np.greater)
_compare("Less", np.less)
_compare("GreaterOrEqual", np.greater_equal)
_compare("LessOrEqual", np.less_equal)
_binary("BitwiseAnd", np.bitwise_and)
_binary("BitwiseOr", np.bitwise_or)
_binary("BitwiseXor", np.bitwise_xor)


@kernel("BitShift")
def bitshift(ctx, x, y):
    """BitShift: logical shifts of unsigned types; opset 28 adds signed types (arithmetic right
    shift) and defines shifts by a negative amount or by the bit width or more (-1 for a right
    shift of a negative value, else 0)."""
    direction = ctx.attr("direction", "")
    if direction not in ("LEFT", "RIGHT"):
        raise UnsupportedError(f"BitShift direction {direction!r} is neither LEFT nor RIGHT")
    bits = x.dtype.itemsize * 8
    check_broadcast(x, y, 8 + x.itemsize, "the BitShift output")  # (int64 shifts, the output)
    yy = y.astype(np.int64, copy=False)
    out_of_range = (yy < 0) | (yy >= bits)
    shift = np.where(out_of_range, 0, yy).astype(x.dtype)
    z = np.left_shift(x, shift) if direction == "LEFT" else np.right_shift(x, shift)
    if out_of_range.any():
        fill = np.zeros((), x.dtype)
        if direction == "RIGHT" and x.dtype.kind == "i":
            fill = np.where(x < 0, np.array(-1, x.dtype), fill)
        z = np.where(out_of_range, fill, z).astype(x.dtype, copy=False)
    return z


# -- selection ------------------------------------------------------------------------------
@kernel("Where")
def where(ctx, cond, x, y):
    check_broadcast_all((cond, x, y), x.itemsize, "the Where output")
    out = np.where(cond, x, y)
    if out.dtype != x.dtype:
        out = out.astype(x.dtype)
    return out


@kernel("Clip")
def clip_attr(ctx, x):
    # Clip-6 defaults to the float32 range (an infinite input comes out finite); Clip-1 to none
    lo = ctx.attr("min", -3.4028234663852886e38 if ctx.opset >= 6 else -math.inf)
    hi = ctx.attr("max", 3.4028234663852886e38 if ctx.opset >= 6 else math.inf)
    with np.errstate(over="ignore"):   # float16: the float32 limits round to infinities
        lo, hi = np.asarray(lo, x.dtype), np.asarray(hi, x.dtype)
    return np.minimum(np.maximum(x, lo), hi)


@kernel("Clip", since=11)
def clip(ctx, x, lo=None, hi=None):
    y = x
    if lo is not None and lo.size:
        y = np.maximum(y, lo.astype(x.dtype, copy=False))
    if hi is not None and hi.size:
        y = np.minimum(y, hi.astype(x.dtype, copy=False))
    return y
