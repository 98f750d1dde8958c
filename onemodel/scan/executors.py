"""Running a scan's tasks (placeholder of the ``scanexec`` branch, which replaces this file).

Only the serial path: every item in this process, in order."""

from __future__ import annotations

from ..errors import UnsupportedError


def run_tasks(function, items, *, jobs=None, dask=None, on_failure, progress=None):
    """Yield ``(index, row)`` for every item: ``function(item)`` in this process, in order
    (any ``jobs`` runs as ``jobs=1``). ``dask`` raises UnsupportedError here."""
    if dask is not None:
        raise UnsupportedError("Dask execution is not available in this build")
    for index, item in enumerate(items):
        yield index, function(item)
