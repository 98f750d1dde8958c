"""A sink that computes a digest of the bytes as they pass (the SHA-1 ``checksum`` of an ONNX
external data file, Part 1 Clause 13.3), so nothing is read twice to hash it."""

from __future__ import annotations

from .base import Sink, Source


class HashingSink(Sink):
    """Passes every byte to ``inner`` and to ``hasher`` (a :mod:`hashlib` object), in order.

    ``copy_from`` reads the source in bounded chunks (:meth:`Sink.copy_from`) and writes them
    through this sink, so each byte is read once, hashed and written: the inner sink's
    file-to-file fast path is not used, since its bytes would not pass through memory.
    ``tell()``, ``commit()`` and ``abort()`` are the inner sink's. Raises what ``inner`` raises.
    """

    def __init__(self, inner: Sink, hasher):
        self.inner = inner
        self.hasher = hasher
        self.name = inner.name

    def write(self, data) -> None:
        self.inner.write(data)
        self.hasher.update(data)

    def tell(self) -> int:
        return self.inner.tell()

    def skip(self, count: int) -> None:
        """A gap: its zeros are hashed (the digest is of the whole file) and the inner sink
        leaves a hole where it can."""
        self.inner.skip(count)  # first: a sink that refuses the gap does so before the hashing
        zeros = bytes(min(count, 1 << 20))
        left = count
        while left > 0:
            n = min(left, len(zeros))
            self.hasher.update(memoryview(zeros)[:n])
            left -= n

    def reserve(self, nbytes: int, ranges=None) -> None:
        self.inner.reserve(nbytes, ranges)

    def copy_from(self, source: Source, offset: int, length: int) -> None:
        Sink.copy_from(self, source, offset, length)

    def commit(self) -> None:
        self.inner.commit()

    def abort(self) -> None:
        self.inner.abort()
