"""BlockView: a remote file read through a block cache, slices across blocks exact."""

from __future__ import annotations

from onemodel.storage import MemorySource
from onemodel.storage.base import BlockView


def test_slices_within_and_across_blocks():
    data = bytes(range(256)) * 5
    reads = []

    class Counted(MemorySource):
        def read(self, offset, length):
            reads.append((offset, length))
            return super().read(offset, length)

    view = BlockView(Counted(data), block_size=100)
    assert len(view) == len(data) and view[5] == data[5] and view[-1] == data[-1]
    assert bytes(view[10:20]) == data[10:20]
    across = view[150:420]
    assert bytes(across) == data[150:420] and across.readonly
    assert bytes(view[1270:5000]) == data[1270:] and bytes(view[30:30]) == b""
    # each block fetched once, whatever the number of slices touching it
    assert sorted(reads) == [(0, 100), (100, 100), (200, 100), (300, 100), (400, 100),
                             (1200, 80)]
