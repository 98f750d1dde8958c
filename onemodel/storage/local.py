"""Local files: sources that are memory-mapped (or read, when small) and atomic sinks.

Files of :data:`~onemodel.limits.MMAP_THRESHOLD` bytes or more are mapped read-only, so every
tensor of the file is a zero-copy view of the map (OneModel format section 5); smaller files are
read into memory. Sinks write a temporary file in the destination's directory and rename it over
the destination on commit, so an interrupted write never leaves a file that looks complete.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import signal
import stat
import threading

from ..errors import IoError
from ..limits import MMAP_THRESHOLD
from . import locks
from .base import MemorySource, Sink, Source, io_error

try:  # POSIX only: absent on Windows, where the calls that need it are not made
    import fcntl
except ImportError:  # pragma: no cover - exercised by tests/storage/test_portable.py
    fcntl = None


class LocalSource(MemorySource):
    """A local file, mapped or read whole.

    A file of ``mmap_threshold`` bytes or more is mapped and its descriptor kept open (until
    :meth:`close`) for file-to-file copies (:meth:`LocalSink.copy_from`); a smaller one is read
    into memory and its descriptor closed at once, so thousands of small files (per-tensor
    external data) hold no descriptors. ``fd``: an open descriptor of the file to use instead
    of opening ``path`` (it is owned by the source from then on: closed as above, or on error).

    The path is opened without blocking (``O_NONBLOCK``, cleared once :func:`os.fstat` shows a
    regular file), so a FIFO, socket or device given as a model path is refused at once instead
    of waiting forever in ``open()`` for a writer.

    Raises IoError when the file cannot be opened or read or is not a regular file (naming its
    kind: a FIFO, a socket, a character device ...).
    """

    def __init__(self, path: str, *, mmap_threshold: int = MMAP_THRESHOLD, fd: int | None = None):
        name = os.fspath(path)
        opened_by_path = fd is None
        try:
            if fd is None:
                fd = open_regular(name)
            else:  # e.g. opened by the confined walk of external data, without blocking
                _check_regular(fd, name)
                _clear_nonblock(fd)
            st = os.fstat(fd)
        except OSError as e:
            if fd is not None:
                os.close(fd)
            raise io_error(e, name, "open") from None
        self.stat = st
        #: ``stat`` when the file was opened by ``path`` (so ``path`` named it then), else None
        #: (a descriptor given: a decompressed temporary file, a data file opened by the walk).
        self.path_stat = st if opened_by_path else None
        self._fd = fd
        self._map = None
        size = st.st_size
        try:
            if size >= mmap_threshold and size > 0:
                self._map = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
                data = memoryview(self._map)
            else:
                data = memoryview(_read_all(fd, size, name))
        except OSError as e:
            os.close(fd)
            raise io_error(e, name) from None
        except IoError:
            os.close(fd)
            raise
        if self._map is None:  # read whole: nothing needs the descriptor any more
            self._fd = None
            os.close(fd)
        super().__init__(data, name)
        self.mapped = self._map is not None

    def fileno(self) -> int | None:
        """The open file descriptor of a mapped file (valid until :meth:`close`); ``None`` for a
        file read into memory (its descriptor was closed) or after :meth:`close`."""
        return self._fd

    def close(self) -> None:
        """Release our view, close the descriptor and unmap when no tensor still views the map;
        reads raise IoError from then on."""
        self.closed = True
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        view, self._view = self._view, memoryview(b"")
        try:
            view.release()
        except BufferError:
            pass
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:
                pass  # arrays still view the map; it is unmapped when the last one goes
            self._map = None


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, for messages: ``"a FIFO"``, ``"a socket"``,
    ``"a directory"`` ... (``"a regular file"`` for one)."""
    for test, kind in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return kind
    return "not a regular file"


def refuse_special_file(path: str, *, follow: bool = True) -> None:
    """Raise IoError (``cannot write: it is a FIFO, not a regular file``) when ``path`` exists
    and is not a regular file: a FIFO (whose open for writing waits for a reader), a socket, a
    device, a directory. A symbolic link is taken as what it names with ``follow``, else as
    itself (a link is allowed: renaming over it replaces the link). Nothing when it does not
    exist or cannot be looked at (the write says why)."""
    try:
        mode = (os.stat if follow else os.lstat)(path).st_mode
    except (OSError, ValueError):
        return
    if not (stat.S_ISREG(mode) or (not follow and stat.S_ISLNK(mode))):
        raise IoError(f"cannot write: it is {file_kind(mode)}, not a regular file", source=path)


def _check_regular(fd: int, name: str) -> None:
    """Raise IoError naming the kind of file unless ``fd`` is a regular file; OSError from
    ``fstat`` passes through. ``fd`` is closed whenever this raises."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise IoError(f"cannot open: it is {file_kind(mode)}, not a regular file", source=name)


def open_regular(path: str) -> int:
    """A read-only descriptor of the regular file ``path``, opened without blocking.

    ``O_NONBLOCK`` (and ``O_NOCTTY``) make ``open()`` return at once for a FIFO without a
    writer or a device; ``fstat`` then refuses anything but a regular file before a byte is
    read, and the flag is cleared for the regular file that remains. Raises IoError naming
    the kind of file (``"it is a FIFO, not a regular file"``), OSError when it cannot be opened.
    """
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0) \
        | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno != errno.ENXIO:
            raise
        mode = os.lstat(path).st_mode  # Linux: open() of a socket fails with ENXIO
        if stat.S_ISREG(mode):
            raise
        raise IoError(f"cannot open: it is {file_kind(mode)}, not a regular file",
                      source=path) from None
    _check_regular(fd, path)
    try:
        _clear_nonblock(fd)
    except OSError:
        os.close(fd)
        raise
    return fd


def _clear_nonblock(fd: int) -> None:
    """Clear ``O_NONBLOCK`` on ``fd`` (opened without blocking to check what it is)."""
    if hasattr(fcntl, "F_GETFL") and getattr(os, "O_NONBLOCK", 0):
        fl = fcntl.fcntl(fd, fcntl.F_GETFL)
        if fl & os.O_NONBLOCK:
            fcntl.fcntl(fd, fcntl.F_SETFL, fl & ~os.O_NONBLOCK)


def _read_all(fd: int, size: int, name: str) -> bytes:
    chunks, got = [], 0
    while got < size:
        b = os.read(fd, size - got)
        if not b:
            raise IoError(f"file shrank while being read ({got} of {size} bytes)", source=name)
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def _drain(r: int, out: int, count: int) -> None:
    """Move ``count`` bytes from pipe ``r`` to file ``out`` with read and write."""
    while count:
        data = os.read(r, min(count, 1 << 20))
        if not data:
            raise IoError("a pipe ended early while copying")
        view = memoryview(data)
        while view:
            view = view[os.write(out, view):]
        count -= len(data)


@contextlib.contextmanager
def _signals_held(hold: bool):
    """Hold SIGINT and SIGTERM back (POSIX, main thread) while the body runs: the renames that
    publish a model's files (docs/storage.md "Atomicity") are not cut in the middle by Ctrl-C;
    the signal is delivered when they are done. A no-op when ``hold`` is false or the platform
    cannot block signals."""
    mask = {signal.SIGINT, signal.SIGTERM}
    if not hold or not hasattr(signal, "pthread_sigmask") \
            or threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, mask)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class LocalSink(Sink):
    """An atomic local file sink: a temporary file beside ``path``, renamed over it on commit.

    ``copy_from`` copies from a local source file in the kernel (``copy_file_range``, or
    ``splice`` through one pipe), else through one reused 4 MiB buffer: bounded memory, whatever
    the tensor size; ``reserve`` allocates the file's disk space up front. A destination that
    exists and is not a regular file (a FIFO, a device, a directory) is refused, never replaced.

    ``lock``: hold the destination's writer lock from here to the end of the write, refusing a
    second writer, and remove the dead temporary files in its directory
    (:mod:`onemodel.storage.locks`); data files of a model are written without it, under the
    model file's lock. ``temporary=False``: write the file at ``path`` itself (created, never
    replaced; :meth:`commit` renames nothing, :meth:`abort` removes it), for a name unique to
    the write (a staged data file, docs/storage.md "Atomicity"). Raises IoError.
    """

    #: Bytes at the start of the file held back until :meth:`commit`: the temporary file holds
    #: zeros there while it is written, so a partial file (a write killed before its rename)
    #: never starts like a model (no ``ONEMODEL`` magic, no protobuf field), whatever the rest.
    HELD = 64

    def __init__(self, path: str, *, durable: bool = False, lock: bool = True,
                 temporary: bool = True):
        self.name = os.fspath(path)
        self.temporary = temporary
        self.durable = durable
        # renaming over a FIFO or a device (/dev/null) would replace it with a file
        refuse_special_file(self.name, follow=False)
        directory = os.path.dirname(os.path.abspath(self.name))
        #: Called in :meth:`commit` once the bytes are complete, before the rename (a failure
        #: aborts the write); after the rename; and by :meth:`abort`. A writer of several files
        #: publishes the others here (docs/storage.md "Atomicity").
        self.before_rename: list = []
        self.after_rename: list = []
        self.on_abort: list = []
        self._lock = locks.acquire_writer_lock(self.name) if lock else None
        if lock:
            locks.remove_stale_partials(directory)
        self._f = None
        self._done = False
        try:
            if temporary:
                fd = self._temporary(directory)
            else:  # a name of its own already (a staged data file): written there, no rename
                self._tmp = self.name
                fd = os.open(self.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                             | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
                             | getattr(os, "O_BINARY", 0), 0o600)
        except OSError as e:
            locks.release_writer_lock(self.name, self._lock)
            raise io_error(e, self.name, "create") from None
        self._f = os.fdopen(fd, "wb", buffering=1 << 20)
        self._pos = 0
        self._held = bytearray()
        self._reserved = 0
        self._copy_buffer = None
        self._pipe = None  # (read end, write end, capacity in bytes) of _splice_copy

    def _temporary(self, directory: str) -> int:
        """Create and lock (:func:`.locks.lock_partial`) the temporary file; its descriptor."""
        import tempfile  # (here: reading imports neither it nor random, 1.8 ms)

        for _ in range(16):
            fd, self._tmp = tempfile.mkstemp(prefix="." + os.path.basename(self.name) + ".",
                                             suffix=".partial", dir=directory)
            if locks.lock_partial(fd, self._tmp):
                return fd
            os.close(fd)  # removed by a cleaner before our lock: make another
        raise OSError(errno.EAGAIN, "the temporary file kept being removed")

    def write(self, data) -> None:
        n = len(data) if not isinstance(data, memoryview) else data.nbytes
        try:
            if self._pos < self.HELD and n:
                view = memoryview(data).cast("B")
                k = min(self.HELD - self._pos, n)
                self._held += view[:k]
                self._f.write(bytes(k))
                data = view[k:]
            self._f.write(data)
        except OSError as e:
            self.abort()
            raise io_error(e, self.name, "write") from None
        self._pos += n

    def tell(self) -> int:
        return self._pos

    #: Gaps of :meth:`skip` shorter than this are written as zeros (a hole is made of whole
    #: file system blocks, and seeking costs a flush of the write buffer).
    HOLE_MIN = 64 << 10

    def skip(self, count: int) -> None:
        """Append ``count`` zero bytes as a hole: the position moves on, nothing is written
        and no disk is allocated for them (on file systems with sparse files; others fill the
        gap with zeros themselves). Gaps under :attr:`HOLE_MIN` bytes are written."""
        if count < self.HOLE_MIN:
            return self.write_zeros(count)
        try:
            self._f.flush()
            self._f.seek(self._pos + count)
        except OSError as e:
            self.abort()
            raise io_error(e, self.name, "write") from None
        self._pos += count

    def reserve(self, nbytes: int, ranges: list[tuple[int, int]] | None = None) -> None:
        """Allocate disk for the temporary file (``posix_fallocate``): for ``[0, nbytes)``, or
        for only the ``(start, end)`` ``ranges`` that will be written when the rest are gaps
        left as holes (:meth:`skip`; gaps under :attr:`HOLE_MIN` count as written).

        A full disk or quota then fails here, with IoError and the temporary file removed,
        before any byte is written; and writes into allocated blocks are cheaper (ext4: a 1 GB
        conversion measured 0.15 s instead of 0.25 s, see docs/performance.md). Where the call
        is missing or the file system refuses it, nothing happens. If fewer bytes are written
        than reserved, :meth:`commit` cuts the file to what was written. What is allocated
        never exceeds the bytes the ranges name (plus the small gaps between them), so an
        offset taken from a model costs no disk unless bytes are written there.
        """
        if self._f is None or not hasattr(os, "posix_fallocate"):
            return
        spans: list[list[int]] = []
        for start, end in sorted(ranges) if ranges is not None else [(0, nbytes)]:
            if end <= start:
                continue
            if spans and start - spans[-1][1] < self.HOLE_MIN:
                spans[-1][1] = max(spans[-1][1], end)
            else:
                spans.append([start, end])
        spans = [[max(a, self._reserved), b] for a, b in spans if b > self._reserved]
        if not spans:
            return
        try:
            for start, end in spans:
                os.posix_fallocate(self._f.fileno(), start, end - start)
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                self.abort()
                raise io_error(e, self.name, "write") from None
            return  # EOPNOTSUPP, EINVAL ...: a hint only
        self._reserved = spans[-1][1]

    #: Bytes per read of :meth:`_buffer_copy`: memory stays bounded whatever the tensor size.
    COPY_CHUNK = 4 << 20
    #: Capacity asked for the pipe of :meth:`_splice_copy` (``F_SETPIPE_SZ``; Linux lets any
    #: user have up to ``/proc/sys/fs/pipe-max-size``, 1 MiB by default; else 64 KiB is kept).
    PIPE_SIZE = 1 << 20

    def copy_from(self, source: Source, offset: int, length: int) -> None:
        """Append ``length`` bytes of a local ``source`` at ``offset``, file to file.

        When source and destination offsets are congruent modulo the page size the kernel copies
        whole pages (``copy_file_range``, as cp does; a reflink where the file system shares
        blocks). Otherwise (a tensor moving between OneModel's 64-byte alignment and an ONNX
        file) the bytes go through a pipe with ``splice``: the source's page-cache pages enter
        the pipe by reference and are copied once, into the destination. Where the kernel or
        file system splices neither, they are read with ``preadv`` into one reused buffer of
        :attr:`COPY_CHUNK` bytes and written (two copies). Ranges under 1 MiB and sources without
        a file descriptor (``fileno()`` absent or ``None``: bytes in memory, a small file read
        whole) go through :meth:`Sink.copy_from`. Measurements: docs/performance.md.
        """
        fileno = getattr(source, "fileno", None)
        fd = fileno() if fileno is not None else None
        if fd is None or length < (1 << 20) or not hasattr(os, "preadv"):
            return super().copy_from(source, offset, length)  # (through write: HELD kept)
        source._check_range(offset, length)
        if self._pos < self.HELD:  # the first bytes are held back (HELD): a slice of the map
            k = self.HELD - self._pos
            self.write(source.read(offset, k))
            offset, length = offset + k, length - k
        try:
            self._f.flush()
            out = self._f.fileno()
            done = 0
            if hasattr(os, "copy_file_range") and (offset - self._pos) % mmap.PAGESIZE == 0:
                done = self._kernel_copy(fd, out, offset, length)
            if done < length:
                done += self._splice_copy(fd, out, offset + done, length - done)
            if done < length:
                self._buffer_copy(fd, out, offset + done, length - done)
            # keep the buffered writer's position in step with what went around it (not the
            # end of the file: reserve() may have made the file longer than what is written)
            self._f.seek(self._pos + length)
        except OSError as e:
            self.abort()
            raise io_error(e, self.name, "write") from None
        self._pos += length

    @staticmethod
    def _kernel_copy(fd: int, out: int, offset: int, length: int) -> int:
        """Bytes ``copy_file_range`` copied (it appends at ``out``'s position); 0 where the
        kernel or file system does not do it."""
        done = 0
        try:
            while done < length:
                n = os.copy_file_range(fd, out, length - done, offset + done)
                if n <= 0:
                    break
                done += n
        except OSError:
            pass  # e.g. EXDEV, ENOSYS: the rest goes through memory
        return done

    def _splice_copy(self, fd: int, out: int, offset: int, length: int) -> int:
        """Bytes copied with ``splice`` from ``fd`` at ``offset`` through this sink's pipe to
        ``out`` (at its position). Returns early, the pipe empty, where the kernel or a file
        system does not splice (the caller copies the rest another way); raises OSError or
        IoError when a transfer fails half-way (the sink is then aborted)."""
        if not hasattr(os, "splice") or fcntl is None:
            return 0
        if self._pipe is None:
            try:
                r, w = os.pipe()
            except OSError:
                return 0
            try:
                fcntl.fcntl(w, getattr(fcntl, "F_SETPIPE_SZ", 1031), self.PIPE_SIZE)
            except OSError:
                pass  # a user over the kernel's pipe limits: the default capacity still works
            self._pipe = (r, w, fcntl.fcntl(w, getattr(fcntl, "F_GETPIPE_SZ", 1032)))
        r, w, capacity = self._pipe
        done = 0
        while done < length:
            try:
                n = os.splice(fd, w, min(capacity, length - done), offset_src=offset + done)
            except OSError as e:
                if e.errno in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV):
                    return done  # nothing of this step entered the pipe
                raise
            if n <= 0:
                raise IoError(f"source ended {length - done} bytes early", source=self.name)
            left = n
            while left:
                try:
                    m = os.splice(r, out, left)
                except OSError as e:
                    if e.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                        raise
                    # the destination's file system does not splice: empty the pipe by hand
                    _drain(r, out, left)
                    return done + n
                if m <= 0:
                    raise IoError("the destination took no more bytes", source=self.name)
                left -= m
            done += n
        return done

    def _close_pipe(self) -> None:
        if self._pipe is not None:
            for end in self._pipe[:2]:
                os.close(end)
            self._pipe = None

    def _buffer_copy(self, fd: int, out: int, offset: int, length: int) -> None:
        if self._copy_buffer is None:
            self._copy_buffer = memoryview(bytearray(self.COPY_CHUNK))
        buf = self._copy_buffer
        done = 0
        while done < length:
            n = os.preadv(fd, [buf[:min(len(buf), length - done)]], offset + done)
            if n <= 0:
                raise IoError(f"source ended {length - done} bytes early", source=self.name)
            view = buf[:n]
            while view:
                view = view[os.write(out, view):]
            done += n

    def commit(self) -> None:
        self._close_pipe()
        if self._f is None:
            return
        # the temporary file's lock (:func:`.locks.lock_partial`) is held until it is renamed:
        # a descriptor of its own outlives the file object's, since another writer's
        # :func:`.locks.remove_stale_partials` removes any partial whose lock it can take
        held_lock = None
        try:
            if self._held:  # the first bytes, last: the file is complete from here on
                self._f.seek(0)
                self._f.write(self._held)
            self._f.flush()
            # cut what reserve() allocated past the end; extend over a final hole (skip)
            if os.fstat(self._f.fileno()).st_size != self._pos:
                os.ftruncate(self._f.fileno(), self._pos)
            if self.durable:
                os.fsync(self._f.fileno())
            if locks.HAVE_FLOCK:
                held_lock = os.dup(self._f.fileno())
            self._f.close()
            self._f = None
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(self._tmp, 0o666 & ~umask)
            with _signals_held(bool(self.before_rename)):
                for step in self.before_rename:
                    step()
                if self.temporary:
                    os.replace(self._tmp, self.name)
                self._done = True  # published: abort() no longer removes anything
        except OSError as e:
            self.abort()
            raise io_error(e, self.name, "write") from None
        except BaseException:
            self.abort()
            raise
        finally:
            if held_lock is not None:
                os.close(held_lock)
        try:
            for step in self.after_rename:
                step()
        finally:
            self._release()

    def _release(self) -> None:
        self.before_rename, self.after_rename, self.on_abort = [], [], []
        lock, self._lock = self._lock, None
        locks.release_writer_lock(self.name, lock)

    def abort(self) -> None:
        steps, self.on_abort = self.on_abort, []
        for step in steps:
            step()
        self._close_pipe()
        if self._done:  # committed (a signal held during the renames arrived after them)
            self._release()
            return
        if self._f is not None:
            try:
                self._f.close()
            except OSError:
                pass
            self._f = None
        try:
            os.unlink(self._tmp)
        except OSError:
            pass
        self._release()
