"""Locks that make a model's files change all at once for onemodel's readers and writers.

Three kinds, all ``flock`` locks on local files (POSIX; on a platform without ``fcntl.flock``
each is a no-op and the guarantees of docs/storage.md "Atomicity" are weaker there):

* **The writer lock** of a destination (:func:`acquire_writer_lock`): an exclusive lock on the
  hidden file ``.<name>.lock`` beside it, held for the whole write and removed at its end. A
  second writer to the same destination is refused at once with IoError instead of mixing its
  files with the first one's.
* **Partial files** (:func:`lock_partial`, :func:`remove_stale_partials`): a sink's temporary
  ``.<name>.<random>.partial`` is locked while it is written, so a partial whose lock can be
  taken belongs to a process that is gone (killed) and is removed by the next write into the
  directory; one being written is never touched.
* **Model file locks** (:func:`model_file_guard`, :func:`exclusive`): a reader takes a shared
  lock on the model file it read while it opens that file's data files; a writer takes an
  exclusive lock on the model file it replaced before it changes or removes a data file that the
  replaced model file names. A reader therefore opens the data files of one version only: it
  either finished opening them before the writer changed one, or finds that the model file it
  read was replaced and gets an IoError saying so.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat

from ..errors import IoError, quote

try:  # POSIX only
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

#: Whether ``flock`` exists here (the locks are no-ops otherwise).
HAVE_FLOCK = fcntl is not None and hasattr(fcntl, "flock")

#: The temporary files of :class:`~onemodel.storage.local.LocalSink` (``tempfile.mkstemp``
#: names: ``.`` + destination name + ``.`` + 8 characters + ``.partial``).
PARTIAL = re.compile(r"^\..+\.[a-z0-9_]{8}\.partial$")

#: Attempts at a lock whose file was replaced or removed between its open and its lock.
_ATTEMPTS = 16


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def lock_file_of(path: str) -> str:
    """The writer lock file of destination ``path``: ``.<name>.lock`` in its directory."""
    directory, name = os.path.split(os.path.abspath(path))
    return os.path.join(directory, "." + name + ".lock")


def acquire_writer_lock(path: str) -> int | None:
    """Take the writer lock of destination ``path`` (module documentation); returns its
    descriptor for :func:`release_writer_lock` (``None`` where there is no ``flock``).

    Raises IoError when another process holds it ("another process is writing ..."), or when
    the lock file cannot be created (a read-only directory: the write would fail anyway)."""
    if not HAVE_FLOCK:
        return None
    lock = lock_file_of(path)
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(_ATTEMPTS):
        try:
            fd = os.open(lock, flags, 0o600)
        except OSError as e:  # as the temporary file would fail (no directory, read-only)
            raise IoError(f"cannot create file: {e.strerror or e}", source=path) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise IoError(f"another process is writing this file (it holds the lock "
                              f"{quote(lock)}); wait for it to finish, or write elsewhere",
                              source=path) from None
            return None  # a file system without flock (some network mounts): no lock
        try:  # a lock file removed by its last holder between our open and our lock: again
            if _same(os.lstat(lock), os.fstat(fd)):
                return fd
        except OSError:
            pass
        os.close(fd)
    raise IoError(f"cannot take the lock {quote(lock)}: it keeps being replaced", source=path)


def release_writer_lock(path: str, fd: int | None) -> None:
    """Remove the lock file of :func:`acquire_writer_lock` and release the lock (in that order,
    so a process waiting on the removed file sees it is gone and takes a new one)."""
    if fd is None:
        return
    try:
        os.unlink(lock_file_of(path))
    except OSError:
        pass
    os.close(fd)


def lock_partial(fd: int, path: str) -> bool:
    """Lock the new temporary file ``fd`` at ``path`` for its writer. False when a cleaner
    (:func:`remove_stale_partials`) removed it before the lock was taken: make another."""
    if not HAVE_FLOCK:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        return True  # no flock on this file system: such partials are never removed
    try:
        return _same(os.lstat(path), os.fstat(fd))
    except OSError:
        return False


def remove_stale_partials(directory: str) -> list[str]:
    """Remove the temporary files (:data:`PARTIAL` names) of writers that are gone: files in
    ``directory`` owned by this user whose lock can be taken (a live writer holds its lock).
    Returns the names removed. Errors are ignored: this is housekeeping."""
    if not HAVE_FLOCK:
        return []
    removed = []
    try:
        names = [n for n in os.listdir(directory) if PARTIAL.match(n)]
    except OSError:
        return []
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0) \
        | getattr(os, "O_NONBLOCK", 0)
    for name in names:
        path = os.path.join(directory, name)
        try:
            fd = os.open(path, flags)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or (uid is not None and st.st_uid != uid):
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # being written
            if _same(os.lstat(path), st):
                os.unlink(path)
                removed.append(name)
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def open_for_lock(path: str, *, follow: bool = False) -> int | None:
    """A read-only descriptor of the regular file ``path`` to lock with :func:`exclusive`, or
    ``None`` when there is none (or no ``flock``). ``follow``: a symbolic link at ``path`` is
    followed (a reader opened the model file through it); else it is no file to lock."""
    if not HAVE_FLOCK:
        return None
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0) \
        | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def exclusive(fd: int | None) -> None:
    """Take an exclusive lock on the model file ``fd`` (waiting for its readers: they hold it
    only while they open data files)."""
    if fd is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass


@contextlib.contextmanager
def model_file_guard(path: str | None, seen: os.stat_result | None):
    """While the body runs (a reader opening the data files of the model file it read from
    ``path``, whose ``fstat`` was ``seen``), hold a shared lock on that file, after checking that
    ``path`` still names it. Raises IoError when the model file was replaced since it was read
    (a writer published a new version: the data files may be the new version's). Nothing is
    checked without ``path`` and ``seen`` or without ``flock``."""
    if path is None or seen is None or not HAVE_FLOCK:
        yield
        return
    fd = open_for_lock(path, follow=True)
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
            except OSError:
                pass
        try:
            now = os.stat(path)
            same = _same(now, seen) and (fd is None or _same(os.fstat(fd), seen))
        except OSError:
            same = False
        if not same:
            raise IoError("the model file was replaced while it was being read (another "
                          "process wrote a new version); read it again", source=path)
        yield
    finally:
        if fd is not None:
            os.close(fd)


__all__ = ["HAVE_FLOCK", "PARTIAL", "lock_file_of", "acquire_writer_lock", "release_writer_lock",
           "lock_partial", "remove_stale_partials", "open_for_lock", "exclusive",
           "model_file_guard"]
