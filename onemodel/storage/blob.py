"""The byte range of a source that holds a tensor's bytes: :class:`Blob`.

A Blob names ``nbytes`` bytes at ``offset`` of a :class:`~onemodel.storage.base.Source`. Readers
put one wherever a tensor's bytes lie in a source: ``raw_data`` of an ONNX file read from a file
or a byte source, an external data file (``Tensor.external``), a OneModel data region, a remote
file. :meth:`view` gives the bytes: a zero-copy slice of a local or in-memory source (taken anew
each time, so nothing keeps the map of a closed model alive), or one range read of a remote
source (kept, so nothing is fetched twice); :func:`prefetch` fills many remote Blobs with
coalesced reads. Writers hand a Blob to :meth:`~onemodel.storage.base.Sink.write_blob`, which
copies it from its source (file to file where it can).

A value that is not a Blob (bytes, a memoryview, an array a user assigned) is bytes in memory:
replacing ``raw_data`` replaces the Blob, so "copy from the source or write the buffer" is
``isinstance(value, Blob)`` and nothing else.

A Blob may carry the content digest recorded for its bytes (:meth:`expect`, set by the OneModel
reader from a manifest written with ``digests=True``, docs/format-extension.md section 9): the
bytes are then checked on first use, once: the first :meth:`view` or :meth:`read` of a mapped or
in-memory source hashes the range, and every fetch of a remote one (one range read, or
:func:`prefetch`) is checked before its bytes are handed out. A mismatch raises IoError naming
the tensor and the byte range.
"""

from __future__ import annotations


class Blob:
    """``nbytes`` bytes at ``offset`` of ``source``: an immutable value, fetched on first use.

    Attributes:
        source: the :class:`~onemodel.storage.base.Source` the bytes lie in.
        offset: where they start in it, in bytes.
        nbytes: how many there are (known without fetching).

    Two Blobs are equal when they name the same range of the same source object (source
    identity, offset, nbytes), whether or not either was fetched. Nothing is read until
    :meth:`view` is called; the bytes of a remote source (one without ``whole()``) are then
    kept, so nothing is fetched twice. ``bytes(blob)`` is a copy of the bytes.
    """

    __slots__ = ("source", "offset", "nbytes", "_data")
    #: a recorded digest (:class:`CheckedBlob`); the C decoder builds plain Blobs slot by slot
    _check = None

    def __init__(self, source, offset: int, nbytes: int):
        set_ = object.__setattr__
        set_(self, "source", source)
        set_(self, "offset", offset)
        set_(self, "nbytes", nbytes)
        set_(self, "_data", None)

    def expect(self, digest: bytes, header: bytes, name: str, path: str) -> "CheckedBlob":
        """The same range with the digest its bytes must have: SHA-256(``header`` + the bytes)
        == ``digest`` (the tensor digest of docs/content-digest.md, ``header`` its prefix,
        element type and dims). ``name`` and ``path`` (tensor name, manifest path) name the
        tensor in the error. The check runs on first use (see the module doc)."""
        b = CheckedBlob(self.source, self.offset, self.nbytes)
        object.__setattr__(b, "_data", self._data)
        object.__setattr__(b, "_check", [digest, header, name, path, False])
        return b

    @property
    def digest(self) -> bytes | None:
        """The 32-octet digest recorded for these bytes (:meth:`expect`), or None."""
        c = self._check
        return c[0] if c is not None else None

    @property
    def digest_path(self) -> str | None:
        """Where the digest was recorded (the tensor's manifest path), or None."""
        c = self._check
        return c[3] if c is not None else None

    def _verify(self, data) -> None:
        """Check ``data`` (the whole range) against the recorded digest, once. IoError on a
        mismatch, naming the tensor, its manifest path and the byte range of the source."""
        c = self._check
        if c is None or c[4]:
            return
        import hashlib

        h = hashlib.sha256(c[1])
        h.update(data)
        self._verify_digest(h)

    def _verify_digest(self, h) -> None:
        c = self._check
        if h.digest() != c[0]:
            from ..errors import IoError

            name = getattr(self.source, "name", None)
            raise IoError(f"tensor {c[2]!r}: bytes [{self.offset}, {self.offset + self.nbytes}) "
                          f"do not match its recorded digest sha256:{c[0].hex()} (they hash to "
                          f"sha256:{h.hexdigest()})", path=c[3], offset=self.offset, source=name)
        c[4] = True

    def __setattr__(self, name, value):
        raise AttributeError(f"a Blob is immutable: cannot set {name!r}")

    def view(self) -> memoryview:
        """The bytes as a read-only memoryview of exactly ``nbytes`` bytes: a zero-copy slice of
        a mapped or in-memory source (not kept: a closed model's map is not held), one range read
        (kept for later calls) of a remote one. Raises MalformedError when the range passes the
        end of the source, IoError when it cannot be read (its source was closed)."""
        data = self._data
        if data is None:
            src = self.source
            data = src.read(self.offset, self.nbytes)
            if src.whole() is None:
                self._verify(data)  # a fetched range is checked before it is kept
                object.__setattr__(self, "_data", data)
        if self._check is not None:
            self._verify(data)
        return data

    def part(self, offset: int, nbytes: int) -> "Blob":
        """The Blob of ``nbytes`` bytes at ``offset`` within this one (fetched bytes shared).
        ``0 <= offset``, ``offset + nbytes <= self.nbytes`` (the caller's ranges). The bytes of
        a Blob with a recorded digest are checked first (:meth:`view`)."""
        b = Blob(self.source, self.offset + offset, nbytes)
        if self._check is not None:
            self.view()
        if self._data is not None:
            object.__setattr__(b, "_data", self._data[offset:offset + nbytes])
        return b

    def read(self, offset: int = 0, length: int | None = None) -> memoryview:
        """``length`` bytes (all to the end when None) at ``offset`` within the Blob, read from the
        source (from the kept bytes when already fetched). Raises MalformedError for a range
        outside the Blob or the source, IoError when it cannot be read."""
        from ..errors import MalformedError

        if length is None:
            length = self.nbytes - offset
        if offset < 0 or length < 0 or offset + length > self.nbytes:
            raise MalformedError(f"range of {length} bytes at {offset} is outside a blob of "
                                 f"{self.nbytes} bytes", source=getattr(self.source, "name", None))
        if self._data is not None or self._check is not None:
            return self.view()[offset:offset + length]  # a recorded digest: checked whole
        return self.source.read(self.offset + offset, length)

    def confirm(self, digest: bytes) -> None:
        """The caller hashed these bytes itself (the tensor digest of the same header and
        bytes, ``digest``): check it against the recorded one (:meth:`expect`) instead of
        hashing again. IoError on a mismatch, as :meth:`view`; nothing without a recorded
        digest."""
        c = self._check
        if c is not None and not c[4]:
            self._verify_digest(_Done(digest))

    def chunks(self, size: int = 8 << 20, *, check: bool = True):
        """The bytes in order, as memoryviews of at most ``size`` bytes each, without holding
        more than one chunk: fetched bytes are sliced; a mapped local file is read with
        ``os.preadv`` into one reused buffer (so the pages of a large file are not mapped into
        the process: memory stays flat); an in-memory source is sliced; a remote one is read
        one range per chunk (not kept). A chunk is valid until the next one is asked for.
        With a recorded digest not yet checked (:meth:`expect`) and ``check``, the chunks are
        hashed as they pass and a mismatch raises IoError after the last one (before the caller
        is done); a caller that hashes them itself passes ``check=False`` and :meth:`confirm`.
        Raises IoError when the source cannot be read, MalformedError for a range past its
        end."""
        c = self._check
        if c is None or c[4] or not check:
            yield from self._chunks(size)
            return
        import hashlib

        h = hashlib.sha256(c[1])
        for chunk in self._chunks(size):
            h.update(chunk)
            yield chunk
        self._verify_digest(h)

    def _chunks(self, size: int):
        import os

        from ..errors import IoError, MalformedError

        if self._data is not None or self.nbytes == 0:
            data = self._data if self._data is not None else memoryview(b"")
            for start in range(0, self.nbytes, size):
                yield data[start:start + size]
            return
        src = self.source
        fileno = getattr(src, "fileno", None)
        fd = fileno() if fileno is not None else None
        if fd is None or not hasattr(os, "preadv"):
            for start in range(0, self.nbytes, size):
                yield src.read(self.offset + start, min(size, self.nbytes - start))
            return
        buf = bytearray(min(size, self.nbytes))
        view = memoryview(buf)
        pos, end = self.offset, self.offset + self.nbytes
        while pos < end:
            want = min(len(buf), end - pos)
            try:
                got = os.preadv(fd, [view[:want]], pos)
            except OSError as e:
                raise IoError(f"cannot read {want} bytes at {pos}: {e.strerror}",
                              source=getattr(src, "name", None)) from None
            if got <= 0:
                raise MalformedError(f"range of {self.nbytes} bytes at {self.offset} passes the "
                                     f"end of the file", source=getattr(src, "name", None))
            yield view[:got]
            pos += got

    @property
    def loaded(self) -> bool:
        """True once the bytes of a remote source were fetched and kept (never for a local or
        in-memory source, whose bytes are always at hand)."""
        return self._data is not None

    @property
    def at_hand(self) -> bool:
        """True when :meth:`view` reads nothing over a network: a local or in-memory source
        (a slice of its bytes) or bytes already fetched."""
        return self._data is not None or self.source.whole() is not None

    def __len__(self) -> int:
        return self.nbytes

    def __bytes__(self) -> bytes:
        return bytes(self.view())

    def __eq__(self, other) -> bool:
        if not isinstance(other, Blob):
            return NotImplemented
        return (self.source is other.source and self.offset == other.offset
                and self.nbytes == other.nbytes)

    def __hash__(self) -> int:
        return hash((id(self.source), self.offset, self.nbytes))

    def __repr__(self) -> str:
        name = getattr(self.source, "name", "?")
        return f"Blob({name!r}, offset={self.offset}, nbytes={self.nbytes})"


class _Done:
    """A finished hash: its digest, as ``hashlib``'s ``digest()``/``hexdigest()`` give it."""

    def __init__(self, d: bytes):
        self.d = d

    def digest(self) -> bytes:
        return self.d

    def hexdigest(self) -> str:
        return self.d.hex()


class CheckedBlob(Blob):
    """A :class:`Blob` with a recorded digest (:meth:`Blob.expect`), checked on first use."""

    __slots__ = ("_check",)


def prefetch(buffers) -> None:
    """Read every not-yet-loaded :class:`Blob` of a remote source in ``buffers``, per source in
    one ``fetch_many`` call (remote sources coalesce neighbouring ranges into few requests).
    Other values, and Blobs of local or in-memory sources (nothing to fetch), are skipped."""
    by_source: dict[int, list[Blob]] = {}
    for b in buffers:
        if isinstance(b, Blob) and b._data is None and b.source.whole() is None:
            by_source.setdefault(id(b.source), []).append(b)
    for group in by_source.values():
        group.sort(key=lambda b: b.offset)
        views = group[0].source.fetch_many([(b.offset, b.nbytes) for b in group])
        for b, v in zip(group, views):
            object.__setattr__(b, "_data", v)


__all__ = ["Blob", "CheckedBlob", "prefetch"]
