"""BitCast (kernels/cast.py) and MaxUnpool (kernels/pool.py) against numpy's own views, the
definition's bit patterns, onnxruntime and MaxPool's indices."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as TP
from oracle import assert_outputs, node_model, ort, ours

from onemodel.errors import EvaluationError, InvalidModelError

RNG = np.random.default_rng(3)


def _bitcast(x, to):
    feeds = {"x": x}
    return ours(node_model("BitCast", feeds, ["x"], ["y"], opset=26, ir_version=12, to=to),
                feeds)[0]


@pytest.mark.parametrize("src,to,dtype", [
    (np.float32, TP.INT32, np.int32), (np.float64, TP.UINT64, np.uint64),
    (np.float16, TP.BFLOAT16, ml_dtypes.bfloat16), (np.int8, TP.FLOAT8E4M3FN,
                                                     ml_dtypes.float8_e4m3fn),
    (np.uint16, TP.FLOAT16, np.float16), (np.int64, TP.DOUBLE, np.float64)])
def test_bitcast_keeps_every_bit(src, to, dtype):
    x = np.frombuffer(RNG.bytes(12 * np.dtype(src).itemsize), dtype=src).reshape(3, 4)
    y = _bitcast(x, to)
    assert y.dtype == np.dtype(dtype) and y.shape == (3, 4)
    assert y.tobytes() == x.tobytes()


def test_bitcast_of_a_scalar_and_a_transposed_view():
    assert _bitcast(np.array(1.0, np.float32), TP.INT32) == np.int32(0x3F800000)
    x = RNG.standard_normal((2, 3)).astype(np.float32).T
    np.testing.assert_array_equal(_bitcast(x, TP.UINT32), x.view(np.uint32))


def test_bitcast_narrow_integers_share_the_four_bits():
    x = np.array([-8, -1, 0, 7], ml_dtypes.int4)
    y = _bitcast(x, TP.UINT4)
    np.testing.assert_array_equal(y.astype(np.int32), [8, 15, 0, 7])
    f = _bitcast(np.array([1, 2, 15], ml_dtypes.uint4), TP.FLOAT4E2M1)
    np.testing.assert_array_equal(f.astype(np.float32), [0.5, 1.0, -6.0])


def test_bitcast_refuses_different_widths_and_non_bool_bytes():
    with pytest.raises(InvalidModelError, match="widths differ"):
        _bitcast(np.zeros(2, np.float32), TP.INT64)
    np.testing.assert_array_equal(_bitcast(np.array([0, 1], np.uint8), TP.BOOL), [False, True])
    with pytest.raises(EvaluationError, match="bool"):
        _bitcast(np.array([0, 2], np.uint8), TP.BOOL)


def test_max_unpool_puts_maxpool_values_back_at_their_indices():
    x = RNG.standard_normal((2, 3, 6, 8)).astype(np.float32)
    feeds = {"x": x}
    pool = node_model("MaxPool", feeds, ["x"], ["y", "i"], opset=22, kernel_shape=[2, 2],
                      strides=[2, 2])
    y, idx = ours(pool, feeds)
    feeds = {"y": y, "i": idx}
    unpool = node_model("MaxUnpool", feeds, ["y", "i"], ["z"], opset=22, kernel_shape=[2, 2],
                        strides=[2, 2])
    (z,) = ours(unpool, feeds)
    assert z.shape == x.shape
    kept = z != 0
    assert kept.sum() == y.size
    np.testing.assert_array_equal(z[kept], x[kept])
    assert_outputs([z], ort(unpool, feeds,
        relies_on="MaxUnpool is data movement: values scattered to their indices, zeros elsewhere"))


def test_max_unpool_with_output_shape_pads_the_unpooled_tensor_at_the_end():
    """As the ONNX test vector test_maxunpool_export_with_output_shape has it: indices are
    positions in the unpooled shape [1, 2, 4, 6], which then sits at the start of each axis of
    output_shape. (onnxruntime 1.32 reads them as positions in output_shape instead and fails
    that vector.)"""
    y = RNG.standard_normal((1, 2, 2, 3)).astype(np.float32)
    idx = np.array([[[[0, 3, 5], [12, 15, 17]], [[24, 26, 29], [43, 44, 47]]]], np.int64)
    feeds = {"y": y, "i": idx, "s": np.array([1, 2, 5, 7], np.int64)}
    model = node_model("MaxUnpool", feeds, ["y", "i", "s"], ["z"], opset=22,
                       kernel_shape=[2, 2], strides=[2, 2])
    (z,) = ours(model, feeds)
    unpooled = np.zeros(1 * 2 * 4 * 6, np.float32)
    unpooled[idx.reshape(-1)] = y.reshape(-1)
    want = np.zeros((1, 2, 5, 7), np.float32)
    want[:, :, :4, :6] = unpooled.reshape(1, 2, 4, 6)
    np.testing.assert_array_equal(z, want)


def test_max_unpool_index_out_of_range_is_refused():
    feeds = {"y": np.ones((1, 1, 1, 1), np.float32), "i": np.array([[[[4]]]], np.int64)}
    model = node_model("MaxUnpool", feeds, ["y", "i"], ["z"], opset=22, kernel_shape=[2, 2])
    with pytest.raises(EvaluationError, match="outside"):
        ours(model, feeds)


def test_max_unpool_output_shape_of_2_60_elements_is_refused_before_allocating():
    from onemodel.errors import UnsupportedError
    feeds = {"y": np.ones((1, 1, 1, 1), np.float32), "i": np.array([[[[0]]]], np.int64),
             "s": np.array([1, 1, 1 << 30, 1 << 30], np.int64)}
    model = node_model("MaxUnpool", feeds, ["y", "i", "s"], ["z"], opset=22, kernel_shape=[2, 2])
    with pytest.raises(UnsupportedError, match=r"2\^60 or more"):
        ours(model, feeds)
