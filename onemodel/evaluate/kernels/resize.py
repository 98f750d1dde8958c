"""Resize (opsets 10, 11, 13, 18, 19) and the deprecated Upsample (opsets 7, 9).

Resizing is separable: every resized axis is done on its own, each output position ``y`` of the
axis mapping to a source coordinate ``x`` by the ``coordinate_transformation_mode``, and reading
a few source positions ("taps") around ``x`` with weights:

* ``nearest``: one tap, the position ``nearest_mode`` picks (round_prefer_floor,
  round_prefer_ceil, floor, ceil), clamped to the axis.
* ``linear``: two taps, ``floor(x)`` and ``floor(x) + 1`` weighted ``1 - t`` and ``t``.
* ``cubic``: four taps, the Keys cubic with ``cubic_coeff_a``.
* ``antialias`` (opset 18+) with linear or cubic when shrinking by a scale ``s < 1``: the
  kernel is stretched by ``1 / s`` (more taps) and normalized.

Taps past the ends of an axis read the edge value; with ``exclude_outside`` their weights are set
to zero and the rest renormalized. ``tf_crop_and_resize`` writes ``extrapolation_value`` where
``x`` falls outside the input. Values are computed in float64 and cast back to the input dtype
(rounded half to even and saturated for integer types).
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import EvaluationError, InvalidModelError, UnsupportedError
from ...operators import axes as axes_
from ...operators import kernel
from ..memory import check_array

_MODES = ("nearest", "linear", "cubic")
_TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
               "asymmetric", "tf_crop_and_resize")


def _source_coords(mode: str, out_len: int, in_len: int, scale: float, roi) -> np.ndarray:
    """Source coordinate of each of the ``out_len`` output positions (ONNX Resize formulas).

    Computed in float32, as onnxruntime does, so that ties of the nearest modes fall the same way.
    """
    f = np.float32
    y = np.arange(out_len, dtype=f)
    scale, n_in, half = f(scale), f(in_len), f(0.5)
    if mode in ("half_pixel", "pytorch_half_pixel"):
        if mode == "pytorch_half_pixel" and out_len <= 1:
            return np.zeros(out_len, dtype=f)
        return (y + half) / scale - half
    if mode == "half_pixel_symmetric":
        adjustment = f(out_len) / (scale * n_in)
        offset = n_in / f(2) * (f(1) - adjustment)
        # the sum is taken in float64 and rounded once, as onnxruntime does
        return (np.float64(offset) + (y.astype(np.float64) + 0.5) / np.float64(scale)
                - 0.5).astype(f)
    if mode == "align_corners":
        # the ONNX test vectors divide by (scale * in_len - 1), the real-valued output length;
        # with sizes that is out_len - 1 (onnxruntime always uses out_len - 1)
        if out_len <= 1:
            return np.zeros(out_len, dtype=f)
        return y * (n_in - f(1)) / (scale * n_in - f(1))
    if mode == "asymmetric":
        return y / scale
    if mode == "tf_crop_and_resize":
        start, end = f(roi[0]), f(roi[1])
        if out_len > 1:
            return start * (n_in - f(1)) + y * (end - start) * (n_in - f(1)) / f(out_len - 1)
        return np.full(out_len, half * (start + end) * (n_in - f(1)), dtype=f)
    raise UnsupportedError(f"coordinate_transformation_mode {mode!r} is not one of "
                           f"{', '.join(_TRANSFORMS)}")


def _cubic(d: np.ndarray, a: float) -> np.ndarray:
    """The Keys cubic convolution kernel at distances ``d``."""
    d = np.abs(d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def _taps(x: np.ndarray, mode: str, scale: float, opts: dict) -> tuple[np.ndarray, np.ndarray]:
    """Source indices (unclamped) and weights, each [out_len, taps], for coordinates ``x``."""
    base = np.floor(x)
    t = (x - base).astype(np.float64)
    base = base.astype(np.int64)
    if mode == "nearest":
        nm = opts["nearest_mode"]
        if nm == "round_prefer_floor":
            idx = np.where(t <= 0.5, base, base + 1)
        elif nm == "round_prefer_ceil":
            idx = np.where(t < 0.5, base, base + 1)
        elif nm == "floor":
            idx = base
        elif nm == "ceil":
            idx = np.where(t > 0, base + 1, base)
        elif nm == "legacy":  # Resize-10 and Upsample: floor when enlarging, ceil when shrinking
            idx = np.where(t > 0, base + 1, base) if scale < 1 else base
        else:
            raise UnsupportedError(f"nearest_mode {nm!r} is not supported")
        return idx[:, None], np.ones((x.size, 1))
    s = min(scale, 1.0) if opts["antialias"] else 1.0
    if mode == "linear":
        first = int(math.floor(-1 / s) + 1)
        offsets = np.arange(first, 2 - first)
        weights = np.clip(1 - np.abs((offsets[None, :] - t[:, None]) * s), 0, None)
    elif mode == "cubic":
        first = int(math.floor(-2 / s) + 1)
        offsets = np.arange(first, 2 - first)
        weights = _cubic((offsets[None, :] - t[:, None]) * s, opts["cubic_coeff_a"])
    else:
        raise UnsupportedError(f"Resize mode {mode!r} is not one of {', '.join(_MODES)}")
    if opts["antialias"]:
        weights = weights / weights.sum(axis=1, keepdims=True)
    return base[:, None] + offsets[None, :], weights


def _resize_axis(data: np.ndarray, axis: int, out_len: int, scale: float, roi, opts: dict):
    """Resize ``data`` along ``axis`` to ``out_len``; returns (result, extrapolated mask)."""
    in_len = data.shape[axis]
    if out_len == 0 or in_len == 0:
        shape = list(data.shape)
        shape[axis] = out_len
        return np.zeros(shape, dtype=data.dtype), np.zeros(out_len, dtype=bool)
    x = _source_coords(opts["transform"], out_len, in_len, scale, roi)
    outside = np.zeros(out_len, dtype=bool)
    if opts["transform"] == "tf_crop_and_resize":
        outside = (x < 0) | (x > in_len - 1)
    idx, w = _taps(x, opts["mode"], scale, opts)
    if opts["exclude_outside"] and opts["mode"] != "nearest":
        w = np.where((idx < 0) | (idx >= in_len), 0.0, w)
        total = w.sum(axis=1, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    idx = np.clip(idx, 0, in_len - 1)
    shape = list(data.shape)
    shape[axis] = out_len
    if opts["mode"] == "nearest":
        check_array(shape, data.itemsize, "the resized output")
        return np.take(data, idx[:, 0], axis=axis), outside
    shape[axis] *= idx.shape[1]  # (the taps gathered, then weighted)
    check_array(shape, 2 * data.itemsize, "the resized output's taps")
    gathered = np.take(data, idx, axis=axis)  # axis -> (out_len, taps)
    wshape = (1,) * axis + w.shape + (1,) * (data.ndim - axis - 1)
    return (gathered * w.reshape(wshape)).sum(axis=axis + 1), outside


def _cast_back(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if values.dtype == dtype:
        return values
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.clip(np.rint(values), info.min, info.max).astype(dtype)
    return values.astype(dtype)


def resize_nd(x: np.ndarray, out_shape: list[int], scales: list[float], rois, opts: dict):
    """Resize ``x`` to ``out_shape``; ``scales[i]`` feeds the coordinate formula of axis i.

    ``rois[i]`` is (start, end) of axis i for tf_crop_and_resize. ``opts``: mode, transform,
    nearest_mode, cubic_coeff_a, exclude_outside, extrapolation_value, antialias.
    """
    nearest = opts["mode"] == "nearest"
    check_array(out_shape, x.itemsize if nearest else 8, "the resized output")
    result = x if nearest else x.astype(np.float64)
    masks = []
    for axis in range(x.ndim):
        same = out_shape[axis] == x.shape[axis] and scales[axis] == 1.0
        if same and (opts["transform"] != "tf_crop_and_resize" or tuple(rois[axis]) == (0, 1)):
            continue
        result, outside = _resize_axis(result, axis, out_shape[axis], scales[axis], rois[axis],
                                       opts)
        if outside.any():
            masks.append((axis, outside))
    if masks:
        result = np.array(result, dtype=np.float64 if not nearest else result.dtype)
        keep = np.zeros(result.shape, dtype=bool)
        for axis, outside in masks:
            keep |= outside.reshape((1,) * axis + (-1,) + (1,) * (x.ndim - axis - 1))
        result = np.where(keep, opts["extrapolation_value"], result)
    return _cast_back(np.asarray(result), x.dtype)


def _present(v) -> bool:
    return v is not None and np.asarray(v).size > 0


@kernel("Resize", since=11)
def resize(ctx, x, roi=None, scales=None, sizes=None):
    """Resize X by ``scales`` or to ``sizes`` (exactly one given; an empty tensor is absent).

    Output extent of axis i: ``floor(in_i * scales_i)``, or ``sizes_i``; with sizes and
    ``keep_aspect_ratio_policy`` not_larger / not_smaller (opset 18+) one common scale (the
    smallest / largest of ``sizes_i / in_i``) and extents ``round_half_up(scale * in_i)``.
    ``axes`` (opset 18+) lists the axes that scales, sizes and roi address; the others keep
    their extent. The coordinate formula uses the given scale, or ``out_i / in_i`` with sizes.
    """
    x = np.asarray(x)
    r = x.ndim
    mode = ctx.attr("mode")
    if mode not in _MODES:
        raise UnsupportedError(f"Resize mode {mode!r} is not one of {', '.join(_MODES)}")
    axes = ctx.attr("axes", None) if ctx.opset >= 18 else None
    if axes is None:
        axes = list(range(r))
    try:
        axes = axes_.distinct_axes(axes, r)
    except axes_.AxisError:
        raise EvaluationError(f"Resize axes {ctx.attr('axes')} do not fit rank {r}") from None
    opts = {
        "mode": mode,
        "transform": ctx.attr("coordinate_transformation_mode"),
        "nearest_mode": ctx.attr("nearest_mode"),
        "cubic_coeff_a": float(ctx.attr("cubic_coeff_a")),
        "exclude_outside": bool(ctx.attr("exclude_outside")),
        "extrapolation_value": float(ctx.attr("extrapolation_value")),
        "antialias": bool(ctx.attr("antialias", 0)) and mode != "nearest",
    }
    n = len(axes)
    rois = [(0.0, 1.0)] * r
    if opts["transform"] == "tf_crop_and_resize":
        if not _present(roi):
            raise InvalidModelError("Resize with tf_crop_and_resize needs roi")
        rv = np.asarray(roi, dtype=np.float64).reshape(-1)
        if rv.size != 2 * n:
            raise EvaluationError(f"Resize roi has {rv.size} values for {n} axes")
        for i, a in enumerate(axes):
            rois[a] = (float(rv[i]), float(rv[n + i]))
    out_shape = list(x.shape)
    factors = [1.0] * r
    if _present(scales) == _present(sizes):
        raise InvalidModelError("Resize needs exactly one of scales and sizes")
    if _present(scales):
        sv = np.asarray(scales).astype(np.float64).reshape(-1)
        if sv.size != n or (sv <= 0).any():
            raise EvaluationError(f"Resize scales {sv.tolist()} do not fit {n} axes")
        for i, a in enumerate(axes):
            factors[a] = float(sv[i])
            out_shape[a] = int(math.floor(np.float32(x.shape[a]) * np.float32(sv[i])))
    else:
        zv = np.asarray(sizes).astype(np.int64).reshape(-1)
        if zv.size != n or (zv < 0).any():
            raise EvaluationError(f"Resize sizes {zv.tolist()} do not fit {n} axes")
        policy = ctx.attr("keep_aspect_ratio_policy") if ctx.opset >= 18 \
            else "stretch"
        ratios = [zv[i] / x.shape[a] if x.shape[a] else 1.0 for i, a in enumerate(axes)]
        if policy == "stretch":
            for i, a in enumerate(axes):
                factors[a] = float(ratios[i])
                out_shape[a] = int(zv[i])
        elif policy in ("not_larger", "not_smaller"):
            common = float(min(ratios) if policy == "not_larger" else max(ratios))
            for a in axes:
                factors[a] = common
                out_shape[a] = int(math.floor(common * x.shape[a] + 0.5))
        else:
            raise UnsupportedError(f"keep_aspect_ratio_policy {policy!r} is not stretch, "
                                   "not_larger or not_smaller")
    return resize_nd(x, out_shape, factors, rois, opts)


def _legacy(x, scales, mode: str):
    """Resize-10 / Upsample: asymmetric coordinates, output extents ``floor(in * scale)``."""
    x = np.asarray(x)
    sv = np.asarray(scales).astype(np.float64).reshape(-1)
    if sv.size != x.ndim or (sv <= 0).any():
        raise EvaluationError(f"scales {sv.tolist()} do not fit rank {x.ndim}")
    if mode == "bilinear":
        mode = "linear"
    if mode not in ("nearest", "linear"):
        raise UnsupportedError(f"mode {mode!r} is not nearest or linear")
    opts = {"mode": mode, "transform": "asymmetric", "nearest_mode": "legacy",
            "cubic_coeff_a": -0.75, "exclude_outside": False, "extrapolation_value": 0.0,
            "antialias": False}
    out_shape = [int(math.floor(d * s)) for d, s in zip(x.shape, sv)]
    return resize_nd(x, out_shape, sv.tolist(), [(0.0, 1.0)] * x.ndim, opts)


@kernel("Resize")
def resize10(ctx, x, scales):
    """Resize, opset 10: ``scales`` per axis, mode nearest or linear, asymmetric coordinates.

    nearest reads ``floor(y / scale)`` on enlarged axes and ``ceil(y / scale)`` on shrunk ones
    (as onnxruntime does for this version).
    """
    return _legacy(x, scales, ctx.attr("mode"))


@kernel("Upsample", since=7)
def upsample(ctx, x, scales=None):
    """Upsample (deprecated since opset 10): like Resize-10; opset 7 takes ``scales`` as an
    attribute (a list of floats), opset 9 as an input."""
    if scales is None:
        scales = ctx.attr("scales", None)
        if scales is None:
            raise InvalidModelError("Upsample needs scales")
    return _legacy(x, scales, ctx.attr("mode"))
