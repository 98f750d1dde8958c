"""Where an external data file is opened (ONNX Part 1, Clause 15.3): the confined walk from the
model's directory, and the directories a data file is written into.

:func:`open_location` is the one function that decides where a location is opened. A local
location is opened component by component from a descriptor of the model's directory (never the
working directory): every directory with ``O_NOFOLLOW | O_DIRECTORY``, the file with
``O_NOFOLLOW``, each after an ``lstat`` that refuses a symbolic link, and each descriptor compared
by ``(st_dev, st_ino)`` with what the ``lstat`` saw, so a component swapped between the check and
the open is caught. The file must be a regular file with exactly one hard link. Where directories
cannot be walked by descriptor (:data:`DIR_FD_WALK` false: Windows), every component is checked
by path and the opened file's identity compared with what the check saw: the refusals are the
same, the guarantee weaker (a directory on the way replaced by a link after its check is not
caught; docs/external-data.md, "Without a descriptor walk"). A location under a URL
passes :func:`~.external_refs.location_parts` with ``url=True``, is joined by
:func:`onemodel.storage.place.join_location` and read with range requests. With
``allow_outside`` (never the default) absolute paths, ``..`` and links are accepted, but still
only a regular file.

:func:`make_dirs` creates the directories of a data file to write the same way, refusing a
symbolic link on the way (:mod:`.external_sinks`).
"""

from __future__ import annotations

import errno
import os
import stat
import weakref

from ...errors import IoError, OneModelError, quote
from ...storage.base import Source
from ...storage.local import LocalSource, file_kind
from ...storage.place import is_remote, local_path, url_join
from .external_refs import RefusedError, location_parts

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)
_FILE_ATTRIBUTE_REPARSE_POINT = 0x400


#: True where directories can be walked by descriptor (POSIX: ``dir_fd``, ``O_NOFOLLOW``,
#: ``O_DIRECTORY``); elsewhere (Windows) every component is checked by path and the opened file's
#: identity compared with what the check saw.
DIR_FD_WALK = (os.open in os.supports_dir_fd and os.stat in os.supports_dir_fd
               and bool(_O_NOFOLLOW) and bool(_O_DIRECTORY))


_IDENTITY: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def data_file_identity(source) -> tuple | str | None:
    """``(st_dev, st_ino)`` of a local data file opened by :func:`open_location` (its URL for a
    remote one), or ``None`` when ``source`` is not such a file (e.g. a OneModel data region)."""
    try:
        return _IDENTITY.get(source)
    except TypeError:
        return None


class OpenedFile:
    """A data file opened by :func:`open_location`: its Source and its identity."""

    __slots__ = ("source", "identity", "name")

    def __init__(self, source: Source, identity, name: str):
        self.source = source
        self.identity = identity  # (st_dev, st_ino) for local files, the URL for remote ones
        self.name = name
        _IDENTITY[source] = identity


def open_location(base, location: str, *, allow_outside: bool = False,
                  storage_options: dict | None = None, base_fd: int | None = None) -> OpenedFile:
    """Open external data file ``location`` of a model whose directory is ``base``.

    This is the one function that decides where a location lives:

    * ``base`` a URL (``s3://b/dir``, ``https://h/dir/``, ``memory://dir``): the location
      passes :func:`location_parts` with ``url=True``, is joined to ``base`` by
      :func:`onemodel.storage.place.join_location` and opened as a
      :class:`~onemodel.storage.remote.RemoteSource` (``storage_options`` go to it);
    * ``base`` a local directory: the file is opened by the confined walk of the module
      documentation (``base_fd``, a descriptor of ``base``, is used when given), or, with
      ``allow_outside``, by a plain open that follows links and accepts absolute paths and ``..``.

    Returns an object with ``source`` (a Source of the file's bytes: a map, the bytes in memory,
    or a remote source), ``identity`` and ``name``. Raises InvalidModelError for a refused
    location or file, IoError when the file cannot be opened or read.
    """
    if is_remote(base):
        location_parts(location, url=True)
        url = url_join(base, location)
        from ...storage.remote import RemoteSource

        src = RemoteSource(url, storage_options)
        return OpenedFile(src, url, src.name)
    directory = local_path(base)
    if allow_outside:
        return _open_outside(directory, location)
    parts = location_parts(location)
    name = os.path.join(directory, *parts)
    if DIR_FD_WALK:
        fd, st = _open_confined(directory, parts, base_fd)
    else:
        fd, st = _open_confined_by_path(directory, parts)
    return OpenedFile(LocalSource(name, fd=fd), (st.st_dev, st.st_ino), name)


def is_link(st: os.stat_result) -> bool:
    """Whether ``st`` (an ``lstat`` result) is a symbolic link or, on Windows, any reparse point
    (junctions included): what Clause 15.3's confinement refuses anywhere on a location's path."""
    return stat.S_ISLNK(st.st_mode) or bool(
        getattr(st, "st_file_attributes", 0) & _FILE_ATTRIBUTE_REPARSE_POINT)


def _check_file(st: os.stat_result, shown: str) -> None:
    if is_link(st):
        raise RefusedError(f"{quote(shown)} is a symbolic link (Clause 15.3)")
    if not stat.S_ISREG(st.st_mode):
        raise RefusedError(f"{quote(shown)} is {file_kind(st.st_mode)}, not a regular file")
    if st.st_nlink > 1:
        raise RefusedError(f"{quote(shown)} has {st.st_nlink} hard links; a file with more than "
                           "one may be a link to a file outside the model directory (Clause 15.3)")


def os_error(e: OSError, shown: str) -> OneModelError:
    """The error to raise for ``e``, an OSError from a step of the walk at component ``shown``
    (the location up to it). ``ELOOP`` / ``ENOTDIR`` (a link or non-directory that appeared
    after its check) are a RefusedError (an InvalidModelError, Clause 15.3); a missing file, too
    many open files and any other failure are an IoError. Returned, not raised."""
    if e.errno == errno.ELOOP:
        return RefusedError(f"{quote(shown)} is a symbolic link (it changed between the check and "
                            "the open; Clause 15.3)")
    if e.errno == errno.ENOTDIR:
        return RefusedError(f"{quote(shown)} is not a directory or is a symbolic link (it changed "
                            "between the check and the open; Clause 15.3)")
    if e.errno == errno.ENOENT:
        return IoError(f"{quote(shown)} does not exist")
    if e.errno in (errno.EMFILE, errno.ENFILE):
        return IoError(f"cannot open {quote(shown)}: too many open files (raise the limit with "
                       "'ulimit -n')")
    return IoError(f"cannot open {quote(shown)}: {e.strerror or e}")


def _swapped(shown: str) -> RefusedError:
    return RefusedError(f"{quote(shown)} changed between the check and the open (Clause 15.3)")


def _open_confined(directory: str, parts: tuple[str, ...], base_fd: int | None):
    """Walk ``parts`` from ``directory`` by descriptor; the open file's (fd, fstat)."""
    opened: list[int] = []
    try:
        if base_fd is None:
            base_fd = open_base_dir(directory)
            opened.append(base_fd)
        cur = base_fd
        for i, part in enumerate(parts):
            shown = "/".join(parts[:i + 1])
            last = i == len(parts) - 1
            try:
                st = os.lstat(part, dir_fd=cur)
            except OSError as e:
                raise os_error(e, shown) from None
            if last:
                _check_file(st, shown)
                flags = os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC | _O_NONBLOCK | \
                    getattr(os, "O_NOCTTY", 0)
            else:
                if is_link(st):
                    raise RefusedError(f"directory {quote(shown)} is a symbolic link (Clause 15.3)")
                if not stat.S_ISDIR(st.st_mode):
                    raise RefusedError(f"{quote(shown)} is {file_kind(st.st_mode)}, not a "
                                       "directory")
                flags = os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC
            try:
                fd = os.open(part, flags, dir_fd=cur)
            except OSError as e:
                raise os_error(e, shown) from None
            opened.append(fd)
            fst = os.fstat(fd)
            if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
                raise _swapped(shown)
            if last:
                try:
                    _check_file(fst, shown)
                except RefusedError:
                    raise _swapped(shown) from None
                opened.pop()
                return fd, fst
            cur = fd
        raise RefusedError("the location does not name a file")  # parts is never empty
    finally:
        for fd in opened:
            os.close(fd)


def _open_confined_by_path(directory: str, parts: tuple[str, ...]):
    """The same checks where there is no ``dir_fd`` (Windows): every prefix is ``lstat``-ed,
    the file is opened and its identity compared with what the check saw."""
    path = directory
    st = None
    for i, part in enumerate(parts):
        shown = "/".join(parts[:i + 1])
        path = os.path.join(path, part)
        try:
            st = os.lstat(path)
        except OSError as e:
            raise os_error(e, shown) from None
        if i < len(parts) - 1:
            if is_link(st):
                raise RefusedError(f"directory {quote(shown)} is a symbolic link (Clause 15.3)")
            if not stat.S_ISDIR(st.st_mode):
                raise RefusedError(f"{quote(shown)} is {file_kind(st.st_mode)}, not a directory")
    shown = "/".join(parts)
    _check_file(st, shown)
    try:
        fd = os.open(path, os.O_RDONLY | _O_BINARY | _O_CLOEXEC | _O_NOFOLLOW | _O_NONBLOCK)
    except OSError as e:
        raise os_error(e, shown) from None
    fst = os.fstat(fd)
    if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(fst.st_mode) \
            or fst.st_nlink > 1:
        os.close(fd)
        raise _swapped(shown)
    return fd, fst


def outside_path(directory: str, location: str) -> str:
    """``allow_outside``: ``location`` (absolute, with ``..``, through links) joined to
    ``directory``; only an empty location or a NUL character is refused."""
    if not location or "\x00" in location:
        raise RefusedError("the location is empty or contains a NUL character")
    return os.path.join(directory, location)


def _open_outside(directory: str, location: str) -> OpenedFile:
    """``allow_outside``: any path (absolute, ``..``, through links), but a regular file."""
    name = outside_path(directory, location)
    try:
        fd = os.open(name, os.O_RDONLY | _O_BINARY | _O_CLOEXEC | _O_NONBLOCK)
    except OSError as e:
        raise os_error(e, location) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise RefusedError(f"{quote(location)} is {file_kind(st.st_mode)}, not a regular file")
    return OpenedFile(LocalSource(name, fd=fd), (st.st_dev, st.st_ino), name)


def make_dirs(directory: str, parts: tuple[str, ...]) -> None:
    """Create ``parts`` under ``directory`` as needed, refusing a symbolic link on the way."""
    if not DIR_FD_WALK:
        path = directory
        for i, part in enumerate(parts):
            path = os.path.join(path, part)
            shown = "/".join(parts[:i + 1])
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                os.mkdir(path)
                continue
            except OSError as e:
                raise os_error(e, shown) from None
            if is_link(st) or not stat.S_ISDIR(st.st_mode):
                raise RefusedError(f"{quote(shown)} is {file_kind(st.st_mode)}, not a directory")
        return
    try:
        cur = os.open(directory, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
    except OSError as e:
        raise IoError(f"cannot open directory {quote(directory)}: {e.strerror or e}") from None
    try:
        for i, part in enumerate(parts):
            shown = "/".join(parts[:i + 1])
            try:
                os.mkdir(part, dir_fd=cur)
            except FileExistsError:
                pass
            except OSError as e:
                raise IoError(f"cannot create directory {quote(shown)}: {e.strerror or e}") \
                    from None
            try:
                st = os.lstat(part, dir_fd=cur)
                if is_link(st) or not stat.S_ISDIR(st.st_mode):
                    raise RefusedError(f"{quote(shown)} is {file_kind(st.st_mode)}, not a "
                                       "directory (Clause 15.3)")
                fd = os.open(part, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC,
                             dir_fd=cur)
            except OSError as e:
                raise os_error(e, shown) from None
            os.close(cur)
            cur = fd
    finally:
        os.close(cur)


def open_base_dir(directory: str) -> int | None:
    """A descriptor of the model's directory for the confined walk (the caller closes it), or
    ``None`` where directories are not walked by descriptor (:data:`DIR_FD_WALK` false).
    Raises IoError when the directory cannot be opened."""
    if not DIR_FD_WALK:
        return None
    try:
        return os.open(directory, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
    except OSError as e:
        raise IoError(f"cannot open the model directory {quote(directory)}: "
                      f"{e.strerror or e}") from None


__all__ = ["DIR_FD_WALK", "open_location", "open_base_dir", "data_file_identity", "make_dirs",
           "outside_path", "is_link", "os_error"]
