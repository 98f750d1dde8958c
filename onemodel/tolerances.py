"""The Clause 11.5 tolerances, and values compared within them.

Tolerances (Part 1, Clause 11.5; the rules docs/conformance.md states, and the ONNX backend test
harness applies, ``onnx.backend.test.runner.Runner.assert_similar_outputs``) are defined once
here, :func:`tolerance` and :data:`RULES`:

* float32, float64, float16, complex: ``|got - want| <= atol + rtol * |want|``, ``rtol`` 1e-3
  and ``atol`` 1e-7 unless the test states others; NaN equals NaN, an infinity the same
  infinity;
* bfloat16: the same with ``rtol = max(rtol, 2**-6)`` (two bfloat16 ulps);
* float8, float6, float4, float8e8m0: the same on the float32 values (one ulp of these is more
  than 1e-3 relative, so the values must be equal);
* integers of every width (int4/int2 included) and bool: exactly equal; strings: equal as text.

:func:`compare` gives every :class:`Difference` of a value (an ndarray for a tensor, a list for
a sequence, a dict for a map, the element or ``None`` for an optional: the evaluator's values)
from the one expected. The values of ONNX test data files are read and written by
:mod:`onemodel.value_files`; ``verify --run`` compares runs with :mod:`onemodel.compare`, which
takes its defaults from here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .lazy import np

#: Default tolerances of a comparison (the ONNX test loader's, Clause 11.5).
RTOL, ATOL = 1e-3, 1e-7

#: The rtol floor of bfloat16 (two bfloat16 ulps, as the harness has it).
BFLOAT16_RTOL = 2.0 ** -6

NARROW_FLOATS = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
                 "float8_e8m0fnu", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn")

#: The comparison rule of each element type, as docs/conformance.md prints them.
RULES = [
    ("float32", "harness: abs(got - want) <= atol + rtol * abs(want); NaN = NaN"),
    ("float64", "harness, as float32"),
    ("float16", "harness, as float32"),
    ("bfloat16", "harness with rtol = max(rtol, 2^-6) (two bfloat16 ulps)"),
    ("complex64", "harness on complex values"),
    ("complex128", "harness on complex values"),
    ("float8_e4m3fn", "harness on the float32 values (an ulp > rtol: same value)"),
    ("float8_e4m3fnuz", "as float8_e4m3fn"),
    ("float8_e5m2", "as float8_e4m3fn"),
    ("float8_e5m2fnuz", "as float8_e4m3fn"),
    ("float8_e8m0fnu", "as float8_e4m3fn"),
    ("float4_e2m1fn", "as float8_e4m3fn"),
    ("float6_e2m3fn", "as float8_e4m3fn"),
    ("float6_e3m2fn", "as float8_e4m3fn"),
]


def is_float(dtype) -> bool:
    """True for the element types compared within a tolerance (every float and complex type,
    the ml_dtypes ones included)."""
    return dtype.kind in "fc" or dtype.name == "bfloat16" or dtype.name in NARROW_FLOATS


def element_type(dtype) -> str:
    """The name under which a result is counted: ``float32``, ``bfloat16``, ``int4``,
    ``bool``, ``string`` (object and text arrays) ..."""
    return "string" if dtype.kind in "OUS" else dtype.name


def tolerance(dtype, rtol: float = RTOL, atol: float = ATOL) -> tuple[float, float] | None:
    """``(rtol, atol)`` a tensor of ``dtype`` is compared with (Clause 11.5, this module's
    docstring), or None when its elements must be equal."""
    if not is_float(dtype):
        return None
    return (max(rtol, BFLOAT16_RTOL) if dtype.name == "bfloat16" else rtol), atol


# -- comparing -------------------------------------------------------------------------------

@dataclasses.dataclass
class Difference:
    """How one compared value (an output, or an element of a sequence or map) differs.

    ``problem`` is a structural difference (kind, length, keys, shape, dtype) when set, and
    then the numbers are not. Otherwise ``count`` of ``size`` elements are out of tolerance,
    the first at index ``index`` (``flat`` in C order; ``got`` and ``want`` its values),
    ``max_abs``/``max_rel`` the largest absolute and relative differences over the finite
    elements (0 for exact types, where any difference counts), ``rtol``/``atol`` the tolerance
    used (None: exact).
    """

    path: str
    problem: str | None = None
    count: int = 0
    size: int = 0
    index: tuple = ()
    flat: int = 0
    got: Any = None
    want: Any = None
    max_abs: float = 0.0
    max_rel: float = 0.0
    rtol: float | None = None
    atol: float | None = None

    def text(self) -> str:
        """One line: the problem, or the counts, differences and first element."""
        if self.problem:
            return f"{self.path}: {self.problem}"
        tol = "exact" if self.rtol is None else f"rtol {self.rtol:g}, atol {self.atol:g}"
        return (f"{self.path}: {self.count} of {self.size} elements out of tolerance ({tol}); "
                f"max abs diff {self.max_abs:.6g}, max rel diff {self.max_rel:.6g}; first: element "
                f"{self.flat} at {list(self.index)}: got {self.got}, expected {self.want}")


def _tensor_diff(got, want, rtol: float, atol: float, path: str) -> Difference | None:
    if got.shape != want.shape:
        return Difference(path, f"shape {list(got.shape)}, expected {list(want.shape)}")
    if element_type(want.dtype) == "string":
        if element_type(got.dtype) != "string":
            return Difference(path, f"dtype {got.dtype}, expected string")
        g = np.array([x.decode("utf-8", "surrogateescape") if isinstance(x, bytes) else str(x)
                      for x in got.reshape(-1)], dtype=object)
        w = np.array([x.decode("utf-8", "surrogateescape") if isinstance(x, bytes) else str(x)
                      for x in want.reshape(-1)], dtype=object)
        bad = g != w
        tol = None
        diff = None
    else:
        if got.dtype != want.dtype:
            return Difference(path, f"dtype {got.dtype}, expected {want.dtype}")
        tol = tolerance(want.dtype, rtol, atol)
        if tol is None:
            wide = np.bool_ if want.dtype.kind == "b" else np.int64
            g = got.astype(wide).reshape(-1)
            w = want.astype(wide).reshape(-1)
            bad = g != w
            diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
        else:
            wide = np.complex128 if want.dtype.kind == "c" else np.float64
            g = got.astype(wide).reshape(-1)
            w = want.astype(wide).reshape(-1)
            bad = ~np.isclose(g, w, rtol=tol[0], atol=tol[1], equal_nan=True)
            finite = np.isfinite(g) & np.isfinite(w)
            with np.errstate(invalid="ignore", over="ignore"):
                diff = np.where(finite, np.abs(g - w), 0.0)
    if not bad.any():
        return None
    first = int(np.flatnonzero(bad)[0])
    d = Difference(path, count=int(bad.sum()), size=int(bad.size), flat=first,
                   index=tuple(int(i) for i in np.unravel_index(first, want.shape))
                   if want.shape else (), got=got.reshape(-1)[first],
                   want=want.reshape(-1)[first])
    if tol is not None:
        d.rtol, d.atol = tol
    if diff is not None and diff.size:
        d.max_abs = float(diff.max())
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(np.abs(w) > 0, diff / np.abs(w), np.where(diff > 0, np.inf, 0.0))
        rel = rel.real if rel.dtype.kind == "c" else rel
        d.max_rel = float(np.where(np.isnan(rel), 0.0, rel).max())
    return d


def compare(got: Any, want: Any, rtol: float = RTOL, atol: float = ATOL,
            path: str = "output") -> list[Difference]:
    """Every difference of ``got`` from ``want`` under the Clause 11.5 rules of this module's
    docstring (``rtol``/``atol`` the test's, bfloat16's floor applied): an empty list when they
    match. Sequences compare element by element, maps key by key, an optional's element as
    itself (``None``: empty)."""
    if want is None:
        return [] if got is None else [Difference(path, "expected an empty optional")]
    if isinstance(want, list):
        if not isinstance(got, list):
            return [Difference(path, f"expected a sequence, got {_kind(got)}")]
        if len(got) != len(want):
            return [Difference(path, f"{len(got)} elements, expected {len(want)}")]
        return [d for i, (g, w) in enumerate(zip(got, want))
                for d in compare(g, w, rtol, atol, f"{path}[{i}]")]
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return [Difference(path, f"expected a map, got {_kind(got)}")]
        if set(got) != set(want):
            return [Difference(path, f"keys {sorted(got)}, expected {sorted(want)}")]
        return [d for k in want for d in compare(np.asarray(got[k]), np.asarray(want[k]),
                                                 rtol, atol, f"{path}[{k!r}]")]
    if not isinstance(got, np.ndarray):
        return [Difference(path, f"expected a tensor, got {_kind(got)}")]
    want = np.asarray(want)
    d = _tensor_diff(got, want, rtol, atol, path)
    return [d] if d else []


def _kind(value) -> str:
    if value is None:
        return "an empty optional"
    if isinstance(value, list):
        return "a sequence"
    if isinstance(value, dict):
        return "a map"
    return "a tensor" if isinstance(value, np.ndarray) else type(value).__name__
