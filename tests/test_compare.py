"""onemodel.compare: every number of a comparison checked against a hand computation (the
values below are chosen so that float64 gives them exactly, or stated with their tolerance)."""

from __future__ import annotations

import json
import math

import ml_dtypes
import numpy as np
import pytest

from onemodel.compare import (
    Tolerance,
    Tolerances,
    ValueComparison,
    compare_outputs,
    compare_value,
    parse_tolerance,
    ulp_distance,
)
from onemodel.errors import UsageError
from onemodel.tolerances import ATOL, BFLOAT16_RTOL, RTOL


def f32(*v):
    return np.array(v, dtype=np.float32)


def test_numbers_of_a_small_float32_difference():
    a = np.array([[1.0, 2.0], [4.0, -8.0]], dtype=np.float32)
    b = np.array([[1.0, 2.5], [4.0, -6.0]], dtype=np.float32)
    c = compare_value("y", a, b, Tolerance(atol=0.25))
    assert not c.within
    assert (c.n_out, c.n_total) == (2, 4)
    assert c.max_abs == 2.0  # |-8 - -6|
    assert c.max_rel == 2.0 / 6.0  # against B, the reference: 0.5/2.5 = 0.2 < 2/6
    assert c.first_index == (0, 1)
    assert (c.first_a, c.first_b) == (2.0, 2.5)
    dot = 1 * 1 + 2 * 2.5 + 4 * 4 + (-8) * (-6)
    want = dot / (math.sqrt(1 + 4 + 16 + 64) * math.sqrt(1 + 6.25 + 16 + 36))
    assert c.cosine == pytest.approx(want, rel=1e-15)  # float64 sums of exact products
    assert (c.dtype_a, c.shape_a, c.shape_b) == ("float32", (2, 2), (2, 2))
    assert c.detail is None
    # a looser atol passes them both; rtol is relative to B
    assert compare_value("y", a, b, Tolerance(atol=2.0)).within
    assert compare_value("y", a, b, Tolerance(rtol=0.34)).within  # 2 <= 0.34 * 6
    assert not compare_value("y", a, b, Tolerance(rtol=0.33)).within


def test_bit_for_bit_sees_signed_zero_and_nan_payload_a_tolerance_does_not():
    a = f32(0.0, np.nan, 1.0)
    b = f32(-0.0, np.nan, 1.0)
    nan2 = np.array([0x7FC00001], dtype=np.uint32).view(np.float32)
    b[1] = nan2[0]
    exact = compare_value("y", a, b, None)
    assert (exact.n_out, exact.first_index) == (2, (0,))
    assert exact.max_abs == 0.0  # the numbers are equal where finite
    loose = compare_value("y", a, b, Tolerance())
    assert loose.within and loose.n_out == 0
    # an infinity equals only the same infinity
    c = compare_value("y", f32(np.inf, np.inf, 1.0), f32(np.inf, -np.inf, 1.5),
                      Tolerance(atol=1e30))
    assert (c.n_out, c.first_index, c.first_a, c.first_b) == (1, (1,), math.inf, -math.inf)
    assert c.max_abs == 0.5  # non-finite pairs are not in max_abs
    assert c.cosine == 1.0  # nor in the cosine: one pair, (1.0, 1.5)


def test_zero_reference_relative_difference_and_cosine_edge_cases():
    c = compare_value("y", f32(0.0, 1.0), f32(0.0, 0.0), Tolerance(atol=2.0))
    assert c.within and c.max_rel == math.inf and c.max_abs == 1.0
    assert c.cosine == 0.0  # one side all zero
    z = compare_value("y", f32(0.0, 0.0), f32(0.0, 0.0), None)
    assert z.cosine == 1.0 and z.max_rel == 0.0
    opposite = compare_value("y", f32(1.0, 2.0), f32(-1.0, -2.0), Tolerance(atol=10.0))
    assert opposite.cosine == pytest.approx(-1.0, abs=1e-15)


def test_ulp_distance_of_known_float32_neighbours():
    one = np.float32(1.0)
    up = np.nextafter(one, np.float32(2))  # 1 + 2^-23
    up2 = np.nextafter(up, np.float32(2))
    down = np.nextafter(one, np.float32(0))  # 1 - 2^-24
    tiny = np.float32(2.0 ** -149)  # the smallest subnormal
    d = ulp_distance(f32(one, one, one, 0.0, -tiny, np.inf, np.nan, np.nan),
                     f32(up, up2, down, -0.0, tiny, np.finfo(np.float32).max, np.nan, 1.0))
    assert d.tolist() == [1, 2, 1, 0, 2, 1, 0, np.iinfo(np.int64).max]
    # float64 across zero: the two smallest subnormals of opposite sign are 2 apart
    t = 5e-324
    assert ulp_distance(np.array([-t]), np.array([t])).tolist() == [2]
    # float16: 1.0 and the next one, 1 + 2^-10
    assert ulp_distance(np.array([1.0], np.float16), np.array([1.0009765625], np.float16)) \
        .tolist() == [1]


def test_ulp_distance_of_ml_dtypes_types():
    bf = ml_dtypes.bfloat16
    # bfloat16 has 7 fraction bits: 1.0, 1 + 2^-7, 1 + 2^-6
    assert ulp_distance(np.array([1.0, 1.0, -0.0], bf),
                        np.array([1.0078125, 1.015625, 0.0], bf)).tolist() == [1, 2, 0]
    f4 = ml_dtypes.float4_e2m1fn  # values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives
    assert ulp_distance(np.array([0.5, -0.5, 6.0], f4),
                        np.array([1.0, 0.5, 4.0], f4)).tolist() == [1, 2, 1]
    e4 = ml_dtypes.float8_e4m3fn  # 3 fraction bits: 1, 1.125, 1.25
    assert ulp_distance(np.array([1.0], e4), np.array([1.25], e4)).tolist() == [2]
    with pytest.raises(UsageError):
        ulp_distance(np.array([1], np.int32), np.array([1], np.int32))


def test_ulp_tolerance_counts_elements_beyond_it():
    one = np.float32(1.0)
    up2 = np.nextafter(np.nextafter(one, np.float32(2)), np.float32(2))
    c = compare_value("y", f32(one, one), f32(one, up2), Tolerance(ulp=1))
    assert (c.within, c.n_out, c.max_ulp, c.first_index) == (False, 1, 2, (1,))
    assert compare_value("y", f32(one, one), f32(one, up2), Tolerance(ulp=2)).within
    # either test passes an element: the atol one here
    assert compare_value("y", f32(one), f32(up2), Tolerance(atol=1e-6, ulp=0)).within


def test_bfloat16_rule_and_defaults_of_clause_11_5():
    t = Tolerances()
    assert t.for_value("y", np.dtype(np.float32)) == Tolerance(atol=ATOL, rtol=RTOL)
    assert t.for_value("y", np.dtype(ml_dtypes.bfloat16)) == Tolerance(atol=ATOL,
                                                                       rtol=BFLOAT16_RTOL)
    for dt in (np.int64, np.int8, np.bool_, object, ml_dtypes.int4):
        assert t.for_value("y", np.dtype(dt)) is None
    # 1 + 2^-6 against 1: rel 2^-6, inside the bfloat16 floor, outside float32's rtol
    bf = np.array([1.015625], ml_dtypes.bfloat16)
    one = np.array([1.0], ml_dtypes.bfloat16)
    c = compare_value("y", bf, one, t.for_value("y", bf.dtype))
    assert c.within and c.max_abs == 2.0 ** -6 and c.max_rel == 2.0 ** -6
    assert c.first_index is None
    assert not compare_value("y", bf.astype(np.float32), one.astype(np.float32),
                             t.for_value("y", np.dtype(np.float32))).within
    # values of ml_dtypes types are reported as Python floats
    c = compare_value("y", np.array([1.0, 2.0], ml_dtypes.bfloat16),
                      np.array([1.0, 3.0], ml_dtypes.bfloat16), None)
    assert (c.first_a, c.first_b, c.max_abs) == (2.0, 3.0, 1.0)
    assert type(c.first_a) is float


def test_tolerances_precedence():
    t = Tolerances(Tolerance(atol=1e-3), {"z": Tolerance(rtol=0.5)})
    f = np.dtype(np.float32)
    assert t.for_value("y", f) == Tolerance(atol=1e-3)
    assert t.for_value("z", f) == Tolerance(atol=1e-3, rtol=0.5)  # unset fields from global
    assert t.for_value("z", np.dtype(np.int32)) is None
    exact = Tolerances(exact=True)
    assert exact.for_value("y", f) is None
    assert Tolerances(None, {"z": Tolerance(ulp=3)}, exact=True).for_value("z", f) \
        == Tolerance(ulp=3)
    assert Tolerances(Tolerance(), exact=True).for_value("y", f) is None  # nothing set
    assert Tolerances.bit_exact().exact


def test_integers_bool_and_strings_are_exact_whatever_the_tolerance():
    c = compare_value("i", np.array([1, 2, 7], np.int64), np.array([1, 3, 5], np.int64),
                      Tolerance(atol=10.0))
    assert (c.within, c.n_out, c.first_index, c.first_a, c.first_b) == (False, 2, (1,), 2, 3)
    assert (c.max_abs, c.max_rel, c.cosine, c.tolerance) == (2.0, 2.0 / 5.0, None, None)
    b = compare_value("b", np.array([True, False]), np.array([True, True]), None)
    assert (b.n_out, b.first_index, b.first_a, b.first_b) == (1, (1,), False, True)
    s = compare_value("s", np.array(["a", "b"], object), np.array([b"a", b"c"], object), None)
    assert (s.n_out, s.first_index, s.first_a, s.first_b, s.max_abs) == (1, (1,), "b", b"c",
                                                                         None)
    i4 = compare_value("q", np.array([1, 2], ml_dtypes.int4), np.array([1, -3], ml_dtypes.int4),
                       None)
    assert (i4.n_out, i4.first_a, i4.first_b, i4.max_abs) == (1, 2, -3, 5.0)


def test_structure_mismatches():
    c = compare_value("y", f32(1.0), np.array([1.0], np.float16), Tolerance(atol=1.0))
    assert (c.within, c.detail, c.max_abs) == (False, "dtype float32 vs float16", None)
    c = compare_value("y", f32(1.0, 2.0), f32(1.0), None)
    assert c.detail == "shape [2] vs [1]" and (c.shape_a, c.shape_b) == ((2,), (1,))
    c = compare_value("y", [f32(1.0)], [f32(1.0), f32(2.0)], None)
    assert c.detail == "sequence of 1 vs 2 elements" and c.dtype_a == "sequence"
    c = compare_value("y", [f32(1.0), f32(1.0)], [f32(1.0), f32(1.0, 2.0)], None)
    assert c.detail == "element 1: shape [1] vs [2]"
    c = compare_value("y", None, f32(1.0), None)
    assert c.detail == "empty optional vs tensor" and c.dtype_a == "optional"
    assert compare_value("y", None, None, None).within
    c = compare_value("m", {1: f32(1.0)}, {2: f32(1.0)}, None)
    assert c.detail == "map keys [1] vs [2]"


def test_sequences_and_maps_add_up_over_their_tensors():
    a = [f32(1.0, 2.0), f32(3.0)]
    b = [f32(1.0, 2.0), f32(3.5)]
    c = compare_value("seq", a, b, Tolerance(atol=0.1))
    assert (c.n_out, c.n_total, c.first_index, c.max_abs) == (1, 3, (1, 0), 0.5)
    want = (1 + 4 + 3 * 3.5) / (math.sqrt(1 + 4 + 9) * math.sqrt(1 + 4 + 12.25))
    assert c.cosine == pytest.approx(want, rel=1e-15)
    m = compare_value("map", {"k": f32(1.0), "j": f32(2.0, 4.0)},
                      {"k": f32(1.0), "j": f32(2.0, 5.0)}, None)
    assert (m.n_out, m.n_total, m.first_index, m.first_a, m.first_b) == (1, 3, ("j", 1), 4.0,
                                                                          5.0)


def test_compare_outputs_uses_each_outputs_tolerance_and_skips_missing():
    out_a = {"y": f32(1.0), "z": f32(1.0), "only_a": f32(0.0)}
    out_b = {"z": f32(1.5), "y": f32(1.001)}
    found = compare_outputs(out_a, out_b, Tolerances(Tolerance(atol=1e-2),
                                                     {"z": Tolerance(atol=1.0)}))
    assert [c.name for c in found] == ["y", "z"]
    assert all(c.within for c in found)
    # defaults: Clause 11.5 (1e-3 relative to 1.001 covers 0.001 only just: 0.001 vs 1.0011e-3)
    found = compare_outputs(out_a, out_b)
    assert [c.within for c in found] == [True, False]
    assert found[0].tolerance == Tolerance(atol=ATOL, rtol=RTOL)


def test_json_and_text():
    c = compare_value("y", f32(1.0, np.nan), f32(2.0, 1.0), Tolerance(atol=0.5))
    j = json.loads(json.dumps(c.to_json(), allow_nan=False))
    assert j == {"name": "y", "within": False, "dtype": ["float32", "float32"],
                 "shape": [[2], [2]], "tolerance": {"atol": 0.5, "rtol": None, "ulp": None},
                 "max_abs": 1.0, "max_rel": 0.5, "max_ulp": None, "n_out": 2, "n_total": 2,
                 "first_index": [0], "first_a": 1.0, "first_b": 2.0, "cosine": 1.0,
                 "detail": None}
    assert str(c) == ("y: 2 of 2 elements out of tolerance (atol 0.5); max abs diff 1, "
                      "max rel diff 0.5; first at [0]: 1.0 vs 2.0; cosine 1")
    n = compare_value("y", f32(np.nan), f32(1.0), None)
    assert n.to_json()["first_a"] == "nan"
    ok = compare_value("y", f32(1.0), f32(1.0), None)
    assert str(ok) == "y: bits identical, 1 elements; max abs diff 0, max rel diff 0; cosine 1"
    assert str(n) == "y: bits differ in 1 of 1 elements; first at [0]: nan vs 1.0"
    assert (n.max_abs, n.cosine) == (None, None)  # no element finite on both sides
    assert isinstance(ok, ValueComparison)


def test_parse_tolerance():
    assert parse_tolerance("y:atol=1e-3,rtol=0.5") == ("y", Tolerance(atol=1e-3, rtol=0.5))
    assert parse_tolerance("a:b:ulp=4") == ("a:b", Tolerance(ulp=4))
    for bad in ("y", ":atol=1", "y:atol", "y:atol=x", "y:atol=-1", "y:ulp=1.5", "y:foo=1",
                "y:atol=1,atol=2", "y:rtol=nan", "y:atol=inf"):
        with pytest.raises(UsageError, match="--tol"):
            parse_tolerance(bad)
    with pytest.raises(UsageError):
        Tolerance(atol=-1.0)
    with pytest.raises(UsageError):
        Tolerance(ulp=-1)


def test_cross_engine_defaults_fit_engines_and_one_engine_stays_strict():
    from onemodel.compare import Tolerance, Tolerances
    cross = Tolerances(cross_engine=True)
    # float32 across two engines: measured (docs/cli.md), rtol 1e-4 and atol 1e-5
    assert cross.for_value("y", np.float32) == Tolerance(atol=1e-5, rtol=1e-4)
    # types not measured keep the Clause 11.5 defaults
    assert cross.for_value("y", np.float64) == Tolerance(atol=ATOL, rtol=RTOL)
    assert cross.for_value("y", ml_dtypes.bfloat16) == Tolerance(atol=ATOL, rtol=BFLOAT16_RTOL)
    # one engine against itself stays bit for bit, flags win, and the API default is unchanged
    assert Tolerances(exact=True, cross_engine=True).for_value("y", np.float32) is None
    assert Tolerances(Tolerance(atol=0.5), cross_engine=True).for_value(
        "y", np.float32) == Tolerance(atol=0.5)
    assert Tolerances().for_value("y", np.float32) == Tolerance(atol=ATOL, rtol=RTOL)
    # PP-OCRv4 det's sigmoids near 0: 1.3e-7 apart with a cosine of 1.0; at b = 1e-5 that is
    # beyond Clause 11.5's 1e-7 + 1e-3 * 1e-5, within 1e-5 + 1e-4 * 1e-5
    a = np.array([1e-5 + 1.3e-7, 0.5], np.float32)
    b = np.array([1e-5, 0.5], np.float32)
    assert not compare_value("y", a, b, Tolerances().for_value("y", np.float32)).within
    assert compare_value("y", a, b, cross.for_value("y", np.float32)).within
    # the verify API across two engines uses them
    from pathlib import Path

    import onemodel
    from onemodel.verify import run_and_compare
    cnn = Path(__file__).resolve().parents[1] / "testdata" / "models" / "cnn_legacy.onnx"
    with onemodel.load(cnn) as m:
        ran = run_and_compare(m, m, engines=("onemodel", "onnxruntime"), dims={"batch": 2})
    assert ran.tolerances.cross_engine and ran.comparisons[0].tolerance == \
        Tolerance(atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("tol", [None, Tolerance(rtol=1e-5, atol=1e-6), Tolerance(ulp=1)])
def test_identical_values_take_the_short_way_with_the_general_way_s_report(monkeypatch, dtype,
                                                                           tol):
    # a leaf whose bytes are the same finite floats is added without the float64 copies; what
    # it adds is what the general way adds: the same fields, the cosine within float64
    # summation order (the short way sums the squares by einsum, the general way by vdot)
    from onemodel import compare as C

    rng = np.random.default_rng(3)
    x = rng.standard_normal(1000).astype(dtype)
    cases = [x, x[:0], [x, x * 2], [x, x + 1]]  # the last: one leaf identical, one not
    calls = []
    real = C._Acc._same_finite_floats
    monkeypatch.setattr(C._Acc, "_same_finite_floats",
                        lambda self, a, b: calls.append(1) or real(self, a, b))
    short = [compare_value("y", c, [np.copy(v) for v in c] if isinstance(c, list)
                           else np.copy(c), tol) for c in cases]
    assert calls  # the short way was asked
    monkeypatch.setattr(C._Acc, "_same_finite_floats", lambda self, a, b: False)
    general = [compare_value("y", c, [np.copy(v) for v in c] if isinstance(c, list)
                             else np.copy(c), tol) for c in cases]
    for s, g in zip(short, general):
        fields = ("within", "n_total", "n_out", "max_abs", "max_rel", "max_ulp", "first_index",
                  "first_a", "first_b", "detail", "tolerance")
        assert [getattr(s, f) for f in fields] == [getattr(g, f) for f in fields]
        assert (s.cosine is None) == (g.cosine is None)
        if s.cosine is not None:
            assert s.cosine == pytest.approx(g.cosine, rel=1e-12)


def test_the_short_way_leaves_out_what_is_not_the_same_finite_floats():
    from onemodel import compare as C

    acc = C._Acc("y", None)
    a = np.array([1.0, np.inf], np.float32)
    assert not acc._same_finite_floats(a, a.copy())  # not finite: the general way
    z = np.array([0.0], np.float32)
    assert not acc._same_finite_floats(z, -z)  # -0.0: other bits
    assert not acc._same_finite_floats(np.ones(2, np.float32), np.ones(2, np.float64))
    assert not acc._same_finite_floats(np.ones(2, np.int32), np.ones(2, np.int32))
    assert acc.pairs == 0 and not acc.floats  # nothing added by a refusal
