"""Resize and Upsample kernels (onemodel/evaluate/kernels/resize.py) against the float64
definition (exact_resize.py), the onnx reference evaluator and hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
from exact_resize import resize_exact, round_to
from oracle import assert_close_to_exact, assert_outputs, node_model, ours, reference

RNG = np.random.default_rng(11)
TRANSFORMS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "asymmetric",
              "tf_crop_and_resize"]


def _check(got, exact, mode):
    """``got`` (onemodel's float32 output) against the exact resize.

    nearest only routes values: every element is the definition's pixel, or, where the exact
    source coordinate lies within the float32 rounding of that coordinate of a rounding point
    (``exact.ambiguous()``), the neighbour a float32 coordinate may pick (onemodel computes
    coordinates in float32, as onnxruntime does; scales like 0.6f put (1 + 0.5) / 0.6f - 0.5 at
    1.99999990, which float32 rounds to 2.0).
    linear / cubic: within ``ulps=1`` of ``exact.scale()``, which counts the roundings already:
    the float32 source coordinate (errs by delta, per transform: exact_resize.coordinate_error)
    times the output's slope along it, plus the one rounding of the float64 result to float32.
    """
    assert got.dtype == np.float32 and got.shape == exact.value.shape
    if mode == "nearest":
        bad = ~exact.allows(got)
        assert not bad.any(), f"{bad.sum()} elements read another pixel, first at " \
                              f"{np.argwhere(bad)[0]}"
        return
    assert_close_to_exact(got, exact.value, ulps=1, scale=exact.scale())


def _resize(x, scales=None, sizes=None, roi=None, opset=19, **attrs):
    feeds = {"X": x}
    ins = ["X", "", "", ""]
    if roi is not None:
        feeds["roi"] = np.asarray(roi, np.float32)
        ins[1] = "roi"
    if scales is not None:
        feeds["scales"] = np.asarray(scales, np.float32)
        ins[2] = "scales"
    if sizes is not None:
        feeds["sizes"] = np.asarray(sizes, np.int64)
        ins[3] = "sizes"
    while ins[-1] == "":
        ins.pop()
    return node_model("Resize", feeds, ins, ["Y"], opset=opset, **attrs), feeds


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("mode, extra", [
    ("nearest", {}), ("nearest", {"nearest_mode": "floor"}), ("nearest", {"nearest_mode": "ceil"}),
    ("nearest", {"nearest_mode": "round_prefer_ceil"}), ("linear", {}),
    ("linear", {"antialias": 1}),
    ("cubic", {}), ("cubic", {"exclude_outside": 1, "cubic_coeff_a": -0.5}),
    ("cubic", {"antialias": 1}),
])
@pytest.mark.parametrize("scales", [[1, 1, 0.6, 0.8], [1, 1, 1.7, 2.3]])
def test_modes_and_transforms_match_the_definition(transform, mode, extra, scales):
    x = (RNG.random((1, 2, 5, 7)) * 100).astype(np.float32)
    roi = [0, 0, 0.2, 0.1, 1, 1, 0.9, 1.2] if transform == "tf_crop_and_resize" else None
    model, feeds = _resize(x, scales=scales, roi=roi, mode=mode,
                           coordinate_transformation_mode=transform, extrapolation_value=-5.0,
                           **extra)
    exact = resize_exact(x, mode=mode, transform=transform, scales=scales, roi=roi,
                         extrapolation_value=-5.0, **extra)
    (got,) = ours(model, feeds)
    _check(got, exact, mode)
    if transform == "tf_crop_and_resize":  # the roi's end 1.2 puts the last columns outside
        assert (got[..., -1] == -5.0).all() and (got[..., 0] != -5.0).all()


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_align_corners_with_sizes_matches_the_definition(mode):
    x = (RNG.random((1, 1, 4, 6)) * 100).astype(np.float32)
    model, feeds = _resize(x, sizes=[1, 1, 7, 3], mode=mode,
                           coordinate_transformation_mode="align_corners")
    exact = resize_exact(x, mode=mode, transform="align_corners", sizes=[1, 1, 7, 3])
    (got,) = ours(model, feeds)
    _check(got, exact, mode)
    if mode == "nearest":  # rows at 0, 1/2, 1, ..., 3, columns at 0, 5/2, 5: ties, exact in
        # float32 too, which round_prefer_floor takes down
        np.testing.assert_array_equal(got[0, 0], x[0, 0][[0, 0, 1, 1, 2, 2, 3]][:, [0, 2, 5]])


def test_align_corners_with_fractional_scale_follows_onnx_test_vectors():
    # 4 * 0.6 = 2.4 output positions: the ONNX vectors divide by (2.4 - 1), not (2 - 1)
    x = np.arange(1, 9, dtype=np.float32).reshape(1, 1, 2, 4)
    model, feeds = _resize(x, scales=[1, 1, 0.6, 0.6], mode="linear",
                           coordinate_transformation_mode="align_corners")
    (y,) = ours(model, feeds)
    np.testing.assert_allclose(y, [[[[1.0, 3.142857]]]], rtol=1e-6)
    assert_outputs([y], reference(model, feeds), rtol=1e-5)
    _check(y, resize_exact(x, mode="linear", transform="align_corners",
                           scales=[1, 1, 0.6, 0.6]), "linear")


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
def test_sizes_axes_and_aspect_policy_match_the_definition(policy):
    x = (RNG.random((2, 3, 5, 7)) * 100).astype(np.float32)
    model, feeds = _resize(x, sizes=[4, 9], axes=[2, 3], mode="linear",
                           keep_aspect_ratio_policy=policy)
    (got,) = ours(model, feeds)
    assert got.shape[:2] == (2, 3)
    assert got.shape[2:] == {"stretch": (4, 9), "not_larger": (4, 6),
                             "not_smaller": (6, 9)}[policy]
    _check(got, resize_exact(x, mode="linear", sizes=[4, 9], axes=[2, 3],
                             keep_aspect_ratio_policy=policy), "linear")


def test_uint8_linear_rounds_the_exact_value_half_to_even():
    x = np.random.default_rng(5).integers(0, 255, (1, 3, 6, 5)).astype(np.uint8)
    model, feeds = _resize(x, scales=[1, 1, 1.5, 0.7], mode="linear")
    (y,) = ours(model, feeds)
    assert y.dtype == np.uint8
    exact = resize_exact(x, mode="linear", scales=[1, 1, 1.5, 0.7])
    # the definition's result is the real value rounded half to even and saturated. onemodel
    # computes it in float64 from float32 coordinates, off by at most coord_slack (+ 1e-9 for
    # the float64 sums, whose size is below 255 * 2**-50): it rounds the same way except where
    # the exact value lies within that of a rounding point (k + 1/2), which may go either way.
    slack = exact.coord_slack + 1e-9
    lo, hi = round_to(exact.value - slack, np.uint8), round_to(exact.value + slack, np.uint8)
    assert ((y >= lo) & (y <= hi)).all()
    np.testing.assert_array_equal(y[lo == hi], round_to(exact.value, np.uint8)[lo == hi])
    assert (lo != hi).sum() == 1  # one of the 162 values is undecided: 107.4999976 +- 1.4e-4


def test_nearest_upsample_by_two_repeats_values():
    x = np.array([[[[1, 2], [3, 4]]]], dtype=np.float32)
    model, feeds = _resize(x, scales=[1, 1, 2, 2], mode="nearest",
                           coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    (y,) = ours(model, feeds)
    np.testing.assert_array_equal(y[0, 0], [[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4],
                                            [3, 3, 4, 4]])


def test_resize10_and_upsample_match_the_definition():
    # Resize-10 and Upsample: asymmetric coordinates, nearest reads floor(x) on an enlarged axis
    # and ceil(x) on a shrunk one ("legacy", see exact_resize)
    x = (RNG.random((1, 1, 4, 5)) * 10).astype(np.float32)

    def exact(mode, scales):
        return resize_exact(x, mode=mode, transform="asymmetric", scales=scales,
                            nearest_mode="legacy")

    for mode in ("nearest", "linear"):
        for scales in ([1, 1, 2, 3], [1, 1, 0.6, 0.5]):
            feeds = {"X": x, "scales": np.array(scales, np.float32)}
            model = node_model("Resize", feeds, ["X", "scales"], ["Y"], opset=10, mode=mode)
            (got,) = ours(model, feeds)
            _check(got, exact(mode, scales), mode)
    feeds = {"X": x, "scales": np.array([1, 1, 2, 1.5], np.float32)}
    model = node_model("Upsample", feeds, ["X", "scales"], ["Y"], opset=9, mode="linear")
    (got,) = ours(model, feeds)
    _check(got, exact("linear", [1, 1, 2, 1.5]), "linear")
    for mode in ("nearest", "linear"):  # opset 7: scales is an attribute
        model = node_model("Upsample", {"X": x}, ["X"], ["Y"], opset=7, ir_version=3, mode=mode,
                           scales=[1.0, 1.0, 2.0, 1.5])
        (got,) = ours(model, {"X": x})
        _check(got, exact(mode, [1, 1, 2, 1.5]), mode)
    # shrinking by 0.6: nearest reads columns ceil(y / 0.6f) = 0, 2 (floor would read 0, 1)
    feeds = {"X": x, "scales": np.array([1, 1, 1, 0.6], np.float32)}
    model = node_model("Resize", feeds, ["X", "scales"], ["Y"], opset=10, mode="nearest")
    np.testing.assert_array_equal(ours(model, feeds)[0], x[..., [0, 2, 4]][..., :3])


def test_scales_and_sizes_together_is_invalid_model():
    from onemodel.errors import InvalidModelError

    x = np.zeros((1, 1, 2, 2), np.float32)
    model, feeds = _resize(x, scales=[1, 1, 2, 2], sizes=[1, 1, 4, 4], mode="nearest")
    with pytest.raises(InvalidModelError):
        ours(model, feeds)
