"""Conv, ConvTranspose and the pooling kernels (onemodel/evaluate/kernels/conv.py, pool.py)
against onnx.reference, float64 formulas (exact_misc.py) and hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
from exact_misc import conv_transpose
from oracle import assert_close_to_exact, assert_outputs, node_model, ours, reference, reference64

RNG = np.random.default_rng(3)


def _r(*shape):
    return RNG.uniform(-1, 1, shape).astype(np.float32)


@pytest.mark.parametrize("x, w, attrs", [
    ((1, 3, 7, 7), (4, 3, 3, 3), {}),
    ((2, 4, 6, 5), (6, 2, 3, 2), {"group": 2, "strides": [2, 1], "pads": [1, 0, 1, 1]}),
    ((1, 2, 8, 8), (3, 2, 3, 3), {"dilations": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 7, 6), (3, 2, 2, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 5, 5), (2, 2, 3, 3), {"auto_pad": "VALID", "strides": [2, 2]}),
    ((1, 4, 5, 5), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),   # depthwise
    ((2, 3, 4, 4), (5, 3, 1, 1), {}),                                     # 1x1
    ((1, 2, 9), (3, 2, 3), {"strides": [2]}),                             # 1-D
    ((1, 1, 4, 4, 4), (2, 1, 2, 2, 2), {"pads": [0, 1, 0, 1, 0, 1]}),     # 3-D
])
def test_conv(x, w, attrs):
    feeds = {"x": _r(*x), "w": _r(*w), "b": _r(w[0])}
    model = node_model("Conv", feeds, ["x", "w", "b"], ["y"], **attrs)
    assert_outputs(ours(model, feeds), reference(model, feeds), rtol=1e-5, atol=1e-5)


def test_conv_hand_computed():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    w = np.ones((1, 1, 2, 2), np.float32)
    (y,) = ours(node_model("Conv", {"x": x, "w": w}, ["x", "w"], ["y"], strides=[2, 2]),
                {"x": x, "w": w})
    np.testing.assert_array_equal(y[0, 0], [[10, 18], [42, 50]])


@pytest.mark.parametrize("x, w, attrs", [
    ((1, 2, 3, 3), (2, 3, 3, 3), {}),
    ((1, 2, 3, 4), (2, 2, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 3, 3), (2, 1, 2, 2), {"strides": [2, 2], "output_padding": [1, 1]}),
    ((1, 1, 3, 3), (1, 2, 3, 3), {"strides": [3, 2], "output_shape": [10, 8]}),
    ((1, 1, 3, 3), (1, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 5), (2, 3, 3), {"strides": [2]}),
])
def test_conv_transpose(x, w, attrs):
    feeds = {"x": _r(*x), "w": _r(*w)}
    model = node_model("ConvTranspose", feeds, ["x", "w"], ["y"], **attrs)
    assert_outputs(ours(model, feeds), reference(model, feeds), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("x, w, attrs", [
    ((1, 4, 3, 3), (4, 1, 3, 3), {"group": 2, "dilations": [2, 1], "strides": [1, 2]}),
    ((2, 6, 3, 4), (6, 2, 3, 2), {"group": 3, "strides": [2, 3], "pads": [1, 0, 0, 2],
                                  "dilations": [1, 2], "output_padding": [1, 0]}),
])
def test_grouped_conv_transpose_against_exact(x, w, attrs):
    # onnx.reference fails on grouped ConvTranspose: exact_misc's float64 formula is the
    # oracle, itself checked against reference64 of each group's ungrouped ConvTranspose
    feeds = {"x": _r(*x), "w": _r(*w), "b": _r(w[1] * attrs["group"])}
    model = node_model("ConvTranspose", feeds, ["x", "w", "b"], ["y"], **attrs)
    (got,) = ours(model, feeds)
    exact = conv_transpose(feeds["x"], feeds["w"], feeds["b"], **attrs)
    per_in, per_out = x[1] // attrs["group"], w[1]
    ungrouped = {k: v for k, v in attrs.items() if k != "group"}
    for g in range(attrs["group"]):
        part = {"x": feeds["x"][:, g * per_in:(g + 1) * per_in],
                "w": feeds["w"][g * per_in:(g + 1) * per_in],
                "b": feeds["b"][g * per_out:(g + 1) * per_out]}
        (want,) = reference64(node_model("ConvTranspose", part, ["x", "w", "b"], ["y"],
                                         **ungrouped), part)
        np.testing.assert_allclose(exact[:, g * per_out:(g + 1) * per_out], want, rtol=1e-12,
                                   atol=1e-12)
    # an output sums at most k = (C / group) * prod(kernel) products and the bias: each term
    # goes through at most one product and k additions, in any order, so the error is at
    # most (k + 1) u sum|terms|, (k + 1) / 2 ulps (EPS32 = 2u) of that sum
    k = per_in * int(np.prod(w[2:]))
    scale = conv_transpose(np.abs(feeds["x"]), np.abs(feeds["w"]), np.abs(feeds["b"]), **attrs)
    assert_close_to_exact(got, exact, ulps=(k + 1) / 2, scale=scale)


@pytest.mark.parametrize("op_type, attrs", [
    ("MaxPool", {"kernel_shape": [3, 3]}),
    ("MaxPool", {"kernel_shape": [2, 3], "strides": [2, 2], "pads": [1, 1, 0, 1]}),
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ("MaxPool", {"kernel_shape": [2, 2], "dilations": [2, 2]}),
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}),
    ("AveragePool", {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1}),
    ("AveragePool", {"kernel_shape": [2, 2], "auto_pad": "SAME_LOWER"}),
    ("LpPool", {"kernel_shape": [2, 2], "p": 3}),
    ("GlobalAveragePool", {}), ("GlobalMaxPool", {}),
])
def test_pooling(op_type, attrs):
    feeds = {"x": _r(2, 3, 7, 6)}
    model = node_model(op_type, feeds, ["x"], ["y"], **attrs)
    assert_outputs(ours(model, feeds), reference(model, feeds), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("storage_order", [0, 1])
def test_maxpool_indices(storage_order):
    x = _r(2, 2, 5, 4)
    model = node_model("MaxPool", {"x": x}, ["x"], ["y", "i"], kernel_shape=[2, 2],
                       strides=[2, 1], pads=[1, 0, 0, 0], storage_order=storage_order)
    y, idx = ours(model, {"x": x})
    assert idx.dtype == np.int64
    order = "F" if storage_order else "C"
    # every index points at the maximum it reports, in the flat layout asked for
    for n in range(2):
        for c in range(2):
            plane = x[n, c]
            flat = plane.reshape(-1, order=order)
            local = idx[n, c] - (n * 2 + c) * plane.size
            np.testing.assert_array_equal(flat[local], y[n, c])
    assert_outputs([y, idx], reference(model, {"x": x}))


def test_average_pool_hand_computed_count_exclude_pad():
    x = np.ones((1, 1, 3, 3), np.float32)
    (y,) = ours(node_model("AveragePool", {"x": x}, ["x"], ["y"], kernel_shape=[3, 3],
                           pads=[1, 1, 1, 1]), {"x": x})
    np.testing.assert_array_equal(y, np.ones((1, 1, 3, 3), np.float32))
    (y,) = ours(node_model("AveragePool", {"x": x}, ["x"], ["y"], kernel_shape=[3, 3],
                           pads=[1, 1, 1, 1], count_include_pad=1), {"x": x})
    np.testing.assert_allclose(y[0, 0], [[4 / 9, 6 / 9, 4 / 9], [6 / 9, 1, 6 / 9],
                                         [4 / 9, 6 / 9, 4 / 9]], rtol=1e-6)


def test_global_lp_pool_hand_computed():
    x = np.array([[[[3.0, -4.0]], [[1.0, 1.0]]]], np.float32)  # [1, 2, 1, 2]
    (y,) = ours(node_model("GlobalLpPool", {"x": x}, ["x"], ["y"]), {"x": x})
    np.testing.assert_allclose(y.reshape(-1), [5.0, np.sqrt(2)], rtol=1e-6)
    (y,) = ours(node_model("GlobalLpPool", {"x": x}, ["x"], ["y"], p=1), {"x": x})
    np.testing.assert_allclose(y.reshape(-1), [7.0, 2.0], rtol=1e-6)


def test_maxpool_with_an_unnamed_indices_output():
    x = _r(1, 1, 4, 4)
    model = node_model("MaxPool", {"x": x}, ["x"], ["y", ""], kernel_shape=[2, 2], strides=[2, 2])
    (y,) = ours(model, {"x": x})
    np.testing.assert_array_equal(y[0, 0], x[0, 0].reshape(2, 2, 2, 2).max(axis=(1, 3)))
