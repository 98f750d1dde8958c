"""Cast and CastLike (ONNX 1-2), for every element type of Table 5.

Conversions between numeric types follow the Cast definition: floats round to nearest even,
once (to bfloat16/float8/float4/float6 via ml_dtypes for values in range, a float64 first
rounded to the target's precision in float64: ml_dtypes alone goes through float32, rounding
twice; :func:`onemodel.ir.tensor.narrow_float`), integers
wrap when out of range, floats to integers truncate toward zero (out of range is undefined),
anything to bool is ``x != 0``. To the four float8 types, ``saturate=1`` (the default) clamps
values beyond the largest finite value to +-FLT_MAX, and so +-Inf from Cast-24/CastLike-24 on;
at opsets 19 to 23 the definitions' table maps +-Inf to NaN for the two FNUZ types (which have
no infinity) and to +-FLT_MAX for E4M3FN and E5M2 (:func:`cast_array`'s ``fnuz_inf_nan``);
``saturate=0`` gives the table of the definition (NaN for the types without infinities, +-Inf
for E5M2). To
FLOAT8E8M0, ``round_mode`` (``up`` by default, ``down``, ``nearest``) picks the power of two and
``saturate`` bounds it. Strings parse as decimal or scientific numbers, ``INF``/``+INF``/
``-INF``/``NaN`` in any case; numbers become their shortest round-trip decimal form.

Rules onemodel fixes itself (Part 1 leaves them unstated, an Annex gap for Clause 6.3; see
docs/conformance-statement.md), computed here and never by a library's out-of-range cast:

* to INT4, UINT4, INT2, UINT2 (:func:`to_narrow_int`): a float rounds to the nearest integer,
  ties to even (Clause 6.3.3), then every integer keeps its low 4 (or 2) bits, read as two's
  complement for the signed types (out of range, which Clause 6.3.3 leaves unstated: the Cast
  definition's "bits that cannot be stored are truncated", as for the wider integers and as
  the onnx test vectors expect): -9 -> INT4 7, 16 -> UINT4 0, 2.5 -> INT2 -2. NaN and +-Inf
  give 0.
* to FLOAT4E2M1, FLOAT6E2M3, FLOAT6E3M2 (no infinity, no NaN): round to nearest even, values
  beyond the largest finite value and +-Inf saturate to +-max, NaN gives +max (the ONNX float4
  definition's table; the same rule for the float6 types).
"""

from __future__ import annotations

import numpy as np

from ...errors import EvaluationError, InvalidModelError, UnsupportedError
from ...ir.dtypes import INFO, DataType
from ...ir.tensor import narrow_float, to_float8
from ...lazy import ml_dtypes  # imported when a narrow type is used (0.5 s in 0.7.0)
from ...operators import kernel

D = DataType
_FLOAT8 = {D.FLOAT8E4M3FN, D.FLOAT8E4M3FNUZ, D.FLOAT8E5M2, D.FLOAT8E5M2FNUZ}
#: Integer types narrower than a byte: tag -> (bits, signed).
NARROW_INTS = {D.INT4: (4, True), D.UINT4: (4, False), D.INT2: (2, True), D.UINT2: (2, False)}
#: Float types without infinity and NaN: FLOAT4E2M1 and the two FLOAT6 types.
_NO_NAN_FLOATS = {D.FLOAT4E2M1, D.FLOAT6E2M3, D.FLOAT6E3M2}


def to_narrow_int(x: np.ndarray, to: int) -> np.ndarray:
    """``x`` (any numeric or bool dtype, any shape) as INT4/UINT4/INT2/UINT2 tag ``to``: floats
    rounded to nearest, ties to even (Clause 6.3.3), then the low ``bits`` bits of the integer
    kept (two's complement for the signed types); NaN and +-Inf give 0. Exact for every finite
    input (the residue is taken in float64, where ``fmod`` is exact), independent of ml_dtypes'
    out-of-range behaviour.
    Returns an array of the ml_dtypes type of ``to``, one element per byte, same shape."""
    bits, signed = NARROW_INTS[to]
    m = 1 << bits
    if x.dtype.kind in "biu":
        r = np.bitwise_and(x.astype(np.int64), m - 1)
    else:
        v = x.astype(np.float64)
        v = np.where(np.isfinite(v), np.rint(v), 0.0)
        r = np.fmod(v, m)
        r = np.where(r < 0, r + m, r).astype(np.int64)
    if signed:
        r = np.where(r >= m // 2, r - m, r)
    # every value is now in the type's range, where ml_dtypes' conversion is exact
    return r.astype(np.int8).astype(INFO[to].dtype)


def _to_no_nan_float(x: np.ndarray, to: int) -> np.ndarray:
    """``x`` as FLOAT4E2M1/FLOAT6E2M3/FLOAT6E3M2: NaN -> +max, beyond +-max -> +-max, else
    round to nearest even (ml_dtypes' conversion of an in-range value)."""
    dt = INFO[to].dtype
    hi = float(ml_dtypes.finfo(dt).max)
    v = x.astype(np.float32) if x.dtype.kind != "f" or x.dtype == np.float16 else x
    v = np.where(np.isnan(v), np.float32(hi), v)
    return narrow_float(np.clip(v, -hi, hi), dt)


def _parse_number(s: str, dt: np.dtype):
    t = s.strip()
    low = t.lower()
    if low in ("inf", "+inf", "infinity", "+infinity"):
        return float("inf")
    if low in ("-inf", "-infinity"):
        return float("-inf")
    if low in ("nan", "+nan", "-nan"):
        return float("nan")
    if dt.kind in "iu":
        try:
            return int(t)
        except ValueError:
            return int(float(t))
    return float(t)


def _from_strings(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    flat = [v.decode() if isinstance(v, bytes) else str(v) for v in x.reshape(-1)]
    if dt == np.bool_:
        vals = [bool(_parse_number(v, np.dtype(np.float64))) for v in flat]
        return np.array(vals, dtype=bool).reshape(x.shape)
    try:
        vals = [_parse_number(v, dt) for v in flat]
    except ValueError as e:
        raise EvaluationError(f"Cast: a string is not a number: {e}") from None
    if dt.kind in "iu":
        return np.array(vals, dtype=object).astype(np.int64).astype(dt).reshape(x.shape)
    return np.array(vals, dtype=np.float64).astype(dt).reshape(x.shape)


def _to_strings(x: np.ndarray) -> np.ndarray:
    if x.dtype == object:
        return x
    out = np.empty(x.size, dtype=object)
    out[:] = [_float_text(str(v)) for v in x.reshape(-1)]
    return out.reshape(x.shape)


def _float_text(s: str) -> str:
    return {"inf": "INF", "-inf": "-INF", "nan": "NaN"}.get(s, s)


def _to_e8m0(x: np.ndarray, saturate: bool, round_mode: str) -> np.ndarray:
    """Powers of two of FLOAT8E8M0 (bias 127, 0xFF NaN) for the magnitudes of ``x``."""
    if round_mode not in ("up", "down", "nearest"):
        raise UnsupportedError(f"round_mode {round_mode!r} is not up, down or nearest")
    v = np.abs(x.astype(np.float64))
    frac, ex = np.frexp(v)  # v = frac * 2**ex, frac in [0.5, 1)
    ex = ex.astype(np.int64)
    if round_mode == "up":
        k = np.where(frac == 0.5, ex - 1, ex)
    elif round_mode == "down":
        k = ex - 1
    else:  # nearest, ties up: v >= 1.5 * 2**(ex-1)
        k = np.where(frac >= 0.75, ex, ex - 1)
    code = k + 127
    top, bottom = (254, 0) if saturate else (255, 255)
    code = np.where(code > 254, top, code)
    code = np.where(code < 0, bottom, code)
    code = np.where(v == 0, 0 if saturate else 255, code)
    code = np.where(np.isinf(v), 254 if saturate else 255, code)
    code = np.where(np.isnan(v), 255, code)
    return code.astype(np.uint8).view(ml_dtypes.float8_e8m0fnu)


def cast_array(x: np.ndarray, to: int, saturate: bool = True, round_mode: str = "up",
               fnuz_inf_nan: bool = False):
    """``x`` converted to element type ``to`` (a Table 5 tag) by the rules of Cast.

    ``fnuz_inf_nan``: the saturate table of Cast-19 to Cast-23 (and CastLike-19 to -23), where
    +-Inf cast to FLOAT8E4M3FNUZ or FLOAT8E5M2FNUZ with ``saturate`` gives NaN; from version 24
    (the default, False) it gives +-FLT_MAX like every value beyond the range.
    """
    if to not in INFO:
        raise UnsupportedError(f"Cast to element type {to}, which is not in Table 5")
    if to == D.STRING:
        return _to_strings(x)
    dt = INFO[to].dtype
    if x.dtype == object or x.dtype.kind in "US":
        if to in _FLOAT8 or to == D.FLOAT8E8M0 or INFO[to].subbyte or dt.kind == "V":
            return cast_array(_from_strings(x, np.dtype(np.float32)), to, saturate, round_mode)
        return _from_strings(x, dt)
    if x.dtype == dt:
        return x
    if to == D.FLOAT8E8M0:
        return _to_e8m0(x, saturate, round_mode)
    if to in _FLOAT8:
        return to_float8(x, to, saturate, fnuz_inf_nan)
    if to in NARROW_INTS:
        return to_narrow_int(x, to)
    if to in _NO_NAN_FLOATS:
        return _to_no_nan_float(x, to)
    if dt == np.bool_:
        return np.asarray(x != 0)
    if to == D.BFLOAT16 and x.dtype.kind == "f":
        return narrow_float(x, dt)  # (float64 rounded once, not through float32)
    try:
        return x.astype(dt)
    except (TypeError, ValueError):  # a pair ml_dtypes has no direct cast for
        return x.astype(np.float64).astype(dt)


@kernel("Cast")
def cast(ctx, x):
    to = ctx.attr("to")
    if to is None:
        raise InvalidModelError("Cast needs the 'to' attribute")
    if isinstance(to, (str, bytes)):  # Cast-1: the type's name, a STRING
        from ...ir.dtypes import code_of_name
        code = code_of_name(to)
        if code is None:
            raise InvalidModelError(f"Cast: 'to' is {to!r}, which names no element type")
        to = code
    return cast_array(x, to, bool(ctx.attr("saturate", 1)), ctx.attr("round_mode", "up"),
                      fnuz_inf_nan=19 <= ctx.opset < 24)


@kernel("CastLike")
def cast_like(ctx, x, like):
    from ...ir.dtypes import code_of_dtype
    if like.dtype == object or like.dtype.kind in "US":
        to = int(D.STRING)
    else:
        to = code_of_dtype(like.dtype)
        if to is None:
            raise UnsupportedError(f"CastLike to numpy dtype {like.dtype}")
    return cast_array(x, to, bool(ctx.attr("saturate", 1)), ctx.attr("round_mode", "up"),
                      fnuz_inf_nan=19 <= ctx.opset < 24)


@kernel("BitCast")
def bitcast(ctx, x):
    """BitCast: the bits of each element of ``x`` read as element type ``to`` (same bit width,
    little endian, same shape). Narrow types (int4, uint4, float4e2m1, int2, uint2) hold one
    element per byte here, their code in the low bits. A byte that is neither 0 nor 1 read as
    bool is refused (InvalidModelError): it is no bool encoding. Strings are refused."""
    from ...ir.dtypes import code_of_dtype
    to = ctx.attr("to")
    if to is None:
        raise InvalidModelError("BitCast needs the 'to' attribute")
    src = code_of_dtype(x.dtype)
    if to not in INFO or to == D.STRING or src is None or src == D.STRING:
        raise UnsupportedError(f"BitCast from {x.dtype} to element type {to}")
    bits = INFO[to].bits
    if INFO[src].bits != bits:
        raise InvalidModelError(f"BitCast from {INFO[src].name} ({INFO[src].bits} bits) to "
                                f"{INFO[to].name} ({bits} bits): the widths differ")
    dt = INFO[to].dtype
    if bits < 8:
        codes = x.view(np.uint8) & np.uint8((1 << bits) - 1)
        return codes.view(dt)
    if dt == np.bool_ and ((x.view(np.uint8) > 1).any()):
        raise EvaluationError("BitCast to bool of a byte other than 0 or 1")
    little = (x if x.flags.c_contiguous else x.copy()).astype(x.dtype.newbyteorder("<"),
                                                             copy=False)
    return little.view(dt.newbyteorder("<")).astype(dt, copy=False)
