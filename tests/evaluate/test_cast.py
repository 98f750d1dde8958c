"""Cast and CastLike (onemodel/evaluate/kernels/cast.py): every conversion rule of the Cast
definition, against onnx.reference where it implements it and hand-computed values."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as TP

from oracle import assert_outputs, node_model, ours, reference

F32 = np.array([0.5, -1.25, 3.75, 1e6, -1e6, np.inf, -np.inf, np.nan, 1e-7, -0.0], np.float32)


def _cast(x, to, **attrs):
    (y,) = ours(node_model("Cast", {"x": x}, ["x"], ["y"], opset=attrs.pop("opset", 24), to=to,
                           **attrs), {"x": x})
    return y


@pytest.mark.parametrize("to", [TP.FLOAT16, TP.DOUBLE, TP.BFLOAT16, TP.INT32, TP.UINT8, TP.BOOL])
def test_numeric_against_reference(to):
    x = np.array([0.5, -1.5, 2.5, 100.25, -7.0, 0.0], np.float32)
    model = node_model("Cast", {"x": x}, ["x"], ["y"], to=to)
    assert_outputs(ours(model, {"x": x}), reference(model, {"x": x}))


def test_integers_wrap_and_floats_truncate():
    np.testing.assert_array_equal(_cast(np.array([200, -129, 7], np.int16), TP.INT8),
                                  [-56, 127, 7])
    np.testing.assert_array_equal(_cast(np.array([2.9, -2.9], np.float32), TP.INT32), [2, -2])
    np.testing.assert_array_equal(_cast(np.array([0.0, -0.0, 0.1, np.nan], np.float32),
                                        TP.BOOL), [False, False, True, True])


@pytest.mark.parametrize("to, dt", [(TP.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn),
                                    (TP.FLOAT8E4M3FNUZ, ml_dtypes.float8_e4m3fnuz),
                                    (TP.FLOAT8E5M2, ml_dtypes.float8_e5m2),
                                    (TP.FLOAT8E5M2FNUZ, ml_dtypes.float8_e5m2fnuz)])
def test_float8_saturate_tables(to, dt):
    top = float(ml_dtypes.finfo(dt).max)
    y = _cast(F32, to).astype(np.float32)
    np.testing.assert_array_equal(y[3:7], [top, -top, top, -top])  # saturate=1 clamps, Inf too
    assert np.isnan(y[7])
    n = _cast(F32, to, saturate=0).astype(np.float32)
    if to == TP.FLOAT8E5M2:
        np.testing.assert_array_equal(n[3:7], [np.inf, -np.inf, np.inf, -np.inf])
    else:
        assert np.isnan(n[3:7]).all()  # types without infinities
    np.testing.assert_array_equal(y[:3], F32[:3].astype(dt).astype(np.float32))  # RNE in range
    if to in (TP.FLOAT8E4M3FNUZ, TP.FLOAT8E5M2FNUZ):
        assert not np.signbit(y[9])  # no negative zero in the FNUZ types


def test_round_to_nearest_even_into_float8_and_float4():
    # 1.0625 is half way between 1.0 and 1.125 in E4M3 (3 mantissa bits): even -> 1.0;
    # 1.1875 is half way between 1.125 and 1.25: even -> 1.25.
    y = _cast(np.array([1.0625, 1.1875], np.float32), TP.FLOAT8E4M3FN).astype(np.float32)
    np.testing.assert_array_equal(y, [1.0, 1.25])
    # E2M1 values: 0, 0.5, 1, 1.5, 2, 3, 4, 6; 2.5 -> 2 (even), 5 -> 4 (even), 100 -> 6
    y = _cast(np.array([2.5, 5.0, 100.0, -0.25], np.float32), TP.FLOAT4E2M1)
    np.testing.assert_array_equal(y.astype(np.float32), [2.0, 4.0, 6.0, -0.0])


def test_e8m0_round_modes_and_saturation():
    x = np.array([1.0, 1.1, 1.6, 3.0, 0.0, np.inf, 2.0 ** 128 * 0.75], np.float32)
    up = _cast(x, TP.FLOAT8E8M0).astype(np.float32)
    np.testing.assert_array_equal(up[:4], [1.0, 2.0, 2.0, 4.0])
    assert up[4] == 2.0 ** -127 and up[5] == 2.0 ** 127 and up[6] == 2.0 ** 127
    down = _cast(x, TP.FLOAT8E8M0, round_mode="down").astype(np.float32)
    np.testing.assert_array_equal(down[:4], [1.0, 1.0, 1.0, 2.0])
    near = _cast(x, TP.FLOAT8E8M0, round_mode="nearest").astype(np.float32)
    np.testing.assert_array_equal(near[:4], [1.0, 1.0, 2.0, 4.0])  # 1.5 * 2^k ties up
    ns = _cast(x, TP.FLOAT8E8M0, round_mode="nearest", saturate=0).astype(np.float32)
    assert np.isnan(ns[4]) and np.isnan(ns[5])


def test_sub_byte_integers():
    x = np.arange(-3, 4, dtype=np.float32)
    y = _cast(x, TP.INT4)
    assert y.dtype == ml_dtypes.int4
    np.testing.assert_array_equal(y.astype(np.int8), [-3, -2, -1, 0, 1, 2, 3])
    u = _cast(np.array([0, 5, 15], np.int32), TP.UINT4)
    np.testing.assert_array_equal(u.astype(np.int8), [0, 5, 15])
    back = _cast(np.array([-2, 1], ml_dtypes.int2), TP.FLOAT)
    np.testing.assert_array_equal(back, [-2.0, 1.0])


def test_strings():
    s = np.array(["1.5", "-INF", "+inf", "NaN", "1e-2", "  7 "], dtype=object)
    y = _cast(s, TP.FLOAT)
    np.testing.assert_array_equal(y[[0, 1, 2, 4, 5]], np.array([1.5, -np.inf, np.inf, 0.01, 7],
                                                               np.float32))
    assert np.isnan(y[3])
    np.testing.assert_array_equal(_cast(np.array(["12", "-3"], dtype=object), TP.INT64), [12, -3])
    t = _cast(np.array([0.5, np.inf, -np.inf, 3.0], np.float32), TP.STRING)
    assert t.tolist() == ["0.5", "INF", "-INF", "3.0"]


def test_castlike_takes_the_type_of_the_second_input():
    feeds = {"x": np.array([1.7, -2.2], np.float32), "like": np.zeros(1, np.int16)}
    model = node_model("CastLike", feeds, ["x", "like"], ["y"])
    (y,) = ours(model, feeds)
    assert y.dtype == np.int16
    assert_outputs([y], reference(model, feeds))
