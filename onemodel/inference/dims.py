"""Symbolic extents (ONNX Part 1, Clauses 6.5.2 and 9.3): integers, dimension variables and
expressions over them.

An extent inside inference is one of

* an ``int`` >= 0 (a ``dim_value``),
* an :class:`Expr`: a dimension variable (``dim_param``, ``Expr.var("batch")``) or an expression
  an operator makes of variables and integers: sums with integer coefficients and products of
  variables (``seq + 1``, ``2*h``, ``h*w``), and floor division, ceiling division and remainder by
  an extent (``floor(h/2)``, ``ceil(h/2)``, ``h mod 2``), which are atoms of the sums,
* ``None``: unknown.

Every expression is kept in one canonical form (a sum of monomials over sorted atoms, integer
coefficients, zero terms dropped), so equal expressions compare equal (``==``, ``hash``) and
print alike. An expression without variables is an ``int``: the functions here never return an
:class:`Expr` that is a constant.

Every expression is bounded (Clause 15.4): at most :data:`~onemodel.limits.MAX_EXPR_SIZE` atoms
(each variable of each monomial, and each ``floor``/``ceil``/``mod`` counted with the atoms of its
operands), so at most that many terms and that degree, and no integer in it (a coefficient,
the constant) of magnitude above :data:`~onemodel.limits.MAX_EXPR_INTEGER`. A result past
either bound is unknown (``None``), a fresh unknown extent, and :data:`BOUNDED` counts it (the
engine reports where). So repeated squaring of a shape (``Mul(s, s)`` 27 times: degree 2^27)
costs as little as any other node. Arithmetic on two ints is exact here: the rules wrap integer
elements to their type (int64 data) and the engine makes an int extent past the bound unknown.

Clause 9.3: two distinct variables are never concluded to be equal, and a variable never a
particular integer. An expression is the extent the model entails (the ``Concat`` of extents
``N`` and ``5`` is ``N + 5``), so inference stays within Clause 9.4 (nothing "not entailed").
:func:`differ` says when two extents cannot be equal whatever the variables are (``N`` and
``N + 1``; 3 and 4), which is a contradiction (Clause 9.4, reported under Clause 10).
"""

from __future__ import annotations

import contextvars
import math
from typing import Union

from ..limits import MAX_EXPR_INTEGER, MAX_EXPR_SIZE

Dim = Union[int, "Expr", None]

#: The largest extent a file can record: ``dim_value`` is an int64 (Annex B, Clause 12.2).
#: Inference keeps larger extents exactly (``info --shapes`` shows them); a written type gives
#: such an extent as unknown (:func:`fits_file`), never a truncated number.
MAX_DIM_VALUE = (1 << 63) - 1

#: The variables taken to be at least 1 during one inference (the engine sets it: the
#: dimension variables of the main graph's inputs, unless asked not to). Every other variable
#: is an extent, at least 0.
POSITIVE: contextvars.ContextVar[frozenset] = contextvars.ContextVar("positive",
                                                                      default=frozenset())

#: How many results the bounds of :data:`~onemodel.limits.MAX_EXPR_SIZE` and
#: :data:`~onemodel.limits.MAX_EXPR_INTEGER` made unknown so far in this process; the engine
#: compares it around a rule's call to report the node.
BOUNDED = 0


def _bounded() -> None:
    """A result past a bound: count it (it becomes unknown, ``None``)."""
    global BOUNDED
    BOUNDED += 1


def _int(x: int) -> int | None:
    """``x`` when within :data:`~onemodel.limits.MAX_EXPR_INTEGER` in magnitude, else None."""
    if -MAX_EXPR_INTEGER <= x <= MAX_EXPR_INTEGER:
        return x
    _bounded()
    return None


class Expr:
    """A symbolic extent in canonical form: ``sum(coeff * monomial) + const``.

    ``terms`` is a tuple of ``(monomial, coeff)`` sorted by monomial, where a monomial is a
    sorted tuple of atoms (a variable name ``str`` or an :class:`Op`) and ``coeff`` a non-zero
    int; ``const`` an int. ``size`` counts its atoms: each variable of each monomial one, each
    :class:`Op` one plus its operands' sizes (see :data:`~onemodel.limits.MAX_EXPR_SIZE`).
    Immutable and hashable; build them with :meth:`var` and the functions of this module
    (``add``, ``mul``...), or the operators ``+ - *`` with ints.
    """

    __slots__ = ("terms", "const", "_hash", "size")

    def __init__(self, terms: tuple, const: int = 0):
        self.terms = terms
        self.const = const
        self._hash = hash((terms, const))
        self.size = sum(1 if type(a) is str else a.size for m, _ in terms for a in m)

    @staticmethod
    def var(name: str) -> "Expr":
        """The dimension variable ``name`` (a ``dim_param``)."""
        return Expr((((name,), 1),), 0)

    @property
    def variable(self) -> str | None:
        """The name when this expression is a single variable, else None."""
        if self.const == 0 and len(self.terms) == 1:
            mono, c = self.terms[0]
            if c == 1 and len(mono) == 1 and isinstance(mono[0], str):
                return mono[0]
        return None

    def variables(self) -> set[str]:
        """Every variable name the expression uses, inside atoms too."""
        out: set[str] = set()
        for mono, _ in self.terms:
            for a in mono:
                if isinstance(a, str):
                    out.add(a)
                else:
                    for x in a.args:
                        if isinstance(x, Expr):
                            out |= x.variables()
        return out

    def evaluate(self, binding: dict[str, int]) -> int | None:
        """The integer value under ``binding`` (variable -> int); None when a variable is
        unbound or a division by zero occurs."""
        total = self.const
        for mono, c in self.terms:
            p = c
            for a in mono:
                v = binding.get(a) if isinstance(a, str) else a.evaluate(binding)
                if v is None:
                    return None
                p *= v
            total += p
        return total

    def __eq__(self, other):
        return (type(other) is Expr and self._hash == other._hash and self.terms == other.terms
                and self.const == other.const)

    def __hash__(self):
        return self._hash

    def __add__(self, other):
        return add(self, other)

    __radd__ = __add__

    def __sub__(self, other):
        return sub(self, other)

    def __rsub__(self, other):
        return sub(other, self)

    def __mul__(self, other):
        return mul(self, other)

    __rmul__ = __mul__

    def __neg__(self):
        return mul(self, -1)

    def __str__(self) -> str:
        parts: list[str] = []
        for mono, c in self.terms:
            body = "*".join(a if isinstance(a, str) else str(a) for a in mono)
            if c == 1:
                text = body
            elif c == -1:
                text = "-" + body
            else:
                text = f"{c}*{body}"
            parts.append(text)
        if self.const:
            parts.append(str(self.const))
        out = parts[0]
        for p in parts[1:]:
            out += f" - {p[1:]}" if p.startswith("-") else f" + {p}"
        return out

    def __repr__(self) -> str:
        return f"Expr({str(self)!r})"


class Op:
    """A non-polynomial atom: ``floor(a/b)``, ``ceil(a/b)`` or ``a mod b`` (``kind`` "floor",
    "ceil", "mod"; ``args`` two extents, ints or :class:`Expr`). Immutable and hashable."""

    __slots__ = ("kind", "args", "_hash", "_key", "size")

    def __init__(self, kind: str, args: tuple):
        self.kind = kind
        self.args = args
        self._hash = hash((kind, args))
        self.size = 1 + sum(x.size if isinstance(x, Expr) else 1 for x in args)
        self._key = str(self) if self.size <= MAX_EXPR_SIZE else ""

    def evaluate(self, binding: dict[str, int]) -> int | None:
        """The integer value under ``binding``, None when unbound or dividing by zero."""
        a, b = (x.evaluate(binding) if isinstance(x, Expr) else x for x in self.args)
        if a is None or b is None or b == 0:
            return None
        if self.kind == "floor":
            return a // b
        if self.kind == "ceil":
            return -(-a // b)
        return a % b

    def __eq__(self, other):
        return type(other) is Op and self.kind == other.kind and self.args == other.args

    def __hash__(self):
        return self._hash

    def __lt__(self, other):  # atoms sort: variables (str) before Op, Ops by text
        return self._key < other._key if type(other) is Op else False

    def __gt__(self, other):
        return self._key > other._key if type(other) is Op else True

    def __str__(self) -> str:
        a, b = (_paren(x) for x in self.args)
        if self.kind == "mod":
            return f"({a} mod {b})"
        return f"{self.kind}({a}/{b})"


def _paren(x) -> str:
    s = str(x)
    return f"({s})" if isinstance(x, Expr) and (len(x.terms) > 1 or x.const) else s


def _make(terms: dict, const: int):
    """The canonical value of ``terms`` (monomial -> coeff) + ``const``: an int when no term
    is left, else an Expr; None (counted in :data:`BOUNDED`) past the bounds of the module
    docstring."""
    items = [(m, c) for m, c in terms.items() if c]
    if not items:
        return _int(const)
    if -MAX_EXPR_INTEGER > const or const > MAX_EXPR_INTEGER or \
            any(-MAX_EXPR_INTEGER > c or c > MAX_EXPR_INTEGER for _, c in items):
        _bounded()
        return None
    if len(items) > 1:  # monomials compare atom by atom: variables (str) before Op atoms
        items.sort(key=_first)
    e = Expr(tuple(items), const)
    if e.size > MAX_EXPR_SIZE:
        _bounded()
        return None
    return e


def _first(mc):
    return mc[0]


def _parts(x) -> tuple[dict, int]:
    if isinstance(x, Expr):
        return dict(x.terms), x.const
    return {}, int(x)


def add(a: Dim, b: Dim) -> Dim:
    """``a + b`` (None when either is unknown)."""
    if a is None or b is None:
        return None
    if type(a) is int and type(b) is int:
        return a + b
    ta, ca = _parts(a)
    tb, cb = _parts(b)
    for m, c in tb.items():
        ta[m] = ta.get(m, 0) + c
    return _make(ta, ca + cb)


def sub(a: Dim, b: Dim) -> Dim:
    """``a - b`` (None when either is unknown)."""
    if a is None or b is None:
        return None
    return add(a, mul(b, -1))


def mul(a: Dim, b: Dim) -> Dim:
    """``a * b``: products of variables are monomials (None when either is unknown)."""
    if a is None or b is None:
        return None
    if type(a) is int and type(b) is int:
        return a * b
    ta, ca = _parts(a)
    tb, cb = _parts(b)
    if (len(ta) + (ca != 0)) * (len(tb) + (cb != 0)) > MAX_EXPR_SIZE:
        _bounded()  # more terms to expand than the result may hold
        return None
    out: dict = {}
    for m1, c1 in list(ta.items()) + ([((), ca)] if ca else []):
        for m2, c2 in list(tb.items()) + ([((), cb)] if cb else []):
            m = m1 + m2
            if len(m) > 1:
                m = tuple(sorted(m))
            out[m] = out.get(m, 0) + c1 * c2
    const = out.pop((), 0)
    return _make(out, const)


def _divisible(x: Expr, k: int) -> bool:
    return x.const % k == 0 and all(c % k == 0 for _, c in x.terms)


def _div_exact(x: Expr, k: int):
    return _make({m: c // k for m, c in x.terms}, x.const // k)


def floordiv(a: Dim, b: Dim) -> Dim:
    """``floor(a / b)`` for extents (b > 0); None when either is unknown or b is 0."""
    return _divide("floor", a, b)


def ceildiv(a: Dim, b: Dim) -> Dim:
    """``ceil(a / b)`` for extents (b > 0); None when either is unknown or b is 0."""
    return _divide("ceil", a, b)


def _divide(kind: str, a: Dim, b: Dim) -> Dim:
    if a is None or b is None or b == 0:
        return None
    if type(a) is int and type(b) is int:
        return a // b if kind == "floor" else -(-a // b)
    if b == 1:
        return a
    if type(b) is int and b > 0:
        g = math.gcd(b, a.const, *(c for _, c in a.terms))  # floor(2h/4) is floor(h/2)
        if g > 1:
            a, b = _div_exact(a, g), b // g
            if b == 1:
                return a
    if isinstance(b, Expr) and a == b:
        return 1
    if type(b) is int and b < 0:
        return None
    return _make({(Op(kind, (a, b)),): 1}, 0)


def mod(a: Dim, b: Dim) -> Dim:
    """``a mod b`` for extents (b > 0); None when either is unknown or b is 0."""
    if a is None or b is None or b == 0:
        return None
    if type(a) is int and type(b) is int:
        return a % b
    if b == 1 or (type(b) is int and b > 0 and _divisible(a, b)) or a == b:
        return 0
    return _make({(Op("mod", (a, b)),): 1}, 0)


def dmax(a: Dim, b: Dim) -> Dim:
    """``max(a, b)`` where it is known (equal extents, two ints, or a difference that is a
    constant); None otherwise."""
    return _extreme(a, b, max)


def dmin(a: Dim, b: Dim) -> Dim:
    """``min(a, b)`` where it is known; None otherwise (see :func:`dmax`)."""
    return _extreme(a, b, min)


def _extreme(a: Dim, b: Dim, pick) -> Dim:
    if a is None or b is None:
        return None
    if a == b:
        return a
    d = sub(a, b)
    if type(d) is int:
        return a if pick(d, 0) == d else b
    return None


def differ(a: Dim, b: Dim) -> bool:
    """Whether extents ``a`` and ``b`` cannot be equal under any binding of the variables:
    two different ints, or two expressions whose difference is a non-zero integer. Unknown
    (None) differs from nothing."""
    if a is None or b is None:
        return False
    if type(a) is int and type(b) is int:
        return a != b
    d = sub(a, b)
    return type(d) is int and d != 0


def same(a: Dim, b: Dim) -> bool:
    """Whether ``a`` and ``b`` are known to be the same extent (both known and equal)."""
    return a is not None and b is not None and a == b


def from_dim_param(text: str) -> "Expr":
    """The extent a ``dim_param`` names: the variable of that name (Clause 6.5.2)."""
    return Expr.var(text)


def fits_file(d: Dim) -> bool:
    """Whether extent ``d`` can be written as a ``dim_value``: an int from 0 to
    :data:`MAX_DIM_VALUE` (True for an expression or unknown, which are no numbers)."""
    return type(d) is not int or 0 <= d <= MAX_DIM_VALUE


def dim_text(d: Dim) -> str:
    """How an extent prints: the int, the expression (``seq + 1``), or ``?``."""
    return "?" if d is None else str(d)


def shape_text(shape) -> str:
    """A shape as ``[batch,seq + 1,768]``, ``?`` for an unknown rank."""
    if shape is None:
        return "?"
    return "[" + ",".join(dim_text(d) for d in shape) + "]"
