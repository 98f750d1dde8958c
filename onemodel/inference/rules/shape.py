"""Inference rules of the shape and indexing operators (the kernels of
``onemodel/evaluate/kernels/shape.py``): reshaping, slicing, gathering, scattering, padding,
generators and constants (ONNX Part 1, Clause 9; the operators' definitions).

These rules carry the partial data propagation of issue 12: ``Shape``, ``Size``, ``Gather``,
``Slice``, ``Concat``, ``Unsqueeze``, ``Squeeze``, ``Reshape``, ``Expand``,
``ConstantOfShape``, ``Range``, ``Identity`` and ``Constant`` give their output's elements
(:attr:`~..value.Value.data`: ints, symbolic extents or None per element) when their inputs'
are known, so ``Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1]))`` has a known,
symbolic, shape.

Exactness (Clause 9.4): an extent is given only where the definition entails it for every
binding of the dimension variables. What is known of a variable is that it is an extent
(``>= 0``) and, since no tensor can be addressed otherwise, below ``2**62``
(:data:`_BIG`): a slice bound of ``2**62`` or more is past the end of any axis. So
``x[1:]`` of an axis ``N`` is unknown (``N`` may be 0), and of an axis ``N + 5`` it is
``N + 4``.
"""

from __future__ import annotations

from ...errors import IoError
from ...operators import axes as axes_
from ...operators import rule
from .. import dims as D
from ..value import MAX_DATA, Value
from ._util import count, expand_data, int_shape
from ._util import lower as _lower
from ._util import nonneg as _nonneg

#: A slice bound at least this large is past the end of every axis; at most its negative,
#: before the start (extents are below 2**62: no tensor of more elements can be addressed).
_BIG = 1 << 62


# -- symbolic helpers -----------------------------------------------------------------------
def _ge(a, b) -> bool:
    """Whether ``a >= b`` holds for every binding (extents below :data:`_BIG`)."""
    if a is None or b is None:
        return False
    if type(a) is int and a >= _BIG:
        return True
    if type(b) is int and b <= -_BIG:
        return True
    return _nonneg(D.sub(a, b))


def _max(a, b):
    if _ge(a, b):
        return a
    return b if _ge(b, a) else None


def _min(a, b):
    if _ge(a, b):
        return b
    return a if _ge(b, a) else None


def _require(ctx, a, b, what: str) -> None:
    """Record that the operator needs extents ``a`` and ``b`` equal (``ctx.unify``: the
    evaluator checks inputs against it), where they are not already known to differ (the
    caller reports that)."""
    if a is not None and b is not None and not D.differ(a, b):
        ctx.unify(a, b, what)


def _prod(dims):
    """The symbolic product of extents (1 for none; None when one is unknown); the ints are
    multiplied first, so an expression is built once (rules run on 50,000-node graphs)."""
    k = 1
    e = None
    for d in dims:
        if type(d) is int:
            k *= d
        elif d is None:
            return None
        else:
            e = d if e is None else D.mul(e, d)
    if e is None or k == 0:
        return k
    return e if k == 1 else D.mul(e, k)


def _exact_div(a, b):
    """``a / b`` where ``b`` divides ``a`` for every binding (an int divisor of every
    coefficient, or a monomial every term of ``a`` contains); None otherwise or for b = 0."""
    if a is None or b is None or b == 0:
        return None
    if type(b) is int:
        if type(a) is int:
            return a // b if a % b == 0 else None
        if a.const % b == 0 and all(c % b == 0 for _, c in a.terms):
            return D.floordiv(a, b)
        return None
    if len(b.terms) != 1 or b.const:
        return D.floordiv(a, b) if a == b else None
    if type(a) is int:
        return 0 if a == 0 else None
    (mono, coeff), = b.terms
    if a.const:
        return None
    out = 0
    for m, c in a.terms:
        rest = list(m)
        for atom in mono:
            if atom not in rest:
                return None
            rest.remove(atom)
        if c % coeff:
            return None
        term = c // coeff if not rest else D.Expr(((tuple(rest), c // coeff),), 0)
        out = D.add(out, term)
    return out


def _zero_follows(t, d) -> bool:
    """Whether ``t = 0`` entails ``d = 0`` (every term of ``d`` holds every atom of the single
    monomial ``t``): then a Reshape target element ``t`` copying extent ``d`` when 0 is ``t``
    either way."""
    if type(d) is int:
        return d == 0
    if not isinstance(t, D.Expr) or not isinstance(d, D.Expr) or len(t.terms) != 1 \
            or t.const or d.const:
        return False
    atoms = set(t.terms[0][0])
    return all(atoms <= set(m) for m, _ in d.terms)


def _rank(x):
    return None if x is None or x.shape is None else len(x.shape)


def _strides(shape):
    out = [1] * len(shape)
    s = 1
    for k in range(len(shape) - 1, -1, -1):
        out[k] = s
        s *= shape[k]
    return out


def _index_data(data, shape, index_lists):
    """The elements of a tensor of int ``shape`` at the cartesian product of per-axis index
    lists, row-major."""
    st = _strides(shape)
    flat = [0]
    for idx, s in zip(index_lists, st):
        flat = [b + i * s for b in flat for i in idx]
    return tuple(data[i] for i in flat)


def _ints_of(ctx, i, v):
    """The elements of optional input ``i`` (``v`` its Value or None) as a list, or None."""
    if v is None or not ctx.present(i):
        return None
    return ctx.ints(i)


def _length_of(v):
    """The element count of a rank-0/1 Value with a known int length, else None."""
    if v is None or v.shape is None or len(v.shape) > 1:
        return None
    return 1 if not v.shape else (v.shape[0] if type(v.shape[0]) is int else None)


def _elem_of_attr(ctx, name, default):
    """The element type code of TENSOR attribute ``name`` (``default`` when unset)."""
    a = ctx._raw.get(name)
    t = getattr(a, "t", None) if a is not None else None
    if t is not None and t.data_type:
        return int(t.data_type)
    return default


#: What a rule takes for a TENSOR attribute whose bytes are no longer at hand (its model was
#: closed): its data type and dims are known, its elements not.
_GONE = object()

#: What :func:`_int` and :func:`_int_list` give for an attribute of another type than the
#: definition's (reported as a contradiction): the rule then says nothing more.
_WRONG = object()


def _int(ctx, name, default=None):
    """INT attribute ``name`` (the definition's default, else ``default``, when unset); a
    value of another type is a contradiction and gives :data:`_WRONG`."""
    v = ctx.attr(name)
    if v is None:
        return default
    if type(v) is int or type(v) is bool:
        return int(v)
    ctx.contradiction(f"attribute {name} is {_attr_text(v)}, not an int")
    return _WRONG


def _int_list(ctx, name, default=None):
    """INTS attribute ``name`` as a list (``default`` when unset); a value of another type is
    a contradiction and gives :data:`_WRONG`."""
    v = ctx.attr(name)
    if v is None:
        return default
    if type(v) is list and all(type(e) is int or type(e) is bool for e in v):
        return [int(e) for e in v]
    ctx.contradiction(f"attribute {name} is {_attr_text(v)}, not a list of ints")
    return _WRONG


def _attr_text(v) -> str:
    text = repr(v) if not hasattr(v, "shape") else f"a tensor of shape {list(v.shape)}"
    return text if len(text) <= 60 else text[:57] + "..."


def _scalar(arr):
    try:
        return arr.reshape(-1)[0].item()
    except Exception:  # an empty or odd attribute
        return None


# -- reshaping ------------------------------------------------------------------------------
def _reshape(ctx, x, target, allowzero):
    """Output of Reshape: ``target`` a list of extents (ints, Expr, None) or None."""
    if target is None:
        return None
    rank = _rank(x)
    xs = x.shape
    if allowzero and 0 in target and -1 in target:
        ctx.contradiction(f"shape {target} has both 0 and -1 with allowzero=1")
        return None
    if target.count(-1) > 1:
        ctx.contradiction(f"shape {D.shape_text(target)} has more than one -1")
        return None
    out = []
    hole = None
    doubtful = []  # (axis, element) of symbolic elements that may be 0
    for i, t in enumerate(target):
        if t == -1:
            hole = i
            out.append(None)
        elif t == 0 and not allowzero:
            if rank is not None and i >= rank:
                ctx.contradiction(f"shape {D.shape_text(target)}: 0 at axis {i} has no input "
                                  f"extent (rank {rank})")
                return None
            out.append(xs[i] if rank is not None else None)
        elif type(t) is int:
            if t < -1:
                ctx.contradiction(f"shape {D.shape_text(target)} has the extent {t}")
                return None
            out.append(t)
        elif t is None or allowzero:
            out.append(t if _nonneg(t) else None)
        else:  # a symbolic element, 0 at run time copies the input extent
            lo = _lower(t)
            if lo is None or lo < 0:
                out.append(None)
            elif lo >= 1 or (rank is not None and i >= rank):
                out.append(t)
            elif rank is not None and (t == xs[i] or _zero_follows(t, xs[i])):
                out.append(t)
            else:
                out.append(None)
                doubtful.append((i, t))
    total = _prod(xs) if xs is not None else None
    if len(doubtful) == 1 and hole is None and total is not None:
        # the only element that may be 0 (copying the input extent): when every other
        # extent is at least 1 and the target's product is the element count, t = 0 leaves a
        # valid run no choice but an input extent 0 there (``[B*S, 768]`` of ``[B, S, 768]``)
        i, t = doubtful[0]
        rest = out[:i] + out[i + 1:]
        if all((_lower(d) or 0) >= 1 for d in rest) and D.same(_prod(rest + [t]), total):
            out[i] = t
    if hole is not None:
        known = _prod(out[:hole] + out[hole + 1:])
        q = _exact_div(total, known)
        if q is None and total is not None and known is not None and known != 0:
            rest = D.mod(total, known)
            if D.differ(rest, 0):
                ctx.contradiction(f"{D.dim_text(total)} elements cannot have the shape "
                                  f"{D.shape_text(target)}")
        out[hole] = q
    elif total is not None:
        n = _prod(out)
        if D.differ(n, total):
            ctx.contradiction(f"{D.dim_text(total)} elements cannot have the shape "
                              f"{D.shape_text(out)}")
    return ctx.tensor(out, data=x.data if x.data is not None else None)


@rule("Reshape")
def reshape_v1(ctx, x):
    """Reshape-1: ``shape`` attribute (0 copies the input extent, -1 the rest)."""
    target = _int_list(ctx, "shape", [])
    return None if target is _WRONG else _reshape(ctx, x, target, 0)


@rule("Reshape", since=5)
def reshape(ctx, x, shape):
    """Reshape-5 and later: the ``shape`` input's elements (symbolic where data inference
    follows them); 0 copies the input extent unless ``allowzero`` (14+), -1 is the element
    count over the other extents where that divides for every binding. Unknown target
    elements give unknown extents; an unknown target of known length a rank."""
    target = ctx.ints(1)
    if target is None:
        n = _length_of(shape)
        return [None] * n if n is not None and _rank(shape) == 1 else None
    allowzero = _int(ctx, "allowzero", 0) if ctx.opset >= 14 else 0
    return None if allowzero is _WRONG else _reshape(ctx, x, target, allowzero)


@rule("Transpose")
def transpose(ctx, x):
    """``perm`` (default: reversed axes) applied to the input's shape; a ``perm`` that is not
    a permutation of the axes is a contradiction."""
    perm = _int_list(ctx, "perm")
    s = x.shape
    if perm is _WRONG:
        return None
    if perm is None:
        return None if s is None else list(reversed(s))
    if s is not None and sorted(int(p) if p >= 0 else p + len(s) for p in perm) \
            != list(range(len(s))):
        ctx.contradiction(f"perm {list(perm)} is not a permutation of {len(s)} axes")
        return None
    if s is None:
        return [None] * len(perm)
    return [s[p] for p in perm]


def _squeeze(ctx, x, axes):
    s = x.shape
    if s is None:
        return None
    if axes is None:
        if any(type(d) is not int for d in s):
            return None  # a symbolic extent may be 1
        out = [d for d in s if d != 1]
    else:
        r = len(s)
        if len(axes) > r:
            ctx.contradiction(f"Squeeze has {len(axes)} axes for rank {r}")
            return None
        drop = set()
        for a in axes:
            if type(a) is not int:
                return [None] * (r - len(axes)) if len(set(axes)) == len(axes) else None
            k = ctx.axis(a, r, "Squeeze axis")
            if k is None:
                return None
            if D.differ(s[k], 1):
                ctx.contradiction(f"Squeeze axis {a} has extent {D.dim_text(s[k])}, not 1")
                return None
            _require(ctx, s[k], 1, f"extent of squeezed axis {k} and 1")
            drop.add(k)
        out = [d for k, d in enumerate(s) if k not in drop]
    return ctx.tensor(out, data=x.data)


@rule("Squeeze")
def squeeze_v1(ctx, x):
    """Squeeze-1/11: ``axes`` attribute (absent: every extent 1, unknown rank when an extent
    is symbolic); an axis whose extent is not 1 is a contradiction."""
    axes = _int_list(ctx, "axes")
    return None if axes is _WRONG else _squeeze(ctx, x, axes)


@rule("Squeeze", since=13)
def squeeze(ctx, x, axes=None):
    """Squeeze-13 and later: the optional ``axes`` input."""
    if axes is None or not ctx.present(1):
        return _squeeze(ctx, x, None)
    got = ctx.ints(1)
    if got is None:
        n = _length_of(axes)
        return [None] * (len(x.shape) - n) if n is not None and x.shape is not None \
            and n <= len(x.shape) else None
    return _squeeze(ctx, x, got)


def _unsqueeze(ctx, x, axes):
    s = x.shape
    if s is None:
        return None
    r = len(s) + len(axes)
    if any(type(a) is not int for a in axes):
        return [None] * r
    try:
        norm = axes_.unsqueeze_axes(list(axes), len(s), "Unsqueeze axis")
    except axes_.AxisError as e:
        ctx.contradiction(str(e))
        return None
    out = list(s)
    for k in norm:
        out.insert(k, 1)
    return ctx.tensor(out, data=x.data)


@rule("Unsqueeze")
def unsqueeze_v1(ctx, x):
    """Unsqueeze-1/11: extents 1 inserted at the ``axes`` attribute's output positions."""
    axes = _int_list(ctx, "axes", [])
    return None if axes is _WRONG else _unsqueeze(ctx, x, axes)


@rule("Unsqueeze", since=13)
def unsqueeze(ctx, x, axes):
    """Unsqueeze-13 and later: the ``axes`` input (unknown elements of known count: the rank
    only); repeated or out-of-range axes are contradictions."""
    got = ctx.ints(1)
    if got is None:
        n = _length_of(axes)
        return [None] * (len(x.shape) + n) if n is not None and x.shape is not None else None
    return _unsqueeze(ctx, x, got)


@rule("Flatten")
def flatten(ctx, x):
    """``[prod(shape[:axis]), prod(shape[axis:])]``, ``axis`` in ``[-rank, rank]``."""
    axis = _int(ctx, "axis", 1)
    s = x.shape
    if s is None or axis is _WRONG:
        return [None, None]
    r = len(s)
    a = axes_.flatten_axis(axis, r)
    if a is None:
        ctx.contradiction(f"Flatten axis {axis} is out of range for rank {r}")
        return [None, None]
    return [_prod(s[:a]), _prod(s[a:])]


@rule("Expand")
def expand(ctx, x, shape):
    """The broadcast (Clause 6.6) of the input's shape and the ``shape`` input's elements;
    the input's elements repeated when known. Unknown elements of known count: the rank."""
    target = ctx.ints(1)
    if target is None:
        n = _length_of(shape)
        if n is None or x.shape is None or _rank(shape) != 1:
            return None
        return [None] * max(n, len(x.shape))
    if any(type(t) is int and t < 0 for t in target):
        ctx.contradiction(f"Expand shape {D.shape_text(target)} has a negative extent")
        return None
    out = ctx.broadcast(x, target, what="input and shape")
    if out is None:
        return None
    return ctx.tensor(out, data=expand_data(x.data, x.shape, out))


@rule("Tile", since=6)
def tile(ctx, x, repeats):
    """Each extent times its ``repeats`` element; ``repeats`` of another length than the
    rank is a contradiction."""
    reps = ctx.ints(1)
    s = x.shape
    if reps is None:
        return None if s is None else [None] * len(s)
    if s is None:
        return [None] * len(reps)
    if len(reps) != len(s):
        ctx.contradiction(f"Tile repeats {D.shape_text(reps)} do not match rank {len(s)}")
        return None
    if any(type(r) is int and r < 0 for r in reps):
        ctx.contradiction(f"Tile repeats {D.shape_text(reps)} has a negative count")
        return None
    return [D.mul(a, b) if _nonneg(b) else None
            for a, b in zip(s, reps)]


@rule("Tile")
def tile_v1(ctx, x, tiles, axis):
    """Tile-1: the extent at ``axis`` times ``tiles`` (both scalar inputs)."""
    s = x.shape
    if s is None:
        return None
    t, a = ctx.ints(1), ctx.ints(2)
    if not t or not a or type(a[0]) is not int:
        return [None] * len(s)
    k = ctx.axis(a[0], len(s))
    if k is None:
        return None
    out = list(s)
    out[k] = D.mul(s[k], t[0]) if type(t[0]) is int and t[0] >= 0 else None
    return out


# -- joining and splitting ------------------------------------------------------------------
@rule("Concat")
def concat(ctx, *xs):
    """The inputs joined along ``axis`` (Concat-1 default 1): that extent the sum (``N + 5``),
    the others unified (a contradiction where they differ); elements joined when every
    input's are known."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    axis = _int(ctx, "axis", 1 if ctx.opset < 4 else None)
    if axis is _WRONG:
        return None
    if axis is None:
        ctx.contradiction("Concat needs the axis attribute")
        return None
    ranks = {len(x.shape) for x in xs if x.shape is not None}
    if not ranks:
        return None
    if len(ranks) > 1:
        ctx.contradiction(f"inputs have ranks {sorted(ranks)}")
        return None
    r = ranks.pop()
    a = ctx.axis(axis, r)
    if a is None:
        return None
    out = [None] * r
    total = 0
    for x in xs:
        s = x.shape
        if s is None:
            total = None
            continue
        total = D.add(total, s[a])
        for k in range(r):
            if k != a:
                out[k] = s[k] if out[k] is None else ctx.unify(out[k], s[k], f"axis {k} extents")
    out[a] = total
    data = None
    if all(x.data is not None and int_shape(x.shape) for x in xs) and int_shape(out):
        outer = count(out[:a])
        pieces = [(x.data, count(x.shape[a:])) for x in xs]
        data = tuple(e for o in range(outer) for d, n in pieces for e in d[o * n:(o + 1) * n])
    return ctx.tensor(out, data=data)


def _split_outputs(ctx, x, axis, sizes, n, ceil):
    s = x.shape
    if s is None:
        return tuple([None] * ctx.num_outputs)
    a = ctx.axis(axis, len(s))
    if a is None:
        return tuple([None] * ctx.num_outputs)
    dim = s[a]
    if sizes is not None:
        if len(sizes) != ctx.num_outputs:
            ctx.contradiction(f"split {D.shape_text(sizes)} has {len(sizes)} parts for "
                              f"{ctx.num_outputs} outputs")
            return tuple([None] * ctx.num_outputs)
        if D.differ(_sum(sizes), dim) or any(type(v) is int and v < 0 for v in sizes):
            ctx.contradiction(f"split {D.shape_text(sizes)} does not add up to extent "
                              f"{D.dim_text(dim)}")
            return tuple([None] * ctx.num_outputs)
        _require(ctx, _sum(sizes), dim, f"sum of the split and extent of axis {a}")
        parts = sizes
    elif n <= 0:
        return tuple([None] * ctx.num_outputs)
    elif ceil:
        if type(dim) is int:
            size = -(-dim // n)
            parts = [min(size, max(dim - i * size, 0)) for i in range(n)]
        else:  # the first part is ceil(d / n) whatever d is; the others only where n | d
            q = _exact_div(dim, n)
            parts = [q if q is not None else D.ceildiv(dim, n)] + [q] * (n - 1)
    else:
        if type(dim) is int and dim % n:
            ctx.contradiction(f"extent {dim} cannot be split into {n} equal parts")
            return tuple([None] * ctx.num_outputs)
        _require(ctx, D.mod(dim, n), 0, f"extent of axis {a} mod {n} and 0")
        parts = [D.floordiv(dim, n)] * n  # a run is valid only where n divides the extent
    outs = []
    for p in list(parts)[:ctx.num_outputs]:
        shp = list(s)
        shp[a] = p
        outs.append(shp)
    outs += [None] * (ctx.num_outputs - len(outs))
    return tuple(outs)


def _sum(vals):
    t = 0
    for v in vals:
        t = D.add(t, v)
    return t


@rule("Split")
def split_v1(ctx, x, split=None):
    """Split-1/2/11: ``split`` attribute (Split-1: or input) or equal parts, one per output;
    parts that do not add up to the extent are a contradiction."""
    sizes = ctx.ints(1) if split is not None and ctx.present(1) else None
    if sizes is None and split is not None and ctx.present(1):
        return tuple([None] * ctx.num_outputs)
    if sizes is None:
        sizes = _int_list(ctx, "split", []) or None
    axis = _int(ctx, "axis", 0)
    if sizes is _WRONG or axis is _WRONG:
        return tuple([None] * ctx.num_outputs)
    return _split_outputs(ctx, x, axis, sizes, ctx.num_outputs, False)


@rule("Split", since=13)
def split(ctx, x, split=None):
    """Split-13/18: the ``split`` input, or ``num_outputs`` (18: the last part the smaller,
    ceil(extent / n) each), or equal parts one per output."""
    sizes = None
    if split is not None and ctx.present(1):
        sizes = ctx.ints(1)
        if sizes is None:
            return tuple([None] * ctx.num_outputs)
    n = _int(ctx, "num_outputs") if ctx.opset >= 18 else None
    axis = _int(ctx, "axis", 0)
    if n is _WRONG or axis is _WRONG:
        return tuple([None] * ctx.num_outputs)
    if n is not None and sizes is not None:
        ctx.contradiction("Split has both the split input and num_outputs")
        return tuple([None] * ctx.num_outputs)
    return _split_outputs(ctx, x, axis, sizes,
                          n if n is not None else ctx.num_outputs, n is not None)


# -- slicing and gathering ------------------------------------------------------------------
def _norm_bound(v, d):
    """A slice bound counted from the start: negative ints add the extent; a symbolic bound
    must be entailed non-negative (else None)."""
    if v is None:
        return None
    if type(v) is int:
        if v >= _BIG:
            return _BIG
        if v <= -_BIG:
            return -_BIG
        return D.add(v, d) if v < 0 else v
    return v if _nonneg(v) else None


def _slice_extent(d, s, e, step):
    """(extent, start, end) of ``[s:e:step]`` on an axis of extent ``d`` after the
    definition's clamping; each None where not entailed."""
    s, e = _norm_bound(s, d), _norm_bound(e, d)
    if step > 0:
        s = _min(_max(s, 0), d) if s is not None and d is not None else None
        e = _min(_max(e, 0), d) if e is not None and d is not None else None
        diff = D.sub(e, s)
    else:
        dm1 = D.sub(d, 1)
        s = _min(_max(s, 0), dm1) if s is not None and d is not None else None
        e = _min(_max(e, -1), dm1) if e is not None and d is not None else None
        diff = D.sub(s, e)
    k = abs(step)
    if diff is None:
        return None, s, e
    if _ge(diff, 0):
        return D.ceildiv(diff, k), s, e
    if _ge(0, diff):
        return 0, s, e
    return None, s, e


def _slice(ctx, x, starts, ends, axes, steps, n_params):
    """Output of Slice; ``starts``... lists or None (unknown), ``n_params`` the number of
    sliced axes when known."""
    s = x.shape
    if s is None:
        return None
    r = len(s)
    if starts is None or ends is None:
        if axes is not None and all(type(a) is int for a in axes):
            ks = [ctx.axis(a, r, "Slice axis") for a in axes]
            return [None if k in ks else d for k, d in enumerate(s)]
        if axes is None and n_params is not None and n_params <= r:
            return [None] * n_params + list(s[n_params:])
        return [None] * r
    if axes is None or len(axes) == 0:
        axes = list(range(len(starts)))
    if steps is None or len(steps) == 0:
        steps = [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        ctx.contradiction("Slice starts, ends, axes and steps differ in length")
        return None
    if any(type(a) is not int for a in axes):
        return [None] * r
    out = list(s)
    bounds = {}  # axis -> (start, end, step) after clamping, ints, for the elements
    seen = set()
    exact = True
    for st, en, a, step in zip(starts, ends, axes, steps):
        k = ctx.axis(a, r, "Slice axis")
        if k is None:
            return None
        if k in seen:
            ctx.contradiction(f"Slice repeats axis {a}")
            return None
        seen.add(k)
        if step == 0:
            ctx.contradiction("Slice step is 0")
            return None
        if type(step) is not int:
            out[k] = None
            exact = False
            continue
        n, b, e = _slice_extent(s[k], st, en, step)
        out[k] = n
        if type(n) is int and type(b) is int and type(e) is int:
            bounds[k] = (b, e, step)
        else:
            exact = False
    data = None
    if exact and int_shape(s) and int_shape(out) and x.data is not None:
        index = [list(range(*bounds[k])) if k in bounds else list(range(d))
                 for k, d in enumerate(s)]
        data = _index_data(x.data, s, index)
    return ctx.tensor(out, data=data)


@rule("Slice")
def slice_v1(ctx, x):
    """Slice-1: ``starts``, ``ends``, ``axes`` attributes."""
    axes, starts, ends = (_int_list(ctx, n, d) for n, d in (("axes", None), ("starts", []),
                                                            ("ends", [])))
    if _WRONG in (axes, starts, ends):
        return None if x.shape is None else [None] * len(x.shape)
    return _slice(ctx, x, starts, ends, axes, None, None)


@rule("Slice", since=10)
def slice_(ctx, x, starts, ends, axes=None, steps=None):
    """Slice-10 and later: bounds clamped to the axis (negative counted from the end, steps
    of either sign); a symbolic extent gives an expression only where the clamping is
    entailed, else None. Elements followed when the input's and the bounds' are known."""
    ax = _ints_of(ctx, 3, axes)
    if axes is not None and ctx.present(3) and ax is None:
        return None if x.shape is None else [None] * len(x.shape)
    st = _ints_of(ctx, 4, steps)
    starts_known = ctx.ints(1)
    if steps is not None and ctx.present(4) and st is None:
        starts_known = None  # unknown steps: every sliced extent unknown
    return _slice(ctx, x, starts_known, ctx.ints(2), ax, st, _length_of(starts))


def _gather_index(v, d):
    if type(v) is not int:
        return None
    return v + d if v < 0 and type(d) is int else v


@rule("Gather")
def gather(ctx, data, indices):
    """``data.shape[:axis] + indices.shape + data.shape[axis+1:]``; elements gathered when
    the data's and indices' are known (a shape's extents from Shape); an index out of range
    of a known extent is a contradiction."""
    s, q = data.shape, indices.shape
    if s is None:
        return None
    axis = _int(ctx, "axis", 0)
    a = ctx.axis(axis, len(s)) if axis is not _WRONG else None
    if a is None:
        return None
    if q is None:
        return None
    out = list(s[:a]) + list(q) + list(s[a + 1:])
    idx = ctx.ints(1)
    if idx is None and indices.data is not None and indices.rank is not None and \
            indices.elem in (6, 7):
        idx = list(indices.data)
    d = s[a]
    if idx is not None and type(d) is int:
        for v in idx:
            if type(v) is int and not -d <= v < d:
                ctx.contradiction(f"Gather index {v} is out of range for extent {d}")
                return ctx.tensor(out)
    values = None
    if data.data is not None and idx is not None and int_shape(s) and int_shape(out):
        norm = [_gather_index(v, d) for v in idx]
        if all(v is not None for v in norm):
            outer, inner = count(s[:a]), count(s[a + 1:])
            src = data.data
            values = tuple(src[(o * d + i) * inner + j] for o in range(outer) for i in norm
                           for j in range(inner))
    return ctx.tensor(out, data=values)


@rule("GatherElements")
def gather_elements(ctx, data, indices):
    """The indices' shape; its rank must be the data's."""
    if data.rank is not None and indices.rank is not None and data.rank != indices.rank:
        ctx.contradiction(f"indices have rank {indices.rank}, data rank {data.rank}")
        return None
    axis = _int(ctx, "axis", 0)
    if data.rank is not None and axis is not _WRONG:
        ctx.axis(axis, data.rank)
    return None if indices.shape is None else list(indices.shape)


@rule("GatherND")
def gather_nd(ctx, data, indices):
    """``data.shape[:b] + indices.shape[b:-1] + data.shape[b+k:]`` with ``k`` the indices'
    last extent and ``b`` = ``batch_dims`` (12+); the batch extents unified."""
    b = _int(ctx, "batch_dims", 0) if ctx.opset >= 12 else 0
    s, q = data.shape, indices.shape
    if s is None or q is None or not q or b is _WRONG or b < 0:
        return None
    k = q[-1]
    if type(k) is not int:
        return None
    if b + k > len(s) or b >= len(q):
        ctx.contradiction(f"index depth {k} with batch_dims {b} exceeds the data rank {len(s)}")
        return None
    batch = [ctx.unify(s[i], q[i], f"batch axis {i} extents") for i in range(b)]
    return batch + list(q[b:-1]) + list(s[b + k:])


def _data_shape(ctx, data):
    return None if data.shape is None else list(data.shape)


@rule("ScatterND")
def scatter_nd(ctx, data, indices, updates):
    """The data's shape."""
    return _data_shape(ctx, data)


@rule("ScatterElements")
def scatter_elements(ctx, data, indices, updates):
    """The data's shape (indices and updates of one shape)."""
    if indices.shape is not None and updates.shape is not None and \
            len(indices.shape) == len(updates.shape):
        for k, (p, u) in enumerate(zip(indices.shape, updates.shape)):
            ctx.unify(p, u, f"indices and updates axis {k} extents")
    return _data_shape(ctx, data)


@rule("Scatter")
def scatter(ctx, data, indices, updates):
    """The data's shape."""
    return _data_shape(ctx, data)


@rule("Compress")
def compress(ctx, x, condition):
    """Without ``axis`` a 1-D tensor, along ``axis`` the input's shape; the selected extent
    is the count of true conditions when they are known (and cover the axis), else None."""
    axis = _int(ctx, "axis")
    if axis is _WRONG:
        return None
    cond = condition.data if condition is not None else None
    if axis is None:
        n = count(x.shape) if x.shape is not None else None
        if cond is not None and n is not None:
            return [sum(1 for c in cond[:n] if c)]
        return [None]
    s = x.shape
    if s is None:
        return None
    a = ctx.axis(axis, len(s))
    if a is None:
        return None
    out = list(s)
    out[a] = sum(1 for c in cond if c) if cond is not None and s[a] == len(cond) else None
    return out


# -- padding --------------------------------------------------------------------------------
def _pad(ctx, x, pads, axes):
    s = x.shape
    if s is None:
        return None
    r = len(s)
    if axes is None:
        ks = list(range(r))
    else:
        if any(type(a) is not int for a in axes):
            return [None] * r
        ks = [ctx.axis(a, r, "Pad axis") for a in axes]
        if None in ks:
            return None
    if pads is None:
        return [None if k in ks else d for k, d in enumerate(s)]
    if len(pads) != 2 * len(ks):
        ctx.contradiction(f"pads {D.shape_text(pads)} has not 2 x {len(ks)} values")
        return None
    out = list(s)
    for i, k in enumerate(ks):
        b, e = pads[i], pads[i + len(ks)]
        if type(b) is not int or type(e) is not int:
            out[k] = None
            continue
        crop = max(-b, 0) + max(-e, 0)
        d = s[k]
        if type(d) is int and d + b + e < 0:
            ctx.contradiction(f"pads {b} and {e} remove more than the extent {d} of axis {k}")
            return None
        # an extent the crop may exceed is unknown (then the definition gives no extent)
        base = d if not crop else (D.sub(d, crop) if _ge(d, crop) else None)
        out[k] = D.add(base, max(b, 0) + max(e, 0))
    return out


@rule("Pad")
def pad_v1(ctx, x):
    """Pad-1: the ``paddings`` attribute (begin values, then end values)."""
    pads = _int_list(ctx, "paddings", [])
    return None if pads is _WRONG else _pad(ctx, x, pads, None)


@rule("Pad", since=2)
def pad_v2(ctx, x):
    """Pad-2: the ``pads`` attribute."""
    pads = _int_list(ctx, "pads", [])
    return None if pads is _WRONG else _pad(ctx, x, pads, None)


@rule("Pad", since=11)
def pad(ctx, x, pads, constant_value=None, axes=None):
    """Pad-11 and later: the ``pads`` input (negative values crop), ``axes`` (18+); every
    mode keeps the extents ``d + begin + end``."""
    ax = _ints_of(ctx, 3, axes)
    if axes is not None and ctx.present(3) and ax is None:
        return None if x.shape is None else [None] * len(x.shape)
    return _pad(ctx, x, ctx.ints(1), ax)


@rule("CenterCropPad")
def center_crop_pad(ctx, x, shape):
    """The ``shape`` input's extents on ``axes`` (default every axis), the others kept."""
    s = x.shape
    if s is None:
        return None
    axes = _int_list(ctx, "axes")
    if axes is _WRONG:
        return [None] * len(s)
    r = len(s)
    ks = list(range(r)) if axes is None else [ctx.axis(a, r) for a in axes]
    if None in ks:
        return None
    target = ctx.ints(1)
    if target is None:
        return [None if k in ks else d for k, d in enumerate(s)]
    if len(target) != len(ks):
        ctx.contradiction(f"CenterCropPad shape {D.shape_text(target)} does not match axes "
                          f"{ks}")
        return None
    if any(type(t) is int and t < 0 for t in target):
        ctx.contradiction(f"CenterCropPad shape {D.shape_text(target)} has a negative extent")
        return None
    out = list(s)
    for k, t in zip(ks, target):
        out[k] = t if _nonneg(t) else None
    return out


# -- generators -----------------------------------------------------------------------------
@rule("Shape")
def shape(ctx, x):
    """The 1-D int64 tensor of the input's extents (15+: ``[start:end]``, clamped), with those
    extents as its elements (symbolic ones as expressions, unknown ones None)."""
    s = x.shape if x is not None and x.kind in ("tensor", "sparse_tensor") else None
    if s is None:
        return [None]
    # start/end count from the end when negative and are clamped to [0, rank], as a Python
    # slice of the extents does
    if ctx.opset >= 15:
        start, end = _int(ctx, "start", 0), _int(ctx, "end")
        if start is _WRONG or end is _WRONG:
            return [None]
        s = s[start:end]
    return ctx.tensor([len(s)], data=s)


@rule("Size")
def size(ctx, x):
    """A scalar int64, the product of the extents (symbolic) when they are known."""
    n = _prod(x.shape) if x.shape is not None else None
    return ctx.tensor([], data=None if n is None else (n,))


@rule("ConstantOfShape")
def constant_of_shape(ctx, shape):
    """The ``shape`` input's elements as extents; element type that of the ``value``
    attribute (default float 0); its elements when few enough and the attribute's bytes are at
    hand (not those of a closed model)."""
    try:
        value = ctx.attr("value")
    except IoError:
        value = _GONE
    elem = _elem_of_attr(ctx, "value", 1)
    if value is not None and value is not _GONE and not hasattr(value, "size"):
        ctx.contradiction(f"attribute value is {_attr_text(value)}, not a tensor")
        return None
    if value is not None and value is not _GONE and value.size != 1:
        ctx.contradiction("ConstantOfShape value must hold one element")
        return Value.tensor(elem, None)
    dims = ctx.ints(0)
    if dims is None:
        n = _length_of(shape) if shape is not None and shape.rank == 1 else None
        return Value.tensor(elem, None if n is None else [None] * n)
    if any(type(d) is int and d < 0 for d in dims):
        ctx.contradiction(f"ConstantOfShape shape {D.shape_text(dims)} has a negative extent")
        return Value.tensor(elem, None)
    dims = [d if type(d) is int or _nonneg(d) else None
            for d in dims]
    n = count(dims)
    data = None
    if n is not None and n <= MAX_DATA and value is not _GONE:
        v = 0.0 if value is None else _scalar(value)
        data = None if v is None else (v,) * n
    return Value.tensor(elem, dims, data)


@rule("Range")
def range_(ctx, start, limit, delta):
    """A 1-D tensor of ``max(ceil((limit - start) / delta), 0)`` elements: computed as the
    kernel does when the three scalars are known (and the elements for integer types),
    symbolic for integer scalars where the sign of ``limit - start`` is entailed."""
    cs, cl, cd = ctx.const(0), ctx.const(1), ctx.const(2)
    if cs is not None and cl is not None and cd is not None:
        import math

        import numpy as np
        try:
            s, lim, d = (np.asarray(v).reshape(()) for v in (cs, cl, cd))
        except ValueError:
            ctx.contradiction("Range start, limit and delta must be scalars")
            return [None]
        if s.dtype.kind in "iu":
            si, li, di = int(s), int(lim), int(d)
            if di == 0:
                ctx.contradiction("Range delta is 0")
                return [None]
            n = max(-(-(li - si) // di), 0)
            data = tuple(si + k * di for k in range(n)) if n <= MAX_DATA else None
            return ctx.tensor([n], data=data)
        work = s.dtype if s.dtype in (np.float32, np.float64) else np.dtype(np.float32)
        fs, fl, fd = (float(v.astype(work)) for v in (s, lim, d))
        if fd == 0 or not all(math.isfinite(v) for v in (fs, fl, fd)):
            if fd == 0:
                ctx.contradiction("Range delta is 0")
            return [None]
        return [max(int(math.ceil((fl - fs) / fd)), 0)]
    s, lim, d = ctx.ints(0), ctx.ints(1), ctx.ints(2)
    if not s or not lim or not d or type(d[0]) is not int or d[0] == 0:
        return [None]
    s, lim, d = s[0], lim[0], d[0]
    diff = D.sub(lim, s) if d > 0 else D.sub(s, lim)
    if diff is None:
        return [None]
    if _ge(diff, 0):
        n = D.ceildiv(diff, abs(d))
    elif _ge(0, diff):
        n = 0
    else:
        return [None]
    data = None
    if type(n) is int and n <= MAX_DATA:
        data = tuple(D.add(s, k * d) for k in range(n))
    return ctx.tensor([n], data=data)


@rule("EyeLike")
def eye_like(ctx, x):
    """The input's (rank 2) shape; element type the ``dtype`` attribute or the input's."""
    if x.rank is not None and x.rank != 2:
        ctx.contradiction(f"EyeLike input has rank {x.rank}, not 2")
        return None
    code = _int(ctx, "dtype")
    if code is _WRONG:
        return None
    elem = code if code else x.elem
    return Value.tensor(elem, None if x.shape is None else x.shape)


@rule("Trilu")
def trilu(ctx, x, k=None):
    """The input's shape (rank at least 2)."""
    if x.rank is not None and x.rank < 2:
        ctx.contradiction(f"Trilu input has rank {x.rank}, below 2")
        return None
    return None if x.shape is None else list(x.shape)


@rule("OneHot")
def one_hot(ctx, indices, depth, values):
    """The indices' shape with the ``depth`` extent inserted at ``axis`` (default -1, the
    last); element type the values'."""
    q = indices.shape
    if q is None:
        return None
    r = len(q) + 1
    axis = _int(ctx, "axis", -1)
    a = ctx.axis(axis, r) if axis is not _WRONG else None
    if a is None:
        return None
    dep = None
    c = ctx.const(1)
    if c is not None and c.size == 1:
        try:
            dep = int(c.reshape(-1)[0])
        except (ValueError, OverflowError):  # NaN or infinite depth
            dep = None
        if dep is not None and dep < 0:
            ctx.contradiction(f"OneHot depth {dep} is negative")
            dep = None
    else:
        ints = ctx.ints(1)
        if ints and len(ints) == 1 and isinstance(ints[0], D.Expr):
            dep = ints[0] if _nonneg(ints[0]) else None
    out = list(q)
    out.insert(a, dep)
    return out


@rule("NonZero")
def non_zero(ctx, x):
    """``[rank, count]`` (a scalar: ``[0, count]``); the count of non-zero elements when the
    input's elements are known, else None."""
    r = x.rank
    if r is None:
        return [None, None]
    n = None
    if x.data is not None and all(type(v) in (int, float, bool) for v in x.data):
        n = sum(1 for v in x.data if v)
    if r == 0:  # as the kernel: no row, one column for a non-zero scalar
        return [0, None if n is None else min(n, 1)]
    return [r, n]


@rule("Identity")
def identity(ctx, x):
    """The input's Value, elements included (tensors, sequences and optionals alike)."""
    return x if x is not None and x.known else None


_CONSTANT_ATTRS = ("value", "sparse_value", "value_float", "value_floats", "value_int",
                   "value_ints", "value_string", "value_strings")


@rule("Constant")
def constant(ctx):
    """The tensor of the one value attribute (``value``, ``sparse_value``, ``value_float(s)``,
    ``value_int(s)``, ``value_string(s)``), with its elements when at most
    :data:`~..value.MAX_DATA` and not strings; none or several attributes are a
    contradiction."""
    given = [n for n in _CONSTANT_ATTRS if ctx.has_attr(n)]
    if len(given) != 1:
        ctx.contradiction(f"Constant needs exactly one value attribute, has {given}")
        return None
    name = given[0]
    if name in ("value", "sparse_value"):
        a = ctx._raw.get(name)
        if name == "value":
            t = getattr(a, "t", None)
            if t is None:
                ctx.contradiction("attribute value is not a tensor")
                return None
            from ..engine import initializer_value

            v = initializer_value(t)
            return Value.tensor(v.elem, v.shape, v.data)
        st = getattr(a, "sparse_tensor", None)
        vals = getattr(st, "values", None) if st is not None else None
        if st is None or vals is None:
            ctx.contradiction("attribute sparse_value is not a sparse tensor")
            return None
        dims = tuple(int(d) for d in st.dims)
        data = None
        if (count(dims) or 0) <= MAX_DATA:
            try:
                arr = ctx.attr(name)
                data = tuple(arr.reshape(-1).tolist())
            except Exception:  # a sparse tensor numpy cannot densify
                data = None
        return Value.tensor(vals.data_type or None, dims, data)
    v = ctx.attr(name)
    want = {"value_float": (float, int), "value_int": (int, bool), "value_string": (str,)}
    if name in want:
        if type(v) not in want[name]:
            ctx.contradiction(f"attribute {name} is {_attr_text(v)}, not a "
                              f"{want[name][0].__name__}")
            return None
        if name == "value_float":
            return Value.tensor(1, [], (float(v),))
        if name == "value_int":
            return Value.tensor(7, [], (int(v),))
        return Value.tensor(8, [])
    item = {"value_floats": (float, int), "value_ints": (int, bool), "value_strings": (str,)}
    v = list(v) if isinstance(v, (list, tuple)) or hasattr(v, "tolist") else None
    if v is None or any(type(e) not in item[name] for e in v):
        ctx.contradiction(f"attribute {name} is not a list of {item[name][0].__name__}s")
        return None
    if name == "value_floats":
        return Value.tensor(1, [len(v)], tuple(float(e) for e in v) if len(v) <= MAX_DATA
                            else None)
    if name == "value_ints":
        return Value.tensor(7, [len(v)], tuple(int(e) for e in v) if len(v) <= MAX_DATA
                            else None)
    return Value.tensor(8, [len(v)])


# -- rearrangements -------------------------------------------------------------------------
def _rank4(ctx, x, op):
    s = x.shape
    if s is None:
        return None
    if len(s) != 4:
        ctx.contradiction(f"{op} input has rank {len(s)}, not 4")
        return None
    return s


def _blocks(ctx, x, op, to_space):
    s = _rank4(ctx, x, op)
    bs = _int(ctx, "blocksize")
    if bs is not _WRONG and bs is not None and bs < 1:
        ctx.contradiction(f"blocksize {bs} is not positive")
        bs = None
    if s is None or bs is _WRONG or bs is None:
        return None if s is None else [s[0], None, None, None]
    b, c, h, w = s
    sq = bs * bs
    checks = ((c, sq, "channel", "blocksize^2 = "),) if to_space else (
        (h, bs, "height", "blocksize "), (w, bs, "width", "blocksize "))
    for d, k, axis, by in checks:
        if type(d) is int and d % k:
            ctx.contradiction(f"the {axis} extent {d} does not divide by {by}{k}")
            return None
        _require(ctx, D.mod(d, k), 0, f"extent mod {k} and 0")
    if to_space:
        return [b, D.floordiv(c, sq), D.mul(h, bs), D.mul(w, bs)]
    return [b, D.mul(c, sq), D.floordiv(h, bs), D.floordiv(w, bs)]


@rule("DepthToSpace")
def depth_to_space(ctx, x):
    """``[b, c / bs^2, h * bs, w * bs]`` (rank 4, either mode); channels that do not divide
    by ``blocksize^2``, and a ``blocksize`` below 1, are a contradiction."""
    return _blocks(ctx, x, "DepthToSpace", True)


@rule("SpaceToDepth")
def space_to_depth(ctx, x):
    """``[b, c * bs^2, h / bs, w / bs]`` (rank 4); spatial extents that do not divide by
    ``blocksize``, and a ``blocksize`` below 1, are a contradiction."""
    return _blocks(ctx, x, "SpaceToDepth", False)


@rule("ReverseSequence")
def reverse_sequence(ctx, x, sequence_lens):
    """The input's shape; ``sequence_lens`` has the batch axis' extent."""
    s = x.shape
    if s is None:
        return None
    b_axis, t_axis = _int(ctx, "batch_axis", 1), _int(ctx, "time_axis", 0)
    if b_axis is _WRONG or t_axis is _WRONG:
        return list(s)
    ba = ctx.axis(b_axis, len(s), "batch_axis")
    ctx.axis(t_axis, len(s), "time_axis")
    if ba is not None and sequence_lens is not None and sequence_lens.rank == 1:
        ctx.unify(s[ba], sequence_lens.shape[0], "batch extent and sequence_lens length")
    return list(s)


@rule("Unique")
def unique(ctx, x):
    """Y: 1-D of unknown length (no ``axis``; the count of distinct elements when they are
    known integers) or the input's shape with that axis unknown; indices and counts 1-D of
    Y's count; inverse_indices 1-D of the input's element count (or of the axis' extent)."""
    axis = _int(ctx, "axis")
    s = x.shape
    if axis is _WRONG:
        return (None, [None], [None], [None])
    if axis is None:
        d = x.data
        n = None  # the number of distinct elements, when they are known integers or bools
        if d is not None and all(type(e) is int or type(e) is bool for e in d):
            n = len(set(d))
        return ([n], [n], [_prod(s) if s is not None else None], [n])
    if s is None:
        return (None, [None], [None], [None])
    a = ctx.axis(axis, len(s))
    if a is None:
        return (None, [None], [None], [None])
    y = list(s)
    y[a] = None
    return (y, [None], [s[a]], [None])
