"""Inference rules of the element-wise operators (the kernels of
``onemodel/evaluate/kernels/elementwise.py``, same keys and versions).

Shapes (ONNX Part 1, Clause 6.6): binary, variadic (from opset 8) and ternary (``Where``)
operators give the multidirectional broadcast of their inputs' shapes (Clause 6.6.2); unary ones
the input's shape. Before opset 7 a binary operator's output has the first input's shape: with
``broadcast=1`` the second input is aligned inside it (at ``axis``, else at the end) and each of
its extents other than 1 must equal the first's; without it the two shapes must be equal (a
contradiction otherwise, Clause 9.4). Before opset 8 ``Sum``/``Mean``/``Max``/``Min`` need
equal shapes too. Element types come from the type constraints (Clause 10.4): comparisons,
``IsNaN`` and ``IsInf`` give ``tensor(bool)``, ``Pow`` the base's type.

Data (Clause 9, partial data propagation): integer tensors whose elements inference follows
(shapes, extents) are computed element by element with the arithmetic of :mod:`..dims`:
``Add``, ``Sub``, ``Mul``, ``Div`` (truncating toward zero; a symbolic quotient only where both
operands are known to be non-negative), ``Mod``, ``Neg``, ``Abs``, ``Sum``, ``Max``, ``Min``,
the bitwise operators on ints; comparisons give bool elements where every one is decided
(``N + 1 > 0`` is true, ``N == -1`` false: extents are non-negative); ``And``/``Or``/``Xor``/
``Not`` on known bools; ``Where`` picks elements by a known condition. An integer result is
wrapped to its element type's range as the kernels' fixed-width arithmetic does.
"""

from __future__ import annotations

from ...operators import broadcast, rule
from .. import dims as D
from ..value import MAX_DATA, Value
from ._util import (
    INT_RANGE,
    at_least,
    count,
    expand_data,
    int_attr,
    int_shape,
    nonneg,
    same_shape,
)

_BOOL = 9
_CONCRETE = (int, float, bool)


# -- element-wise data ----------------------------------------------------------------------
def _wrap(x, elem):
    """An integer result in ``elem``'s fixed-width range (two's complement wrap-around)."""
    if type(x) is not int:
        return x
    lo, hi = INT_RANGE[elem]
    if lo <= x <= hi:
        return x
    span = hi - lo + 1
    return (x - lo) % span + lo


def _operands(ctx, out, values, kind):
    """The elements of each Value broadcast to ``out`` when every one is known and the output
    is small, else None. ``kind`` "int" asks for integer element types, "bool" for bool,
    "any" takes whatever is known. Reads input data only when the output could carry it."""
    if not int_shape(out) or count(out) > MAX_DATA:
        return None
    for v in values:
        if kind == "int" and v.elem not in INT_RANGE:
            return None
        if kind == "bool" and v.elem != _BOOL:
            return None
    got = []
    for v in values:
        d = v.data
        if d is None:
            return None
        e = expand_data(d, v.shape, out)
        if e is None:
            return None
        got.append(e)
    return got


def _int_result(ctx, out, items, elem=None) -> Value:
    """The output tensor of shape ``out`` with integer elements ``items`` (wrapped to the
    output's type), or only the shape when the type is not an integer type."""
    elem = ctx.elem(0) if elem is None else elem
    if elem not in INT_RANGE or items is None:
        return ctx.tensor(out)
    return ctx.tensor(out, data=tuple(_wrap(x, elem) for x in items))


def _trunc_div(a, b):
    """Integer division truncating toward zero (the kernel's); a symbolic quotient where both
    operands are known non-negative (then it is the floor), or the dividend non-negative and
    the divisor a negative int."""
    if a is None or b is None or b == 0:
        return None
    if type(a) is int and type(b) is int:
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q
    if not nonneg(a):
        return None
    if nonneg(b):
        return D.floordiv(a, b)
    if type(b) is int:  # b < 0
        return D.mul(D.floordiv(a, -b), -1)
    return None


def _mod(fmod):
    def fn(a, b):
        if a is None or b is None or b == 0:
            return None
        if type(a) is int and type(b) is int:
            if fmod:
                r = abs(a) % abs(b)
                return -r if a < 0 else r
            return a % b
        if nonneg(a) and nonneg(b):  # both conventions agree for non-negative operands
            return D.mod(a, b)
        return None
    return fn


def _extreme(items, sign):
    """The greatest (``sign`` 1) or least (-1) of the extents ``items`` where bounds decide
    it, else None."""
    for c in items:
        if all((at_least(c, o) if sign > 0 else at_least(o, c)) for o in items if o is not c):
            return c
    return None


def _bit(fn):
    def apply(a, b):
        return fn(a, b) if type(a) is int and type(b) is int else None
    return apply


def _decided(test, symbolic):
    """A comparison of two elements: concrete values compare directly (``test``); extents by
    their bounds (``symbolic``, :func:`at_least`); None when undecided."""
    def fn(a, b):
        if type(a) in _CONCRETE and type(b) in _CONCRETE:
            return bool(test(a, b))
        if isinstance(a, (int, D.Expr)) and isinstance(b, (int, D.Expr)):
            return symbolic(a, b)
        return None
    return fn


def _equal(a, b):
    if a == b:
        return True
    if at_least(a, b, 1) or at_least(b, a, 1):
        return False
    return None


_ARITH = {"Add": D.add, "Sub": D.sub, "Mul": D.mul, "Div": _trunc_div,
          "BitwiseAnd": _bit(lambda a, b: a & b), "BitwiseOr": _bit(lambda a, b: a | b),
          "BitwiseXor": _bit(lambda a, b: a ^ b)}
_COMPARE = {"Equal": _decided(lambda a, b: a == b, _equal),
            "Greater": _decided(lambda a, b: a > b, lambda a, b: at_least(a, b, 1)),
            "Less": _decided(lambda a, b: a < b, lambda a, b: at_least(b, a, 1)),
            "GreaterOrEqual": _decided(lambda a, b: a >= b, at_least),
            "LessOrEqual": _decided(lambda a, b: a <= b, lambda a, b: at_least(b, a))}
_LOGIC = {"And": lambda a, b: a and b, "Or": lambda a, b: a or b, "Xor": lambda a, b: a != b}


# -- shapes ---------------------------------------------------------------------------------
def legacy_shape(ctx, a: Value, b: Value) -> list | None:
    """The output shape of a binary operator before opset 7: ``a``'s shape; with
    ``broadcast=1`` ``b`` is aligned inside ``a`` (at attribute ``axis``, else at its end) and
    its extents other than 1 must equal ``a``'s; without it the shapes must be equal. A
    contradiction where they cannot be."""
    if a.shape is None:
        return None
    out = list(a.shape)
    if b.shape is None:
        return out
    ra, rb = len(a.shape), len(b.shape)
    flag = int_attr(ctx, "broadcast", 0)
    if flag is None:  # not an int: reported
        return out
    if not flag:
        if ra != rb:
            ctx.contradiction(f"without broadcast=1 (opset {ctx.opset}) the inputs need the "
                              f"same shape, not {D.shape_text(a.shape)} and "
                              f"{D.shape_text(b.shape)}")
            return out
        return [ctx.unify(x, y, "input extents") for x, y in zip(a.shape, b.shape)]
    axis = int_attr(ctx, "axis")
    if axis is None and ctx.has_attr("axis"):
        return out
    start = broadcast.legacy_start(axis, ra, rb)
    if rb > ra or start < 0 or start + rb > ra:
        ctx.contradiction(f"the second input {D.shape_text(b.shape)} does not fit in the first "
                          f"{D.shape_text(a.shape)}" + ("" if axis is None else f" at axis {axis}"))
        return out
    for k, d in enumerate(b.shape):
        if type(d) is int and d != 1:
            out[start + k] = ctx.unify(out[start + k], d, "broadcast extents")
    return out


def _shape(ctx, a, b):
    if ctx.opset < 7:
        return legacy_shape(ctx, a, b)
    return ctx.broadcast(a, b)


def _aligned(ctx, a, b) -> bool:
    """Whether the elements of ``b`` line up with ``a``'s as in multidirectional broadcasting
    (always from opset 7; before, unless ``axis`` puts ``b`` elsewhere than at the end)."""
    if ctx.opset >= 7 or not int_attr(ctx, "broadcast", 0, report=False):
        return True
    axis = int_attr(ctx, "axis", report=False)
    if axis is None and ctx.has_attr("axis"):
        return False
    if axis is None or a.shape is None or b.shape is None:
        return axis is None
    ra, rb = len(a.shape), len(b.shape)
    return broadcast.legacy_start(axis, ra, rb) == ra - rb


def _arith(name):
    fn = _ARITH[name]

    def infer(ctx, a, b):
        out = _shape(ctx, a, b)
        if not _aligned(ctx, a, b):
            return out
        items = _operands(ctx, out, (a, b), "int")
        if items is None:
            return out
        return _int_result(ctx, out, [fn(x, y) for x, y in zip(*items)])

    infer.__name__ = infer.__qualname__ = name.lower()
    return infer


for _name in ("Add", "Sub", "Mul", "Div", "BitwiseAnd", "BitwiseOr", "BitwiseXor"):
    rule(_name)(_arith(_name))


@rule("Mod")
def mod(ctx, a, b):
    """Mod: the broadcast shape; integer data with ``fmod`` 0 (sign of the divisor) or 1
    (sign of the dividend)."""
    out = ctx.broadcast(a, b)
    items = _operands(ctx, out, (a, b), "int")
    if items is None:
        return out
    fn = _mod(bool(ctx.attr("fmod")))
    return _int_result(ctx, out, [fn(x, y) for x, y in zip(*items)])


@rule("Pow")
def pow_(ctx, x, y):
    """Pow: the broadcast shape (before opset 7 the base's); the base's element type."""
    return _shape(ctx, x, y)


@rule("BitShift")
def bitshift(ctx, x, y):
    """BitShift: the broadcast shape of the two inputs."""
    return ctx.broadcast(x, y)


def _comparison(name):
    fn = _COMPARE.get(name)
    logic = _LOGIC.get(name)

    def infer(ctx, a, b):
        out = _shape(ctx, a, b)
        if not _aligned(ctx, a, b):
            return out
        if fn is not None:
            items = _operands(ctx, out, (a, b), "any")
            got = None if items is None else [fn(x, y) for x, y in zip(*items)]
        else:
            items = _operands(ctx, out, (a, b), "bool")
            got = None if items is None else [logic(bool(x), bool(y)) for x, y in zip(*items)]
        if got is None or any(g is None for g in got):
            return out
        return ctx.tensor(out, elem=_BOOL, data=tuple(got))

    infer.__name__ = infer.__qualname__ = name.lower()
    return infer


for _name in ("And", "Or", "Xor", "Equal", "Greater", "Less", "GreaterOrEqual",
              "LessOrEqual"):
    rule(_name)(_comparison(_name))


# -- variadic ---------------------------------------------------------------------------------
def _variadic_shape(ctx, xs):
    if ctx.opset >= 8:
        return ctx.broadcast(*xs)
    known = [x.shape for x in xs if x.shape is not None]
    if not known:
        return None
    if len({len(s) for s in known}) > 1:
        ctx.contradiction(f"before opset 8 the inputs need the same shape, not "
                          f"{', '.join(D.shape_text(s) for s in known)}")
        return None
    out = list(known[0])
    for s in known[1:]:
        out = [ctx.unify(p, q, "input extents") for p, q in zip(out, s)]
    return out


def _variadic(name, fold, sign=0):
    def infer(ctx, *xs):
        xs = [x for x in xs if x is not None]
        if not xs:
            return None
        out = _variadic_shape(ctx, xs)
        if fold is None and not sign:
            return out
        items = _operands(ctx, out, xs, "int")
        if items is None:
            return out
        if sign:
            return _int_result(ctx, out, [_extreme(c, sign) for c in zip(*items)])
        acc = list(items[0])
        for other in items[1:]:
            acc = [fold(p, q) for p, q in zip(acc, other)]
        return _int_result(ctx, out, acc)

    infer.__name__ = infer.__qualname__ = name.lower()
    return infer


rule("Sum")(_variadic("Sum", D.add))
rule("Mean")(_variadic("Mean", None))
rule("Max")(_variadic("Max", None, 1))
rule("Min")(_variadic("Min", None, -1))


# -- unary ------------------------------------------------------------------------------------
def _unary(ctx, x):
    return same_shape(ctx, x)


for _name in ("Floor", "Ceil", "Sqrt", "Exp", "Tanh", "Log", "Round", "Sin", "Cos", "Tan",
              "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Sign",
              "BitwiseNot", "Reciprocal", "IsNaN", "IsInf", "Erf"):
    rule(_name)(_unary)


def _int_unary(fn):
    def infer(ctx, x):
        out = x.shape
        items = _operands(ctx, out, (x,), "int")
        if items is None:
            return same_shape(ctx, x)
        return _int_result(ctx, list(out), [fn(e) for e in items[0]])
    return infer


def _abs(e):
    if type(e) is int:
        return abs(e)
    if nonneg(e):
        return e
    neg = D.mul(e, -1)
    return neg if nonneg(neg) else None


rule("Neg")(_int_unary(lambda e: D.mul(e, -1)))
rule("Abs")(_int_unary(_abs))


@rule("Not")
def not_(ctx, x):
    """Not: the input's shape; known bools negated."""
    items = _operands(ctx, x.shape, (x,), "bool")
    if items is None:
        return same_shape(ctx, x)
    return ctx.tensor(x.shape, elem=_BOOL, data=tuple(not e for e in items[0]))


# -- selection --------------------------------------------------------------------------------
@rule("Where")
def where(ctx, cond, x, y):
    """Where: the broadcast of the three shapes (Clause 6.6.2), ``X``'s element type; the
    elements where the condition and the picked elements are known."""
    out = ctx.broadcast(cond, x, y)
    items = _operands(ctx, out, (cond,), "bool")
    if items is None:
        return out
    picks = items[0]
    if not all(type(c) is bool for c in picks):
        return out
    need_x, need_y = any(picks), not all(picks)
    dx = _operands(ctx, out, (x,), "any") if need_x else [picks]
    dy = _operands(ctx, out, (y,), "any") if need_y else [picks]
    if dx is None or dy is None:
        return out
    data = tuple(p if c else q for c, p, q in zip(picks, dx[0], dy[0]))
    elem = ctx.elem(0)
    if elem in INT_RANGE:
        return ctx.tensor(out, data=tuple(_wrap(e, elem) for e in data))
    if elem is None or any(type(e) not in _CONCRETE for e in data):
        return out
    return ctx.tensor(out, data=data)


@rule("Clip")
def clip_attr(ctx, x):
    """Clip before opset 11 (``min``/``max`` attributes): the input's shape."""
    return same_shape(ctx, x)


@rule("Clip", since=11)
def clip(ctx, x, lo=None, hi=None):
    """Clip from opset 11 (``min``/``max`` scalar inputs, optional; an empty one is ignored as
    the kernel does): the broadcast of the input with the bounds, which is the input's shape
    for scalar bounds."""
    bounds = [v for v in (lo, hi) if v is not None and count(v.shape) != 0]
    if not bounds:
        return same_shape(ctx, x)
    return ctx.broadcast(x, *bounds)

