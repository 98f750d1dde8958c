"""LocalSink.copy_from from a mapped LocalSource gives exact bytes whatever the alignment of the
source offset and of the write position (page-congruent or not, before and after other writes)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from onemodel.storage import LocalSink, LocalSource


@pytest.fixture
def big(tmp_path):
    data = np.random.default_rng(5).integers(0, 256, (5 << 20) + 123, dtype=np.uint8).tobytes()
    path = tmp_path / "src.bin"
    path.write_bytes(data)
    src = LocalSource(str(path))
    assert src.mapped
    yield src, data
    src.close()


@pytest.mark.parametrize("head, offset", [
    (0, 0), (100, 100), (0, 4096 * 3), (1000, 0), (0, 777), (4095, 1), (5, 64),
], ids=lambda v: str(v))
def test_copy_from_a_mapped_file_is_exact(tmp_path, big, head, offset):
    src, data = big
    length = len(data) - offset - 50
    out = tmp_path / "out.bin"
    sink = LocalSink(str(out))
    sink.write(b"h" * head)
    sink.copy_from(src, offset, length)
    sink.write(b"tail")
    sink.copy_from(src, 3, 1 << 20)
    assert sink.tell() == head + length + 4 + (1 << 20)
    sink.commit()
    assert out.read_bytes() == (b"h" * head + data[offset:offset + length] + b"tail"
                                + data[3:3 + (1 << 20)])


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_a_file_read_into_memory_holds_no_descriptor_and_still_copies(tmp_path, big):
    """A file under the mapping threshold is read whole and its descriptor closed at once;
    copy_from then reads it from memory (no fileno), with the same bytes."""
    _, data = big
    path = tmp_path / "src.bin"
    before = _open_fds()
    sources = [LocalSource(str(path), mmap_threshold=len(data) + 1) for _ in range(20)]
    assert _open_fds() == before  # twenty files read, no descriptor kept
    src = sources[0]
    assert not src.mapped and src.fileno() is None and bytes(src.whole()) == data
    sink = LocalSink(str(tmp_path / "out.bin"))
    sink.write(b"h" * 5)
    sink.copy_from(src, 7, (2 << 20) + 9)  # over 1 MiB: the fast path would need fileno
    sink.commit()
    assert (tmp_path / "out.bin").read_bytes() == b"h" * 5 + data[7:7 + (2 << 20) + 9]
    for s in sources:
        s.close()
    mapped = LocalSource(str(path))
    assert mapped.mapped and isinstance(mapped.fileno(), int)
    mapped.close()
    assert mapped.fileno() is None


def test_a_file_that_shrinks_while_read_closes_its_descriptor(tmp_path, monkeypatch):
    from onemodel.errors import IoError
    from onemodel.storage import local

    path = tmp_path / "small.bin"
    path.write_bytes(b"x" * 100)
    closed = []
    real_close = os.close
    monkeypatch.setattr(local.os, "read", lambda fd, n: b"")  # the file ends early
    monkeypatch.setattr(local.os, "close", lambda fd: (closed.append(fd), real_close(fd)))
    with pytest.raises(IoError, match="shrank"):
        LocalSource(str(path))
    assert len(closed) == 1


def test_reserve_allocates_up_front_and_copies_stay_exact(tmp_path, big):
    """After reserve() the file is already long; writes and copies still land at the written
    position (not at the end of the reservation) and commit cuts the file to what was written."""
    src, data = big
    out = tmp_path / "out.bin"
    sink = LocalSink(str(out))
    sink.reserve(len(data) + (8 << 20))  # more than will be written
    assert os.fstat(sink._f.fileno()).st_size == len(data) + (8 << 20)
    sink.write(b"head")
    sink.copy_from(src, 11, (2 << 20) + 5)  # preadv path (4 and 11 not page-congruent)
    sink.write(b"mid")
    sink.copy_from(src, 4096 * 2, 1 << 20)  # position 4 + 2 MiB + 8: buffered path again
    sink.commit()
    want = b"head" + data[11:11 + (2 << 20) + 5] + b"mid" + data[8192:8192 + (1 << 20)]
    assert out.read_bytes() == want


def test_reserve_on_a_full_disk_fails_before_writing_and_leaves_nothing(tmp_path, monkeypatch):
    import errno

    from onemodel.errors import IoError

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    sink = LocalSink(str(tmp_path / "model.onemodel"))
    with pytest.raises(IoError, match="No space left") as info:
        sink.reserve(1 << 30)
    assert "model.onemodel" in str(info.value)
    assert os.listdir(tmp_path) == []  # the temporary file is gone, no destination appeared


def test_reserve_is_only_a_hint_where_the_file_system_refuses_it(tmp_path, monkeypatch):
    import errno

    def unsupported(fd, offset, length):
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr(os, "posix_fallocate", unsupported)
    out = tmp_path / "out.bin"
    sink = LocalSink(str(out))
    sink.reserve(1 << 20)
    sink.write(b"abc")
    sink.commit()
    assert out.read_bytes() == b"abc"


def _splice_failing(where: str, real=os.splice):
    """An os.splice that refuses (EINVAL, as a file system without splice does) on the given
    side: "source" (file into the pipe) or "destination" (pipe into the file)."""
    import errno

    def fake(src, dst, count, offset_src=None, offset_dst=None, flags=0):
        if (where == "source") == (offset_src is not None):
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(src, dst, count, offset_src=offset_src)
    return fake


@pytest.mark.parametrize("mode", ["splice", "no splice", "source refuses", "destination refuses"])
def test_every_copy_path_gives_exact_bytes(tmp_path, big, monkeypatch, mode):
    """Non-congruent offsets go through splice; where splice is missing or a file system refuses
    it on either side, the copy continues through memory with the same bytes (and a refusal
    on the destination side after the pipe was filled loses nothing)."""
    src, data = big
    calls = []
    if mode == "no splice":
        monkeypatch.delattr(os, "splice")
    else:
        inner = os.splice if mode == "splice" else _splice_failing(mode.split()[0])

        def spy(*args, **kwargs):
            calls.append(args[2])
            return inner(*args, **kwargs)
        monkeypatch.setattr(os, "splice", spy)
    out = tmp_path / "out.bin"
    sink = LocalSink(str(out))
    sink.write(b"xyz")
    sink.copy_from(src, 10, (3 << 20) + 7)
    sink.write(b"!")
    sink.copy_from(src, 5, 1 << 20)
    sink.commit()
    assert sink._pipe is None  # commit closed it
    assert (len(calls) > 8) if mode == "splice" else (mode == "no splice" or calls)
    assert out.read_bytes() == (b"xyz" + data[10:10 + (3 << 20) + 7] + b"!"
                                + data[5:5 + (1 << 20)])
