"""Opening sources and sinks for paths, URLs and in-memory bytes (DESIGN: storage/).

``open_source(target)`` and ``open_sink(target)`` accept a local path, a ``file://`` URL, or
bytes (sources only).
"""

from __future__ import annotations

import os

from .base import BytesSink, MemorySource, Sink, Source
from .local import LocalSink, LocalSource


def _local_path(target) -> str | None:
    if isinstance(target, os.PathLike):
        return os.fspath(target)
    if isinstance(target, str):
        if target.startswith("file://"):
            return target[len("file://"):]
        if "://" not in target:
            return target
    return None


def open_source(target, *, storage_options: dict | None = None, **options) -> Source:
    """A :class:`Source` for ``target``: a path, ``file://`` URL, bytes-like, or a Source.

    ``storage_options`` are passed to the fsspec backend of a URL (ignored for local files).
    Raises IoError when it cannot be opened.
    """
    if isinstance(target, Source):
        return target
    if isinstance(target, (bytes, bytearray, memoryview)):
        return MemorySource(target)
    path = _local_path(target)
    if path is not None:
        return LocalSource(path, **options)
    raise TypeError(f"cannot open {target!r} as a byte source")


def open_sink(target, *, storage_options: dict | None = None, **options) -> Sink:
    """A :class:`Sink` for ``target`` (a path or ``file://`` URL), committed atomically.

    ``storage_options`` are passed to the fsspec backend of a URL (ignored for local files).
    """
    if isinstance(target, Sink):
        return target
    path = _local_path(target)
    if path is not None:
        return LocalSink(path, **options)
    raise TypeError(f"cannot open {target!r} as a byte sink")


def is_local(target) -> bool:
    """True when ``target`` names a local file (a path or ``file://`` URL)."""
    return _local_path(target) is not None


__all__ = ["Source", "Sink", "MemorySource", "BytesSink", "LocalSource", "LocalSink",
           "open_source", "open_sink", "is_local"]
