"""Cast and CastLike (ONNX 1-2), for every element type of Table 5.

Conversions between numeric types follow the Cast definition: floats round to nearest even
(float32 -> float16/bfloat16/float8/float4/float6 via ml_dtypes), integers wrap when out of range,
floats to integers truncate toward zero (out of range is undefined), anything to bool is
``x != 0``. To the four float8 types, ``saturate=1`` (the default) clamps values beyond the
largest finite value, infinities included, to +-FLT_MAX; ``saturate=0`` gives the table of the
definition (NaN for the types without infinities, +-Inf for E5M2). To FLOAT8E8M0, ``round_mode``
(``up`` by default, ``down``, ``nearest``) picks the power of two and ``saturate`` bounds it.
Strings parse as decimal or scientific numbers, ``INF``/``+INF``/``-INF``/``NaN`` in any case;
numbers become their shortest round-trip decimal form.
"""

from __future__ import annotations

import numpy as np

from ...errors import InvalidModelError, UnsupportedError
from ...ir.dtypes import INFO, DataType
from ...lazy import ml_dtypes  # imported when a narrow type is used (0.5 s in 0.7.0)
from ..registry import op

D = DataType
_FLOAT8 = {D.FLOAT8E4M3FN, D.FLOAT8E4M3FNUZ, D.FLOAT8E5M2, D.FLOAT8E5M2FNUZ}


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
        raise InvalidModelError(f"Cast: a string is not a number: {e}") from None
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


def cast_array(x: np.ndarray, to: int, saturate: bool = True, round_mode: str = "up"):
    """``x`` converted to element type ``to`` (a Table 5 tag) by the rules of Cast."""
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
        src = x
        if src.dtype.kind not in "f" or src.dtype == np.float16:
            src = src.astype(np.float32)
        if saturate:
            hi = float(ml_dtypes.finfo(dt).max)
            src = np.clip(src, -hi, hi)
        return src.astype(dt)
    if dt == np.bool_:
        return np.asarray(x != 0)
    try:
        return x.astype(dt)
    except (TypeError, ValueError):  # a pair ml_dtypes has no direct cast for
        return x.astype(np.float64).astype(dt)


@op("Cast", since=(1, 6, 9, 13, 19, 21, 23, 24, 25, 28))
def cast(ctx, x):
    to = ctx.attr("to")
    if to is None:
        raise InvalidModelError("Cast needs the 'to' attribute")
    return cast_array(x, to, bool(ctx.attr("saturate", 1)), ctx.attr("round_mode", "up"))


@op("CastLike", since=(15, 19, 21, 23, 24, 25))
def cast_like(ctx, x, like):
    from ...ir.dtypes import code_of_dtype
    if like.dtype == object or like.dtype.kind in "US":
        to = int(D.STRING)
    else:
        to = code_of_dtype(like.dtype)
        if to is None:
            raise UnsupportedError(f"CastLike to numpy dtype {like.dtype}")
    return cast_array(x, to, bool(ctx.attr("saturate", 1)), ctx.attr("round_mode", "up"))


@op("BitCast", since=26)
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
        raise InvalidModelError("BitCast to bool of a byte other than 0 or 1")
    little = (x if x.flags.c_contiguous else x.copy()).astype(x.dtype.newbyteorder("<"),
                                                             copy=False)
    return little.view(dt.newbyteorder("<")).astype(dt, copy=False)
