"""NonMaxSuppression, RoiAlign, GridSample and AffineGrid kernels
(onemodel/evaluate/kernels/vision.py) against onnxruntime, the onnx reference evaluator and
float64 formulas (exact_misc.py)."""

from __future__ import annotations

import numpy as np
import pytest
from exact_misc import grid_sample_2d
from oracle import (
    assert_close_to_exact,
    assert_outputs,
    bound_ratio,
    node_model,
    ort,
    ours,
    reference,
    reference64,
)

RNG = np.random.default_rng(5)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_2d_against_exact(mode, padding, align):
    x = RNG.standard_normal((2, 3, 5, 6)).astype(np.float32)
    g = (RNG.random((2, 4, 7, 2)) * 2.6 - 1.3).astype(np.float32)  # some points outside
    feeds = {"X": x, "G": g}
    model = node_model("GridSample", feeds, ["X", "G"], ["Y"], opset=16, mode=mode,
                       padding_mode=padding, align_corners=align)
    # exact: exact_misc's float64 sampling, as torch.nn.functional.grid_sample (which the
    # definition refers to) samples; GridSample-20 renamed bilinear/bicubic to linear/cubic,
    # the only change for 2-D.
    renamed = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    exact = grid_sample_2d(x, g, mode=renamed, padding=padding, align=bool(align))
    if (mode, padding) != ("bicubic", "border"):
        # the formula agrees with reference64 where onnx.reference samples by the same rule
        # (it computes the coordinates in float32: a few roundings of values < 8, times a
        # slope < 2 max|x|). Under border padding onnx.reference clips the cubic coordinate
        # itself, not each of the 4 x 4 pixel indices (see the hand-computed case below), and
        # lands 0.2 - 0.4 away within a pixel of the edges.
        renamed_model = node_model("GridSample", feeds, ["X", "G"], ["Y"], opset=20,
                                   mode=renamed, padding_mode=padding, align_corners=align)
        (ref,) = reference64(renamed_model, feeds)
        assert bound_ratio(ref, exact, ulps=32, scale=np.abs(x).max()) <= 1
    # An output is a sum of at most 16 weights times x, a weight a product of two cubic
    # polynomials of the float32 coordinate (~10 roundings each): 16 + 2 * 10 + 4 roundings of
    # values bounded by about 1.6 max|x|: 64 ulps of max|x|
    assert_close_to_exact(ours(model, feeds), [exact], ulps=64, scale=np.abs(x).max())


def test_grid_sample_bicubic_border_clips_each_pixel_index_by_hand():
    # one row [1, 9, 4, 2], align_corners 0: grid x -1.125 is pixel coordinate -0.75, whose
    # 4 cubic taps -2, -1, 0, 1 (t = 0.25) border-clip to pixels 0, 0, 0, 1; Keys' weight of
    # the last (distance 1.75, A = -0.75) is -0.03515625 and the weights sum to 1, so
    # y = 1 - 0.03515625 * (9 - 1) = 0.71875 (clipping the coordinate to 0 first would give 1)
    x = np.array([[[[1, 9, 4, 2]]]], np.float32)
    g = np.array([[[[-1.125, 0.0]]]], np.float32)
    feeds = {"X": x, "G": g}
    model = node_model("GridSample", feeds, ["X", "G"], ["Y"], opset=16, mode="bicubic",
                       padding_mode="border")
    (y,) = ours(model, feeds)
    np.testing.assert_array_equal(y, [[[[0.71875]]]])
    np.testing.assert_array_equal(grid_sample_2d(x, g, mode="cubic", padding="border",
                                                 align=False), y)


@pytest.mark.parametrize("mode", ["linear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_3d_matches_onnxruntime(mode, padding):
    x = RNG.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    g = (RNG.random((1, 2, 3, 4, 3)) * 2.6 - 1.3).astype(np.float32)
    feeds = {"X": x, "G": g}
    model = node_model("GridSample", feeds, ["X", "G"], ["Y"], opset=20, mode=mode,
                       padding_mode=padding)
    # exact: the definition in float64; 8 trilinear weights (products of 3 float32 fractions)
    # times x, summed: about 8 + 3 * 4 roundings of values <= max|x|: 24 ulps of max|x|
    assert_close_to_exact(ours(model, feeds), reference64(model, feeds), ulps=24,
                          scale=np.abs(x).max())


def test_grid_sample_identity_grid_returns_input():
    x = RNG.standard_normal((1, 1, 3, 4)).astype(np.float32)
    ys, xs = np.meshgrid(np.linspace(-1, 1, 3), np.linspace(-1, 1, 4), indexing="ij")
    g = np.stack([xs, ys], axis=-1)[None].astype(np.float32)
    feeds = {"X": x, "G": g}
    model = node_model("GridSample", feeds, ["X", "G"], ["Y"], opset=16, align_corners=1)
    (y,) = ours(model, feeds)
    np.testing.assert_allclose(y, x, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("transform", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("ratio", [0, 2])
def test_roi_align_matches_onnxruntime(mode, transform, ratio):
    x = RNG.standard_normal((2, 3, 10, 12)).astype(np.float32)
    rois = np.array([[0, 0, 9, 9], [2.5, 1.2, 7.7, 8.1], [-2, -1, 14, 13], [3, 3, 3.5, 3.2]],
                    np.float32)
    feeds = {"X": x, "rois": rois, "bi": np.array([0, 1, 1, 0], np.int64)}
    model = node_model("RoiAlign", feeds, ["X", "rois", "bi"], ["Y"], opset=16, mode=mode,
                       coordinate_transformation_mode=transform, sampling_ratio=ratio,
                       output_height=3, output_width=4, spatial_scale=0.8)
    # exact: the definition in float64 (T1 = double). A bin averages (or maxes) at most
    # 4 x 4 bilinear samples of 4 corners each: 64 products and sums plus the coordinates'
    # few roundings: 80 ulps of max|x|
    assert_close_to_exact(ours(model, feeds), reference64(model, feeds), ulps=80,
                          scale=np.abs(x).max())


@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("score_threshold", [None, 0.4])
def test_non_max_suppression_matches_onnxruntime(center, score_threshold):
    feeds = {"b": RNG.random((2, 20, 4)).astype(np.float32),
             "s": RNG.random((2, 3, 20)).astype(np.float32),
             "m": np.array([5], np.int64), "iou": np.array([0.3], np.float32)}
    ins = ["b", "s", "m", "iou"]
    if score_threshold is not None:
        feeds["st"] = np.array([score_threshold], np.float32)
        ins.append("st")
    model = node_model("NonMaxSuppression", feeds, ins, ["Y"], opset=11,
                       center_point_box=center)
    assert_outputs(ours(model, feeds), ort(model, feeds,
        relies_on="NonMaxSuppression selects boxes by comparisons; random boxes have no IoU or "
                  "score within float32 rounding of the thresholds, so the selected indices "
                  "(int64) are exact"))


def test_non_max_suppression_by_hand():
    boxes = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 2, 1, 3], [0, 0, 1, 1]]], np.float32)
    scores = np.array([[[0.9, 0.95, 0.5, 0.1]]], np.float32)
    feeds = {"b": boxes, "s": scores, "m": np.array([10], np.int64),
             "iou": np.array([0.5], np.float32)}
    model = node_model("NonMaxSuppression", feeds, ["b", "s", "m", "iou"], ["Y"], opset=11)
    (y,) = ours(model, feeds)
    # box 1 (0.95) suppresses 0 and 3 (IoU > 0.5); box 2 does not overlap
    np.testing.assert_array_equal(y, [[0, 0, 1], [0, 0, 2]])


@pytest.mark.parametrize("align", [0, 1])
def test_affine_grid_matches_reference(align):
    th = RNG.standard_normal((2, 2, 3)).astype(np.float32)
    feeds = {"t": th, "s": np.array([2, 3, 4, 5], np.int64)}
    model = node_model("AffineGrid", feeds, ["t", "s"], ["Y"], opset=20, align_corners=align)
    assert_outputs(ours(model, feeds), reference(model, feeds), rtol=1e-5)
    th = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    feeds = {"t": th, "s": np.array([2, 3, 4, 5, 6], np.int64)}
    model = node_model("AffineGrid", feeds, ["t", "s"], ["Y"], opset=20, align_corners=align)
    (y,) = ours(model, feeds)
    assert y.shape == (2, 4, 5, 6, 3)
    assert_outputs([y], reference(model, feeds), rtol=1e-5)
