"""Inference rules of the poolings (the kernels of ``onemodel/evaluate/kernels/pool.py``, same
keys and versions): MaxPool (with Indices), AveragePool, LpPool, their global forms, MaxUnpool.

Shapes (ONNX Part 1, operator definitions of Clause 14.3): ``X`` is ``[N, C, x1, ..., xn]`` and
the output ``[N, C, o1, ..., on]`` with the window extents of Conv
(:func:`.conv.window_extents`: ``floor((x + pads - d*(k-1) - 1)/s) + 1``; with ``ceil_mode=1``
the ceiling, a last window starting in the end padding dropped; ``SAME_*`` ``ceil(x/s)``),
``kernel_shape`` required; ``dilations`` from MaxPool 10, AveragePool 19, LpPool 18. An extent
of 0 (a window that does not fit the padded input, ``floor((1 - 2)/2) + 1``) is an empty
output, as the formula gives it (onnx.reference computes it; onnxruntime's division truncates
toward zero and gives 1 there). MaxPool's
``Indices`` has the output's shape (int64). Global poolings give ``[N, C, 1, ..., 1]``.
MaxUnpool gives ``[N, C, (x - 1)*s + k - p_begin - p_end, ...]``, or the elements of its
``output_shape`` input when given (unknown extents of the input's rank when they are not known:
the output is then set at run time, never the computed default). The definition says only that
``pads`` are ignored then and that the indices lie in ``[0, N x C x D1 x ... x Dn)`` of the
output: an ``output_shape`` smaller or larger than the computed extents, or with other
``N``/``C``, is taken as given (onnxruntime refuses one smaller than the computed extents or
with other ``N``/``C``; the definition does not), known indices outside it are contradicted.

Contradictions (Clause 9.4): a rank under 3 (2 for global poolings), no ``kernel_shape`` or one
without a value per spatial axis, a ``kernel_shape`` value, a stride or a dilation below 1
(:func:`.conv.positive`; MaxUnpool's too), a window that does not fit (an output extent that is
a negative int, :func:`.conv.fitting`), MaxUnpool's indices of another shape than X, an unpooled
extent that is a negative int, an ``output_shape`` of another length than X's rank or with a
negative extent, or known indices outside ``[0, count)`` of a known output shape (the
definition's range of the linear indices).
"""

from __future__ import annotations

from ...operators import geometry, rule
from .. import dims as D
from .conv import _ints, fitting, positive, window_extents


def _kernel_shape(ctx, n: int):
    """``kernel_shape`` as a list of ``n`` ints; None, and a contradiction, when unset, of
    another length, or with a value below 1."""
    k = ctx.attr("kernel_shape", None)
    if not k:
        ctx.contradiction("kernel_shape is required")
        return None
    k = [int(a) for a in k]
    if len(k) != n:
        ctx.contradiction(f"kernel_shape {k} does not have {n} values")
        return None
    return k if positive(ctx, "kernel_shape", k) else None


def _rank_n(ctx, x) -> int | None:
    """The spatial rank of X, from its rank, else ``kernel_shape``; a rank under 3 is a
    contradiction (None)."""
    r = x.rank
    if r is not None:
        if r < 3:
            ctx.contradiction(f"the input has rank {r}; at least 3 is needed")
            return None
        return r - 2
    k = ctx.attr("kernel_shape", None)
    return len(k) if k else None


def _pool(ctx, x, dilations: bool):
    n = _rank_n(ctx, x)
    if n is None:
        return None
    xs = x.shape
    kernel = _kernel_shape(ctx, n)
    ceil = bool(ctx.attr("ceil_mode", 0))
    head = [xs[0], xs[1]] if xs is not None else [None, None]
    if kernel is None:
        return head + [None] * n
    return head + window_extents(ctx, xs[2:] if xs is not None else None, kernel, n,
                                 dilations_attr=dilations, ceil_mode=ceil, least=0)


@rule("MaxPool")
def max_pool(ctx, x):
    """MaxPool: ``(Y, Indices)`` of the pooled shape (module doc)."""
    out = _pool(ctx, x, ctx.opset >= 10)
    return out, (list(out) if out is not None else None)


@rule("AveragePool")
def average_pool(ctx, x):
    """AveragePool: the pooled shape (module doc)."""
    return _pool(ctx, x, ctx.opset >= 19)


@rule("LpPool")
def lp_pool(ctx, x):
    """LpPool: the pooled shape (module doc)."""
    return _pool(ctx, x, ctx.opset >= 18)


def _global(ctx, x):
    xs = x.shape
    if xs is None:
        return None
    if len(xs) < 2:
        ctx.contradiction(f"the input has rank {len(xs)}; at least 2 is needed")
        return None
    return [xs[0], xs[1]] + [1] * (len(xs) - 2)


@rule("GlobalAveragePool")
def global_average_pool(ctx, x):
    """GlobalAveragePool: ``[N, C, 1, ..., 1]``."""
    return _global(ctx, x)


@rule("GlobalMaxPool")
def global_max_pool(ctx, x):
    """GlobalMaxPool: ``[N, C, 1, ..., 1]``."""
    return _global(ctx, x)


@rule("GlobalLpPool")
def global_lp_pool(ctx, x):
    """GlobalLpPool: ``[N, C, 1, ..., 1]``."""
    return _global(ctx, x)


def _indices_fit(ctx, indices, out) -> None:
    """A contradiction when MaxUnpool's ``indices`` are known ints and one is outside
    ``[0, count)``, ``count`` the element count of the output shape ``out`` when known (the
    definition: linear indices into the output, ``[0, N x C x D1 x ... x Dn)``)."""
    data = indices.data if indices is not None else None
    if data is None or not data or out is None or any(type(d) is not int for d in out):
        return
    if any(type(e) is not int for e in data):
        return
    total = 1
    for d in out:
        total *= d
    bad = sorted({e for e in data if e < 0 or e >= total})
    if bad:
        ctx.contradiction(f"indices {bad[:8]} are outside [0, {total}) of the output "
                          f"{D.shape_text(out)}")


@rule("MaxUnpool")
def max_unpool(ctx, x, indices, output_shape=None):
    """MaxUnpool: the unpooled shape, or ``output_shape``'s elements (module doc)."""
    n = _rank_n(ctx, x)
    xs = x.shape
    if indices is not None and indices.shape is not None:
        if xs is None:
            xs = indices.shape
            n = _rank_n(ctx, indices) if n is None else n
        elif len(indices.shape) != len(xs):
            ctx.contradiction(f"the indices {D.shape_text(indices.shape)} do not have X's "
                              f"shape {D.shape_text(xs)}")
        else:
            xs = tuple(ctx.unify(a, b, "X and indices extents")
                       for a, b in zip(xs, indices.shape))
    kernel = strides = None
    if n is not None:
        kernel = _kernel_shape(ctx, n)
        strides = _ints(ctx, "strides", n, 1)
        if strides is not None and not positive(ctx, "strides", strides):
            strides = None
    if output_shape is not None:
        got = ctx.ints(2)
        if got is None:
            return None if n is None else [None] * (n + 2)
        if n is not None and len(got) != n + 2:
            ctx.contradiction(f"output_shape has {len(got)} values; X has rank {n + 2}")
            return None
        bad = [d for d in got if type(d) is int and d < 0]
        if bad:
            ctx.contradiction(f"output_shape {D.shape_text(got)} has negative extents: {bad}")
            return [None if type(d) is int and d < 0 else d for d in got]
        _indices_fit(ctx, indices, got)
        return got
    if n is None:
        return None
    pads = _ints(ctx, "pads", n, 0, per=2)
    head = [xs[0], xs[1]] if xs is not None else [None, None]
    if kernel is None or strides is None or pads is None:
        return head + [None] * n
    sp = xs[2:] if xs is not None else [None] * n
    out = [geometry.transposed_extent(sp[i], kernel[i], strides[i], 1, 0, pads[i], pads[n + i],
                                      ar=D) for i in range(n)]
    out = head + fitting(ctx, "the unpooled extents are negative", out, sp, kernel,
                         f"pads {pads}", strides, None, least=0)
    _indices_fit(ctx, indices, out)
    return out
