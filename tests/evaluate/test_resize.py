"""Resize and Upsample kernels (onemodel/evaluate/kernels/resize.py) against onnxruntime, the onnx
reference evaluator and hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from oracle import F32_ORACLE as F32
from oracle import assert_outputs, node_model, ort, ours, reference

RNG = np.random.default_rng(11)
TRANSFORMS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "asymmetric",
              "tf_crop_and_resize"]


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
def test_modes_and_transforms_match_onnxruntime(transform, mode, extra, scales):
    x = (RNG.random((1, 2, 5, 7)) * 100).astype(np.float32)
    roi = [0, 0, 0.2, 0.1, 1, 1, 0.9, 1.2] if transform == "tf_crop_and_resize" else None
    model, feeds = _resize(x, scales=scales, roi=roi, mode=mode,
                           coordinate_transformation_mode=transform, extrapolation_value=-5.0,
                           **extra)
    assert_outputs(ours(model, feeds), ort(model, feeds,
        relies_on=F32.format(what="Resize interpolates with at most 4 x 4 weights per output "
                                  "(antialias: a few more)")), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_align_corners_with_sizes_matches_onnxruntime(mode):
    x = (RNG.random((1, 1, 4, 6)) * 100).astype(np.float32)
    model, feeds = _resize(x, sizes=[1, 1, 7, 3], mode=mode,
                           coordinate_transformation_mode="align_corners")
    assert_outputs(ours(model, feeds), ort(model, feeds,
        relies_on=F32.format(what="Resize interpolates with at most 4 x 4 "
                                  "weights per output")), rtol=1e-4, atol=1e-3)


def test_align_corners_with_fractional_scale_follows_onnx_test_vectors():
    # 4 * 0.6 = 2.4 output positions: the ONNX vectors divide by (2.4 - 1), not (2 - 1)
    x = np.arange(1, 9, dtype=np.float32).reshape(1, 1, 2, 4)
    model, feeds = _resize(x, scales=[1, 1, 0.6, 0.6], mode="linear",
                           coordinate_transformation_mode="align_corners")
    (y,) = ours(model, feeds)
    np.testing.assert_allclose(y, [[[[1.0, 3.142857]]]], rtol=1e-6)
    assert_outputs([y], reference(model, feeds), rtol=1e-5)


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
def test_sizes_axes_and_aspect_policy_match_reference(policy):
    x = (RNG.random((2, 3, 5, 7)) * 100).astype(np.float32)
    model, feeds = _resize(x, sizes=[4, 9], axes=[2, 3], mode="linear",
                           keep_aspect_ratio_policy=policy)
    got = ours(model, feeds)
    want = reference(model, feeds)
    assert_outputs(got, want, rtol=1e-4, atol=1e-3)
    assert got[0].shape[:2] == (2, 3)
    assert got[0].shape[2:] == {"stretch": (4, 9), "not_larger": (4, 6),
                                "not_smaller": (6, 9)}[policy]


def test_uint8_linear_rounds_like_onnxruntime():
    x = RNG.integers(0, 255, (1, 3, 6, 5)).astype(np.uint8)
    model, feeds = _resize(x, scales=[1, 1, 1.5, 0.7], mode="linear")
    (y,) = ours(model, feeds)
    (want,) = ort(model, feeds,
        relies_on="linear uint8 Resize: float32 weights, then rounding to uint8; a value within "
                  "rounding of .5 may round either way, so the test allows 1")
    assert y.dtype == np.uint8
    assert np.abs(y.astype(int) - want.astype(int)).max() <= 1


def test_nearest_upsample_by_two_repeats_values():
    x = np.array([[[[1, 2], [3, 4]]]], dtype=np.float32)
    model, feeds = _resize(x, scales=[1, 1, 2, 2], mode="nearest",
                           coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    (y,) = ours(model, feeds)
    np.testing.assert_array_equal(y[0, 0], [[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4],
                                            [3, 3, 4, 4]])


def test_resize10_and_upsample_match_onnxruntime():
    x = (RNG.random((1, 1, 4, 5)) * 10).astype(np.float32)
    for mode in ("nearest", "linear"):
        for scales in ([1, 1, 2, 3], [1, 1, 0.6, 0.5]):
            feeds = {"X": x, "scales": np.array(scales, np.float32)}
            model = node_model("Resize", feeds, ["X", "scales"], ["Y"], opset=10, mode=mode)
            assert_outputs(ours(model, feeds), ort(model, feeds,
                relies_on=F32.format(what="Resize-10 interpolates with at most 2 x 2 weights per "
                                          "output")), rtol=1e-5)
    feeds = {"X": x, "scales": np.array([1, 1, 2, 1.5], np.float32)}
    model = node_model("Upsample", feeds, ["X", "scales"], ["Y"], opset=9, mode="linear")
    assert_outputs(ours(model, feeds), ort(model, feeds,
        relies_on=F32.format(what="Upsample interpolates with at most 2 x 2 weights "
                                  "per output")), rtol=1e-5)
    for mode in ("nearest", "linear"):  # opset 7: scales is an attribute
        model = node_model("Upsample", {"X": x}, ["X"], ["Y"], opset=7, ir_version=3, mode=mode,
                           scales=[1.0, 1.0, 2.0, 1.5])
        assert_outputs(ours(model, {"X": x}), ort(model, {"X": x},
            relies_on=F32.format(what="Upsample interpolates with at most 2 x 2 "
                                      "weights per output")), rtol=1e-5)


def test_scales_and_sizes_together_is_invalid_model():
    from onemodel.errors import InvalidModelError

    x = np.zeros((1, 1, 2, 2), np.float32)
    model, feeds = _resize(x, scales=[1, 1, 2, 2], sizes=[1, 1, 4, 4], mode="nearest")
    with pytest.raises(InvalidModelError):
        ours(model, feeds)
