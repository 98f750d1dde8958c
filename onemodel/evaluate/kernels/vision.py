"""Detection and sampling operators: NonMaxSuppression, RoiAlign, GridSample, AffineGrid.

Where ONNX leaves details to the implementation (RoiAlign max pooling, GridSample bicubic
padding), the kernels follow onnxruntime, which follows PyTorch.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import EvaluationError, UnsupportedError
from ...operators import kernel

# -- NonMaxSuppression ------------------------------------------------------------------------

def _corners(boxes: np.ndarray, center: bool) -> np.ndarray:
    """[..., 4] boxes as (y1, x1, y2, x2) with y1 <= y2, x1 <= x2."""
    b = boxes.astype(np.float64)
    if center:
        xc, yc, w, h = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
        return np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], axis=-1)
    y1, x1, y2, x2 = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return np.stack([np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2),
                     np.maximum(x1, x2)], axis=-1)


def _iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    """IoU of one (y1, x1, y2, x2) box with each of ``others`` [K, 4]; 0 for an empty box."""
    ih = np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0])
    iw = np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1])
    inter = np.maximum(ih, 0) * np.maximum(iw, 0)
    a1 = (box[2] - box[0]) * (box[3] - box[1])
    a2 = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    union = a1 + a2 - inter
    ok = (a1 > 0) & (a2 > 0) & (union > 0)
    return np.where(ok, inter / np.where(union > 0, union, 1), 0.0)


@kernel("NonMaxSuppression")
def non_max_suppression(ctx, boxes, scores, max_output_boxes_per_class=None,
                        iou_threshold=None, score_threshold=None):
    """NonMaxSuppression: per batch and class, greedily keep the best-scoring boxes, dropping
    any whose IoU with a kept box exceeds ``iou_threshold``, at most
    ``max_output_boxes_per_class`` (0 or absent: none) boxes, scores above ``score_threshold``.

    boxes [B, S, 4] (corners, or center/size with ``center_point_box``); scores [B, C, S].
    Output: int64 [K, 3] rows (batch, class, box index), by batch, class, then score order
    (ties: the lower box index first).
    """
    b = np.asarray(boxes)
    s = np.asarray(scores).astype(np.float64)
    if b.ndim != 3 or b.shape[2] != 4 or s.ndim != 3 or s.shape[0] != b.shape[0] \
            or s.shape[2] != b.shape[1]:
        raise EvaluationError(f"NonMaxSuppression boxes {list(b.shape)} and scores "
                              f"{list(s.shape)} do not fit")
    limit = 0 if max_output_boxes_per_class is None else \
        int(np.asarray(max_output_boxes_per_class).reshape(-1)[0])
    iou_t = 0.0 if iou_threshold is None else float(np.asarray(iou_threshold).reshape(-1)[0])
    score_t = None if score_threshold is None else \
        float(np.asarray(score_threshold).reshape(-1)[0])
    corners = _corners(b, bool(ctx.attr("center_point_box")))
    out = []
    if limit > 0:
        for bi in range(b.shape[0]):
            for ci in range(s.shape[1]):
                sc = s[bi, ci]
                cand = np.arange(sc.size) if score_t is None else np.flatnonzero(sc > score_t)
                order = cand[np.lexsort((cand, -sc[cand]))]
                kept: list[int] = []
                for i in order:
                    if kept and (_iou(corners[bi, i], corners[bi, kept]) > iou_t).any():
                        continue
                    kept.append(int(i))
                    if len(kept) >= limit:
                        break
                out.extend([bi, ci, k] for k in kept)
    return np.array(out, dtype=np.int64).reshape(-1, 3)


# -- RoiAlign ---------------------------------------------------------------------------------

def _axis_samples(start: float, size: float, pooled: int, grid: int, extent: int):
    """Per pooled cell and sample: low index, high index, low weight, high weight, valid."""
    bin_size = size / pooled
    pos = (start + np.arange(pooled)[:, None] * bin_size
           + (np.arange(grid)[None, :] + 0.5) * bin_size / grid)  # [pooled, grid]
    valid = (pos >= -1.0) & (pos <= extent)
    pos = np.maximum(pos, 0.0)
    low = np.floor(pos).astype(np.int64)
    at_end = low >= extent - 1
    low = np.where(at_end, extent - 1, low)
    high = np.where(at_end, extent - 1, low + 1)
    pos = np.where(at_end, low.astype(np.float64), pos)
    frac = pos - low
    return low, high, 1 - frac, frac, valid


@kernel("RoiAlign")
def roi_align(ctx, x, rois, batch_indices):
    """RoiAlign: average (or max) of bilinear samples over each bin of each region.

    X [N, C, H, W]; rois [R, 4] (x1, y1, x2, y2) scaled by ``spatial_scale``; batch_indices
    [R]. ``sampling_ratio`` samples per bin side (0: ``ceil(roi size / bins)``).
    ``coordinate_transformation_mode`` half_pixel (the default from opset 16) shifts by -0.5;
    output_half_pixel (opset 10) does not and makes regions at least 1x1. ``mode`` max takes, as
    onnxruntime, the largest weighted corner of each sample. Output [R, C, oh, ow].
    """
    x = np.asarray(x)
    r = np.asarray(rois).astype(np.float64)
    bidx = np.asarray(batch_indices).astype(np.int64).reshape(-1)
    if x.ndim != 4 or r.ndim != 2 or r.shape[1] != 4 or bidx.size != r.shape[0]:
        raise EvaluationError("RoiAlign needs X [N,C,H,W], rois [R,4], batch_indices [R]")
    if bidx.size and ((bidx < 0).any() or (bidx >= x.shape[0]).any()):
        raise EvaluationError(f"RoiAlign batch indices {bidx.tolist()} exceed batch "
                              f"{x.shape[0]}")
    oh, ow = int(ctx.attr("output_height")), int(ctx.attr("output_width"))
    ratio = int(ctx.attr("sampling_ratio"))
    scale = float(ctx.attr("spatial_scale"))
    mode = ctx.attr("mode")
    # RoiAlign-10 has no such attribute: its coordinates are output_half_pixel's
    half = ctx.attr("coordinate_transformation_mode") == "half_pixel" \
        if ctx.opset >= 16 else False
    h, w = x.shape[2], x.shape[3]
    out = np.zeros((r.shape[0], x.shape[1], oh, ow), dtype=np.float64)
    for k in range(r.shape[0]):
        off = 0.5 if half else 0.0
        x1, y1, x2, y2 = r[k] * scale - off
        rw, rh = x2 - x1, y2 - y1
        if not half:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        gh = ratio if ratio > 0 else int(math.ceil(rh / oh))
        gw = ratio if ratio > 0 else int(math.ceil(rw / ow))
        ylo, yhi, wyl, wyh, vy = _axis_samples(y1, rh, oh, gh, h)
        xlo, xhi, wxl, wxh, vx = _axis_samples(x1, rw, ow, gw, w)
        img = x[bidx[k]].astype(np.float64)  # [C, H, W]
        if mode == "avg":
            count = max(gh * gw, 1)
            wy = np.zeros((oh, h))
            for p in range(oh):
                np.add.at(wy[p], ylo[p], np.where(vy[p], wyl[p], 0))
                np.add.at(wy[p], yhi[p], np.where(vy[p], wyh[p], 0))
            wx = np.zeros((ow, w))
            for p in range(ow):
                np.add.at(wx[p], xlo[p], np.where(vx[p], wxl[p], 0))
                np.add.at(wx[p], xhi[p], np.where(vx[p], wxh[p], 0))
            out[k] = np.einsum("ph,chw,qw->cpq", wy, img, wx) / count
        elif mode == "max":
            yl, yh_ = ylo[:, :, None, None], yhi[:, :, None, None]
            xl, xh = xlo[None, None], xhi[None, None]
            corners = [
                img[:, yl, xl] * (wyl[:, :, None, None] * wxl[None, None]),
                img[:, yl, xh] * (wyl[:, :, None, None] * wxh[None, None]),
                img[:, yh_, xl] * (wyh[:, :, None, None] * wxl[None, None]),
                img[:, yh_, xh] * (wyh[:, :, None, None] * wxh[None, None]),
            ]  # each [C, oh, gh, ow, gw]
            best = np.maximum.reduce(corners)
            valid = vy[:, :, None, None] & vx[None, None]
            best = np.where(valid, best, 0.0)
            out[k] = best.max(axis=(2, 4)) if gh * gw else 0.0
        else:
            raise UnsupportedError(f"RoiAlign mode {mode!r} is not avg or max")
    return out.astype(x.dtype)


# -- GridSample -------------------------------------------------------------------------------

def _unnormalize(g: np.ndarray, size: int, align: bool) -> np.ndarray:
    return (g + 1) / 2 * (size - 1) if align else ((g + 1) * size - 1) / 2


def _reflect(v: np.ndarray, twice_low: float, twice_high: float) -> np.ndarray:
    if twice_low == twice_high:
        return np.zeros_like(v)
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    v = np.abs(v - low)
    extra = np.fmod(v, span)
    flips = np.floor(v / span)
    return np.where(flips % 2 == 0, extra + low, span - extra + low)


def _pad_coord(v: np.ndarray, size: int, padding: str, align: bool) -> np.ndarray:
    """Source coordinates after ``border`` clipping or ``reflection`` (PyTorch's rules)."""
    if padding == "border":
        return np.clip(v, 0, size - 1)
    if padding == "reflection":
        v = _reflect(v, 0, 2 * (size - 1)) if align else _reflect(v, -1, 2 * size - 1)
        return np.clip(v, 0, size - 1)
    return v


def _cubic_weights(t: np.ndarray, a: float = -0.75) -> list[np.ndarray]:
    def near(d):
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


@kernel("GridSample")
def grid_sample(ctx, x, grid):
    """GridSample: sample X [N, C, *in] at grid [N, *out, D] (normalized to [-1, 1], x first).

    ``mode`` nearest (half to even), linear / bilinear, cubic / bicubic (A = -0.75);
    ``padding_mode`` zeros, border, reflection; ``align_corners``. Output [N, C, *out].
    """
    x = np.asarray(x)
    g = np.asarray(grid).astype(np.float64)
    nd = x.ndim - 2
    if g.ndim != nd + 2 or g.shape[-1] != nd or g.shape[0] != x.shape[0]:
        raise EvaluationError(f"GridSample grid {list(g.shape)} does not fit X "
                              f"{list(x.shape)}")
    # GridSample-16 names the modes bilinear and bicubic (its default bilinear), 20 on linear/cubic
    mode = ctx.attr("mode")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    padding = ctx.attr("padding_mode")
    align = bool(ctx.attr("align_corners"))
    if mode not in ("nearest", "linear", "cubic"):
        raise UnsupportedError(f"GridSample mode {mode!r} is not supported")
    if padding not in ("zeros", "border", "reflection"):
        raise UnsupportedError(f"GridSample padding_mode {padding!r} is not supported")
    sizes = x.shape[2:]
    # grid's last axis lists (x, y, z...): the innermost spatial axis first
    coords = [_unnormalize(g[..., nd - 1 - d], sizes[d], align) for d in range(nd)]
    n_idx = np.arange(x.shape[0]).reshape((-1,) + (1,) * nd)
    xf = x.astype(np.float64)

    def fetch(idx_list):
        """Values [N, C, *out] at integer indices per axis; zeros padding outside."""
        inside = np.ones(idx_list[0].shape, dtype=bool)
        clamped = []
        for d, idx in enumerate(idx_list):
            if padding == "zeros":
                inside &= (idx >= 0) & (idx < sizes[d])
            else:
                idx = _pad_coord(idx.astype(np.float64), sizes[d], padding, align)
                idx = idx.astype(np.int64)
            clamped.append(np.clip(idx, 0, sizes[d] - 1))
        # advanced indices around a slice: the result is [N, *out, C]
        gathered = np.moveaxis(xf[(n_idx, slice(None)) + tuple(clamped)], -1, 1)
        return np.where(inside[:, None], gathered, 0.0)

    if mode == "nearest":
        idx = [np.rint(_pad_coord(c, sizes[d], padding, align)).astype(np.int64)
               for d, c in enumerate(coords)]
        return fetch(idx).astype(x.dtype)
    if mode == "linear":
        pc = [_pad_coord(c, sizes[d], padding, align) for d, c in enumerate(coords)]
        base = [np.floor(c).astype(np.int64) for c in pc]
        frac = [c - np.floor(c) for c in pc]
        taps = [((0, 1 - f), (1, f)) for f in frac]
    else:
        base = [np.floor(c).astype(np.int64) - 1 for c in coords]
        frac = [c - np.floor(c) for c in coords]
        taps = [tuple(enumerate(_cubic_weights(f))) for f in frac]
    out = 0.0
    for combo in np.ndindex(*[len(t) for t in taps]):
        weight = 1.0
        idx = []
        for d, k in enumerate(combo):
            off, wgt = taps[d][k]
            weight = weight * wgt
            idx.append(base[d] + off)
        out = out + fetch(idx) * weight[:, None]
    return np.asarray(out).astype(x.dtype)


# -- AffineGrid -------------------------------------------------------------------------------

@kernel("AffineGrid")
def affine_grid(ctx, theta, size):
    """AffineGrid: the sampling grid of affine matrices theta ([N, 2, 3] or [N, 3, 4]) for an
    output of ``size`` [N, C, H, W] or [N, C, D, H, W]; output [N, H, W, 2] or [N, D, H, W, 3]
    of normalized (x, y[, z]) coordinates (``align_corners``)."""
    th = np.asarray(theta)
    dims = [int(v) for v in np.asarray(size).reshape(-1)]
    nd = len(dims) - 2
    if nd not in (2, 3) or th.shape[1:] != (nd, nd + 1):
        raise EvaluationError(f"AffineGrid theta {list(th.shape)} does not fit size {dims}")
    align = bool(ctx.attr("align_corners"))

    def base(n):
        if n <= 1:
            return np.zeros(max(n, 0))
        i = np.arange(n, dtype=np.float64)
        return -1 + 2 * i / (n - 1) if align else (2 * i + 1) / n - 1

    spatial = dims[2:]
    axes = [base(n) for n in spatial]  # outer to inner: (D,) H, W
    mesh = np.meshgrid(*axes, indexing="ij")
    pts = [m for m in reversed(mesh)] + [np.ones_like(mesh[0])]  # x, y, (z), 1
    p = np.stack(pts, axis=-1).reshape(-1, nd + 1)  # [P, nd + 1]
    out = np.einsum("nij,pj->npi", th.astype(np.float64), p)
    return out.reshape([dims[0]] + spatial + [nd]).astype(th.dtype)
