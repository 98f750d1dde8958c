"""Cast from float64 to the narrow float types rounds once (Clause 6.3.2, round to nearest
even), not through float32 (ml_dtypes' conversion, and onnx.reference's, rounds twice). The
expected values are computed exactly here, with fractions, from the type's own values."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as TP
from oracle import node_model, ours

TYPES = {TP.BFLOAT16: ml_dtypes.bfloat16, TP.FLOAT8E4M3FN: ml_dtypes.float8_e4m3fn,
         TP.FLOAT8E4M3FNUZ: ml_dtypes.float8_e4m3fnuz, TP.FLOAT8E5M2: ml_dtypes.float8_e5m2,
         TP.FLOAT8E5M2FNUZ: ml_dtypes.float8_e5m2fnuz, TP.FLOAT4E2M1: ml_dtypes.float4_e2m1fn}


def _cast(x, to, **attrs):
    (y,) = ours(node_model("Cast", {"x": x}, ["x"], ["y"], opset=25, to=to, **attrs), {"x": x})
    return y


def _neighbours(dt) -> list[tuple[Fraction, int, Fraction, int]]:
    """(value, code, next value, next code) of neighbouring finite values >= 0 of ``dt``,
    exact (bfloat16: every 61st code, the subnormals and the largest values)."""
    bits = {ml_dtypes.bfloat16: 16, ml_dtypes.float4_e2m1fn: 4}.get(dt, 8)
    codes = np.arange(1 << (bits - 1), dtype=np.uint16 if bits == 16 else np.uint8)
    vals = codes.view(dt).astype(np.float64)
    out = []
    for c in range(len(codes) - 1):
        if bits == 16 and not (c % 61 == 0 or c < 300 or c > 0x7F7F - 300):
            continue
        if np.isfinite(vals[c]) and np.isfinite(vals[c + 1]) and vals[c + 1] > vals[c]:
            out.append((Fraction(float(vals[c])), c, Fraction(float(vals[c + 1])), c + 1))
    return out


def _cases(pairs) -> tuple[list[float], list[Fraction]]:
    """Inputs and their exact roundings: each midpoint of neighbouring values (exact in
    float64: few bits; the tie goes to the even code) and the float64 values either side of
    it, 2^-40 relative away (below float32's half ulp: a rounding through float32 lands on the
    midpoint, then goes to the even side, which is wrong for one of the two)."""
    xs, want = [], []
    for a, ca, b, cb in pairs:
        mid = (a + b) / 2
        xs += [float(mid), float(mid * (1 + Fraction(1, 2 ** 40))),
               float(mid * (1 - Fraction(1, 2 ** 40)))]
        want += [a if ca % 2 == 0 else b, b, a]
    return xs, want


@pytest.mark.parametrize("to", list(TYPES), ids=[TP.DataType.Name(t) for t in TYPES])
def test_double_to_narrow_floats_rounds_once(to):
    xs, want = _cases(_neighbours(TYPES[to]))
    assert all(Fraction(x) == Fraction(float(np.float64(x))) for x in xs)
    x = np.array(xs + [-v for v in xs], np.float64)
    got = _cast(x, to).astype(np.float64)
    want = np.array([float(w) for w in want] + [-float(w) for w in want])
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(float(x[i]), float(got[i]), float(want[i])) for i in bad[:5]]


def test_the_issue_values():
    x = np.array([-431.99999999999994, 1 + 2 ** -8 + 2 ** -40], np.float64)
    # -432 is the midpoint of -416 and -448 in E4M3FN; x lies 2^-44 nearer -416
    assert _cast(x[:1], TP.FLOAT8E4M3FN).astype(np.float64).tolist() == [-416.0]
    # bfloat16 has 7 mantissa bits: 1 + 2^-8 is the midpoint of 1 and 1 + 2^-7; x is above it
    assert _cast(x[1:], TP.BFLOAT16).astype(np.float64).tolist() == [1.0078125]


@pytest.mark.parametrize("to,hi,over", [
    (TP.FLOAT8E4M3FN, 448.0, None), (TP.FLOAT8E4M3FNUZ, 240.0, None),
    (TP.FLOAT8E5M2, 57344.0, np.inf), (TP.FLOAT8E5M2FNUZ, 57344.0, None)])
def test_double_to_float8_saturate(to, hi, over):
    # the largest value's neighbourhood: a float64 a hair under the midpoint to the next
    # binade value rounds down to hi in both modes; far beyond, saturate=1 gives hi and
    # saturate=0 gives NaN (or Inf for E5M2)
    nmant = 3 if to in (TP.FLOAT8E4M3FN, TP.FLOAT8E4M3FNUZ) else 2
    ulp = Fraction(2) ** (int(hi).bit_length() - 1 - nmant)  # of the largest value's binade
    just_under = float((Fraction(hi) + ulp / 2) * (1 - Fraction(1, 2 ** 40)))
    x = np.array([just_under, -just_under, 1e6, -1e300], np.float64)
    sat = _cast(x, to, saturate=1).astype(np.float64)
    assert sat.tolist() == [hi, -hi, hi, -hi]
    raw = _cast(x, to, saturate=0).astype(np.float64)
    assert raw[:2].tolist() == [hi, -hi]
    if over is None:
        assert np.isnan(raw[2:]).all()
    else:
        assert raw[2:].tolist() == [over, -over]
