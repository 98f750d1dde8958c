"""storage.blob.Blob: the one byte-range type of a tensor's bytes, and how the IR knows it."""

import pytest

from onemodel.errors import IoError, MalformedError
from onemodel.ir.record import buffer_nbytes, buffer_view, is_blob
from onemodel.storage.base import MemorySource, Source
from onemodel.storage.blob import Blob, prefetch


class _Counting(MemorySource):
    def __init__(self, data):
        super().__init__(data)
        self.reads = 0

    def read(self, offset, length):
        self.reads += 1
        return super().read(offset, length)


class _Remote(Source):
    """A source with no local view (``whole()`` is None): every read is a request."""

    def __init__(self, data):
        self._data = bytes(data)
        self.size = len(self._data)
        self.name = "remote://x"
        self.reads = 0

    def read(self, offset, length):
        self._check_range(offset, length)
        self.reads += 1
        return memoryview(self._data)[offset:offset + length]


def test_a_blob_of_a_remote_source_is_read_once_and_kept():
    src = _Remote(bytes(range(100)))
    b = Blob(src, 10, 5)
    assert not b.loaded and not b.at_hand and src.reads == 0 and len(b) == 5
    assert bytes(b.view()) == bytes(range(10, 15))
    assert bytes(b.view()) == bytes(range(10, 15)) and src.reads == 1 and b.loaded and b.at_hand


def test_a_blob_of_a_local_source_is_a_view_of_it_kept_by_nobody():
    src = _Counting(bytes(range(100)))
    b = Blob(src, 10, 5)
    assert b.at_hand and bytes(b) == bytes(range(10, 15))
    v = b.view()
    assert v.obj is src.whole().obj and v.readonly
    assert not b.loaded  # nothing held: closing the source's map is not kept from
    src.close()
    with pytest.raises(IoError, match="its model was closed"):
        b.view()


def test_part_is_the_blob_of_a_sub_range_and_shares_fetched_bytes():
    src = _Remote(bytes(range(100)))
    b = Blob(src, 10, 20)
    assert b.part(5, 3) == Blob(src, 15, 3) and not b.part(5, 3).loaded
    b.view()
    p = b.part(5, 3)
    assert p.loaded and bytes(p.view()) == bytes([15, 16, 17]) and src.reads == 1


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


def test_the_ir_knows_a_blob_by_its_source_without_importing_storage():
    src = _Remote(b"abcdef")
    b = Blob(src, 1, 4)
    assert is_blob(b)
    assert buffer_nbytes(b) == 4 and not b.loaded and src.reads == 0  # nbytes without fetching
    assert bytes(buffer_view(b)) == b"bcde"
    for plain in (memoryview(b"ab"), b"ab", bytearray(b"ab")):
        assert not is_blob(plain) and bytes(buffer_view(plain)) == b"ab"
    np = pytest.importorskip("numpy")
    assert not is_blob(np.zeros(3))   # has view and nbytes, not source
    assert buffer_nbytes(np.zeros(3)) == 24


def test_prefetch_fills_blobs_in_one_fetch_per_source():
    calls = []

    class Src(MemorySource):
        def fetch_many(self, ranges):
            calls.append(list(ranges))
            return [self.read(o, n) for o, n in ranges]

    class RemoteSrc(_Remote):
        def fetch_many(self, ranges):
            calls.append(list(ranges))
            return [self.read(o, n) for o, n in ranges]

    src = RemoteSrc(bytes(range(200)))
    local = Src(bytes(range(200)))
    blobs = [Blob(src, 100, 4), Blob(src, 0, 4), b"plain", Blob(local, 8, 4)]
    prefetch(blobs)
    assert calls == [[(0, 4), (100, 4)]]  # a local source has nothing to fetch
    assert blobs[0].loaded and bytes(blobs[1].view()) == bytes(range(4))
    assert src.reads == 2 and not blobs[3].loaded


def test_write_blob_copies_a_blob_from_its_source_and_writes_a_fetched_one():
    from onemodel.storage.base import BytesSink

    class Recording(BytesSink):
        def __init__(self):
            super().__init__()
            self.copies = []

        def copy_from(self, source, offset, length):
            self.copies.append((source, offset, length))
            super().copy_from(source, offset, length)

    src = _Remote(bytes(range(64)))
    local = _Counting(bytes(range(64)))
    sink = Recording()
    sink.write_blob(Blob(src, 4, 8))
    fetched = Blob(src, 40, 4)
    fetched.view()
    reads = src.reads
    sink.write_blob(fetched)
    viewed = Blob(local, 20, 4)
    viewed.view()
    sink.write_blob(viewed)
    sink.commit()
    assert sink.copies == [(src, 4, 8), (local, 20, 4)]  # copied when not fetched
    assert src.reads == reads                     # a fetched blob is not read again
    assert sink.getvalue() == bytes(range(4, 12)) + bytes(range(40, 44)) + bytes(range(20, 24))
