"""Tables of functions by ``(domain, op_type)`` and ``since_version``: the lookup rule of
ONNX Part 1, Clause 14.3 shared by the evaluator's kernels and inference's rules.

A function registered for ``since`` serves every operator set version from ``since`` until
the next registered version of the same operator; for a node whose model imports its domain
at version ``v``, the function with the greatest ``since <= v`` applies.
"""

from __future__ import annotations

import bisect
from typing import Callable

from .entries import normalize_domain

#: (domain, op_type) -> list of (since, function), sorted by since
Table = dict[tuple[str, str], list[tuple[int, Callable]]]


def add(table: Table, domain: str, op_type: str, since: int, fn: Callable) -> None:
    """Register ``fn`` for ``(domain, op_type)`` from version ``since`` on, replacing one of the
    same version. Raises ValueError for a version below 1, TypeError when ``fn`` is not
    callable."""
    if not isinstance(since, int) or since < 1:
        raise ValueError(f"since must be an opset version >= 1, not {since!r}")
    if not callable(fn):
        raise TypeError(f"function for {op_type} is not callable: {fn!r}")
    entries = table.setdefault((normalize_domain(domain), op_type), [])
    entries[:] = [e for e in entries if e[0] != since]
    bisect.insort(entries, (since, fn), key=lambda e: e[0])


def pick(entries, version: int) -> Callable | None:
    """The function of ``entries`` with the greatest ``since <= version``, or None."""
    i = bisect.bisect_right([e[0] for e in entries], version)
    return entries[i - 1][1] if i else None
