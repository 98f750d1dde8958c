"""storage.blob.Blob: the one byte-range type of a tensor's bytes, and how the IR knows it."""

import pytest

from onemodel.errors import MalformedError
from onemodel.ir.record import LazyBuffer, buffer_nbytes, buffer_view
from onemodel.storage.base import MemorySource
from onemodel.storage.blob import Blob, prefetch


class _Counting(MemorySource):
    def __init__(self, data):
        super().__init__(data)
        self.reads = 0

    def read(self, offset, length):
        self.reads += 1
        return super().read(offset, length)


def test_a_blob_is_read_once_and_kept():
    src = _Counting(bytes(range(100)))
    b = Blob(src, 10, 5)
    assert not b.loaded and src.reads == 0 and len(b) == 5
    assert bytes(b.view()) == bytes(range(10, 15))
    assert bytes(b.view()) == bytes(range(10, 15)) and src.reads == 1 and b.loaded


def test_a_blob_is_equal_by_source_identity_offset_and_nbytes_not_by_fetching():
    src, other = MemorySource(b"x" * 64), MemorySource(b"x" * 64)
    a, b = Blob(src, 8, 16), Blob(src, 8, 16)
    a.view()
    assert a == b and hash(a) == hash(b)
    assert a != Blob(other, 8, 16) and a != Blob(src, 8, 15) and a != Blob(src, 9, 16)
    assert len({a, b, Blob(src, 0, 16)}) == 2


def test_a_blob_is_immutable():
    b = Blob(MemorySource(b"abcd"), 0, 4)
    with pytest.raises(AttributeError):
        b.offset = 1


def test_read_is_a_range_checked_against_the_blob():
    b = Blob(MemorySource(bytes(range(50))), 20, 10)
    assert bytes(b.read(2, 3)) == bytes([22, 23, 24])
    assert bytes(b.read()) == bytes(range(20, 30))
    with pytest.raises(MalformedError):
        b.read(8, 3)
    with pytest.raises(MalformedError):
        b.read(-1, 2)


def test_a_blob_past_the_end_of_its_source_is_malformed_on_view():
    with pytest.raises(MalformedError):
        Blob(MemorySource(b"abcd"), 2, 10).view()


def test_the_ir_knows_a_blob_as_a_lazy_buffer_without_importing_storage():
    b = Blob(MemorySource(b"abcdef"), 1, 4)
    assert isinstance(b, LazyBuffer)
    assert buffer_nbytes(b) == 4 and not b.loaded   # nbytes without fetching
    assert bytes(buffer_view(b)) == b"bcde"
    assert not isinstance(memoryview(b"ab"), LazyBuffer) and not isinstance(b"ab", LazyBuffer)
    np = pytest.importorskip("numpy")
    assert not isinstance(np.zeros(3), LazyBuffer)   # has view and nbytes, not source/offset


def test_prefetch_fills_blobs_in_one_fetch_per_source():
    calls = []

    class Src(MemorySource):
        def fetch_many(self, ranges):
            calls.append(list(ranges))
            return [self.read(o, n) for o, n in ranges]

    src = Src(bytes(range(200)))
    blobs = [Blob(src, 100, 4), Blob(src, 0, 4), b"plain"]
    prefetch(blobs)
    assert calls == [[(0, 4), (100, 4)]]
    assert blobs[0].loaded and bytes(blobs[1].view()) == bytes(range(4))


def test_write_blob_copies_an_unfetched_blob_from_its_source_and_writes_a_fetched_one():
    from onemodel.storage.base import BytesSink

    class Recording(BytesSink):
        def __init__(self):
            super().__init__()
            self.copies = []

        def copy_from(self, source, offset, length):
            self.copies.append((source, offset, length))
            super().copy_from(source, offset, length)

    src = _Counting(bytes(range(64)))
    sink = Recording()
    sink.write_blob(Blob(src, 4, 8))
    fetched = Blob(src, 40, 4)
    fetched.view()
    reads = src.reads
    sink.write_blob(fetched)
    sink.commit()
    assert sink.copies == [(src, 4, 8)]          # file to file when not yet fetched
    assert src.reads == reads                     # a fetched blob is not read again
    assert sink.getvalue() == bytes(range(4, 12)) + bytes(range(40, 44))
