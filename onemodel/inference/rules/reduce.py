"""Inference rules of the reductions (the kernels of ``onemodel/evaluate/kernels/reduce.py``,
same keys and versions): Reduce*, ArgMax/ArgMin, CumSum, CumProd, TopK.

Shapes (ONNX Part 1, operator definitions of Clause 14.3):

* ``Reduce*``: the axes are the ``axes`` attribute up to the version where they became the
  optional second input (ReduceSum 13, the others 18). No axes: every axis, or with
  ``noop_with_empty_axes=1`` (input form) the identity. A reduced axis becomes 1 with
  ``keepdims=1`` (default) and is dropped otherwise. An axes input whose elements are not known
  leaves the reduced axes unknown: with ``keepdims=1`` the rank is still the input's (an extent
  1 stays 1 either way), without it the rank is one less for an axes input of shape [1], else
  unknown.
* ``ArgMax``/``ArgMin``: ``axis`` reduced as above (``keepdims``), int64 elements;
  ``select_last_index`` does not change the shape.
* ``CumSum``/``CumProd``: the input's shape.
* ``TopK``: the input's shape with ``axis`` of extent K (the ``k`` attribute before opset 10,
  then the element of input ``K``: an extent, symbolic when the data is); outputs Values (X's
  type) and Indices (int64).

Data (Clause 9, partial data propagation): ``ReduceSum``, ``ReduceProd``, ``ReduceMax`` and
``ReduceMin`` of a known rank-1 integer tensor (a shape) over its axis give the sum, product,
maximum or minimum of its elements (symbolic where they are, None where undetermined), as
``ReduceProd(Shape(x))`` counts elements.

Contradictions (Clause 9.4): an axis out of range, K negative or greater than the extent.
"""

from __future__ import annotations

from ...operators import rule
from .. import dims as D
from ._util import INT_RANGE, int_attr, list_attr, lower

_I64 = 7


def _norm_axes(ctx, axes, rank):
    """Sorted distinct non-negative axes, or None after a contradiction."""
    out = set()
    for a in axes:
        k = ctx.axis(a, rank, "reduction axis")
        if k is None:
            return None
        out.add(k)
    return sorted(out)


def _reduce_data(op, x, axes):
    """The element of a full reduction of a known 1-D integer tensor, or None."""
    if op not in _DATA or x.elem not in INT_RANGE or x.rank != 1 or axes not in (None, [0]):
        return None
    d = x.data
    if d is None:
        return None
    fn, acc = _DATA[op]
    for e in d:
        acc = fn(acc, e)
        if acc is None:
            return None
    if type(acc) is not int and not isinstance(acc, D.Expr):
        return None
    if type(acc) is int:
        lo, hi = INT_RANGE[x.elem]
        if not lo <= acc <= hi:
            return None
    return (acc,)


def _first(fn):
    """``fn`` of two elements, taking the first element alone as the start."""
    start = object()

    def step(acc, e, _s=start):
        return e if acc is _s else fn(acc, e)

    return step, start


def _extreme(pick, sym):
    """The larger (``pick`` max, ``sym`` D.dmax) or smaller of two elements, where known."""
    def fn(a, b):
        if a is None or b is None:
            return None
        if type(a) is int and type(b) is int:
            return pick(a, b)
        return sym(a, b) if lower(a) is not None and lower(b) is not None else None

    return fn


def _add(a, b):
    return None if a is None or b is None else D.add(a, b)


def _mul(a, b):
    return None if a is None or b is None else D.mul(a, b)


_DATA = {"ReduceSum": (_add, 0), "ReduceProd": (_mul, 1),
         "ReduceMax": _first(_extreme(max, D.dmax)),
         "ReduceMin": _first(_extreme(min, D.dmin))}


def _make(name, first_input: int):

    def reduce_rule(ctx, x, axes_in=None):
        """A reduction (module doc): the reduced shape, with data for shapes."""
        shape = x.shape
        keep = int_attr(ctx, "keepdims", 1)
        if ctx.opset >= first_input:
            if axes_in is None:
                axes = None
                if int_attr(ctx, "noop_with_empty_axes", 0):
                    return x if x.kind == "tensor" else (None if shape is None
                                                         else list(shape))
            else:
                axes = ctx.ints(1)
                empty = axes_in.shape is not None and 0 in axes_in.shape[:1] \
                    and len(axes_in.shape) == 1
                if empty or axes == []:
                    if int_attr(ctx, "noop_with_empty_axes", 0):
                        return x if x.kind == "tensor" else (None if shape is None
                                                             else list(shape))
                    axes = None
                elif axes is None or any(type(a) is not int for a in axes):
                    if shape is None:
                        return None
                    if keep:
                        return [1 if d == 1 else None for d in shape]
                    if axes_in.shape == (1,) and shape:   # one axis dropped, which unknown
                        return [None] * (len(shape) - 1)
                    return None
        else:
            axes = list_attr(ctx, "axes", int) or None
            if axes is None and ctx.attr("axes") not in (None, []):
                return None   # not a list of ints: reported
        if shape is None:
            return None
        rank = len(shape)
        if axes is not None:
            axes = _norm_axes(ctx, axes, rank)
            if axes is None:
                return None
        chosen = set(range(rank)) if axes is None else set(axes)
        if keep:
            out = [1 if k in chosen else d for k, d in enumerate(shape)]
        else:
            out = [d for k, d in enumerate(shape) if k not in chosen]
        data = _reduce_data(name, x, axes)
        if data is not None:
            return ctx.tensor(out, elem=x.elem, data=data)
        return out

    reduce_rule.__name__ = reduce_rule.__qualname__ = name.lower()
    rule(name)(reduce_rule)
    return reduce_rule


_make("ReduceSum", 13)
_make("ReduceMean", 18)
_make("ReduceMax", 18)
_make("ReduceMin", 18)
_make("ReduceProd", 18)
_make("ReduceL1", 18)
_make("ReduceL2", 18)
_make("ReduceLogSum", 18)
_make("ReduceLogSumExp", 18)
_make("ReduceSumSquare", 18)


def _arg(ctx, x):
    if x.shape is None:
        return None
    rank = len(x.shape)
    a = int_attr(ctx, "axis", 0)
    if rank == 0:
        if a not in (0, None):
            ctx.contradiction(f"axis {a} is out of range for rank 0")
        return []
    k = ctx.axis(a, rank)
    if k is None:
        return None
    if int_attr(ctx, "keepdims", 1):
        return [1 if i == k else d for i, d in enumerate(x.shape)]
    return [d for i, d in enumerate(x.shape) if i != k]


@rule("ArgMax")
def arg_max(ctx, x):
    """ArgMax: ``axis`` reduced (kept as 1 with ``keepdims``), int64 indices."""
    return _arg(ctx, x)


@rule("ArgMin")
def arg_min(ctx, x):
    """ArgMin: as :func:`arg_max`."""
    return _arg(ctx, x)


def _cumulative(ctx, x, axis):
    if x.shape is None:
        return None
    a = ctx.ints(1)
    if a is not None and len(a) == 1 and type(a[0]) is int:
        ctx.axis(a[0], len(x.shape))
    return list(x.shape)


@rule("CumSum")
def cum_sum(ctx, x, axis):
    """CumSum: X's shape (the axis, when known, checked against X's rank)."""
    return _cumulative(ctx, x, axis)


@rule("CumProd")
def cum_prod(ctx, x, axis):
    """CumProd: as :func:`cum_sum`."""
    return _cumulative(ctx, x, axis)


def _top_k(ctx, x, k):
    if x.shape is None:
        return None, None
    axis = ctx.axis(int_attr(ctx, "axis", -1), len(x.shape))
    if axis is None:
        return None, None
    n = x.shape[axis]
    if type(k) is int and (k < 0 or (type(n) is int and k > n)):
        ctx.contradiction(f"K {k} is not in [0, {D.dim_text(n)}]")
        k = None
    out = list(x.shape)
    out[axis] = k
    return out, list(out)


@rule("TopK")
def top_k_v1(ctx, x):
    """TopK before opset 10: K is the ``k`` attribute."""
    return _top_k(ctx, x, int_attr(ctx, "k"))


@rule("TopK", since=10)
def top_k(ctx, x, k):
    """TopK: K is the element of input ``K`` ([1] int64), an extent (module doc)."""
    ks = ctx.ints(1)
    kk = ks[0] if ks is not None and len(ks) == 1 else None
    return _top_k(ctx, x, kk)

