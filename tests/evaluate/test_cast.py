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


# -- narrow types: fixed expected values, written from the format definitions ------------------
# Every expected value below is written by hand (the bit pattern from the format's definition),
# never computed by ml_dtypes, whose out-of-range conversions changed between releases.

NARROW_X = np.array([-9, -8.7, -3.5, -2.5, -0.5, 0.5, 2.7, 7.6, 8, 15.9, 16, 1e10,
                     np.nan, np.inf, -np.inf], np.float32)
#: round to nearest, ties to even (Clause 6.3.3), keep the low bits (two's complement):
#: -9 -> ...10111 -> INT4 0111 = 7; -3.5 -> -4, -2.5 -> -2, 2.7 -> 3, 15.9 -> 16 -> UINT4 0
NARROW_WANT = {
    TP.INT4: [7, 7, -4, -2, 0, 0, 3, -8, -8, 0, 0, 0, 0, 0, 0],
    TP.UINT4: [7, 7, 12, 14, 0, 0, 3, 8, 8, 0, 0, 0, 0, 0, 0],
    TP.INT2: [-1, -1, 0, -2, 0, 0, -1, 0, 0, 0, 0, 0, 0, 0, 0],
    TP.UINT2: [3, 3, 0, 2, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0],
}
NARROW_DTYPE = {TP.INT4: ml_dtypes.int4, TP.UINT4: ml_dtypes.uint4, TP.INT2: ml_dtypes.int2,
                TP.UINT2: ml_dtypes.uint2}


@pytest.mark.parametrize("to", list(NARROW_WANT))
def test_float_to_narrow_integers_round_to_even_then_keep_the_low_bits(to):
    import narrow_reference as nr
    y = _cast(NARROW_X, to)
    assert y.dtype == np.dtype(NARROW_DTYPE[to])
    np.testing.assert_array_equal(y.astype(np.int8), NARROW_WANT[to])
    ref = nr.cast(NARROW_X, TP.DataType.Name(to))
    np.testing.assert_array_equal(ref.astype(np.int8), NARROW_WANT[to])
    h = _cast(NARROW_X[:11].astype(np.float16), to)  # float16: the same rule
    np.testing.assert_array_equal(h.astype(np.int8), NARROW_WANT[to][:11])


def test_onnx_int4_vector_wraps():
    # onnx's test_cast_FLOAT_to_INT4 input, arange(-9, 16): -9 -> 7, 8 -> -8, 15 -> -1
    y = _cast(np.arange(-9, 16).astype(np.float32), TP.INT4)
    np.testing.assert_array_equal(y.astype(np.int8),
                                  [7] + list(range(-8, 8)) + list(range(-8, 0)))
    u = _cast(np.arange(-9, 16).astype(np.float32), TP.UINT4)
    np.testing.assert_array_equal(u.astype(np.int8), list(range(7, 16)) + list(range(0, 16)))


def test_integers_to_narrow_integers_wrap():
    x = np.array([200, -9, 17, -129, 7], np.int32)
    np.testing.assert_array_equal(_cast(x, TP.INT4).astype(np.int8), [-8, 7, 1, -1, 7])
    np.testing.assert_array_equal(_cast(x, TP.UINT2).astype(np.int8), [0, 3, 1, 3, 3])
    np.testing.assert_array_equal(_cast(np.array([True, False]), TP.INT2).astype(np.int8), [1, 0])
    back = _cast(np.array([-8, 7], ml_dtypes.int4), TP.UINT4)  # INT4 -> UINT4: the same bits
    np.testing.assert_array_equal(back.astype(np.int8), [8, 7])


F8_X = np.array([1.0, 1.0625, 1.1875, 1.125, 1.375, -0.0, 448, 464, 465, 240, 248, 57344, 61439,
                 61440, 2.0 ** -9, 2.0 ** -10, 3 * 2.0 ** -10, 2.0 ** -11, 2.0 ** -16,
                 2.0 ** -17, np.inf, -np.inf, -1e-7], np.float32)
#: (saturate=1 codes, saturate=0 codes) per type, for F8_X; None: a NaN (any NaN code)
F8_WANT = {
    # E4M3FN: bias 7, max 448 = 0x7E, NaN S.1111.111, no Inf; 464 ties to even 448, 465 rounds
    # to 480 > max; 240 = 1.875 * 2**7 = 0x77, 248 ties to the even 256 = 0x78; 2**-9 is the
    # smallest subnormal 0x01, 2**-10 ties to 0, 3*2**-10 to 0x02
    TP.FLOAT8E4M3FN: (
        [0x38, 0x38, 0x3A, 0x39, 0x3B, 0x80, 0x7E, 0x7E, 0x7E, 0x77, 0x78, 0x7E, 0x7E, 0x7E,
         0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x7E, 0xFE, 0x80],
        [0x38, 0x38, 0x3A, 0x39, 0x3B, 0x80, 0x7E, 0x7E, None, 0x77, 0x78, None, None, None,
         0x01, 0x00, 0x02, 0x00, 0x00, 0x00, None, None, 0x80]),
    # E4M3FNUZ: bias 8, max 240 = 0x7F, NaN 0x80, no -0; 248 ties to the (even) 256 > max
    TP.FLOAT8E4M3FNUZ: (
        [0x40, 0x40, 0x42, 0x41, 0x43, 0x00, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F,
         0x02, 0x01, 0x03, 0x00, 0x00, 0x00, 0x7F, 0xFF, 0x00],
        [0x40, 0x40, 0x42, 0x41, 0x43, 0x00, None, None, None, 0x7F, None, None, None, None,
         0x02, 0x01, 0x03, 0x00, 0x00, 0x00, None, None, 0x00]),
    # E5M2: bias 15, max 57344 = 0x7B, Inf 0x7C; 1.125 ties to 1.0, 61440 ties to 2**16 (Inf);
    # 240 = 1.875 * 2**7 ties to the even 256 = 0x5C
    TP.FLOAT8E5M2: (
        [0x3C, 0x3C, 0x3D, 0x3C, 0x3E, 0x80, 0x5F, 0x5F, 0x5F, 0x5C, 0x5C, 0x7B, 0x7B, 0x7B,
         0x18, 0x14, 0x1A, 0x10, 0x01, 0x00, 0x7B, 0xFB, 0x80],
        [0x3C, 0x3C, 0x3D, 0x3C, 0x3E, 0x80, 0x5F, 0x5F, 0x5F, 0x5C, 0x5C, 0x7B, 0x7B, 0x7C,
         0x18, 0x14, 0x1A, 0x10, 0x01, 0x00, 0x7C, 0xFC, 0x80]),
    # E5M2FNUZ: bias 16, max 57344 = 0x7F, NaN 0x80, no -0, smallest subnormal 2**-17 = 0x01
    TP.FLOAT8E5M2FNUZ: (
        [0x40, 0x40, 0x41, 0x40, 0x42, 0x00, 0x63, 0x63, 0x63, 0x60, 0x60, 0x7F, 0x7F, 0x7F,
         0x1C, 0x18, 0x1E, 0x14, 0x02, 0x01, 0x7F, 0xFF, 0x00],
        [0x40, 0x40, 0x41, 0x40, 0x42, 0x00, 0x63, 0x63, 0x63, 0x60, 0x60, 0x7F, 0x7F, None,
         0x1C, 0x18, 0x1E, 0x14, 0x02, 0x01, None, None, 0x00]),
}
#: the NaN codes of each type
F8_NAN = {TP.FLOAT8E4M3FN: {0x7F, 0xFF}, TP.FLOAT8E4M3FNUZ: {0x80},
          TP.FLOAT8E5M2: {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}, TP.FLOAT8E5M2FNUZ: {0x80}}


def _check_codes(codes: np.ndarray, want: list, nan: set[int]) -> None:
    """``codes`` equal ``want``; where ``want`` is None, one of the ``nan`` codes."""
    for i, (c, w) in enumerate(zip(codes.tolist(), want)):
        if w is None:
            assert c in nan, (i, hex(c))
        else:
            assert c == w, (i, float(F8_X[i]), hex(c), hex(w))


@pytest.mark.parametrize("to", list(F8_WANT))
@pytest.mark.parametrize("saturate", [1, 0])
def test_float8_bit_patterns_from_the_definition(to, saturate):
    import narrow_reference as nr
    want = F8_WANT[to][0 if saturate else 1]
    got = _cast(F8_X, to, saturate=saturate).view(np.uint8)
    _check_codes(got, want, F8_NAN[to])
    ref = nr.cast(F8_X, TP.DataType.Name(to), bool(saturate)).view(np.uint8)
    _check_codes(ref, want, F8_NAN[to])
    nan = _cast(np.array([np.nan, -np.nan], np.float32), to, saturate=saturate).view(np.uint8)
    _check_codes(nan, [None, None], F8_NAN[to])


def test_float4_bit_patterns_ties_saturation_and_nan():
    import narrow_reference as nr
    # E2M1 codes 0..7: 0, 0.5, 1, 1.5, 2, 3, 4, 6; ties go to the even code; no Inf, no NaN:
    # beyond 6 and +-Inf saturate, NaN gives 6 (the ONNX float4 definition's table)
    x = np.array([0.25, 0.75, 1.25, 2.5, 3.5, 5.0, 7.0, 100.0, np.inf, -np.inf, np.nan, -0.0,
                  -3.5, -1e-9], np.float32)
    want = [0x0, 0x2, 0x2, 0x4, 0x6, 0x6, 0x7, 0x7, 0x7, 0xF, 0x7, 0x8, 0xE, 0x8]
    np.testing.assert_array_equal(_cast(x, TP.FLOAT4E2M1).view(np.uint8), want)
    np.testing.assert_array_equal(nr.cast(x, "FLOAT4E2M1").view(np.uint8), want)


def test_float6_saturation_and_nan():
    from onemodel.evaluate.kernels.cast import cast_array
    from onemodel.ir.dtypes import DataType
    # E2M3 (bias 1, max 7.5 = 0x1F), E3M2 (bias 3, max 28 = 0x1F): 1.0 is 0x08 / 0x0C
    x = np.array([1.0, 100.0, -np.inf, np.nan, -0.0], np.float32)
    np.testing.assert_array_equal(cast_array(x, DataType.FLOAT6E2M3).view(np.uint8),
                                  [0x08, 0x1F, 0x3F, 0x1F, 0x20])
    np.testing.assert_array_equal(cast_array(x, DataType.FLOAT6E3M2).view(np.uint8),
                                  [0x0C, 0x1F, 0x3F, 0x1F, 0x20])


def test_e8m0_bit_patterns():
    # E8M0: code = exponent + 127; 0xFF is NaN; saturate: 0 -> 0x00, Inf -> 0xFE
    x = np.array([1.0, 3.0, 1.5, 1.4, 0.0, np.inf, np.nan, 2.0 ** -127], np.float32)
    up = _cast(x, TP.FLOAT8E8M0).view(np.uint8)
    np.testing.assert_array_equal(up, [0x7F, 0x81, 0x80, 0x80, 0x00, 0xFE, 0xFF, 0x00])
    down = _cast(x, TP.FLOAT8E8M0, round_mode="down").view(np.uint8)
    np.testing.assert_array_equal(down, [0x7F, 0x80, 0x7F, 0x7F, 0x00, 0xFE, 0xFF, 0x00])
    near = _cast(x, TP.FLOAT8E8M0, round_mode="nearest", saturate=0).view(np.uint8)
    np.testing.assert_array_equal(near, [0x7F, 0x81, 0x80, 0x7F, 0xFF, 0xFF, 0xFF, 0x00])
