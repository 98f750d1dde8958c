"""A reference for Cast into the narrow types, written from the format definitions alone.

Test helper: the expected values of the Cast/CastLike conformance cases into INT4, UINT4, INT2,
UINT2, FLOAT4E2M1 and the four float8 types come from here, not from the installed ml_dtypes
(onnx generates those cases with ``astype`` of the installed ml_dtypes, so comparing with them
would test ml_dtypes against itself). Nothing here calls a library conversion out of range:
every code of a format is decoded by the format's formula, and a value is rounded by comparing
it with the neighbouring codes in exact (float64, dyadic) arithmetic. ml_dtypes is used only to
label the resulting bytes (``view``) or to hold in-range integers.

Float formats (sign, exponent bits E, mantissa bits M, bias B), value of a code with exponent
field e and mantissa field m: ``m * 2**(1 - B - M)`` when e = 0, else ``(1 + m / 2**M) *
2**(e - B)``. Special codes: E4M3FN has NaN at S.1111.111 and no infinity; E4M3FNUZ and E5M2FNUZ
have NaN at 0x80 (no negative zero, no infinity); E5M2 has IEEE infinities and NaNs (exponent all
ones); FLOAT4E2M1 has neither. Casts follow the tables of the ONNX Cast definition (saturate 1
and 0) and, for FLOAT4E2M1, the ONNX float4 definition (+-Inf -> +-6, NaN -> 6).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

#: name -> (exponent bits, mantissa bits, bias, kind, ml_dtypes type)
FORMATS = {
    "FLOAT8E4M3FN": (4, 3, 7, "fn", ml_dtypes.float8_e4m3fn),
    "FLOAT8E4M3FNUZ": (4, 3, 8, "fnuz", ml_dtypes.float8_e4m3fnuz),
    "FLOAT8E5M2": (5, 2, 15, "ieee", ml_dtypes.float8_e5m2),
    "FLOAT8E5M2FNUZ": (5, 2, 16, "fnuz", ml_dtypes.float8_e5m2fnuz),
    "FLOAT4E2M1": (2, 1, 1, "none", ml_dtypes.float4_e2m1fn),
}

#: name -> (bits, signed, ml_dtypes type)
INTS = {"INT4": (4, True, ml_dtypes.int4), "UINT4": (4, False, ml_dtypes.uint4),
        "INT2": (2, True, ml_dtypes.int2), "UINT2": (2, False, ml_dtypes.uint2)}


def _finite_positive(name: str) -> list[tuple[float, int]]:
    """(value, code) of every finite non-negative code of the format, ascending."""
    e_bits, m_bits, bias, kind, _ = FORMATS[name]
    out = []
    for code in range(1 << (e_bits + m_bits)):  # sign bit 0
        e, m = code >> m_bits, code & ((1 << m_bits) - 1)
        if kind == "fn" and e == (1 << e_bits) - 1 and m == (1 << m_bits) - 1:
            continue  # NaN
        if kind == "ieee" and e == (1 << e_bits) - 1:
            continue  # Inf, NaN
        if e == 0:
            value = m * 2.0 ** (1 - bias - m_bits)
        else:
            value = (1 + m / 2 ** m_bits) * 2.0 ** (e - bias)
        out.append((value, code))
    return out


def _nan_code(name: str, negative: bool) -> int:
    e_bits, m_bits, _, kind, _ = FORMATS[name]
    sign = 1 << (e_bits + m_bits)
    if kind == "fnuz":
        return 0x80
    if kind == "fn":
        return (sign if negative else 0) | (sign - 1)
    return (sign if negative else 0) | (((1 << e_bits) - 1) << m_bits) | (1 << (m_bits - 1))


def float_code(name: str, x: float, saturate: bool = True) -> int:
    """The code of ``x`` cast to float format ``name`` (round to nearest even)."""
    e_bits, m_bits, bias, kind, _ = FORMATS[name]
    sign = 1 << (e_bits + m_bits)
    table = _finite_positive(name)
    top_value, top_code = table[-1]
    neg = math.copysign(1.0, x) < 0
    if math.isnan(x):
        return top_code if kind == "none" else _nan_code(name, neg)

    def signed(code: int) -> int:
        if neg and not (kind == "fnuz" and code == 0):
            return code | sign
        return code

    overflow_code = None  # what a value rounding past the largest finite value becomes
    if saturate or kind == "none":
        overflow_code = top_code
    elif kind == "ieee":
        overflow_code = ((1 << e_bits) - 1) << m_bits  # infinity
    if math.isinf(x):
        return signed(overflow_code) if overflow_code is not None else _nan_code(name, neg)
    a = abs(x)
    # the next value past the largest finite one, at the same mantissa width (its code's
    # parity is that of top_code + 1): [x] rounds to it when x is past the midpoint
    top_e = top_code >> m_bits
    ulp = 2.0 ** (max(top_e, 1) - bias - m_bits)
    grid = table + [(top_value + ulp, top_code + 1)]
    for (lo, lo_code), (hi, hi_code) in zip(grid, grid[1:]):
        if lo <= a <= hi:
            if a - lo < hi - a or (a - lo == hi - a and lo_code % 2 == 0):
                code = lo_code
            else:
                code = hi_code
            break
    else:
        code = top_code + 1
    if code > top_code:
        return signed(overflow_code) if overflow_code is not None else _nan_code(name, neg)
    return signed(code)


def int_value(name: str, x) -> int:
    """``x`` cast to INT4/UINT4/INT2/UINT2: round to nearest, ties to even (Clause 6.3.3), then
    onemodel's stated rule out of range: keep the low bits (two's complement for the signed
    types); NaN, +-Inf -> 0."""
    bits, signed, _ = INTS[name]
    if isinstance(x, float) and not math.isfinite(x):
        return 0
    r = round(x) % (1 << bits)  # round() ties to even; % is the non-negative residue
    return r - (1 << bits) if signed and r >= 1 << (bits - 1) else r


def cast(x: np.ndarray, name: str, saturate: bool = True) -> np.ndarray:
    """``x`` cast to the narrow type ``name`` (a TensorProto name), same shape, as the ml_dtypes
    array onemodel returns (built from the codes, no out-of-range conversion)."""
    flat = np.asarray(x).reshape(-1)
    if name in INTS:
        vals = [int_value(name, float(v) if flat.dtype.kind == "f" else int(v)) for v in flat]
        return np.array(vals, np.int8).astype(INTS[name][2]).reshape(np.shape(x))
    codes = [float_code(name, float(v), saturate) for v in flat]
    return np.array(codes, np.uint8).view(FORMATS[name][4]).reshape(np.shape(x))
