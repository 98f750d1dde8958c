"""Statistics of an initializer for ``onemodel view``: min, max, mean and the counts of NaN and
Inf, computed from the tensor's bytes where they lie (a mapped file, a remote range, memory).

A tensor of at most :data:`~onemodel.limits.VIEW_STATS_ELEMENTS` elements is read whole; a
larger one is sampled: :data:`RUNS` evenly spaced runs of consecutive elements, together
``VIEW_STATS_ELEMENTS`` elements, each read as its own byte range (``Blob.read``), so the
tensor is never read whole. Arithmetic is float64 (integers converted exactly below 2^53).
"""

from __future__ import annotations

from ..ir import EXTERNAL
from ..ir.dtypes import INFO
from ..lazy import np
from ..limits import VIEW_STATS_ELEMENTS

#: Runs a sampled tensor is read in.
RUNS = 64

_NUMERIC_KINDS = "biuf"  # bool, signed, unsigned, float (ml_dtypes' floats have kind "V"...)


def tensor_statistics(tensor, limit: int = VIEW_STATS_ELEMENTS) -> dict | None:
    """``{"min", "max", "mean", "nan", "inf", "count", "sampled"}`` of ``tensor``'s elements,
    or ``None`` when it has none to count (STRING, complex, sub-byte types, no elements).

    ``min``, ``max`` and ``mean`` are over the finite elements read (``None`` when none is
    finite), as Python floats computed in float64; ``nan`` and ``inf`` count the elements read;
    ``count`` is how many were read, ``sampled`` whether that is fewer than the tensor holds.
    Raises what reading the tensor raises (IoError for a closed model, InvalidModelError for
    contents that do not match its dims)."""
    info = INFO.get(tensor.data_type or 0)
    if info is None or info.subbyte or info.bits == 0:
        return None
    dtype = info.dtype
    if not (dtype.kind in _NUMERIC_KINDS or _is_ml_float(dtype)):
        return None
    size = tensor.size
    if size == 0:
        return None
    blob = _raw_bytes(tensor)
    if blob is None or size <= limit:
        return _stats(np.asarray(tensor.numpy()).reshape(-1), size, False)
    itemsize = dtype.itemsize
    run = max(1, limit // RUNS)
    step = size // RUNS
    parts = []
    for k in range(RUNS):
        start = k * step
        n = min(run, size - start)
        data = blob.read(start * itemsize, n * itemsize)
        parts.append(np.frombuffer(data, dtype=dtype.newbyteorder("<")))
    return _stats(np.concatenate(parts), size, True)


def _is_ml_float(dtype) -> bool:
    """An ml_dtypes float (bfloat16, float8 kinds): numpy reports them as kind ``V``."""
    try:
        return bool(np.issubdtype(dtype, np.floating)) or dtype.name.startswith(("bfloat", "float"))
    except TypeError:
        return False


def _raw_bytes(tensor):
    """The Blob or buffer that holds ``tensor``'s raw contents, with a ``read(offset, length)``
    (a Blob) for ranged reads, else ``None`` (typed storage, bytes in memory: already read)."""
    buf = tensor.external if tensor.data_location == EXTERNAL else tensor.raw_data
    return buf if hasattr(buf, "source") else None


def _stats(values, total: int, sampled: bool) -> dict:
    if values.dtype.kind == "b":
        values = values.astype(np.uint8)
    x = values.astype(np.float64)
    nan = int(np.count_nonzero(np.isnan(x)))
    inf = int(np.count_nonzero(np.isinf(x)))
    finite = x if nan == 0 and inf == 0 else x[np.isfinite(x)]
    out = {"count": int(x.size), "total": int(total), "sampled": sampled, "nan": nan, "inf": inf,
           "min": None, "max": None, "mean": None}
    if finite.size:
        out["min"] = float(finite.min())
        out["max"] = float(finite.max())
        out["mean"] = float(finite.mean(dtype=np.float64))
    return out
