"""Inference rules of the normalizations (the kernels of ``onemodel/evaluate/kernels/norm.py``,
same keys and versions): Batch, Layer, RMS, Instance, Group, Lp and MeanVariance normalization,
and LRN (X's shape).

Shapes (ONNX Part 1, operator definitions of Clause 14.3): ``Y`` has X's shape. The per-channel
parameters of BatchNormalization and InstanceNormalization are ``[C]``, ``C = X.shape[1]``
(BatchNormalization before opset 9 with ``spatial=0`` takes ``[C, D1, ...]``: not unified);
BatchNormalization's other outputs (training mode: running mean and variance, and before opset
14 the saved mean and variance) are ``[C]``. LayerNormalization's ``Mean`` and ``InvStdDev`` keep
X's extents before ``axis`` and have 1 from it on, element type ``stash_type``.
GroupNormalization's scale and bias are ``[num_groups]`` at opset 18, ``[C]`` from 21, and
``num_groups`` must divide ``C``. Element types come from the type constraints (Clause 10.4).

Contradictions (Clause 9.4): an input of rank under 2 where channels are needed, an axis out of
range, parameter extents that differ from the channel count.
"""

from __future__ import annotations

from ...operators import rule
from .. import dims as D
from ..value import Value
from ._util import shape_list


def _channels(ctx, x, params, what="channels"):
    """X's channel extent unified with the extent of each rank-1 parameter; a contradiction
    for X of rank under 2 or a parameter not of rank 1."""
    xs = x.shape
    c = None
    if xs is not None:
        if len(xs) < 2:
            ctx.contradiction(f"the input has rank {len(xs)}; at least 2 is needed")
            return None
        c = xs[1]
    for p in params:
        if p is None or p.shape is None:
            continue
        if len(p.shape) != 1:
            ctx.contradiction(f"a parameter has shape {D.shape_text(p.shape)}; [C] is needed")
            continue
        c = ctx.unify(c, p.shape[0], f"{what} and parameter extents") if c is not None \
            else p.shape[0]
    return c


@rule("BatchNormalization")
def batch_normalization(ctx, x, scale, bias, mean, var):
    """BatchNormalization: ``Y`` of X's shape, the statistics outputs ``[C]`` (module doc)."""
    spatial = ctx.opset >= 9 or ctx.attr("spatial", 1) == 1
    if spatial:
        c = _channels(ctx, x, (scale, bias, mean, var))
    else:
        c = x.shape[1] if x.shape is not None and len(x.shape) >= 2 else None
    stat = [c] if spatial else None
    n_stats = 2 if ctx.opset >= 14 else 4
    return (list(x.shape) if x.shape is not None else None,) + tuple(
        list(stat) if stat is not None else None for _ in range(n_stats))


def _trailing(ctx, x, axis_name="axis"):
    """(rank, axis) of X for a normalization over axes ``axis..rank-1``."""
    xs = x.shape
    if xs is None:
        return None, None
    return len(xs), ctx.axis(ctx.attr(axis_name), len(xs))


def _unidirectional(ctx, x, p, what):
    """Check that ``p`` broadcasts to X's shape (Clause 6.6.3)."""
    if p is None or p.shape is None or x.shape is None:
        return
    if len(p.shape) > len(x.shape):
        ctx.contradiction(f"the {what} {D.shape_text(p.shape)} has a higher rank than X "
                          f"{D.shape_text(x.shape)}")
        return
    for a, b in zip(reversed(x.shape), reversed(p.shape)):
        if b != 1 and D.differ(a, b):
            ctx.contradiction(f"the {what} {D.shape_text(p.shape)} does not broadcast to X "
                              f"{D.shape_text(x.shape)}")
            return


@rule("LayerNormalization")
def layer_normalization(ctx, x, scale, bias=None):
    """LayerNormalization: ``(Y, Mean, InvStdDev)`` (module doc)."""
    r, axis = _trailing(ctx, x)
    _unidirectional(ctx, x, scale, "scale")
    _unidirectional(ctx, x, bias, "bias")
    st = ctx.attr("stash_type")
    elem = st if st in (1, 11) else None
    y = list(x.shape) if x.shape is not None else None
    if axis is None:
        stat = Value.tensor(elem, None)
        return y, stat, stat
    stat = Value.tensor(elem, list(x.shape[:axis]) + [1] * (r - axis))
    return y, stat, stat


@rule("RMSNormalization")
def rms_normalization(ctx, x, scale):
    """RMSNormalization: X's shape; the axis checked, scale broadcast to X."""
    _trailing(ctx, x)
    _unidirectional(ctx, x, scale, "scale")
    return list(x.shape) if x.shape is not None else None


@rule("InstanceNormalization")
def instance_normalization(ctx, x, scale, bias):
    """InstanceNormalization: X's shape with the channel extent of scale and bias."""
    c = _channels(ctx, x, (scale, bias))
    if x.shape is None or len(x.shape) < 2:
        return None
    return [x.shape[0], c] + list(x.shape[2:])


@rule("GroupNormalization")
def group_normalization(ctx, x, scale, bias):
    """GroupNormalization: X's shape; scale and bias ``[num_groups]`` (18) or ``[C]`` (21)."""
    g = ctx.attr("num_groups")
    xs = x.shape
    if xs is not None and len(xs) < 2:
        ctx.contradiction(f"the input has rank {len(xs)}; at least 2 is needed")
        return None
    c = xs[1] if xs is not None else None
    if g is None or g < 1:
        ctx.contradiction(f"num_groups {g} is not positive")
    elif type(c) is int and c % g:
        ctx.contradiction(f"{c} channels do not divide into {g} groups")
    want = c if ctx.opset >= 21 else g
    for p in (scale, bias):
        if p is not None and p.shape is not None:
            if len(p.shape) != 1:
                ctx.contradiction(f"a parameter has shape {D.shape_text(p.shape)}; rank 1 is "
                                  f"needed")
            elif ctx.opset >= 21:
                c = want = ctx.unify(want, p.shape[0], "channels and parameter extents")
            else:
                ctx.unify(want, p.shape[0], "groups and parameter extents")
    if xs is None:
        return None
    return [xs[0], c] + list(xs[2:])


@rule("LpNormalization")
def lp_normalization(ctx, x):
    """LpNormalization: X's shape; the axis checked."""
    _trailing(ctx, x)
    return list(x.shape) if x.shape is not None else None


@rule("MeanVarianceNormalization")
def mean_variance_normalization(ctx, x):
    """MeanVarianceNormalization: X's shape; every axis of ``axes`` checked."""
    if x.shape is None:
        return None
    seen = set()
    for a in ctx.attr("axes") or ():
        k = ctx.axis(a, len(x.shape))
        if k is not None and k in seen:
            ctx.contradiction(f"axes {list(ctx.attr('axes'))} repeat axis {k}")
        seen.add(k)
    return list(x.shape)


@rule("LRN")
def lrn(ctx, x):
    """LRN: X's shape ([N, C, D1, ...])."""
    s = shape_list(x)
    if s is not None and len(s) < 2:
        ctx.contradiction(f"X has rank {len(s)}; at least 2 is needed")
    return s

