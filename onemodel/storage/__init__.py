"""Opening sources and sinks for paths, URLs and in-memory bytes.

``open_source(target)`` and ``open_sink(target)`` accept:

==========================  =================================================================
target                      opened as
==========================  =================================================================
a Source / a Sink           itself
bytes-like (sources only)   :class:`MemorySource`
a path, ``file://`` URL     :class:`LocalSource` (mapped) / :class:`LocalSink` (atomic rename)
any other fsspec URL        :class:`RemoteSource` (range reads) / :class:`RemoteSink` (staged
                            upload): ``s3://``, ``gs://``, ``https://``, ``memory://``, chains
a name ending in ``.zst``   the above, decompressed (:func:`decompress_source`, size-capped)
                            or compressed (:class:`ZstdSink`) transparently
==========================  =================================================================

``storage_options`` go to the fsspec backend of a URL. ``progress`` is a callable given byte
counts as they move (see :mod:`onemodel.storage.progress`).
"""

from __future__ import annotations

import os

from ..errors import UsageError, display_url
from ..limits import MAX_COMPRESSION_RATIO, MAX_DECOMPRESSED_BYTES
from .base import BytesSink, MemorySource, Sink, Source, is_url
from .blob import Blob, prefetch
from .compressed import (
    DEFAULT_LEVEL,
    ZstdSink,
    decompress_source,
    has_zstd_suffix,
    is_zstd,
    looks_like_model,
)
from .local import LocalSink, LocalSource
from .place import (
    is_remote,
    join_location,
    local_path,
    name_of_url,
    place_of,
    target_of,
    url_join,
)
from .progress import Progress, ProgressSink

_REMOTE = ("RemoteSource", "RemoteSink")


def __getattr__(name: str):
    # the fsspec layer (and asyncio under it) is imported only when a URL is used
    if name in _REMOTE:
        from . import remote
        return getattr(remote, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _compressed(target: str, compression: str | None) -> bool:
    if compression is None:
        return False
    if compression == "zstd":
        return True
    if compression != "infer":
        raise ValueError(f"compression must be 'infer', 'zstd' or None, not {compression!r}")
    return has_zstd_suffix(name_of_url(target))


def open_source(target, *, storage_options: dict | None = None, compression: str | None = "infer",
                progress=None, max_decompressed: int = MAX_DECOMPRESSED_BYTES,
                max_ratio: float = MAX_COMPRESSION_RATIO, sniff=looks_like_model,
                **options) -> Source:
    """A :class:`Source` for ``target``: a path, URL, bytes-like, or a Source.

    Args:
        storage_options: fsspec backend options for a URL (credentials, ``endpoint_url`` ...).
        compression: ``"infer"`` (zstd when the name ends in ``.zst``), ``"zstd"`` or ``None``.
        progress: callable given the bytes transferred (remote reads, decompression input).
        max_decompressed: the most bytes a ``.zst`` stream may decompress to (default 64 GiB).
        max_ratio: the most bytes a ``.zst`` stream may decompress to per compressed byte, once
            past 16 MiB (default 1000; :mod:`onemodel.storage.compressed`). Raise both to load
            a trusted, extremely compressible file: ``load(open_source(path, max_ratio=1e6))``.
        sniff: the check the first decompressed bytes of a ``.zst`` must pass before anything
            is spilled to disk (default: they start a model); ``None`` for bytes of any kind.
        options: passed to the source class (``mmap_threshold`` for local files,
            ``head_bytes`` for URLs).

    Raises IoError when it cannot be opened, UnsupportedError for an unknown URL scheme, a
    missing backend, a decompressed size or ratio over the limit or decompressed bytes that
    do not start like a model, MalformedError for a bad ``.zst``.
    """
    if isinstance(target, Source):
        return target
    if isinstance(target, (bytes, bytearray, memoryview)):
        return MemorySource(target)
    if isinstance(target, os.PathLike):
        target = os.fspath(target)
    if not isinstance(target, str):
        raise TypeError(f"cannot open {target!r} as a byte source")
    zst = _compressed(target, compression)
    path = local_path(target)
    if path is not None:
        raw = LocalSource(path, **options)
    else:
        from .remote import RemoteSource
        raw = RemoteSource(target, storage_options, progress=None if zst else progress,
                           **options)
    if zst:
        return decompress_source(raw, limit=max_decompressed, max_ratio=max_ratio,
                                 sniff=sniff, progress=progress)
    return raw


def open_sink(target, *, storage_options: dict | None = None, compression: str | None = "infer",
              progress=None, level: int = DEFAULT_LEVEL, **options) -> Sink:
    """A :class:`Sink` for ``target`` (a path or URL), published atomically on commit.

    Args:
        storage_options: fsspec backend options for a URL.
        compression: ``"infer"`` (zstd when the name ends in ``.zst``), ``"zstd"`` or ``None``.
        progress: callable given the bytes written (uncompressed).
        level: zstd level for compressed sinks.
        options: passed to the sink class (``durable`` for local files, ``block_size`` for
            URLs).

    Raises IoError, UnsupportedError (unknown scheme, missing backend, read-only backend).
    """
    if isinstance(target, Sink):
        sink = target
    else:
        if isinstance(target, os.PathLike):
            target = os.fspath(target)
        if not isinstance(target, str):
            raise TypeError(f"cannot open {target!r} as a byte sink")
        path = local_path(target)
        if path is not None:
            sink = LocalSink(path, **options)
        else:
            from .remote import RemoteSink
            sink = RemoteSink(target, storage_options, **options)
        if _compressed(target, compression):
            sink = ZstdSink(sink, level=level)
    return ProgressSink(sink, progress) if progress is not None else sink


def check_storage_options(storage_options: dict | None, *targets,
                          name: str = "storage_options") -> None:
    """Refuse storage options that nothing of an operation would use: the one check of the
    Python API (``load``, ``save``, ``convert``, ``verify``, ``check``, ...) and the command
    line (``--storage-option``).

    ``targets``: every path, URL, Source or Sink the operation opens (model file, output,
    ``base_dir`` of external data; ``None``, bytes and loaded models are skipped).
    ``storage_options`` are for fsspec backends of URLs only; given when every target is local
    they would be ignored silently, so they raise :class:`~onemodel.errors.UsageError` naming
    every local target (a conversion's source and destination both, not only the first) and
    ``name``, the option as the caller spells it (``--storage-option`` on the command line).
    A command that reads from S3 and writes a local file uses them (for the S3 end) and passes.
    """
    if not storage_options:
        return
    names = [target_of(t) for t in targets if t is not None]
    if any(t is not None and is_remote(t) for t in names):
        return
    shown = list(dict.fromkeys(t for t in names if isinstance(t, str)))
    where = f" ({', '.join(shown[:-1])} and {shown[-1]})" if len(shown) > 1 else \
        f" ({shown[0]})" if shown else ""
    raise UsageError(f"storage options are for URLs (s3://, https:// ...), but every file of "
                     f"this operation is local{where}: they would be ignored; drop {name}")


def is_local(target) -> bool:
    """True when ``target`` names a local file (a path or ``file://`` URL)."""
    return local_path(target) is not None


__all__ = ["Source", "Sink", "MemorySource", "BytesSink", "LocalSource", "LocalSink",
           "RemoteSource", "RemoteSink", "ZstdSink", "Blob", "Progress", "ProgressSink",
           "open_source", "open_sink", "check_storage_options", "is_local", "is_url", "is_zstd",
           "display_url", "decompress_source", "join_location", "prefetch", "local_path",
           "is_remote", "place_of", "target_of", "url_join"]
