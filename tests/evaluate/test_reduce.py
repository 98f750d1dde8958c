"""Reductions, ArgMax/ArgMin, CumSum, TopK (onemodel/evaluate/kernels/reduce.py) against
onnx.reference and hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import assert_outputs, node_model, ours, reference

X = np.random.default_rng(5).uniform(0.1, 2, (2, 3, 4)).astype(np.float32)
OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
       "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]


@pytest.mark.parametrize("op_type", OPS)
@pytest.mark.parametrize("axes, keepdims", [([1], 1), ([0, -1], 0), (None, 1), (None, 0)])
def test_axes_as_input_opset_18(op_type, axes, keepdims):
    feeds = {"x": X}
    names = ["x"]
    if axes is not None:
        feeds["axes"] = np.array(axes, np.int64)
        names.append("axes")
    model = node_model(op_type, feeds, names, ["y"], opset=18, keepdims=keepdims)
    assert_outputs(ours(model, feeds), reference(model, feeds), rtol=1e-5)


@pytest.mark.parametrize("op_type", OPS[1:])  # ReduceSum takes axes as an input from 13 on
def test_axes_as_attribute_opset_13(op_type):
    feeds = {"x": X}
    model = node_model(op_type, feeds, ["x"], ["y"], opset=13, axes=[2, 0], keepdims=0)
    assert_outputs(ours(model, feeds), reference(model, feeds), rtol=1e-5)


def test_reduce_sum_axes_attribute_before_opset_13():
    feeds = {"x": X}
    model = node_model("ReduceSum", feeds, ["x"], ["y"], opset=11, axes=[1], keepdims=0)
    assert_outputs(ours(model, feeds), reference(model, feeds), rtol=1e-5)


def test_noop_with_empty_axes_and_empty_set():
    feeds = {"x": X, "axes": np.array([], np.int64)}
    (y,) = ours(node_model("ReduceSum", feeds, ["x", "axes"], ["y"], noop_with_empty_axes=1),
                feeds)
    np.testing.assert_array_equal(y, X)
    (y,) = ours(node_model("ReduceSum", feeds, ["x", "axes"], ["y"]), feeds)
    np.testing.assert_allclose(y, X.sum(keepdims=True), rtol=1e-5)
    e = {"x": np.zeros((2, 0, 3), np.float32), "axes": np.array([1], np.int64)}
    for op_type, want in (("ReduceSum", 0.0), ("ReduceProd", 1.0), ("ReduceMax", -np.inf),
                          ("ReduceMin", np.inf), ("ReduceLogSumExp", -np.inf)):
        (y,) = ours(node_model(op_type, e, ["x", "axes"], ["y"], opset=18), e)
        assert y.shape == (2, 1, 3)
        np.testing.assert_array_equal(y, np.full((2, 1, 3), want, np.float32))


def test_integer_sums_stay_in_their_type():
    feeds = {"x": np.array([[100, 100], [100, 100]], np.int8), "axes": np.array([0], np.int64)}
    (y,) = ours(node_model("ReduceSum", feeds, ["x", "axes"], ["y"]), feeds)
    assert y.dtype == np.int8
    np.testing.assert_array_equal(y, np.array([[200, 200]]).astype(np.int8))


@pytest.mark.parametrize("op_type", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("attrs", [{}, {"axis": 1, "keepdims": 0}, {"axis": -1,
                                                                     "select_last_index": 1}])
def test_arg_reductions(op_type, attrs):
    feeds = {"x": np.array([[1, 3, 3, 0], [2, 2, 0, 0]], np.float32)}
    model = node_model(op_type, feeds, ["x"], ["y"], **attrs)
    assert_outputs(ours(model, feeds), reference(model, feeds))


@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum(exclusive, reverse):
    feeds = {"x": np.array([[1, 2, 3], [4, 5, 6]], np.int32), "axis": np.array(1, np.int64)}
    model = node_model("CumSum", feeds, ["x", "axis"], ["y"], exclusive=exclusive,
                       reverse=reverse)
    assert_outputs(ours(model, feeds), reference(model, feeds))


def test_topk_ties_keep_the_lower_index():
    feeds = {"x": np.array([[3, 1, 3, 2, 1]], np.float32), "k": np.array([3], np.int64)}
    v, i = ours(node_model("TopK", feeds, ["x", "k"], ["v", "i"]), feeds)
    np.testing.assert_array_equal(v, [[3, 3, 2]])
    np.testing.assert_array_equal(i, [[0, 2, 3]])
    v, i = ours(node_model("TopK", feeds, ["x", "k"], ["v", "i"], largest=0), feeds)
    np.testing.assert_array_equal(v, [[1, 1, 2]])
    np.testing.assert_array_equal(i, [[1, 4, 3]])
    feeds = {"x": np.random.default_rng(0).uniform(size=(3, 6)).astype(np.float32),
             "k": np.array([2], np.int64)}
    model = node_model("TopK", feeds, ["x", "k"], ["v", "i"], axis=0)
    assert_outputs(ours(model, feeds), reference(model, feeds))


@pytest.mark.parametrize("exclusive, reverse, want", [(0, 0, [1, 2, 6, 24]), (1, 0, [1, 1, 2, 6]),
                                                      (0, 1, [24, 24, 12, 4]),
                                                      (1, 1, [24, 12, 4, 1])])
def test_cumprod(exclusive, reverse, want):
    feeds = {"x": np.array([1, 2, 3, 4], np.int64), "axis": np.array(0, np.int64)}
    (y,) = ours(node_model("CumProd", feeds, ["x", "axis"], ["y"], opset=26, exclusive=exclusive,
                           reverse=reverse), feeds)
    np.testing.assert_array_equal(y, want)
