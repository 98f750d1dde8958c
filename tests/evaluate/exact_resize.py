"""Float64 oracle for Resize (opsets 10, 11, 13, 18, 19) and Upsample (7, 9), written from the
operators' definitions (``onnx.defs.get_schema("Resize", 19).doc`` and its attributes), for the
tests in test_resize.py.

Resizing is separable: each resized axis maps every output position ``y`` to a source
coordinate ``x`` by the ``coordinate_transformation_mode``. Here ``x`` is computed exactly, as a
``Fraction`` of the float32 parameters the model holds (``scales``, ``roi``) or of the integer
ratio ``sizes / in`` (ONNX: ``scale = length_resized / length_original``), so the choices the
definition makes on ``x`` (which pixel is nearest, ties, inside or outside the crop box) are
made exactly. Then:

* ``nearest``: the input pixel the ``nearest_mode`` rounding of ``x`` names, clamped to the axis.
* ``linear`` / ``cubic``: every integer ``j`` with ``|s (j - x)| < R`` (R = 1 linear, 2 cubic;
  ``s = min(scale, 1)`` with ``antialias``, which stretches the filter by ``max(1, 1/scale)``,
  else 1) weighs ``k(s (j - x))`` (the triangle, or Keys' cubic with ``cubic_coeff_a``) and
  reads the edge value past the ends of the axis; with ``exclude_outside`` those weights are 0.
  Weights are divided by their sum (a no-op without antialias or exclude_outside: both kernels
  are partitions of unity).
* ``tf_crop_and_resize``: positions whose ``x`` falls outside ``[0, in - 1]`` are
  ``extrapolation_value``.

Readings where the text is loose (each the one ONNX's own test vectors or TF/PyTorch fix):

* the output extent with ``scales`` is ``floor(in * scale)`` (what onnx.reference, onnxruntime
  and onemodel compute; the doc's ``floor(in * (roi_end - roi_start) * scale)`` is implemented
  by none of them);
* ``align_corners`` divides by ``scale * in - 1``, the real-valued output length: the ONNX test
  vector resize_downsample_scales_linear_align_corners (2 x 4 by 0.6 -> [1, 3.142857]) says so;
  with ``sizes`` that is ``out - 1``;
* ``tf_crop_and_resize`` divides by ``out - 1`` (TF CropAndResize: the first and last output
  samples sit on the crop box's edges), and with one output position reads its centre;
* ``pytorch_half_pixel`` gives 0 where the output has one position;
* Resize-10 and Upsample (asymmetric coordinates) state no rounding for nearest: this oracle
  uses onnxruntime's, which onemodel follows: ``floor(x)`` where the axis is enlarged,
  ``ceil(x)`` where it is shrunk;
* an integer input's result is rounded half to even and saturated (onnx.reference's
  saturate_cast), which :func:`round_to` does.

:func:`resize_exact` also returns a per-element bound for the one place an implementation that
computes the source coordinate in float32 (onnxruntime, onemodel) departs from the definition
beyond the final rounding: the coordinate's own rounding error ``delta`` (counted per transform in
:func:`coordinate_error`) times how fast the output moves with the coordinate. See
:class:`Exact`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

#: float32 unit roundoff: one correctly rounded float32 operation errs by at most u * |result|.
U32 = 2.0 ** -24

TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
              "asymmetric", "tf_crop_and_resize")


@dataclass
class Exact:
    """The exact result of a Resize and the error bound of a float32-coordinate implementation.

    ``value``: float64, the definition's result before any cast to the input's dtype (for
    nearest, the routed input values, exact). ``coord_slack``: float64 of the same shape,
    ``sum_a max|d value / d x_a| * delta_a`` over the resized axes ``a``, the derivative taken as
    the largest of its values at ``x_a - delta_a``, ``x_a``, ``x_a + delta_a`` (so a kink of the
    triangle filter or a change of taps inside that interval is covered) and ``delta_a`` the
    bound of :func:`coordinate_error`, plus a second-order term (``64 magnitude delta_a**2``);
    0 for nearest and for extrapolated positions.
    ``magnitude``: float64, the same resize with the absolute weights applied to ``|X|``, the
    size of the float64 sums. ``alternatives`` (nearest only): the results of every choice, per
    resized axis, of the pixel at ``x - delta`` or at ``x + delta``: where a coordinate lies
    within its float32 rounding of a rounding point (``x + 1/2`` for the round modes, an integer
    for floor and ceil) an implementation computing it in float32 may pick either neighbour.
    """

    value: np.ndarray
    coord_slack: np.ndarray
    magnitude: np.ndarray
    alternatives: list = field(default_factory=list)

    def ambiguous(self) -> np.ndarray:
        """nearest: the elements some float32-coordinate choice may read from another pixel
        than the definition's (a coordinate within ``delta`` of a rounding point)."""
        moved = np.zeros(self.value.shape, bool)
        for alt in self.alternatives:
            moved |= alt != self.value
        return moved

    def allows(self, got: np.ndarray) -> np.ndarray:
        """nearest: elementwise, ``got`` is the definition's value or one of the values a
        float32 coordinate may pick instead."""
        ok = got == self.value
        for alt in self.alternatives:
            ok |= got == alt
        return ok

    def scale(self) -> np.ndarray:
        """The ``scale`` for ``assert_close_to_exact(got, value, ulps=1, scale=...)`` of a
        float32 output computed through float32 source coordinates: in units of EPS32 = 2u,
        ``coord_slack / EPS32`` (the coordinates' rounding, first order) plus ``|value| / 2``
        (the one rounding of the result to float32, u |value|) plus ``magnitude / 2**20`` (the
        float64 sums, <= 2**-50 of it: far below this allowance)."""
        eps32 = 2 * U32
        return self.coord_slack / eps32 + np.abs(self.value) / 2 + self.magnitude * 2.0 ** -20


def _keys_cubic(d: np.ndarray, a: float) -> tuple[np.ndarray, np.ndarray]:
    """Keys' cubic convolution kernel k(d) (Keys 1981, eq. 4, parameter ``a``) and k'(d)."""
    ad = np.abs(d)
    sg = np.sign(d)
    near = (a + 2) * ad ** 3 - (a + 3) * ad ** 2 + 1
    near_d = 3 * (a + 2) * ad ** 2 - 2 * (a + 3) * ad
    far = a * ad ** 3 - 5 * a * ad ** 2 + 8 * a * ad - 4 * a
    far_d = 3 * a * ad ** 2 - 10 * a * ad + 8 * a
    k = np.where(ad <= 1, near, np.where(ad < 2, far, 0.0))
    dk = np.where(ad <= 1, near_d, np.where(ad < 2, far_d, 0.0)) * sg
    return k, dk


def _triangle(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The linear-interpolation kernel max(0, 1 - |d|) and its derivative; the derivative is
    taken on the closed support (|d| <= 1) so that it bounds the slope on both sides of a kink."""
    ad = np.abs(d)
    return np.clip(1 - ad, 0, None), np.where(ad <= 1, -np.sign(d) - (d == 0), 0.0)


def _weights(x: np.ndarray, n_in: int, mode: str, s: float, a: float, exclude: bool):
    """Taps (clamped indices [out, taps]), weights and a bound on |d weight / d x|, for float64
    coordinates ``x`` (one per output position) on an axis of ``n_in`` pixels; ``s`` < 1 is an
    antialiasing stretch (weights then divided by their sum, as with ``exclude``)."""
    radius = 1.0 if mode == "linear" else 2.0
    reach = radius / s
    lo = np.floor(x - reach).astype(np.int64) + 1            # first j with s (j - x) > -R
    width = int(math.ceil(2 * reach)) + 1
    j = lo[:, None] + np.arange(width)[None, :]
    d = s * (j - x[:, None])
    k, dk_dd = _triangle(d) if mode == "linear" else _keys_cubic(d, a)
    inside = np.abs(d) < radius
    k = np.where(inside, k, 0.0)
    dk = np.where(np.abs(d) <= radius, dk_dd, 0.0) * (-s)    # d k(s (j - x)) / d x
    if exclude:
        outside = (j < 0) | (j >= n_in)
        k = np.where(outside, 0.0, k)
        dk = np.where(outside, 0.0, dk)
    if not (exclude or s < 1):
        # both kernels are partitions of unity (sum_j k(j - x) = 1): no division
        return np.clip(j, 0, n_in - 1), k, np.abs(dk)
    total = k.sum(axis=1, keepdims=True)
    safe = np.where(total == 0, 1.0, total)
    # |d (k_j / K)| <= (|dk_j| |K| + |k_j| sum_i |dk_i|) / K**2: a bound that holds on both sides
    # of a kink, where the one-sided derivatives of k_j and K need not pair up
    slope = (np.abs(dk) * np.abs(safe) + np.abs(k) * np.abs(dk).sum(axis=1, keepdims=True)) \
        / safe ** 2
    return np.clip(j, 0, n_in - 1), k / safe, slope


def _apply(data: np.ndarray, axis: int, idx: np.ndarray, w: np.ndarray) -> np.ndarray:
    """sum over taps of ``w[y, t] * data[..., idx[y, t], ...]`` along ``axis``."""
    gathered = np.take(data, idx, axis=axis)
    shape = (1,) * axis + w.shape + (1,) * (data.ndim - axis - 1)
    return (gathered * w.reshape(shape)).sum(axis=axis + 1)


def coordinate_error(transform: str, y: np.ndarray, x: np.ndarray, n_in: int, out: int,
                     scale: Fraction, roi: tuple[Fraction, Fraction]) -> np.ndarray:
    """Bound on ``|x32 - x|``: the source coordinate computed in float32 from the float32 scale
    (as onnxruntime and onemodel do) against the exact ``x``, one per output position.

    Each correctly rounded float32 operation errs by at most u * |its result| (u = 2**-24); a
    scale derived from ``sizes`` is itself rounded to float32 once (u relative). Terms of
    order u**2 are left to the allowance of :meth:`Exact.scale`.

    * asymmetric ``y / s``: the division and the rounding of s: 2u |x|.
    * half_pixel, pytorch_half_pixel ``(y + 0.5) / s - 0.5``: q = (y + 0.5) / s errs by 2u |q|,
      the subtraction adds u |x|.
    * align_corners ``y (n - 1) / (s n - 1)``: ``s n`` errs by 2u s n (rounding of s and of the
      product), the subtraction by u |s n - 1|, the division by u: |x| (2u s n / |s n - 1| + 2u).
    * half_pixel_symmetric ``offset + (y + 0.5) / s - 0.5`` with ``offset = n/2 (1 - adj)``,
      ``adj = out / (s n)``: adj errs by 3u adj (s, the product, the division), ``1 - adj`` and the
      product with n/2 by u each: ``n/2 (3u adj + 2u |1 - adj|)``; the quotient errs by u |q|
      (rounding of s: onnxruntime sums in float64) and the final rounding by u |x|.
    * tf_crop_and_resize ``start (n - 1) + y (end - start) (n - 1) / (out - 1)`` (roi in float32):
      the first term errs by u |A|, the second (four roundings) by 4u |B|, the sum by u |x|; with
      one output position ``(start + end) / 2 (n - 1)``: 2u |x|.
    """
    ax = np.abs(x)
    s = float(scale)
    if transform == "asymmetric":
        err = 2 * U32 * ax
    elif transform in ("half_pixel", "pytorch_half_pixel"):
        err = 2 * U32 * np.abs((y + 0.5) / s) + U32 * ax
    elif transform == "align_corners":
        denom = abs(s * n_in - 1)
        err = ax * (2 * U32 * s * n_in / denom + 2 * U32) if denom else np.zeros_like(x)
    elif transform == "half_pixel_symmetric":
        adj = out / (s * n_in)
        err = (n_in / 2 * (3 * U32 * adj + 2 * U32 * abs(1 - adj))
               + U32 * np.abs((y + 0.5) / s) + U32 * ax)
    elif transform == "tf_crop_and_resize":
        start, end = float(roi[0]), float(roi[1])
        if out > 1:
            first = abs(start) * (n_in - 1)
            second = np.abs(y * (end - start) * (n_in - 1) / (out - 1))
            err = U32 * first + 4 * U32 * second + U32 * ax
        else:
            err = 2 * U32 * ax
    else:
        raise ValueError(f"unknown coordinate_transformation_mode {transform!r}")
    return np.asarray(err, dtype=np.float64) * (1 + 1e-6)


def source_coordinates(transform: str, out: int, n_in: int, scale: Fraction,
                       roi: tuple[Fraction, Fraction]) -> list[Fraction]:
    """The exact source coordinate of each of the ``out`` output positions (Resize-19's
    coordinate_transformation_mode formulas with the readings of the module docstring)."""
    half = Fraction(1, 2)
    xs = []
    for y in range(out):
        if transform == "half_pixel":
            x = (y + half) / scale - half
        elif transform == "pytorch_half_pixel":
            x = (y + half) / scale - half if out > 1 else Fraction(0)
        elif transform == "half_pixel_symmetric":
            adjustment = out / (scale * n_in)
            offset = Fraction(n_in, 2) * (1 - adjustment)
            x = offset + (y + half) / scale - half
        elif transform == "align_corners":
            length = scale * n_in
            x = y * Fraction(n_in - 1) / (length - 1) if y else Fraction(0)
        elif transform == "asymmetric":
            x = y / scale
        elif transform == "tf_crop_and_resize":
            start, end = roi
            if out > 1:
                x = start * (n_in - 1) + y * (end - start) * (n_in - 1) / (out - 1)
            else:
                x = half * (start + end) * (n_in - 1)
        else:
            raise ValueError(f"unknown coordinate_transformation_mode {transform!r}")
        xs.append(x)
    return xs


def _nearest_index(x: Fraction, rule: str, scale: Fraction) -> int:
    base = math.floor(x)
    t = x - base
    if rule == "round_prefer_floor":
        return base + (t > Fraction(1, 2))
    if rule == "round_prefer_ceil":
        return base + (t >= Fraction(1, 2))
    if rule == "floor":
        return base
    if rule == "ceil":
        return math.ceil(x)
    if rule == "legacy":
        return math.ceil(x) if scale < 1 else base
    raise ValueError(f"unknown nearest_mode {rule!r}")


def _fraction(v) -> Fraction:
    return Fraction(float(v))


def output_plan(shape, *, scales=None, sizes=None, axes=None,
                keep_aspect_ratio_policy="stretch"):
    """``(out_shape, scale per axis as Fraction)``: the output extents and the scale each
    coordinate formula uses. ``scales`` (float32 values): extent ``floor(in * scale)``;
    ``sizes``: ``sizes`` (stretch) or, for not_larger / not_smaller, the common scale
    ``min / max(sizes_i / in_i)`` and extents ``round_half_up(scale * in)``, all exact."""
    r = len(shape)
    axes = list(range(r)) if axes is None else [a % r for a in axes]
    out = list(shape)
    factor = [Fraction(1)] * r
    if scales is not None:
        for a, s in zip(axes, np.asarray(scales, np.float32).reshape(-1)):
            factor[a] = _fraction(s)
            out[a] = math.floor(shape[a] * factor[a])
        return out, factor, axes
    sizes = [int(v) for v in np.asarray(sizes).reshape(-1)]
    ratios = [Fraction(z, shape[a]) for a, z in zip(axes, sizes)]
    if keep_aspect_ratio_policy == "stretch":
        for a, z, q in zip(axes, sizes, ratios):
            out[a], factor[a] = z, q
        return out, factor, axes
    common = min(ratios) if keep_aspect_ratio_policy == "not_larger" else max(ratios)
    for a in axes:
        factor[a] = common
        out[a] = math.floor(common * shape[a] + Fraction(1, 2))
    return out, factor, axes


def resize_exact(x: np.ndarray, *, mode: str = "nearest", transform: str = "half_pixel",
                 scales=None, sizes=None, roi=None, axes=None,
                 nearest_mode: str = "round_prefer_floor", cubic_coeff_a: float = -0.75,
                 exclude_outside: bool = False, extrapolation_value: float = 0.0,
                 antialias: bool = False, keep_aspect_ratio_policy: str = "stretch") -> Exact:
    """The exact Resize of ``x`` (any real dtype, read as float64) with the given attributes.

    ``roi``: ``[starts..., ends...]`` for the axes ``axes`` (float32 values; only used by
    tf_crop_and_resize). ``nearest_mode="legacy"`` is Resize-10 / Upsample's rule (with
    transform "asymmetric"). ``cubic_coeff_a`` and ``extrapolation_value`` are taken as the
    float32 values a model stores. Raises ValueError where a tf_crop_and_resize coordinate lies
    within its rounding bound of the crop box's edge (the float32 implementation may decide it
    either way: choose other inputs).
    """
    data = np.asarray(x).astype(np.float64)
    out_shape, factor, axes = output_plan(data.shape, scales=scales, sizes=sizes, axes=axes,
                                          keep_aspect_ratio_policy=keep_aspect_ratio_policy)
    r = data.ndim
    rois = [(Fraction(0), Fraction(1))] * r
    if transform == "tf_crop_and_resize":
        rv = np.asarray(roi, np.float32).reshape(-1)
        for i, a in enumerate(axes):
            rois[a] = (_fraction(rv[i]), _fraction(rv[len(axes) + i]))
    a_coef = float(np.float32(cubic_coeff_a))
    fill = float(np.float32(extrapolation_value))

    # one plan per resized axis: taps and weights at x, and at x -/+ delta for the slopes
    plans = []
    for a in axes:
        n_in, n_out = data.shape[a], out_shape[a]
        xs = source_coordinates(transform, n_out, n_in, factor[a], rois[a])
        if n_out == n_in and all(v == y for y, v in enumerate(xs)):
            continue  # identity: every formula gives x = y, which reads pixel y alone
        if n_out == 0 or n_in == 0:
            plans.append((a, None, None, None, None))
            continue
        xf = np.array([float(v) for v in xs])
        yv = np.arange(n_out, dtype=np.float64)
        outside = np.array([(v < 0) or (v > n_in - 1) for v in xs]) \
            if transform == "tf_crop_and_resize" else np.zeros(n_out, bool)
        delta = coordinate_error(transform, yv, xf, n_in, n_out, factor[a], rois[a])
        if transform == "tf_crop_and_resize":
            near_edge = (np.abs(xf) <= delta) & (xf != 0) | \
                        (np.abs(xf - (n_in - 1)) <= delta) & (xf != n_in - 1)
            if near_edge.any():
                raise ValueError(f"axis {a}: coordinates {xf[near_edge]} lie within rounding of "
                                 "the crop box's edge")
        if mode == "nearest":
            # the pixel at x, and at the ends of [x - delta, x + delta] (the rounding rules are
            # monotone, so these two are all a float32 coordinate can pick)
            ends = []
            for sign in (0, -1, 1):
                picked = [_nearest_index(v + sign * Fraction(float(d)), nearest_mode, factor[a])
                          for v, d in zip(xs, delta)]
                ends.append(np.clip(np.array(picked), 0, n_in - 1)[:, None])
            plans.append((a, ends[0], np.ones((n_out, 1)), ("nearest", ends[1:]), outside))
            continue
        s = min(float(factor[a]), 1.0) if antialias else 1.0
        taps = [_weights(xf + sign * delta, n_in, mode, s, a_coef, exclude_outside)
                for sign in (0, -1, 1)]
        plans.append((a, taps[0][0], taps[0][1], (taps, delta), outside))

    def run(src, pick):
        res = src
        for a, idx, w, extra, outside in plans:
            if idx is None:
                shape = list(res.shape)
                shape[a] = out_shape[a]
                res = np.zeros(shape)
                continue
            res = _apply(res, a, *pick(a, idx, w, extra))
        return res

    value = run(data, lambda a, idx, w, extra: (idx, w))
    magnitude = run(np.abs(data), lambda a, idx, w, extra: (idx, np.abs(w)))
    slack = np.zeros(value.shape)
    alternatives = []
    if mode == "nearest":
        moved = [b for b, idx, _, extra, _ in plans
                 if extra is not None and any((e != idx).any() for e in extra[1])]
        for choice in itertools.product((0, 1), repeat=len(moved)):
            picks = dict(zip(moved, choice))
            alternatives.append(run(data, lambda a, idx, w, extra: (
                extra[1][picks[a]] if a in picks else idx, w)))
    for b, _, _, extra, _ in plans:
        if extra is None or extra[0] == "nearest":
            continue
        taps, delta = extra
        worst = None
        for t_idx, _, t_dw in taps:
            def pick(a, idx, w, ex, b=b, t_idx=t_idx, t_dw=t_dw):
                return (t_idx, np.abs(t_dw)) if a == b else (idx, np.abs(w))
            sens = run(np.abs(data), pick)
            worst = sens if worst is None else np.maximum(worst, sens)
        # second order: |d2 value / d x_b^2| <= 64 magnitude (at most 5 taps inside the filter,
        # |k''| <= 2 (|a| + 3) <= 8 for |a| <= 1, the stretch s <= 1 only lowers it, dividing by
        # the weights' sum at most doubles it: 5 * 8 * 2 / 2 < 64 for the delta**2 / 2 term)
        along = delta.reshape((1,) * b + (-1,) + (1,) * (r - b - 1))
        slack += worst * along + 64 * magnitude * along ** 2

    keep = np.zeros(value.shape, bool)
    for a, _, _, _, outside in plans:
        if outside is not None and outside.any():
            keep |= outside.reshape((1,) * a + (-1,) + (1,) * (r - a - 1))
    value = np.where(keep, fill, value)
    slack = np.where(keep, 0.0, slack)
    magnitude = np.where(keep, abs(fill), magnitude)
    alternatives = [np.where(keep, fill, v) for v in alternatives]
    return Exact(value, slack, magnitude, alternatives)


def round_to(value: np.ndarray, dtype) -> np.ndarray:
    """``value`` cast to the integer ``dtype`` as the definition's result is: rounded half to
    even, saturated to the dtype's range."""
    info = np.iinfo(dtype)
    return np.clip(np.rint(value), info.min, info.max).astype(dtype)
