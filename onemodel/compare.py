"""Numeric comparison of runtime values: the one place where two runs' outputs are compared.

A runtime value is what the evaluator and the engines return (Part 1, Clause 11): an ndarray for
a tensor (numpy's types and the ml_dtypes ones: bfloat16, float8, float4, float6, int4, int2), a
list for a sequence, a dict for a map, the element or ``None`` for an optional.

:func:`compare_value` compares two values of one output and gives a :class:`ValueComparison`:
the largest absolute and relative difference, how many elements are out of tolerance, the first
of them (index and both values) and, for float outputs, the cosine similarity. B is the
reference: an element is within tolerance when

    ``|a - b| <= atol + rtol * |b|``  (NaN equals NaN, an infinity the same infinity)

or, when ``ulp`` is set, when at most ``ulp`` representable values of the element type lie
between them (:func:`ulp_distance`). Values are compared as float64 (complex128 for complex
types), so the ml_dtypes types are compared by their values.

Only float and complex elements are compared within a tolerance. Integers of every width,
bool and strings are always compared exactly; and a tolerance of ``None`` means bit for bit
(NaN payloads and signed zeros included), as ``verify --run`` compares by default.

:class:`Tolerances` picks the tolerance of each output: a per-output one, else the global one,
else the default of the element type: across two engines :data:`CROSS_ENGINE`'s (float32: rtol
1e-4, atol 1e-5, from measurement), else the Part 1, Clause 11.5 one
(:func:`onemodel.tolerances.tolerance`: rtol 1e-3, atol 1e-7, bfloat16 rtol at least 2^-6); or bit
for bit in ``exact`` mode (one engine against itself).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any

from .errors import UsageError
from .lazy import np


@dataclass(frozen=True)
class Tolerance:
    """How far two float elements may be apart (B the reference).

    An element is within when ``|a - b| <= atol + rtol * |b|`` or, with ``ulp`` set, when its
    :func:`ulp_distance` is at most ``ulp``. An unset ``atol`` or ``rtol`` counts as 0, so
    ``Tolerance()`` asks for equal values (NaN equal to NaN, ``-0.0`` equal to ``0.0``).
    """

    atol: float | None = None
    rtol: float | None = None
    ulp: int | None = None

    def __post_init__(self):
        for f in ("atol", "rtol"):
            v = getattr(self, f)
            if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v)
                                      and v >= 0):
                raise UsageError(f"{f} {v!r} is not a finite number >= 0")
        if self.ulp is not None and (isinstance(self.ulp, bool) or not isinstance(self.ulp, int)
                                     or self.ulp < 0):
            raise UsageError(f"ulp {self.ulp!r} is not an integer >= 0")

    def over(self, base: "Tolerance | None") -> "Tolerance":
        """This tolerance with its unset fields taken from ``base``."""
        if base is None:
            return self
        return Tolerance(*(getattr(self, f.name) if getattr(self, f.name) is not None
                           else getattr(base, f.name) for f in fields(self)))

    def is_set(self) -> bool:
        """True when any field is set."""
        return any(getattr(self, f.name) is not None for f in fields(self))

    def to_json(self) -> dict:
        """``{"atol": .., "rtol": .., "ulp": ..}`` (null when unset)."""
        return {"atol": self.atol, "rtol": self.rtol, "ulp": self.ulp}

    def __str__(self) -> str:
        parts = [f"{f.name} {getattr(self, f.name):g}" for f in fields(self)
                 if getattr(self, f.name) is not None]
        return ", ".join(parts) if parts else "equal values"


def parse_tolerance(text: str, flag: str = "--tol") -> tuple[str, Tolerance]:
    """``NAME:atol=X,rtol=Y,ulp=N`` (any of the three, at least one) as ``(NAME, Tolerance)``.
    The name is everything before the last ``:``, so output names holding ``:`` work.

    Raises:
        UsageError naming ``flag`` and the value when it is malformed.
    """
    name, sep, spec = text.rpartition(":")
    form = "NAME:atol=X,rtol=Y,ulp=N"
    if not sep or not name:
        raise UsageError(f"{flag} {text!r} is not {form}")
    got: dict[str, Any] = {}
    for item in spec.split(","):
        key, eq, value = item.strip().partition("=")
        if not eq or key not in ("atol", "rtol", "ulp"):
            raise UsageError(f"{flag} {text!r}: {item.strip()!r} is not atol=X, rtol=Y or ulp=N")
        if key in got:
            raise UsageError(f"{flag} {text!r}: {key} given twice")
        got[key] = _number(value, key, f"{flag} {text!r}")
    return name, Tolerance(**got)


def _number(text: str, key: str, where: str):
    """A tolerance field from text: atol/rtol a finite float >= 0, ulp an integer >= 0."""
    try:
        v = int(text) if key == "ulp" else float(text)
    except ValueError:
        v = None
    if v is None or v < 0 or (key != "ulp" and not math.isfinite(v)):
        kind = "an integer >= 0" if key == "ulp" else "a finite number >= 0"
        raise UsageError(f"{where}: {key} {text.strip()!r} is not {kind}")
    return v


#: Defaults of two engines' outputs compared (``verify --engines onemodel,onnxruntime``), by
#: element type: ``(rtol, atol)``. Measured (onemodel against onnxruntime 1.23, one thread,
#: random inputs of seeds 0 and 1) on testdata/models (cnn, detector, transformer, bert,
#: gpt2) and the models of the rapidocr_onnxruntime, silero-vad, magika, nudenet and ddddocr
#: wheels, every output float32: the largest ``|a - b| - rtol |b|`` over an output was
#: 3.8e-6 at rtol 1e-5 and 2.4e-6 at rtol 1e-4 (ddddocr's recognizer, |b| up to 19), 1.3e-6
#: (ddddocr's detector), 1.4e-7 (nudenet, PP-OCRv4 det: sigmoids near 0, where 1e-7 failed
#: though the cosine was 1.0). float32 gets rtol 1e-4 and atol 1e-5: 4x the largest measured
#: need (Polygraphy's defaults are 1e-5 and 1e-5). Other types were not measured and keep the
#: Clause 11.5 defaults (:func:`onemodel.tolerances.tolerance`). One engine against itself
#: stays bit for bit.
CROSS_ENGINE = {"float32": (1e-4, 1e-5)}


class Tolerances:
    """The tolerance of each output: ``per_output[name]`` (its unset fields from ``default``),
    else ``default``, else the default of the element type: the :data:`CROSS_ENGINE` one when
    ``cross_engine`` is set and it has one, else the Clause 11.5 one; or bit for bit when
    ``exact`` is set and no explicit tolerance applies.

    Args:
        default: the global tolerance (``--atol``/``--rtol``/``--ulp``), or None.
        per_output: ``{output name: Tolerance}`` (``--tol NAME:...``).
        exact: without an explicit tolerance, compare float outputs bit for bit instead of
            within the defaults (``verify --run`` with one engine).
        cross_engine: the outputs come from two engines (``verify --engines E1,E2``): the
            defaults are :data:`CROSS_ENGINE`'s where it has the element type.
    """

    def __init__(self, default: Tolerance | None = None,
                 per_output: dict[str, Tolerance] | None = None, *, exact: bool = False,
                 cross_engine: bool = False):
        self.default = default if default is not None and default.is_set() else None
        self.per_output = dict(per_output or {})
        self.exact = exact
        self.cross_engine = cross_engine and not exact

    @classmethod
    def bit_exact(cls) -> "Tolerances":
        """Every output bit for bit."""
        return cls(exact=True)

    def explicit(self) -> bool:
        """True when any tolerance was given (global or per output)."""
        return self.default is not None or bool(self.per_output)

    def for_value(self, name: str, dtype) -> Tolerance | None:
        """The tolerance output ``name`` of element type ``dtype`` (a numpy dtype) is compared
        with, or None: bit for bit (always for integers, bool and strings, which
        :func:`compare_value` compares exactly whatever it is given)."""
        from .tolerances import is_float, tolerance

        if dtype is None or not is_float(np.dtype(dtype)):
            return None
        own = self.per_output.get(name)
        if own is not None:
            return own.over(self.default)
        if self.default is not None:
            return self.default
        if self.exact:
            return None
        cross = CROSS_ENGINE.get(np.dtype(dtype).name) if self.cross_engine else None
        rtol, atol = cross or tolerance(np.dtype(dtype))  # (else Clause 11.5)
        return Tolerance(atol=atol, rtol=rtol)

    def to_json(self) -> dict:
        """The settings as plain JSON values."""
        return {"exact": self.exact, "cross_engine": self.cross_engine,
                "default": None if self.default is None else self.default.to_json(),
                "per_output": {k: v.to_json() for k, v in self.per_output.items()}}


@dataclass
class ValueComparison:
    """How the two values of one output compare (A against the reference B).

    Attributes:
        name: the output's name.
        dtype_a, dtype_b: element type names (``float32``, ``bfloat16``, ``string``), or
            ``sequence``, ``map``, ``optional`` (an empty optional) for those values.
        shape_a, shape_b: tensor shapes (None for a sequence, map or empty optional).
        within: True when every element is within tolerance and the structures agree.
        tolerance: the tolerance float elements were compared with (None: bit for bit).
        max_abs, max_rel: largest ``|a - b|`` and ``|a - b| / |b|`` over the elements finite
            on both sides (``|b|`` 0: 0 when equal, else inf); None for strings, when no
            element is finite on both sides, or when the structures differ.
        max_ulp: largest ulp distance of the float elements when ``tolerance.ulp`` is set.
        n_out, n_total: elements out of tolerance, elements compared (over every tensor of a
            sequence or map).
        first_index: the first element out of tolerance: its index in C order (a sequence's
            element number or a map's key first), or None.
        first_a, first_b: its two values (Python scalars), or None.
        cosine: ``sum(a*b) / (|a| |b|)`` in float64 over the float elements finite on both
            sides (1.0 when both are all zero, 0.0 when only one is); None for other types
            and when no element is finite on both sides.
        detail: a dtype, shape or structure mismatch (then the numbers are not compared).
    """

    name: str
    dtype_a: str | None = None
    dtype_b: str | None = None
    shape_a: tuple | None = None
    shape_b: tuple | None = None
    within: bool = True
    tolerance: Tolerance | None = None
    max_abs: float | None = None
    max_rel: float | None = None
    max_ulp: int | None = None
    n_out: int = 0
    n_total: int = 0
    first_index: tuple | None = None
    first_a: Any = None
    first_b: Any = None
    cosine: float | None = None
    detail: str | None = None

    def to_json(self) -> dict:
        """Plain JSON values (non-finite floats as the strings ``"nan"``, ``"inf"``,
        ``"-inf"``; bytes as text; tuples as lists)."""
        return {
            "name": self.name, "within": self.within,
            "dtype": [self.dtype_a, self.dtype_b],
            "shape": [_json(self.shape_a), _json(self.shape_b)],
            "tolerance": None if self.tolerance is None else self.tolerance.to_json(),
            "max_abs": _json(self.max_abs), "max_rel": _json(self.max_rel),
            "max_ulp": self.max_ulp, "n_out": self.n_out, "n_total": self.n_total,
            "first_index": _json(self.first_index), "first_a": _json(self.first_a),
            "first_b": _json(self.first_b), "cosine": _json(self.cosine),
            "detail": self.detail,
        }

    def __str__(self) -> str:
        if self.detail:
            return f"{self.name}: {self.detail}"
        if self.tolerance is not None:
            tol = str(self.tolerance)
            head = (f"within tolerance ({tol}), {self.n_total} elements" if self.within else
                    f"{self.n_out} of {self.n_total} elements out of tolerance ({tol})")
        else:  # bit for bit (floats without a tolerance; integers, bool, strings always)
            what = "text" if self.dtype_b == "string" else "bits"
            head = (f"{what} identical, {self.n_total} elements" if self.within else
                    f"{what} differ in {self.n_out} of {self.n_total} elements")
        head = f"{self.name}: {head}"
        parts = [head]
        if self.max_abs is not None:
            parts.append(f"max abs diff {self.max_abs:.6g}, max rel diff {self.max_rel:.6g}")
        if self.max_ulp is not None:
            parts.append(f"max {self.max_ulp} ulp")
        if self.first_index is not None:
            parts.append(f"first at {list(self.first_index)}: "
                         f"{_shown(self.first_a, self.dtype_a)} vs "
                         f"{_shown(self.first_b, self.dtype_b)}")
        if self.cosine is not None:
            parts.append(f"cosine {self.cosine:.9g}")
        return "; ".join(parts)


def _shown(v, type_name: str | None) -> str:
    """An element for the text line: a float in the shortest form of its tensor's type
    (``0.1`` for a float32 0.1, not ``0.10000000149011612``), anything else as ``repr``."""
    if isinstance(v, float) and type_name not in (None, "sequence", "map", "optional"):
        try:
            return str(np.array([v]).astype(np.dtype(type_name))[0])
        except TypeError:
            pass
    return repr(v)


def _json(v):
    if isinstance(v, float):
        return v if math.isfinite(v) else ("nan" if math.isnan(v) else
                                           ("inf" if v > 0 else "-inf"))
    if isinstance(v, complex):
        return [_json(v.real), _json(v.imag)]
    if isinstance(v, bytes):
        return v.decode("utf-8", "surrogateescape")
    if isinstance(v, (tuple, list)):
        return [_json(x) for x in v]
    return v


def _scalar(x):
    """An element as a plain Python value (ml_dtypes floats as float, bytes as is)."""
    if isinstance(x, (bytes, str)):
        return x
    dt = getattr(x, "dtype", None)
    if dt is not None and dt.kind not in "biufcOUSM":  # the ml_dtypes types
        return int(x) if dt.name.startswith(("int", "uint")) else float(x)
    try:
        return x.item()
    except (AttributeError, ValueError, TypeError):
        return x


def _type_name(dtype) -> str:
    return "string" if dtype.kind in "OUS" else dtype.name


def _is_float(dtype) -> bool:
    from .tolerances import is_float
    return is_float(dtype)


@lru_cache(maxsize=None)
def _rank_table(dtype_name: str):
    """The sorted distinct finite-or-infinite values a type of at most 16 bits represents
    (every bit pattern decoded; patterns that do not round-trip are left out)."""
    dtype = np.dtype(dtype_name)
    bits = np.arange(256 ** dtype.itemsize, dtype=np.uint8 if dtype.itemsize == 1 else np.uint16)
    with np.errstate(invalid="ignore", over="ignore"):
        vals = bits.view(dtype).astype(np.float64)
    vals = vals[~np.isnan(vals)]
    back = vals.astype(dtype).astype(np.float64)
    return np.unique(vals[back == vals])


def _ordered(x, dtype):
    """Float elements as integers whose difference is their ulp distance (int64 or object)."""
    if dtype.itemsize <= 2:
        table = _rank_table(dtype.name)
        return np.searchsorted(table, x.astype(np.float64)).astype(np.int64)
    ints = x.view(np.int32 if dtype.itemsize == 4 else np.int64).astype(np.int64)
    # sign-magnitude to two's complement order: -0.0 and 0.0 both 0
    if dtype.itemsize == 4:
        return np.where(ints < 0, -(ints & 0x7FFFFFFF), ints)
    return np.where(ints < 0, -(ints & 0x7FFFFFFFFFFFFFFF), ints)


def ulp_distance(a, b):
    """Elementwise number of representable steps from ``a`` to ``b`` (two arrays of one float
    type: float16/32/64, bfloat16, float8, float6, float4; complex: the larger over the real
    and imaginary parts) as an int64 array; 0 for two NaNs, ``-0.0`` and ``0.0`` or the same
    infinity, and the int64 maximum when only one side is NaN.

    Raises:
        UsageError: ``a`` and ``b`` differ in dtype or the type is not a float type.
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or not _is_float(a.dtype):
        raise UsageError(f"ulp distance of {a.dtype} and {b.dtype}: needs one float type")
    if a.dtype.kind == "c":
        part = np.float32 if a.dtype.itemsize == 8 else np.float64
        re = ulp_distance(a.real.astype(part), b.real.astype(part))
        im = ulp_distance(a.imag.astype(part), b.imag.astype(part))
        return np.maximum(re, im)
    a = np.ascontiguousarray(a)
    b = np.ascontiguousarray(b)
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    na, nb = np.isnan(fa), np.isnan(fb)
    # (NaN positions get a placeholder so the order computation sees numbers only)
    oa = _ordered(np.where(na | nb, np.zeros_like(a), a), a.dtype)
    ob = _ordered(np.where(na | nb, np.zeros_like(b), b), b.dtype)
    big = np.iinfo(np.int64).max
    # (in uint64, where the difference of two float64 orders cannot overflow)
    hi, lo = np.maximum(oa, ob).astype(np.uint64), np.minimum(oa, ob).astype(np.uint64)
    d = np.minimum(hi - lo, np.uint64(big)).astype(np.int64)
    return np.where(na & nb, 0, np.where(na | nb, big, d)).astype(np.int64)


class _Acc:
    """What the leaves of one output add up to."""

    def __init__(self, name: str, tol: Tolerance | None):
        self.c = ValueComparison(name, tolerance=tol)
        self.tol = tol
        self.dot = self.na = self.nb = 0.0
        self.floats = False
        self.pairs = 0  # float elements finite on both sides
        self.numeric = False
        self.abs = self.rel = 0.0
        self.ulp: int | None = None

    def fail(self, where: str, what: str) -> None:
        if self.c.detail is None:
            self.c.detail = f"{where}{what}"
        self.c.within = False

    def leaf(self, a, b, prefix: tuple, where: str) -> None:
        a, b = np.asarray(a), np.asarray(b)
        if _type_name(a.dtype) != _type_name(b.dtype) or (
                a.dtype != b.dtype and _type_name(a.dtype) != "string"):
            return self.fail(where, f"dtype {_type_name(a.dtype)} vs {_type_name(b.dtype)}")
        if a.shape != b.shape:
            return self.fail(where, f"shape {list(a.shape)} vs {list(b.shape)}")
        fa, fb = a.reshape(-1), b.reshape(-1)
        n = fa.size
        self.c.n_total += n
        kind = _type_name(a.dtype)
        if kind == "string":
            def text(x):
                return x.decode("utf-8", "surrogateescape") if isinstance(x, bytes) else str(x)
            bad = np.array([text(x) != text(y) for x, y in zip(fa, fb)], dtype=bool)
        elif self._same_finite_floats(fa, fb):
            return
        elif _is_float(a.dtype):
            wide = np.complex128 if a.dtype.kind == "c" else np.float64
            xa, xb = fa.astype(wide), fb.astype(wide)
            tol = self.tol
            if tol is None:
                bad = _bits_differ(fa, fb)
            else:
                bad = ~np.isclose(xa, xb, rtol=tol.rtol or 0.0, atol=tol.atol or 0.0,
                                  equal_nan=True)
                if tol.ulp is not None:
                    u = ulp_distance(fa, fb)
                    if u.size:
                        self.ulp = max(self.ulp or 0, int(u.max()))
                    else:
                        self.ulp = self.ulp or 0
                    bad &= u > tol.ulp
            self._numbers(xa, xb)
            self.floats = True
            finite = np.isfinite(xa) & np.isfinite(xb)
            x, y = xa[finite], xb[finite]
            self.pairs += int(x.size)
            self.dot += float(np.real(np.vdot(y, x))) if x.size else 0.0
            self.na += float(np.real(np.vdot(x, x))) if x.size else 0.0
            self.nb += float(np.real(np.vdot(y, y))) if y.size else 0.0
        else:  # integers of every width and bool: exact
            if a.dtype.kind in "biu":
                bad = fa != fb
            else:  # int4, int2 (ml_dtypes): by value
                bad = fa.astype(np.int64) != fb.astype(np.int64)
            wa, wb = fa.astype(np.float64), fb.astype(np.float64)  # (the report's numbers)
            self._rel(np.abs(wa - wb), np.abs(wb))
        self.c.n_out += int(bad.sum())
        if bad.any():
            self.c.within = False
            if self.c.first_index is None:
                i = int(np.flatnonzero(bad)[0])
                idx = tuple(int(k) for k in np.unravel_index(i, a.shape)) if a.shape else ()
                self.c.first_index = prefix + idx
                self.c.first_a, self.c.first_b = _scalar(fa[i]), _scalar(fb[i])

    def _same_finite_floats(self, fa, fb) -> bool:
        """Whether flat ``fa`` and ``fb`` are the same finite float16/32/64 elements, bit for bit;
        if so they are added as :meth:`leaf` would add them (no element out, differences 0,
        every element a finite pair, the sums of products in float64) without its float64
        copies: a comparison of identical values (most of a ``verify --bisect``'s) costs one
        pass over the bytes instead of a dozen temporary arrays."""
        if fa.dtype.char not in _NATIVE_FLOATS or fa.dtype != fb.dtype:
            return False
        ua, ub = _as_unsigned(fa), _as_unsigned(fb)
        if not np.array_equal(ua, ub) or not np.isfinite(fa).all():
            return False
        n = int(fa.size)
        self.floats = True
        if n:
            self.numeric = True
            self.abs, self.rel = max(self.abs, 0.0), max(self.rel, 0.0)
        if self.tol is not None and self.tol.ulp is not None:
            self.ulp = max(self.ulp or 0, 0)
        self.pairs += n
        square = float(np.einsum("i,i->", fa, fa, dtype=np.float64)) if n else 0.0
        self.dot += square
        self.na += square
        self.nb += square
        return True

    def _numbers(self, xa, xb) -> None:
        finite = np.isfinite(xa) & np.isfinite(xb)
        diff = np.abs(xa[finite] - xb[finite]).astype(np.float64)
        self._rel(diff, np.abs(xb[finite]).astype(np.float64))

    def _rel(self, diff, ref) -> None:
        if not diff.size:
            return
        self.numeric = True
        self.abs = max(self.abs, float(diff.max()))
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(ref > 0, diff / np.where(ref > 0, ref, 1.0),
                           np.where(diff > 0, np.inf, 0.0))
        self.rel = max(self.rel, float(rel.max()))

    def walk(self, a, b, prefix: tuple = (), where: str = "") -> None:
        if a is None or b is None:
            if (a is None) != (b is None):
                self.fail(where, f"{_kind(a)} vs {_kind(b)}")
            return
        if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
            if not (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple))):
                return self.fail(where, f"{_kind(a)} vs {_kind(b)}")
            if len(a) != len(b):
                return self.fail(where, f"sequence of {len(a)} vs {len(b)} elements")
            for i, (u, v) in enumerate(zip(a, b)):
                self.walk(u, v, prefix + (i,), f"{where}element {i}: ")
            return
        if isinstance(a, dict) or isinstance(b, dict):
            if not (isinstance(a, dict) and isinstance(b, dict)):
                return self.fail(where, f"{_kind(a)} vs {_kind(b)}")
            if set(a) != set(b):
                return self.fail(where, f"map keys {sorted(a, key=repr)} vs "
                                        f"{sorted(b, key=repr)}")
            for k in a:
                self.walk(a[k], b[k], prefix + (_scalar(k),), f"{where}key {k!r}: ")
            return
        self.leaf(a, b, prefix, where)

    def result(self) -> ValueComparison:
        c = self.c
        if c.detail is not None:
            return c
        if self.numeric:
            c.max_abs, c.max_rel = self.abs, self.rel
        c.max_ulp = self.ulp
        if not self.floats:
            c.tolerance = None  # (integers, bool, strings: compared exactly whatever given)
        if self.pairs:
            if self.na == 0.0 and self.nb == 0.0:
                c.cosine = 1.0
            elif self.na == 0.0 or self.nb == 0.0:
                c.cosine = 0.0
            else:
                c.cosine = self.dot / (math.sqrt(self.na) * math.sqrt(self.nb))
        return c


#: The float element types :meth:`_Acc._same_finite_floats` takes, by numpy's type characters:
#: float16, float32, float64 (the narrow ml_dtypes types go the general way).
_NATIVE_FLOATS = ("e", "f", "d")


def _as_unsigned(a):
    """The bits of a flat float16/32/64 array as unsigned integers of its width (a view when it
    is contiguous)."""
    return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")


def _bits_differ(a, b):
    """Per element: True where the bytes of two same-dtype flat arrays differ."""
    n, size = a.size, a.dtype.itemsize
    if not n:
        return np.zeros(0, dtype=bool)
    x = np.ascontiguousarray(a).view(np.uint8).reshape(n, size)
    y = np.ascontiguousarray(b).view(np.uint8).reshape(n, size)
    return (x != y).any(axis=1)


def _kind(v) -> str:
    if v is None:
        return "empty optional"
    if isinstance(v, (list, tuple)):
        return "sequence"
    if isinstance(v, dict):
        return "map"
    return "tensor"


def _describe(v) -> tuple[str | None, tuple | None]:
    if v is None:
        return "optional", None
    if isinstance(v, (list, tuple)):
        return "sequence", None
    if isinstance(v, dict):
        return "map", None
    arr = np.asarray(v)
    return _type_name(arr.dtype), tuple(int(d) for d in arr.shape)


def leaf_dtype(value):
    """The element type of a runtime value's tensors (a sequence's or map's first tensor;
    None for an empty one or an empty optional)."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        for v in value:
            d = leaf_dtype(v)
            if d is not None:
                return d
        return None
    if isinstance(value, dict):
        return leaf_dtype(list(value.values()))
    return np.asarray(value).dtype


def compare_value(name: str, a, b, tol: Tolerance | None) -> ValueComparison:
    """Compare two runtime values of output ``name`` (B the reference).

    Tensors must agree in element type and shape, sequences in length, maps in keys, optionals
    in presence (else ``detail`` says where and ``within`` is False). Float and complex
    elements are compared within ``tol`` (None: bit for bit); integers, bool and strings
    exactly. Sequences and maps add up over their tensors (``first_index`` starts with the
    element number or key).
    Returns:
        a :class:`ValueComparison`.
    """
    acc = _Acc(name, tol)
    acc.walk(a, b)
    c = acc.result()
    c.dtype_a, c.shape_a = _describe(a)
    c.dtype_b, c.shape_b = _describe(b)
    if c.detail is not None:
        c.max_abs = c.max_rel = c.cosine = None
        c.first_index = c.first_a = c.first_b = None
    return c


def compare_outputs(out_a: dict, out_b: dict,
                    tolerances: Tolerances | None = None) -> list[ValueComparison]:
    """Compare the outputs both runs have, by name, in ``out_a``'s order, each with the
    tolerance ``tolerances.for_value`` gives for it (default: the Clause 11.5 defaults).
    Outputs only one side has are not listed (the caller reports them)."""
    tolerances = tolerances if tolerances is not None else Tolerances()
    found = []
    for name, a in out_a.items():
        if name not in out_b:
            continue
        tol = tolerances.for_value(name, leaf_dtype(out_b[name]) if leaf_dtype(a) is None
                                   else leaf_dtype(a))
        found.append(compare_value(name, a, out_b[name], tol))
    return found


__all__ = ["Tolerance", "Tolerances", "ValueComparison", "compare_value", "compare_outputs",
           "parse_tolerance", "ulp_distance", "leaf_dtype"]
