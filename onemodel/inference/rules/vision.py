"""Inference rules of the detection and sampling operators (the kernels of
``onemodel/evaluate/kernels/vision.py``, same keys and versions): NonMaxSuppression, RoiAlign,
GridSample, AffineGrid.

Shapes (ONNX Part 1, operator definitions of Clause 14.3):

* NonMaxSuppression: ``[K, 3]`` int64, ``K`` the number of boxes kept, which the values decide:
  unknown (Clause 9.4). boxes ``[B, S, 4]`` and scores ``[B, C, S]`` share ``B`` and ``S``.
* RoiAlign: ``[R, C, output_height, output_width]`` for X ``[N, C, H, W]``, rois ``[R, 4]``
  and batch_indices ``[R]``.
* GridSample: ``[N, C, *grid.shape[1:-1]]`` for X ``[N, C, *in]`` and grid ``[N, *out, n]``
  (``n`` the number of spatial axes).
* AffineGrid: ``[N, H, W, 2]`` or ``[N, D, H, W, 3]`` from the elements of ``size``
  (``[N, C, H, W]`` or ``[N, C, D, H, W]``); theta is ``[N, 2, 3]`` or ``[N, 3, 4]``.

Contradictions: inputs of the wrong rank, extents that must be equal and differ.
"""

from __future__ import annotations

from ...operators import rule
from .. import dims as D


def _rank(ctx, v, r: int, what: str):
    """``v``'s shape when it has rank ``r`` (a contradiction, None, otherwise or unknown)."""
    if v is None or v.shape is None:
        return None
    if len(v.shape) != r:
        ctx.contradiction(f"{what} has shape {D.shape_text(v.shape)}; rank {r} is needed")
        return None
    return v.shape


@rule("NonMaxSuppression")
def non_max_suppression(ctx, boxes, scores, max_output_boxes_per_class=None,
                        iou_threshold=None, score_threshold=None):
    """NonMaxSuppression: ``[K, 3]`` with ``K`` unknown (module doc)."""
    b = _rank(ctx, boxes, 3, "boxes")
    s = _rank(ctx, scores, 3, "scores")
    if b is not None:
        ctx.unify(b[2], 4, "box coordinates")
    if b is not None and s is not None:
        ctx.unify(b[0], s[0], "batch extents of boxes and scores")
        ctx.unify(b[1], s[2], "box counts of boxes and scores")
    return [None, 3]


@rule("RoiAlign")
def roi_align(ctx, x, rois, batch_indices):
    """RoiAlign: ``[R, C, output_height, output_width]`` (module doc)."""
    xs = _rank(ctx, x, 4, "X")
    rs = _rank(ctx, rois, 2, "rois")
    bs = _rank(ctx, batch_indices, 1, "batch_indices")
    r = None
    if rs is not None:
        ctx.unify(rs[1], 4, "roi coordinates")
        r = rs[0]
    if bs is not None:
        r = ctx.unify(r, bs[0], "roi counts") if r is not None else bs[0]
    return [r, xs[1] if xs is not None else None, ctx.attr("output_height"),
            ctx.attr("output_width")]


@rule("GridSample")
def grid_sample(ctx, x, grid):
    """GridSample: ``[N, C, *grid.shape[1:-1]]`` (module doc)."""
    xs, gs = x.shape, grid.shape
    for s, what in ((xs, "X"), (gs, "grid")):
        if s is not None and len(s) < 3:
            ctx.contradiction(f"{what} has rank {len(s)}; at least 3 is needed")
            return None
    if xs is not None and gs is not None and len(xs) != len(gs):
        ctx.contradiction(f"X {D.shape_text(xs)} and grid {D.shape_text(gs)} have different "
                          f"ranks")
        return None
    if gs is None:
        return None if xs is None else [xs[0], xs[1]] + [None] * (len(xs) - 2)
    n = ctx.unify(gs[0], xs[0], "batch extents") if xs is not None else gs[0]
    ctx.unify(gs[-1], len(gs) - 2, "grid coordinates per point")
    return [n, xs[1] if xs is not None else None] + list(gs[1:-1])


@rule("AffineGrid")
def affine_grid(ctx, theta, size):
    """AffineGrid: ``[N, *spatial, n]`` from ``size``'s elements (module doc)."""
    dims = ctx.ints(1)
    ts = _rank(ctx, theta, 3, "theta")
    n = None
    if dims is not None:
        n = len(dims) - 2
    elif size is not None and size.shape is not None and len(size.shape) == 1 and \
            type(size.shape[0]) is int:
        n = size.shape[0] - 2
    if n is not None and n not in (2, 3):
        ctx.contradiction(f"size has {n + 2} values; 4 or 5 are needed")
        return None
    if ts is not None and n is not None:
        ctx.unify(ts[1], n, "theta extent 1")
        ctx.unify(ts[2], n + 1, "theta extent 2")
    if n is None:
        return None
    if dims is None:
        return [ts[0] if ts is not None else None] + [None] * n + [n]
    batch = dims[0] if ts is None else ctx.unify(dims[0], ts[0], "batch extents")
    return [batch] + list(dims[2:]) + [n]
