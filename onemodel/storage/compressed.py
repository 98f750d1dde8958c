"""Zstandard-compressed files (``model.onnx.zst``, ``model.onemodel.zst``), read and written
transparently over any source or sink, local or remote.

A zstd stream cannot be read at an offset, so a compressed source is decompressed once, front to
back, into an unlinked temporary file that is then memory-mapped: tensors are views of that map
and the decompressed model is never held in memory as well. Three checks bound what
a decompression bomb can cost:

* the size: a frame that declares a content size over the limit
  (:data:`~onemodel.limits.MAX_DECOMPRESSED_BYTES`, 64 GiB, by default) is refused before
  anything is decompressed, and the output is counted while it is produced;
* the first bytes: the first :data:`SNIFF_BYTES` decompressed bytes are held back and checked to
  start a model (:func:`looks_like_model`: a plausible first field key of an ONNX ModelProto,
  or a format plugin's magic, such as OneModel's, which :mod:`onemodel.formats` tells through
  :func:`set_format_sniff`) before anything is written to disk, so a
  stream of zeros or other bytes that are no model is refused after one step;
* the ratio: the output may not exceed ``max_ratio`` (default
  :data:`~onemodel.limits.MAX_COMPRESSION_RATIO`, 1000) times the compressed file's size (and is
  allowed :data:`RATIO_ALLOWANCE` whatever the ratio), so a small file cannot fill the disk
  with gigabytes before the size limit is reached. The whole file's ratio counts, not that of
  the bytes read so far: a model whose first tensor is a long run of zeros is not refused for
  it when the rest of the file brings the ratio back down.

Each is checked before the step's output (at most :data:`MAX_STEP_OUTPUT` bytes) is written, and
a refusal is an UnsupportedError naming the limit and how to raise it (``max_decompressed=``,
``max_ratio=`` of :func:`onemodel.storage.open_source`; docs/storage.md).

Writing compresses as the bytes arrive and hands the compressed bytes to the underlying sink,
which publishes them atomically on commit.
"""

from __future__ import annotations

import os

from ..errors import IoError, MalformedError, OneModelError, UnsupportedError
from ..lazy import zstandard
from ..limits import MAX_COMPRESSION_RATIO, MAX_DECOMPRESSED_BYTES, MiB
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

#: Decompressed bytes held back and checked by :func:`looks_like_model` before any is written.
SNIFF_BYTES = 16

#: Output allowed whatever the compression ratio (a small model of zeros compresses past any
#: sensible ratio); past it the ratio limit applies.
RATIO_ALLOWANCE = 16 * MiB

#: First keys of an ONNX ModelProto (ONNX Part 1, Clause 12: a key is ``field << 3 | wire
#: type``): the fields of ModelProto with their wire types (0 varint, 2 length-delimited).
_MODEL_KEYS = {1: 0, 2: 2, 3: 2, 4: 2, 5: 0, 6: 2, 7: 2, 8: 2, 14: 2, 20: 2, 25: 2, 26: 2}

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


#: ``callable(head: bytes) -> bool``: whether ``head`` starts a file of a registered format (by
#: its magic); set by :mod:`onemodel.formats` when it is imported (which ``import onemodel``
#: does), so storage imports nothing from the formats. ``None``: no format is known.
_format_sniff = None


def set_format_sniff(sniff) -> None:
    """Make ``sniff`` (``callable(head: bytes) -> bool``) the check of :func:`looks_like_model`
    for a format's magic. Called once by :mod:`onemodel.formats`."""
    global _format_sniff
    _format_sniff = sniff


def looks_like_model(head: bytes) -> bool:
    """Whether decompressed bytes starting with ``head`` can be a model: empty, an ONNX
    ModelProto whose first key (a varint, Clause 12.2) names one of its fields with that field's
    wire type, or the magic of a registered format (the sniff :mod:`onemodel.formats` set:
    OneModel's ``ONEMODEL`` ...). Zeros (field 0) and other filler are not."""
    if not head:
        return True
    key, shift = 0, 0
    for b in head[:5]:
        key |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            if _MODEL_KEYS.get(key >> 3) == key & 7:
                return True
            break
    sniff = _format_sniff
    return sniff is not None and bool(sniff(bytes(head)))


def decompress_source(compressed: Source, *, limit: int = MAX_DECOMPRESSED_BYTES,
                      max_ratio: float = MAX_COMPRESSION_RATIO, sniff=looks_like_model,
                      progress=None, tmpdir: str | None = None) -> Source:
    """A Source over the decompressed bytes of the zstd stream in ``compressed``.

    Args:
        compressed: the compressed bytes (any Source; read front to back in
            :data:`READ_CHUNK` pieces). It is closed when this returns.
        limit: the most decompressed bytes accepted.
        max_ratio: the most decompressed bytes per byte of the compressed file, once the
            output passes :data:`RATIO_ALLOWANCE` (module documentation).
        sniff: ``callable(first bytes) -> bool`` that the first :data:`SNIFF_BYTES`
            decompressed bytes (fewer for a shorter output) must pass before anything is
            written (default :func:`looks_like_model`); ``None`` for no check.
        progress: optional callable given the number of compressed bytes consumed per chunk.
        tmpdir: directory of the temporary file (default: ``TMPDIR``).

    Returns a :class:`~onemodel.storage.local.LocalSource` over an unlinked temporary file
    (mapped when large), named like ``compressed``, whose ``target`` is the compressed file's
    path or URL (``None`` for bytes in memory), so external data resolves beside it
    (:func:`onemodel.storage.place.place_of`). Concatenated frames are read in turn.

    Raises UnsupportedError when the declared or produced size exceeds ``limit``, the output
    exceeds ``max_ratio``, or its first bytes are no model; MalformedError when the bytes are
    not a complete, valid zstd stream (bad magic, corrupt data, checksum mismatch,
    truncation); IoError when the temporary file cannot be written.
    """
    target = target_of(compressed)
    try:
        result = _decompress(compressed, _Bounds(limit, max_ratio, sniff, compressed.size),
                             progress, tmpdir)
    finally:
        compressed.close()
    result.target = target
    return result


class _Bounds:
    """The limits of one decompression of a ``size``-byte file and the count of its output."""

    def __init__(self, limit: int, max_ratio: float, sniff, size: int):
        if not max_ratio > 0:
            raise ValueError(f"max_ratio must be positive, not {max_ratio!r}")
        self.limit, self.max_ratio, self.sniff = limit, max_ratio, sniff
        self.size = size
        self.ratio_limit = max(RATIO_ALLOWANCE, int(max_ratio * size))
        self.produced = 0        # decompressed bytes so far (also those held back)
        self.written = 0         # bytes written to the temporary file
        self.held = b"" if sniff is not None else None  # first bytes, until checked

    def check(self, name: str, offset: int) -> None:
        if self.produced > self.limit:
            raise UnsupportedError(f"decompressed size exceeds the limit of {self.limit} bytes "
                                   "(raise it with max_decompressed=)", offset=offset,
                                   source=name)
        if self.produced > self.ratio_limit:
            raise UnsupportedError(
                f"the {self.size}-byte file decompresses to more than {self.ratio_limit} bytes, "
                f"past the compression ratio limit of {self.max_ratio:g}:1 (a decompression "
                f"bomb?); if the file is trusted, {RAISE_RATIO}", offset=offset,
                source=name)

    def refuse_head(self, name: str) -> None:
        raise UnsupportedError(f"the decompressed bytes do not start like a model (first bytes "
                               f"{self.held[:SNIFF_BYTES].hex(' ')}): neither a OneModel file "
                               "nor an ONNX ModelProto", offset=0, source=name)


#: How to get past the ratio limit, for the command line and Python alike.
RAISE_RATIO = ("decompress it first (zstd -d FILE) and give the result, or raise the limit with "
               "open_source(max_ratio=) in Python")


def _decompress(compressed: Source, bounds: _Bounds, progress, tmpdir) -> Source:
    name = compressed.name
    size = compressed.size
    limit = bounds.limit
    if size < 4 or not is_zstd(compressed.read(0, 4)):
        raise MalformedError("not a zstd stream (bad magic)", offset=0, source=name)
    declared = _declared_size(compressed.read(0, min(size, 18)))
    if declared is not None and declared > limit:
        raise UnsupportedError(f"decompressed size exceeds the limit: the frame declares "
                               f"{declared} bytes, the limit is {limit} (raise it with "
                               "max_decompressed=)", offset=0, source=name)
    if declared is not None and declared > bounds.ratio_limit:
        raise UnsupportedError(f"the frame declares {declared} bytes, past the compression "
                               f"ratio limit of {bounds.max_ratio:g}:1 for a {size}-byte file "
                               f"(a decompression bomb?); if the file is trusted, {RAISE_RATIO}",
                               offset=0, source=name)
    import tempfile  # (here: a read that decompresses nothing does not import it)

    try:
        tmp = tempfile.TemporaryFile(dir=tmpdir)
    except OSError as e:
        raise IoError(f"cannot create a temporary file for decompressing: {e.strerror}",
                      source=name) from None
    with tmp:
        _decompress_into(compressed, tmp, bounds, progress)
        fd = os.dup(tmp.fileno())
        os.lseek(fd, 0, os.SEEK_SET)  # LocalSource reads small files from the current offset
    return LocalSource(name, fd=fd)


def _declared_size(head) -> int | None:
    try:
        n = zstandard.frame_content_size(bytes(head))
    except zstandard.ZstdError:
        return None  # a malformed header is reported by the decompressor, with its offset
    return n if n >= 0 else None


def _decompress_into(src: Source, out, bounds: _Bounds, progress) -> None:
    """Decompress every frame of ``src`` into the file ``out`` within ``bounds``."""
    dctx = zstandard.ZstdDecompressor()
    dobj = dctx.decompressobj()
    fed = False          # the current frame has received input
    frame_start = 0      # offset of the current frame in ``src``
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
                    bounds.produced += len(result)
                    _emit(out, result, bounds, name, frame_start)
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
    if bounds.held is not None:  # the whole output is shorter than SNIFF_BYTES
        if not bounds.sniff(bounds.held):
            bounds.refuse_head(name)
        _write(out, bounds.held, name)
        bounds.written += len(bounds.held)
    try:
        out.flush()
    except OSError as e:
        raise IoError(f"cannot write the decompressed bytes to a temporary file: {e.strerror}",
                      source=name) from None


def _emit(out, data: bytes, bounds: _Bounds, name: str, offset: int) -> None:
    """Write decompressed ``data`` once the first bytes passed the sniff and the output is
    within ``bounds`` (``offset``: of the frame, for messages)."""
    if bounds.held is not None:
        held = bounds.held + data[:SNIFF_BYTES]
        if len(held) < SNIFF_BYTES:
            bounds.held = held
            return
        if not bounds.sniff(held[:SNIFF_BYTES]):
            bounds.held = held
            bounds.refuse_head(name)
        data = bounds.held + data
        bounds.held = None
    bounds.check(name, offset)
    _write(out, data, name)
    bounds.written += len(data)


def _write(out, data: bytes, name: str) -> None:
    try:
        out.write(data)
    except OSError as e:
        raise IoError(f"cannot write the decompressed bytes to a temporary file: {e.strerror}",
                      source=name) from None


def is_compressed_sink(sink) -> bool:
    """True when what is written to ``sink`` ends up zstd-compressed: it is a
    :class:`ZstdSink`, or wraps one (``inner``: a ProgressSink around it), at most 16 deep."""
    for _ in range(16):
        if isinstance(sink, ZstdSink):
            return True
        sink = getattr(sink, "inner", None)
        if sink is None:
            return False
    return False


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
