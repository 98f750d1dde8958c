"""Zstandard-compressed files (``model.onnx.zst``, ``model.onemodel.zst``), read and written
transparently over any source or sink, local or remote.

A zstd stream cannot be read at an offset, so a compressed source is decompressed once, front to
back, into an unlinked temporary file that is then memory-mapped: tensors are views of that map
and the decompressed model is never held in memory as well. The output is bounded by a limit
(:data:`~onemodel.limits.MAX_DECOMPRESSED_BYTES` by default): a frame that declares a larger
content size is refused before anything is decompressed, and the output is counted while it
is produced, in steps of at most :data:`MAX_STEP_OUTPUT` bytes, so a decompression bomb is
refused with UnsupportedError long before memory or disk run out.

Writing compresses as the bytes arrive and hands the compressed bytes to the underlying sink,
which publishes them atomically on commit.
"""

from __future__ import annotations

import os
import tempfile

from ..errors import IoError, MalformedError, OneModelError, UnsupportedError
from ..lazy import zstandard
from ..limits import MAX_DECOMPRESSED_BYTES, MiB
from .base import Sink, Source
from .local import LocalSource
from .place import target_of

#: The four bytes every zstd frame starts with (RFC 8878, 3.1.1).
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

#: Compressed bytes given to the decompressor at once. A zstd block of at most 128 KiB costs at
#: least 4 compressed bytes, so one step yields at most 32768 times this: 64 MiB.
STEP_INPUT = 2048

#: Most output one decompression step can produce (see :data:`STEP_INPUT`).
MAX_STEP_OUTPUT = STEP_INPUT * 32768

#: Compressed bytes read from the underlying source per request.
READ_CHUNK = 8 * MiB

#: Default zstd compression level for ``.zst`` sinks.
DEFAULT_LEVEL = 3


#: The file name suffix of zstd-compressed files (``model.onnx.zst``).
ZSTD_SUFFIX = ".zst"


def has_zstd_suffix(name: str) -> bool:
    """True when ``name`` (a path or URL) ends with :data:`ZSTD_SUFFIX` (any case)."""
    return name.lower().endswith(ZSTD_SUFFIX)


def is_zstd(head) -> bool:
    """True when ``head`` starts with a zstd frame or a skippable frame (magic 0x184D2A50 to
    0x184D2A5F, RFC 8878, 3.1.2)."""
    head = bytes(head[:4])
    return head == ZSTD_MAGIC or (head[1:4] == b"\x2a\x4d\x18" and head[0] & 0xF0 == 0x50)


def decompress_source(compressed: Source, *, limit: int = MAX_DECOMPRESSED_BYTES,
                      progress=None, tmpdir: str | None = None) -> Source:
    """A Source over the decompressed bytes of the zstd stream in ``compressed``.

    Args:
        compressed: the compressed bytes (any Source; read front to back in
            :data:`READ_CHUNK` pieces). It is closed when this returns.
        limit: the most decompressed bytes accepted.
        progress: optional callable given the number of compressed bytes consumed per chunk.
        tmpdir: directory of the temporary file (default: ``TMPDIR``).

    Returns a :class:`~onemodel.storage.local.LocalSource` over an unlinked temporary file
    (mapped when large), named like ``compressed``, whose ``target`` is the compressed file's
    path or URL (``None`` for bytes in memory), so external data resolves beside it
    (:func:`onemodel.storage.place.place_of`). Concatenated frames are read in turn.

    Raises UnsupportedError when the declared or produced size exceeds ``limit``,
    MalformedError when the bytes are not a complete, valid zstd stream (bad magic, corrupt
    data, checksum mismatch, truncation), IoError when the temporary file cannot be written.
    """
    target = target_of(compressed)
    try:
        result = _decompress(compressed, limit, progress, tmpdir)
    finally:
        compressed.close()
    result.target = target
    return result


def _decompress(compressed: Source, limit: int, progress, tmpdir) -> Source:
    name = compressed.name
    size = compressed.size
    if size < 4 or not is_zstd(compressed.read(0, 4)):
        raise MalformedError("not a zstd stream (bad magic)", offset=0, source=name)
    declared = _declared_size(compressed.read(0, min(size, 18)))
    if declared is not None and declared > limit:
        raise UnsupportedError(f"decompressed size exceeds the limit: the frame declares "
                               f"{declared} bytes, the limit is {limit}", offset=0, source=name)
    try:
        tmp = tempfile.TemporaryFile(dir=tmpdir)
    except OSError as e:
        raise IoError(f"cannot create a temporary file for decompressing: {e.strerror}",
                      source=name) from None
    with tmp:
        _decompress_into(compressed, tmp, limit, progress)
        fd = os.dup(tmp.fileno())
        os.lseek(fd, 0, os.SEEK_SET)  # LocalSource reads small files from the current offset
    return LocalSource(name, fd=fd)


def _declared_size(head) -> int | None:
    try:
        n = zstandard.frame_content_size(bytes(head))
    except zstandard.ZstdError:
        return None  # a malformed header is reported by the decompressor, with its offset
    return n if n >= 0 else None


def _decompress_into(src: Source, out, limit: int, progress) -> None:
    """Decompress every frame of ``src`` into the file ``out``, counting against ``limit``."""
    dctx = zstandard.ZstdDecompressor()
    dobj = dctx.decompressobj()
    fed = False          # the current frame has received input
    frame_start = 0      # offset of the current frame in ``src``
    produced = 0
    name = src.name
    for base in range(0, src.size, READ_CHUNK):
        n = min(READ_CHUNK, src.size - base)
        chunk = src.read(base, n)
        for pos in range(0, n, STEP_INPUT):
            data = chunk[pos:pos + STEP_INPUT]
            end = base + pos + len(data)
            while data:
                try:
                    result = dobj.decompress(data)
                except zstandard.ZstdError as e:
                    raise MalformedError(f"corrupt zstd data: {e}", offset=frame_start,
                                         source=name) from None
                fed = True
                if result:
                    produced += len(result)
                    if produced > limit:
                        raise UnsupportedError(f"decompressed size exceeds the limit of "
                                               f"{limit} bytes", offset=frame_start,
                                               source=name)
                    _write(out, result, name)
                if not dobj.eof:
                    break
                # the frame ended: the bytes it did not use start the next frame
                data = dobj.unused_data
                frame_start = end - len(data)
                dobj, fed = dctx.decompressobj(), False
        if progress is not None:
            progress(n)
    if fed and not dobj.eof:
        raise MalformedError("truncated zstd stream: the last frame is incomplete",
                             offset=frame_start, source=name)
    try:
        out.flush()
    except OSError as e:
        raise IoError(f"cannot write the decompressed bytes to a temporary file: {e.strerror}",
                      source=name) from None


def _write(out, data: bytes, name: str) -> None:
    try:
        out.write(data)
    except OSError as e:
        raise IoError(f"cannot write the decompressed bytes to a temporary file: {e.strerror}",
                      source=name) from None


class ZstdSink(Sink):
    """A sink that zstd-compresses what is written and passes it to ``inner``.

    Args:
        inner: the sink receiving the compressed bytes (local or remote); it is committed or
            aborted with this one.
        level: zstd compression level (default :data:`DEFAULT_LEVEL`).

    ``tell()`` counts uncompressed bytes, so writers lay out offsets as for a plain file. The
    frame carries a content checksum. Raises IoError (from ``inner``).
    """

    def __init__(self, inner: Sink, *, level: int = DEFAULT_LEVEL):
        self.inner = inner
        self.name = inner.name
        self._cobj = zstandard.ZstdCompressor(level=level, write_checksum=True).compressobj()
        self._pos = 0
        self._done = False

    def write(self, data) -> None:
        if self._done:
            raise IoError("cannot write: the file was already committed or aborted",
                          source=self.name)
        view = memoryview(data)
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B")
        for i in range(0, view.nbytes, 16 * MiB):
            out = self._cobj.compress(view[i:i + 16 * MiB])
            if out:
                self.inner.write(out)
        self._pos += view.nbytes

    def tell(self) -> int:
        return self._pos

    def commit(self) -> None:
        if self._done:
            return
        self._done = True
        try:
            self.inner.write(self._cobj.flush())
        except OneModelError:
            self.inner.abort()
            raise
        self.inner.commit()

    def abort(self) -> None:
        self._done = True
        self.inner.abort()
