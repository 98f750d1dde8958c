"""HashingSink: the digest of exactly the bytes written, each source byte read once."""

from __future__ import annotations

import hashlib

from onemodel.storage import BytesSink, MemorySource
from onemodel.storage.hashing import HashingSink


def test_the_digest_is_of_the_bytes_written():
    data = bytes(range(256)) * 4096  # 1 MiB
    reads = []

    class Counted(MemorySource):
        def read(self, offset, length):
            reads.append(length)
            return super().read(offset, length)

    inner = BytesSink()
    sink = HashingSink(inner, hashlib.sha1())
    sink.write(b"head")
    sink.write_zeros(3)
    sink.copy_from(Counted(data), 10, len(data) - 20)
    assert sink.tell() == 4 + 3 + len(data) - 20
    sink.commit()
    want = b"head" + bytes(3) + data[10:-10]
    assert inner.getvalue() == want and sink.hasher.hexdigest() == hashlib.sha1(want).hexdigest()
    assert sum(reads) == len(data) - 20
