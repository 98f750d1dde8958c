"""Byte sources and sinks: what readers read from and writers write to.

A reader never sees a path. It gets a :class:`Source` with a ``size`` and ``read(offset, length)``,
and, when the bytes are a local file or already in memory, ``whole()``: one zero-copy memoryview of
all of them, so tensors can be views. A writer gets a :class:`Sink` that is written front to back
and made visible only by :meth:`Sink.commit` (atomic: an interrupted write leaves no file that
looks complete).
"""

from __future__ import annotations

from ..errors import IoError, MalformedError, Placeholder, Setting, UnsupportedError, literal
from ..limits import MAX_WRITTEN_GAP


def is_url(target) -> bool:
    """True when ``target`` is a string naming an fsspec URL (``scheme://...`` or ``a::b``)."""
    return isinstance(target, str) and ("://" in target or "::" in target)


class Source:
    """Random-access bytes of known size.

    Attributes:
        name: the path or URL, for error messages.
        size: length in bytes.
        closed: True once :meth:`close` ran on a local or in-memory source; its reads then
            raise IoError (the model that read it was closed, its tensors' contents are gone).
    """

    name: str = "<bytes>"
    size: int = 0
    closed: bool = False

    def read(self, offset: int, length: int) -> memoryview:
        """Exactly ``length`` bytes at ``offset``. Raises MalformedError past the end, IoError."""
        raise NotImplementedError

    def whole(self) -> memoryview | None:
        """All the bytes as one zero-copy memoryview, or ``None`` when they are not local."""
        return None

    def fetch_many(self, ranges: list[tuple[int, int]]) -> list[memoryview]:
        """Read several ``(offset, length)`` ranges (ints, bytes); remote sources coalesce them
        into few requests."""
        return [self.read(o, n) for o, n in ranges]

    def close(self) -> None:
        """Release the file, map or connection; views already handed out stay valid."""

    def _check_range(self, offset: int, length: int) -> None:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise MalformedError(f"read of {length} bytes at {offset} is past the end of the "
                                 f"{self.size}-byte file", offset=offset, source=self.name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class MemorySource(Source):
    """A source over bytes already in memory (``bytes``, ``bytearray``, ``memoryview``, mmap)."""

    def __init__(self, data, name: str = "<bytes>", closer=None):
        self._view = memoryview(data).cast("B") if not isinstance(data, memoryview) else data
        if self._view.ndim != 1 or self._view.itemsize != 1:
            self._view = self._view.cast("B")
        self.size = len(self._view)
        self.name = name
        self._closer = closer

    def read(self, offset: int, length: int) -> memoryview:
        if self.closed:
            raise IoError("the contents of this tensor are gone: its model was closed",
                          source=self.name)
        self._check_range(offset, length)
        return self._view[offset:offset + length]

    def whole(self) -> memoryview:
        return self._view

    def close(self) -> None:
        self.closed = True
        closer, self._closer = self._closer, None
        if closer is not None:
            closer()


class Sink:
    """Bytes written front to back, published atomically by :meth:`commit`.

    Attributes:
        name: the destination path or URL, for error messages.
        progress: the callable this sink reports written byte counts to (a
            :class:`~onemodel.storage.progress.ProgressSink` has one), else ``None``; a writer
            that opens more sinks for one model (ONNX data files) reports their bytes there too.
    """

    name: str = "<sink>"
    progress = None

    def write(self, data) -> None:
        """Append ``data`` (any bytes-like object). Raises IoError."""
        raise NotImplementedError

    def tell(self) -> int:
        """Bytes written so far."""
        raise NotImplementedError

    def write_zeros(self, count: int) -> None:
        """Append ``count`` zero bytes (padding)."""
        chunk = bytes(min(count, 1 << 20))
        while count > 0:
            n = min(count, len(chunk))
            self.write(memoryview(chunk)[:n])
            count -= n

    def skip(self, count: int) -> None:
        """Append ``count`` zero bytes that need not be stored: a gap between the tensors of a
        data file that keeps its offsets (layout ``keep``).

        A local file leaves a hole (:meth:`LocalSink.skip`: no disk allocated, nothing
        written). A sink that cannot (an upload, bytes in memory) writes the zeros, up to
        :data:`~onemodel.limits.MAX_WRITTEN_GAP` bytes; a larger gap raises UnsupportedError,
        since it would transfer or hold that many zeros.
        """
        check_gap(self.name, self.tell(), count)
        self.write_zeros(count)

    def reserve(self, nbytes: int, ranges: list[tuple[int, int]] | None = None) -> None:
        """Announce that the finished object will be ``nbytes`` long, before writing it.

        ``ranges``: the ``(start, end)`` byte ranges that will really be written, when the rest
        are gaps (:meth:`skip`); default all of ``[0, nbytes)``. A hint: a local file allocates
        the disk of those ranges now (:meth:`LocalSink.reserve`), so a full disk is reported
        before anything is written and the writes that follow are cheaper. A sink that cannot
        leave holes checks the gaps here, so one over
        :data:`~onemodel.limits.MAX_WRITTEN_GAP` is refused (UnsupportedError) before a byte
        is written. Writing more or fewer bytes stays correct.
        """
        pos = 0
        for start, end in ranges or ():
            check_gap(self.name, pos, start - pos)
            pos = max(pos, end)

    def write_blob(self, blob) -> None:
        """Append the bytes of a :class:`~onemodel.storage.blob.Blob`: the one place a writer's
        "copy from the source file or write the buffer" is decided. Bytes already fetched are
        written as they are (no second request); otherwise they are copied from the source with
        :meth:`copy_from`, which a local sink does file to file (``copy_file_range`` or
        ``splice``, docs/performance.md) and a remote source serves as range reads in bounded
        chunks. A :class:`~onemodel.storage.progress.ProgressSink` counts the Blob's bytes here,
        once, whichever way they go; hashing sinks see them through ``write``/``copy_from``.
        A Blob with a recorded digest is checked before its bytes are written: a remote one
        goes through ``blob.chunks()``, which checks it as it streams; a local one is checked
        (``blob.view()``, once) before the file-to-file copy, so a conversion never writes
        bytes that do not match their recorded digest (IoError naming the tensor)."""
        if blob.loaded:
            self.write(blob.view())
        elif blob.digest is not None and not blob.at_hand:
            for chunk in blob.chunks(64 << 20):
                self.write(chunk)
        elif blob.digest is not None:
            blob.view()  # raises IoError when the bytes do not match the recorded digest
            self.copy_from(blob.source, blob.offset, blob.nbytes)
        else:
            self.copy_from(blob.source, blob.offset, blob.nbytes)

    def copy_from(self, source: Source, offset: int, length: int) -> None:
        """Append ``length`` bytes of ``source`` at ``offset``, streamed in bounded chunks."""
        step = 64 << 20
        while length > 0:
            n = min(step, length)
            self.write(source.read(offset, n))
            offset += n
            length -= n

    def commit(self) -> None:
        """Make the written bytes visible under the destination name (atomic where possible)."""
        raise NotImplementedError

    def abort(self) -> None:
        """Discard everything written; the destination is left as it was."""
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.commit()
        else:
            self.abort()


class BytesSink(Sink):
    """A sink that collects bytes in memory; :meth:`getvalue` returns them after commit."""

    def __init__(self, name: str = "<bytes>"):
        self.name = name
        self._buf = bytearray()
        self._done = False

    def write(self, data) -> None:
        self._buf += data

    def tell(self) -> int:
        return len(self._buf)

    def commit(self) -> None:
        self._done = True

    def abort(self) -> None:
        self._buf = bytearray()

    def getvalue(self) -> bytes:
        return bytes(self._buf)


def check_gap(name: str, offset: int, count: int) -> None:
    """Refuse (UnsupportedError) a gap of ``count`` zeros at ``offset`` that a sink which cannot
    leave holes would have to write, when it exceeds :data:`~onemodel.limits.MAX_WRITTEN_GAP`."""
    if count > MAX_WRITTEN_GAP:
        raise UnsupportedError.advising(
            literal(f"the data file keeps a gap of {count} bytes at offset {offset} (layout "
                    f"'keep' keeps every tensor at its offset) and this destination cannot leave "
                    f"holes: it would write {count} zero bytes, more than the limit of "
                    f"{MAX_WRITTEN_GAP}") + "; lay the data out afresh ({0}, {1}) or write to a "
            "local file, which leaves gaps as holes", Setting("external_data", Placeholder("NAME")),
            Setting("layout", "file"), offset=offset, source=name)


def io_error(exc: OSError, name: str, action: str = "read") -> IoError:
    """An IoError for an OSError, naming the file and what was being done."""
    why = exc.strerror or str(exc)
    return IoError(f"cannot {action} file: {why}", source=name)


class BlockView:
    """Random access to a source through a cache of fixed-size blocks, fetched on first touch.

    Not a :class:`~onemodel.storage.blob.Blob`: a Blob is one tensor's byte range, fetched whole
    when used; a BlockView is the whole source as an indexable buffer for a decoder that touches
    scattered bytes (the structure of a remote ONNX file), each block fetched once.

    Supports ``len()``, ``view[i]`` (an int) and ``view[a:b]`` (a memoryview), so a decoder
    written for an in-memory buffer can read a remote file while fetching only the blocks it
    touches. Used to parse the structure of a remote ONNX file without fetching raw_data.
    """

    def __init__(self, source: Source, block_size: int = 64 * 1024):
        self.source = source
        self.block = block_size
        self._blocks: dict[int, memoryview] = {}
        self._size = source.size

    def __len__(self) -> int:
        return self._size

    def _get(self, index: int) -> memoryview:
        b = self._blocks.get(index)
        if b is None:
            start = index * self.block
            b = self.source.read(start, min(self.block, self._size - start))
            self._blocks[index] = b
        return b

    def __getitem__(self, key):
        if isinstance(key, slice):
            start, stop, _ = key.indices(self._size)
            if stop <= start:
                return memoryview(b"")
            first, last = start // self.block, (stop - 1) // self.block
            if first == last:
                off = first * self.block
                return self._get(first)[start - off:stop - off]
            out = bytearray()
            for i in range(first, last + 1):
                off = i * self.block
                blk = self._get(i)
                out += blk[max(start - off, 0):min(stop - off, len(blk))]
            return memoryview(out).toreadonly()
        if key < 0:
            key += self._size
        return self._get(key // self.block)[key % self.block]
