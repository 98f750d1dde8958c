"""Clause 15.3: external data outside the model directory is refused, and not one byte of a file
outside it is read.

Every hostile model points at a sentinel file outside the model directory whose size is exactly
what the tensor needs, so only the security checks stand between the reader and its bytes. Each
test asserts that the reader never opened the sentinel (every descriptor the process opens during
the read is checked against the sentinel's inode), that its access time did not move (where the
file system records access times), and that its content appears nowhere in the error.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from external_models import external_tensor, model_with, write_model
from servers.fifo import run_guarded

from onemodel.errors import InvalidModelError, OneModelError
from onemodel.formats.onnx import external_sinks, external_walk, read
from onemodel.ir import iter_tensors
from onemodel.storage import open_source

linux = pytest.mark.skipif(not sys.platform.startswith("linux"),
                           reason="symbolic links, hard links and FIFOs as on Linux")

SECRET = b"SENTINEL-SECRET!" * 4  # 64 bytes: 16 float32 elements


class Sentinel:
    """A file outside the model directory, watched: opened (by inode), accessed (atime)."""

    def __init__(self, root, monkeypatch):
        self.outside = root / "outside"
        self.outside.mkdir()
        self.path = self.outside / "secret.bin"
        self.path.write_bytes(SECRET)
        st = os.stat(self.path)
        self.ino = (st.st_dev, st.st_ino)
        old = st.st_mtime - 3600
        os.utime(self.path, (old, st.st_mtime))
        self.atime = os.stat(self.path).st_atime
        self.atime_works = _atime_recorded(root)
        self.opened: list = []
        real_open = os.open

        def watching_open(*args, **kwargs):
            fd = real_open(*args, **kwargs)
            st = os.fstat(fd)
            self.opened.append((st.st_dev, st.st_ino))
            return fd
        monkeypatch.setattr(os, "open", watching_open)
        self.model_dir = root / "model"
        self.model_dir.mkdir()

    def assert_untouched(self, error: Exception | None = None) -> None:
        assert self.ino not in self.opened, "the sentinel was opened"
        if self.atime_works:
            assert os.stat(self.path).st_atime == self.atime, "the sentinel was read"
        if error is not None:
            assert b"SENTINEL" not in str(error).encode()


def _atime_recorded(root) -> bool:
    probe = root / "probe"
    probe.write_bytes(b"x")
    st = os.stat(probe)
    os.utime(probe, (st.st_mtime - 3600, st.st_mtime))
    before = os.stat(probe).st_atime
    with open(probe, "rb") as f:
        f.read()
    return os.stat(probe).st_atime != before


@pytest.fixture
def sentinel(tmp_path, monkeypatch):
    return Sentinel(tmp_path, monkeypatch)


def _hostile(sentinel, location, where="initializer", name="w"):
    t = external_tensor(name, [16], [("location", location), ("offset", "0"), ("length", "64")])
    return write_model(model_with(t, where), sentinel.model_dir / "m.onnx")


def _refused(path, words, **kw) -> OneModelError:
    with pytest.raises(InvalidModelError) as e:
        read(open_source(str(path)), **kw)
    assert e.value.kind == "InvalidModel"
    assert words in str(e.value), str(e.value)
    return e.value


@pytest.mark.parametrize("location_of, words", [
    (lambda s: "../outside/secret.bin", "parent-directory component"),
    (lambda s: "a/../../outside/secret.bin", "parent-directory component"),
    (lambda s: str(s.path), "absolute path"),
    (lambda s: "C:\\outside\\secret.bin", "Windows drive path"),
    (lambda s: "C:/outside/secret.bin", "Windows drive path"),
    (lambda s: "..\\outside\\secret.bin", "backslash"),
], ids=["dotdot", "a-dotdot-dotdot", "absolute", "drive-backslash", "drive-slash", "backslash"])
def test_paths_leaving_the_directory_are_refused(sentinel, location_of, words):
    location = location_of(sentinel)
    path = _hostile(sentinel, location)
    err = _refused(path, words)
    assert "'w'" in str(err) and f"location {location!r}" in str(err)
    assert err.path == "ModelProto.graph.initializer[0]"
    sentinel.assert_untouched(err)


@linux
def test_symbolic_link_as_the_file_is_refused(sentinel):
    os.symlink(sentinel.path, sentinel.model_dir / "link.bin")
    err = _refused(_hostile(sentinel, "link.bin"), "'link.bin' is a symbolic link")
    assert "'w'" in str(err)
    sentinel.assert_untouched(err)


@linux
def test_symbolic_link_to_a_file_inside_is_refused_too(sentinel):
    (sentinel.model_dir / "real.bin").write_bytes(bytes(64))
    os.symlink("real.bin", sentinel.model_dir / "link.bin")
    _refused(_hostile(sentinel, "link.bin"), "is a symbolic link")


@linux
def test_symbolic_link_as_a_middle_directory_is_refused(sentinel):
    (sentinel.model_dir / "a").mkdir()
    os.symlink(sentinel.outside, sentinel.model_dir / "a" / "sub")
    err = _refused(_hostile(sentinel, "a/sub/secret.bin"), "directory 'a/sub' is a symbolic link")
    sentinel.assert_untouched(err)


@linux
def test_hard_link_to_a_file_outside_is_refused(sentinel):
    os.link(sentinel.path, sentinel.model_dir / "hard.bin")
    err = _refused(_hostile(sentinel, "hard.bin"), "has 2 hard links")
    sentinel.assert_untouched(err)


@linux
def test_fifo_is_refused_without_blocking(sentinel):
    # the guard fails the test (instead of hanging the suite) if a read blocks in open()
    fifo = sentinel.model_dir / "pipe.bin"
    os.mkfifo(fifo)
    run_guarded(lambda: _refused(_hostile(sentinel, "pipe.bin"),
                                 "'pipe.bin' is a FIFO, not a regular file"), fifo)
    # even when resolution outside the directory is allowed, a FIFO is not a data file
    run_guarded(lambda: _refused(_hostile(sentinel, "pipe.bin"), "is a FIFO",
                                 allow_outside=True), fifo)


def test_directory_is_refused(sentinel):
    (sentinel.model_dir / "d.bin").mkdir()
    _refused(_hostile(sentinel, "d.bin"), "'d.bin' is a directory, not a regular file")


def test_file_shorter_than_offset_plus_length_is_refused(sentinel):
    (sentinel.model_dir / "short.bin").write_bytes(bytes(60))
    _refused(_hostile(sentinel, "short.bin"), "60-byte file is shorter than offset 0 + length 64")


@pytest.mark.parametrize("where, path", [
    ("subgraph", "ModelProto.graph.node[0].attribute[0].g.initializer[0]"),
    ("sparse", "ModelProto.graph.sparse_initializer[0].values"),
    ("constant", "ModelProto.graph.node[0].attribute[0].t"),
    ("function", "ModelProto.functions[0].node[0].attribute[0].t"),
])
def test_tensors_pointing_outside_are_refused_wherever_they_sit(sentinel, where, path):
    err = _refused(_hostile(sentinel, "../outside/secret.bin", where, name="deep"),
                   "parent-directory component")
    assert err.path == path and "'deep'" in str(err)
    sentinel.assert_untouched(err)


def test_allow_outside_is_explicit_and_then_reads(sentinel):
    path = _hostile(sentinel, "../outside/secret.bin")
    _refused(path, "parent-directory component")
    with read(open_source(str(path)), allow_outside=True) as model:
        (t,) = model.graph.initializers
        assert t.tobytes() == SECRET
    # the watch works: this time the sentinel was opened and read
    assert sentinel.ino in sentinel.opened
    if sentinel.atime_works:
        assert os.stat(sentinel.path).st_atime != sentinel.atime


# -- a swap between the check and the open --------------------------------------------------------
def _swap_after_lstat(monkeypatch, name: str, swap) -> list:
    """Make ``os.lstat`` of the component ``name`` run ``swap()`` right after it returns: the
    file system changes between the reader's check and its open."""
    real_lstat = os.lstat
    done = []

    def lstat(path, *args, **kwargs):
        st = real_lstat(path, *args, **kwargs)
        if os.fspath(path) == name and not done:
            done.append(True)
            swap()
        return st
    monkeypatch.setattr(os, "lstat", lstat)
    return done


@linux
@pytest.mark.parametrize("walk", ["dir_fd", "by_path"])
def test_file_swapped_for_a_symbolic_link_after_the_check_is_caught(sentinel, monkeypatch,
                                                                      walk):
    data = sentinel.model_dir / "w.bin"
    data.write_bytes(bytes(64))
    path = _hostile(sentinel, "w.bin")
    if walk == "by_path":
        monkeypatch.setattr(external_walk, "DIR_FD_WALK", False)
        name = str(data)
    else:
        name = "w.bin"

    def swap():
        os.unlink(data)
        os.symlink(sentinel.path, data)
    done = _swap_after_lstat(monkeypatch, name, swap)
    err = _refused(path, "'w.bin' is a symbolic link (it changed between the check and the open")
    assert done and os.path.islink(data)
    sentinel.assert_untouched(err)


@linux
def test_file_swapped_for_another_file_after_the_check_is_caught(sentinel, monkeypatch):
    data = sentinel.model_dir / "w.bin"
    data.write_bytes(bytes(64))
    other = sentinel.model_dir / "other.bin"
    other.write_bytes(b"\x01" * 64)
    path = _hostile(sentinel, "w.bin")
    done = _swap_after_lstat(monkeypatch, "w.bin", lambda: os.replace(other, data))
    _refused(path, "'w.bin' changed between the check and the open")
    assert done


@linux
def test_directory_swapped_for_a_symbolic_link_after_the_check_is_caught(sentinel, monkeypatch):
    sub = sentinel.model_dir / "sub"
    sub.mkdir()
    (sub / "secret.bin").write_bytes(bytes(64))
    path = _hostile(sentinel, "sub/secret.bin")

    def swap():
        os.rename(sub, sentinel.model_dir / "moved")
        os.symlink(sentinel.outside, sub)
    done = _swap_after_lstat(monkeypatch, "sub", swap)
    err = _refused(path, "'sub' is not a directory or is a symbolic link (it changed between "
                         "the check and the open")
    assert done
    sentinel.assert_untouched(err)


@linux
def test_walk_without_dir_fd_applies_the_same_checks(sentinel, monkeypatch):
    monkeypatch.setattr(external_walk, "DIR_FD_WALK", False)
    os.symlink(sentinel.path, sentinel.model_dir / "link.bin")
    (sentinel.model_dir / "a").mkdir()
    os.symlink(sentinel.outside, sentinel.model_dir / "a" / "sub")
    os.link(sentinel.path, sentinel.model_dir / "hard.bin")
    _refused(_hostile(sentinel, "link.bin"), "is a symbolic link")
    _refused(_hostile(sentinel, "a/sub/secret.bin"), "directory 'a/sub' is a symbolic link")
    _refused(_hostile(sentinel, "hard.bin"), "has 2 hard links")
    sentinel.assert_untouched()
    good = sentinel.model_dir / "good.bin"
    good.write_bytes(np.arange(16, dtype=np.float32).tobytes())
    with read(open_source(str(_hostile(sentinel, "good.bin")))) as model:
        assert [t.tobytes() for _, t in iter_tensors(model)] == [good.read_bytes()]


def test_where_a_data_file_is_written_is_decided_once(tmp_path):
    """open_data_sink writes where data_file_target says, confined or (allow_outside) not; an
    empty location or a NUL character is refused by both."""
    out = tmp_path / "out"
    out.mkdir()
    for location, allow in (("sub/w.bin", False), ("../w.bin", True)):
        where = external_sinks.data_file_target(str(out), location, allow_outside=allow)
        sink = external_sinks.open_data_sink(str(out), location, allow_outside=allow)
        sink.write(b"abc")
        sink.commit()
        assert os.path.normpath(where) == os.path.normpath(os.path.join(out, location))
        with open(where, "rb") as f:
            assert f.read() == b"abc"
    for bad in ("", "w\x00.bin"):
        for call in (external_sinks.data_file_target, external_sinks.open_data_sink):
            with pytest.raises(InvalidModelError, match="empty or contains a NUL"):
                call(str(out), bad, allow_outside=True)
