"""Statistics of an initializer for ``onemodel view``: min, max, mean and the counts of NaN and
Inf, computed from the tensor's bytes where they lie (a mapped file, a remote range, memory).

A tensor of at most :data:`~onemodel.limits.VIEW_STATS_ELEMENTS` elements is read whole; a
larger one is sampled: :data:`RUNS` evenly spaced runs of consecutive elements, together
``VIEW_STATS_ELEMENTS`` elements, each read as its own byte range (``Blob.read``), so the
tensor is never read whole. Arithmetic is float64 (integers converted exactly below 2^53).
"""

from __future__ import annotations

from ..errors import OneModelError
from ..ir import EXTERNAL
from ..ir.dtypes import INFO
from ..lazy import np
from ..limits import VIEW_STATS_ELEMENTS

#: Runs a sampled tensor is read in.
RUNS = 64

_NUMERIC_KINDS = "biuf"  # bool, signed, unsigned, float (ml_dtypes' floats have kind "V"...)


#: Bytes asked of a remote source at once (the ranges of several tensors, one ``fetch_many``).
BATCH_BYTES = 64 << 20


def tensor_statistics(tensor, limit: int = VIEW_STATS_ELEMENTS) -> dict | None:
    """``{"min", "max", "mean", "nan", "inf", "count", "total", "sampled"}`` of ``tensor``'s
    elements, or ``None`` when it has none to count (STRING, complex, sub-byte types, no
    elements): :func:`statistics_of` of one tensor."""
    return statistics_of([tensor], limit)[0]


def statistics_of(tensors, limit: int = VIEW_STATS_ELEMENTS) -> list:
    """The statistics of each of ``tensors`` (in order), each ``None`` or a dict:

    ``min``, ``max`` and ``mean`` over the finite elements read (``None`` when none is
    finite), Python floats computed in float64; ``nan`` and ``inf`` count the elements read;
    ``count`` is how many were read, ``total`` how many the tensor has, ``sampled`` whether
    fewer were read (more than ``limit``: :data:`RUNS` evenly spaced runs of ``limit // RUNS``
    consecutive elements). A tensor whose bytes cannot be read gives ``{"error": message}``
    (a closed model, contents that do not match its dims).

    Bytes are read where they lie: a mapped file by zero-copy slices, a remote source by
    ``fetch_many`` over the ranges of many tensors at once (at most :data:`BATCH_BYTES` a
    call; coalesced into few requests), tensors in memory as they are."""
    out: list = [None] * len(tensors)
    small: dict = {}  # dtype -> [(index, values, total)]: computed together (_small_stats)
    remote: dict[int, list] = {}  # id(source) -> [(index, blob, dtype, ranges, total)]
    for i, t in enumerate(tensors):
        plan = _plan(t, limit)
        if plan is None:
            continue
        blob, dtype, ranges, total = plan
        try:
            if blob is None:
                _put(out, small, i, np.asarray(t.numpy()).reshape(-1), total)
            elif blob.source.whole() is None and blob._data is None and \
                    getattr(blob, "_check", None) is None:
                remote.setdefault(id(blob.source), []).append((i, blob, dtype, ranges, total))
            else:
                _put(out, small, i, _of_views([blob.read(o, n) for o, n in ranges], dtype), total)
        except OneModelError as e:
            out[i] = {"error": str(e)}
    for jobs in remote.values():
        batch: list = []
        size = 0
        for job in jobs:
            batch.append(job)
            size += sum(n for _, n in job[3])
            if size >= BATCH_BYTES:
                _fetch(batch, out, small)
                batch, size = [], 0
        if batch:
            _fetch(batch, out, small)
    for items in small.values():
        _small_stats(items, out)
    return out


def _plan(t, limit: int):
    """``(blob or None, dtype, [(offset, length)] in the blob, total)`` for a tensor with
    statistics, else ``None``."""
    info = INFO.get(t.data_type or 0)
    if info is None or info.subbyte or info.bits == 0:
        return None
    dtype = info.dtype
    if not (dtype.kind in _NUMERIC_KINDS or _is_ml_float(dtype)):
        return None
    size = t.size
    if size == 0:
        return None
    blob = t.external if t.data_location == EXTERNAL else t.raw_data
    if not hasattr(blob, "source"):  # typed storage, bytes in memory: already read
        return None, dtype, [], size
    itemsize = dtype.itemsize
    if blob.nbytes != size * itemsize:  # (numpy() raises the InvalidModelError that says so)
        return None, dtype, [], size
    if size <= limit:
        return blob, dtype, [(0, blob.nbytes)], size
    run, step = max(1, limit // RUNS), size // RUNS
    ranges = [(k * step * itemsize, min(run, size - k * step) * itemsize) for k in range(RUNS)]
    return blob, dtype, ranges, size


def _fetch(batch: list, out: list, small: dict) -> None:
    """One ``fetch_many`` for the ranges of ``batch`` (tensors of one remote source)."""
    src = batch[0][1].source
    flat = [(blob.offset + o, n) for _, blob, _, ranges, _ in batch for o, n in ranges]
    try:
        views = src.fetch_many(flat)
    except OneModelError as e:
        for i, *_ in batch:
            out[i] = {"error": str(e)}
        return
    k = 0
    for i, _, dtype, ranges, total in batch:
        _put(out, small, i, _of_views(views[k:k + len(ranges)], dtype), total)
        k += len(ranges)


def _of_views(views: list, dtype):
    """The elements of ``views`` (raw little-endian bytes of ``dtype``), one 1-D array."""
    le = dtype.newbyteorder("<")
    parts = [np.frombuffer(v, dtype=le) for v in views]
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


#: Tensors of at most this many elements are computed together, per element type.
SMALL = 4096


def _put(out: list, small: dict, i: int, values, total: int) -> None:
    if values.size <= SMALL:
        small.setdefault(values.dtype, []).append((i, values, total))
    else:
        out[i] = _stats(values, total, values.size < total)


def _small_stats(items: list, out: list) -> None:
    """:func:`_stats` of many small arrays of one dtype at once: one concatenation, and each
    figure a ``reduceat`` over the segments (the same float64 values; the mean's sum runs in
    order instead of pairwise, a difference of a few ulps at most)."""
    lens = np.fromiter((v.size for _, v, _ in items), dtype=np.int64, count=len(items))
    starts = np.zeros(len(items), dtype=np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    values = np.concatenate([v for _, v, _ in items])
    if values.dtype.kind == "b":
        values = values.astype(np.uint8)
    x = values.astype(np.float64)
    nan, inf = np.isnan(x), np.isinf(x)
    fin = ~(nan | inf)
    nans = np.add.reduceat(nan, starts)
    infs = np.add.reduceat(inf, starts)
    fins = np.add.reduceat(fin, starts)
    all_finite = bool(fin.all())
    lo = np.minimum.reduceat(x if all_finite else np.where(fin, x, np.inf), starts)
    hi = np.maximum.reduceat(x if all_finite else np.where(fin, x, -np.inf), starts)
    sums = np.add.reduceat(x if all_finite else np.where(fin, x, 0.0), starts)
    for k, (i, v, total) in enumerate(items):
        f = int(fins[k])
        out[i] = {"count": int(v.size), "total": int(total), "sampled": v.size < total,
                  "nan": int(nans[k]), "inf": int(infs[k]),
                  "min": float(lo[k]) if f else None, "max": float(hi[k]) if f else None,
                  "mean": float(sums[k] / f) if f else None}


def _is_ml_float(dtype) -> bool:
    """An ml_dtypes float (bfloat16, float8 kinds): numpy reports them as kind ``V``."""
    try:
        return bool(np.issubdtype(dtype, np.floating)) or dtype.name.startswith(("bfloat", "float"))
    except TypeError:
        return False


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
