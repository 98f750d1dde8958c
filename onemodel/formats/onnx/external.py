"""External data: resolving the references of ONNX Part 1, Clause 13 under the rules of Clause 15.3.

A tensor whose ``data_location`` is EXTERNAL carries key-value ``external_data`` entries instead of
its contents. Resolution turns them into bytes:

1. **The reference** (:func:`parse_reference`, Clause 13.2, Table 11). Only the keys ``location``,
   ``offset``, ``length`` and ``checksum`` are accepted, each at most once; ``location`` is
   mandatory; ``offset`` and ``length`` are non-negative decimal integers written with ASCII digits
   only (no sign, space or underscore) and below 2^63; ``checksum`` is a SHA-1 digest in hex.
2. **The location** (:func:`location_parts`, the one rule of which locations are legal). A
   relative path of ``/``-separated components: not empty, not absolute, no Windows drive
   (``C:``), no backslash, no NUL, no ``..`` component; joined to a URL, also none of these once
   percent-decoded, and no scheme.
3. **The file** (:func:`open_location`, the one place that decides where a location is opened).
   A local location is opened component by component from a descriptor of the model's directory
   (never the working directory): every directory with ``O_NOFOLLOW | O_DIRECTORY``, the file with
   ``O_NOFOLLOW``, each after an ``lstat`` that refuses a symbolic link, and each descriptor
   compared by ``(st_dev, st_ino)`` with what the ``lstat`` saw, so a component swapped between
   the check and the open is caught. The file must be a regular file with exactly one hard link.
   A location under a URL (``s3://``, ``https://``, ``memory://`` ...) passes the same rule (with
   ``url=True``), is joined to the model's directory URL by
   :func:`onemodel.storage.remote.join_location` and read with range requests.
4. **The bytes** (:func:`resolve_external_data`). ``offset + length`` is checked against the
   file's size before anything is used, a missing ``length`` runs to the end of the file, and the
   length must equal the element count times the element size (dims x element type). A
   ``checksum`` is verified (SHA-1 of the whole file, Clause 13.3) before the bytes are used. Each
   data file is opened and mapped once, whatever the number of tensors in it;
   ``tensor.external`` becomes the :class:`~onemodel.storage.blob.Blob` of the tensor's bytes in
   it (a zero-copy view of the map, or range reads of a remote file), which writers copy file to
   file.

Resolution outside the model's directory is possible only when asked for explicitly
(``allow_outside=True``, CLI ``--allow-external-outside``; Clause 15.3 "SHALL NOT be the default").
It then accepts absolute paths, ``..`` and links, but still only a regular file.

Errors: a refusal under Clause 15.3, a bad key or value, a size that does not fit the file and a
checksum mismatch are :class:`~onemodel.errors.InvalidModelError` (Clause 13.2 / 15.3: a
validation failure under Clause 10); a file that cannot be opened or read is
:class:`~onemodel.errors.IoError`. Every message names the tensor and the location; the error's
path is the tensor's proto path (``ModelProto.graph.initializer[3]``), its offset the tensor's
position in the .onnx file, its source the model file.

Local data files of :data:`~onemodel.limits.MMAP_THRESHOLD` bytes or more are mapped (the map and
its descriptor stay open until ``model.close()``); smaller ones are read into memory and their
descriptor closed at once, so a model with thousands of small per-tensor files does not run out of
descriptors. The map is read-only; a data file truncated by another process while it is mapped
makes reads of the lost pages fail (SIGBUS), as for any mapped file.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import weakref
from dataclasses import dataclass

from ...errors import QUOTE_LIMIT, InvalidModelError, IoError, OneModelError, clip, quote
from ...ir.dtypes import INFO, DataType
from ...ir.model import Model
from ...ir.tensor import EXTERNAL
from ...ir.walk import iter_tensors
from ...storage.base import Source
from ...storage.blob import Blob
from ...storage.local import LocalSource, file_kind
from ...storage.place import is_remote, local_path, place_of, url_join
from .paths import proto_path

#: The keys of an external data reference (Clause 13.2, Table 11); any other key is refused.
KEYS = ("location", "offset", "length", "checksum")

#: ``offset`` and ``length`` values are below this (a signed 64-bit file offset).
MAX_OFFSET = (1 << 63) - 1

_DIGITS = re.compile(r"[0-9]+")
_SHA1 = re.compile(r"[0-9A-Fa-f]{40}")
_DRIVE = re.compile(r"[A-Za-z]:")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_HASH_CHUNK = 16 << 20

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


# -- the reference ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ExternalReference:
    """One tensor's external data reference (Clause 13.2, Table 11).

    Attributes:
        location: the relative path as written (``/``-separated).
        offset: first byte in the file (0 when the key is absent).
        length: number of bytes, or ``None`` when the key is absent (to the end of the file).
        checksum: the SHA-1 hex digest of the whole file, lower case, or ``None``.
    """

    location: str
    offset: int = 0
    length: int | None = None
    checksum: str | None = None


class RefusedError(InvalidModelError):
    """A reference refused by Clause 13.2 or 15.3 (an InvalidModelError; the message says why)."""


def _decimal(key: str, value: str | None) -> int:
    if value is None or not _DIGITS.fullmatch(value):
        raise RefusedError(f"{key} {quote(value)} is not a non-negative decimal integer")
    if len(value.lstrip("0")) > 19 or int(value) > MAX_OFFSET:
        raise RefusedError(f"{key} {clip(value, QUOTE_LIMIT)} is larger than 2^63 - 1")
    return int(value)


def parse_reference(entries) -> ExternalReference:
    """The :class:`ExternalReference` of a tensor's ``external_data`` entries.

    Raises InvalidModelError (without a location in the model; callers add it) for a key not in
    :data:`KEYS` (or absent), a key given twice, a missing or empty ``location``, an ``offset``
    or ``length`` that is not a non-negative decimal integer below 2^63, or a ``checksum`` that
    is not 40 hex digits.
    """
    seen: dict[str, str | None] = {}
    for e in entries:
        key = e.key
        if key not in KEYS:
            raise RefusedError(f"unknown key {quote(key)} in external_data (Clause 13.2 allows only "
                               f"{', '.join(KEYS)})")
        if key in seen:
            raise RefusedError(f"key {quote(key)} appears more than once in external_data")
        seen[key] = e.value
    location = seen.get("location")
    if not location:
        raise RefusedError("external_data has no location (Clause 13.2: it is mandatory)")
    offset = _decimal("offset", seen["offset"]) if "offset" in seen else 0
    length = _decimal("length", seen["length"]) if "length" in seen else None
    checksum = None
    if "checksum" in seen:
        checksum = seen["checksum"]
        if checksum is None or not _SHA1.fullmatch(checksum):
            raise RefusedError(f"checksum {quote(checksum)} is not a SHA-1 digest (40 hex digits)")
        checksum = checksum.lower()
    return ExternalReference(location, offset, length, checksum)


def location_parts(location: str, *, url: bool = False) -> tuple[str, ...]:
    """The components of a location, after the checks of Clauses 13.2 and 15.3 on its text: the
    one rule of which locations are legal, for files on disk and under a URL alike.

    Empty and ``.`` components are dropped (``./a//b`` is ``("a", "b")``). Raises
    InvalidModelError for an empty location, an absolute path, a Windows drive path, a backslash,
    a NUL character, a ``..`` component, or a location that names a directory (``a/``).

    ``url``: the location is to be joined to a URL (a model read from ``s3://``, ``https://``
    ...), where percent-encoding and schemes mean something: also refused are a location that is
    absolute or holds a ``..`` component once percent-decoded (``%2e%2e/w.bin``), and one that
    names a scheme or drive (``s3://other/w.bin``, ``x::s3://b/k``, ``c:w.bin``), so the joined
    URL stays in the model's directory, on the same host or bucket
    (:func:`onemodel.storage.remote.join_location` joins it).
    """
    if not location:
        raise RefusedError("the location is empty")
    if "\x00" in location:
        raise RefusedError("the location contains a NUL character")
    if location.startswith("/"):
        raise RefusedError("the location is an absolute path (Clause 13.2: it must be relative)")
    if _DRIVE.match(location):
        raise RefusedError("the location is a Windows drive path (Clause 13.2: it must be "
                           "relative)")
    if "\\" in location:
        raise RefusedError("the location contains a backslash (a path separator on Windows; "
                           "use '/')")
    raw = location.split("/")
    if ".." in raw:
        raise RefusedError("the location contains a parent-directory component '..' "
                           "(Clause 13.2)")
    parts = tuple(p for p in raw if p not in ("", "."))
    if not parts or raw[-1] in ("", "."):
        raise RefusedError("the location does not name a file")
    if url:
        _check_url_location(location)
    return parts


def _check_url_location(location: str) -> None:
    """The rules of :func:`location_parts` with ``url`` that the text checks do not cover: no
    scheme or drive, also percent-decoded, and no absolute path or ``..`` once percent-decoded
    (a URL's path is percent-decoded by the server or the storage backend)."""
    from urllib.parse import unquote

    decoded = unquote(location)
    if any("://" in t or "::" in t or _SCHEME.match(t) for t in (location, decoded)):
        raise RefusedError("the location names a scheme or drive (Clause 13.2: it must be a "
                           "relative path)")
    if decoded.startswith("/"):
        raise RefusedError("the location is an absolute path once percent-decoded "
                           "(Clause 13.2: it must be relative)")
    if ".." in decoded.replace("\\", "/").split("/"):
        raise RefusedError("the location contains a parent-directory component '..' once "
                           "percent-decoded (Clause 13.2)")


# -- where a location is opened --------------------------------------------------------------
_IDENTITY: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def data_file_identity(source) -> tuple | str | None:
    """``(st_dev, st_ino)`` of a local data file opened by :func:`open_location` (its URL for a
    remote one), or ``None`` when ``source`` is not such a file (e.g. a OneModel data region)."""
    try:
        return _IDENTITY.get(source)
    except TypeError:
        return None


class _Opened:
    """A data file opened by :func:`open_location`: its Source and its identity."""

    __slots__ = ("source", "identity", "name")

    def __init__(self, source: Source, identity, name: str):
        self.source = source
        self.identity = identity  # (st_dev, st_ino) for local files, the URL for remote ones
        self.name = name
        _IDENTITY[source] = identity


def open_location(base, location: str, *, allow_outside: bool = False,
                  storage_options: dict | None = None, base_fd: int | None = None) -> _Opened:
    """Open external data file ``location`` of a model whose directory is ``base``.

    This is the one function that decides where a location lives:

    * ``base`` a URL (``s3://b/dir``, ``https://h/dir/``, ``memory://dir``): the location
      passes :func:`location_parts` with ``url=True``, is joined to ``base`` by
      :func:`onemodel.storage.remote.join_location` and opened as a
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
        return _Opened(src, url, src.name)
    directory = local_path(base)
    if allow_outside:
        return _open_outside(directory, location)
    parts = location_parts(location)
    name = os.path.join(directory, *parts)
    if DIR_FD_WALK:
        fd, st = _open_confined(directory, parts, base_fd)
    else:
        fd, st = _open_confined_by_path(directory, parts)
    return _Opened(LocalSource(name, fd=fd), (st.st_dev, st.st_ino), name)


def _is_link(st: os.stat_result) -> bool:
    return stat.S_ISLNK(st.st_mode) or bool(
        getattr(st, "st_file_attributes", 0) & _FILE_ATTRIBUTE_REPARSE_POINT)


def _check_file(st: os.stat_result, shown: str) -> None:
    if _is_link(st):
        raise RefusedError(f"{quote(shown)} is a symbolic link (Clause 15.3)")
    if not stat.S_ISREG(st.st_mode):
        raise RefusedError(f"{quote(shown)} is {file_kind(st.st_mode)}, not a regular file")
    if st.st_nlink > 1:
        raise RefusedError(f"{quote(shown)} has {st.st_nlink} hard links; a file with more than "
                           "one may be a link to a file outside the model directory (Clause 15.3)")


def _os_error(e: OSError, shown: str) -> OneModelError:
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
            try:
                base_fd = os.open(directory, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
            except OSError as e:
                raise IoError(f"cannot open the model directory {quote(directory)}: "
                              f"{e.strerror or e}") from None
            opened.append(base_fd)
        cur = base_fd
        for i, part in enumerate(parts):
            shown = "/".join(parts[:i + 1])
            last = i == len(parts) - 1
            try:
                st = os.lstat(part, dir_fd=cur)
            except OSError as e:
                raise _os_error(e, shown) from None
            if last:
                _check_file(st, shown)
                flags = os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC | _O_NONBLOCK | \
                    getattr(os, "O_NOCTTY", 0)
            else:
                if _is_link(st):
                    raise RefusedError(f"directory {quote(shown)} is a symbolic link (Clause 15.3)")
                if not stat.S_ISDIR(st.st_mode):
                    raise RefusedError(f"{quote(shown)} is {file_kind(st.st_mode)}, not a "
                                       "directory")
                flags = os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC
            try:
                fd = os.open(part, flags, dir_fd=cur)
            except OSError as e:
                raise _os_error(e, shown) from None
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
            raise _os_error(e, shown) from None
        if i < len(parts) - 1:
            if _is_link(st):
                raise RefusedError(f"directory {quote(shown)} is a symbolic link (Clause 15.3)")
            if not stat.S_ISDIR(st.st_mode):
                raise RefusedError(f"{quote(shown)} is {file_kind(st.st_mode)}, not a directory")
    shown = "/".join(parts)
    _check_file(st, shown)
    try:
        fd = os.open(path, os.O_RDONLY | _O_BINARY | _O_CLOEXEC | _O_NOFOLLOW | _O_NONBLOCK)
    except OSError as e:
        raise _os_error(e, shown) from None
    fst = os.fstat(fd)
    if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(fst.st_mode) \
            or fst.st_nlink > 1:
        os.close(fd)
        raise _swapped(shown)
    return fd, fst


def _outside_path(directory: str, location: str) -> str:
    """``allow_outside``: ``location`` (absolute, with ``..``, through links) joined to
    ``directory``; only an empty location or a NUL character is refused."""
    if not location or "\x00" in location:
        raise RefusedError("the location is empty or contains a NUL character")
    return os.path.join(directory, location)


def _open_outside(directory: str, location: str) -> _Opened:
    """``allow_outside``: any path (absolute, ``..``, through links), but a regular file."""
    name = _outside_path(directory, location)
    try:
        fd = os.open(name, os.O_RDONLY | _O_BINARY | _O_CLOEXEC | _O_NONBLOCK)
    except OSError as e:
        raise _os_error(e, location) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise RefusedError(f"{quote(location)} is {file_kind(st.st_mode)}, not a regular file")
    return _Opened(LocalSource(name, fd=fd), (st.st_dev, st.st_ino), name)


# -- where a data file is written -------------------------------------------------------------
def data_file_target(base, location: str, *, allow_outside: bool = False) -> str:
    """Where :func:`open_data_sink` writes data file ``location`` of a model whose directory is
    ``base``: a local path (``base`` joined with the location's components, or with the location
    as it is under ``allow_outside``), or a URL for a URL base. Nothing is opened or created.
    Raises InvalidModelError for a location refused by :func:`location_parts` (with ``url=True``
    for a URL base)."""
    if is_remote(base):
        location_parts(location, url=True)
        return url_join(base, location)
    directory = local_path(base)
    if allow_outside:
        return _outside_path(directory, location)
    return os.path.join(directory, *location_parts(location))


def open_data_sink(base, location: str, *, allow_outside: bool = False,
                   storage_options: dict | None = None, progress=None):
    """A Sink for writing data file ``location`` of a model whose directory is ``base``, at
    :func:`data_file_target`: the write-side counterpart of :func:`open_location`.

    A local location passes :func:`location_parts`; its directories are walked from ``base`` by
    descriptor with ``O_NOFOLLOW`` (missing ones are created) and a symbolic link among them is
    refused, so a link planted in the output directory does not redirect the write outside
    ``base`` (a directory changed by another process while the file is being written is out of
    scope: the output directory is the caller's). The file itself is written to a
    temporary file in its directory and renamed over the destination on commit
    (:class:`~onemodel.storage.local.LocalSink`): an existing file is replaced, never appended to
    or truncated in place, and maps of the old file stay valid. A URL base writes through
    :func:`onemodel.storage.open_sink` at the URL :func:`data_file_target` gives.
    ``allow_outside`` accepts any path (absolute, ``..``). ``progress``: the callable the bytes
    written are counted to (the model sink's, so a data file's bytes count on its bar), through
    :func:`onemodel.storage.open_sink`. Raises InvalidModelError for a refused location, IoError.
    """
    from ...storage import LocalSink, open_sink

    path = data_file_target(base, location, allow_outside=allow_outside)
    if is_remote(base):
        return open_sink(path, storage_options=storage_options, compression=None,
                         progress=progress)
    if allow_outside:
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        except OSError as e:
            raise IoError(f"cannot create the directory of {quote(location)}: {e.strerror or e}") \
                from None
        return open_sink(LocalSink(path), progress=progress)
    parts = location_parts(location)
    if len(parts) > 1:
        _make_dirs(local_path(base), parts[:-1])
    if os.path.isdir(path) and not os.path.islink(path):
        raise IoError(f"cannot write data file {quote(location)}: it is a directory")
    return open_sink(LocalSink(path), progress=progress)


def _make_dirs(directory: str, parts: tuple[str, ...]) -> None:
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
                raise _os_error(e, shown) from None
            if _is_link(st) or not stat.S_ISDIR(st.st_mode):
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
                if _is_link(st) or not stat.S_ISDIR(st.st_mode):
                    raise RefusedError(f"{quote(shown)} is {file_kind(st.st_mode)}, not a "
                                       "directory (Clause 15.3)")
                fd = os.open(part, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC,
                             dir_fd=cur)
            except OSError as e:
                raise _os_error(e, shown) from None
            os.close(cur)
            cur = fd
    finally:
        os.close(cur)


def same_directory(a, b) -> bool:
    """True when ``a`` and ``b`` name the same directory (same file for local paths, equal
    strings for URLs)."""
    if a is None or b is None:
        return False
    if is_remote(a) or is_remote(b):
        return str(a).rstrip("/") == str(b).rstrip("/")
    try:
        return os.path.samefile(local_path(a), local_path(b))
    except OSError:
        return False


# -- resolving a model's references -----------------------------------------------------------
def _sha1_of(source: Source) -> str:
    import hashlib  # here: 2.5 ms of every model's first load otherwise

    h = hashlib.sha1()
    whole = source.whole()
    for start in range(0, source.size, _HASH_CHUNK):
        n = min(_HASH_CHUNK, source.size - start)
        h.update(whole[start:start + n] if whole is not None else source.read(start, n))
    return h.hexdigest()


class _DataFile:
    __slots__ = ("opened", "sha1")

    def __init__(self, opened: _Opened):
        self.opened = opened
        self.sha1 = None


def expected_nbytes(tensor) -> int:
    """Bytes the external contents of ``tensor`` must have: dims x element size (raw layout).

    Raises InvalidModelError for a STRING tensor (it has no raw layout, so it cannot be
    external: Clause 13.1) or an element type outside Table 5.
    """
    code = tensor.data_type or 0
    if code == DataType.STRING:
        raise RefusedError("a STRING tensor cannot have external data (it has no raw layout, "
                           "Clause 13.1)")
    info = INFO.get(code)
    if info is None or code == DataType.UNDEFINED:
        raise RefusedError(f"element type {code} has no raw layout")
    return info.raw_nbytes(tensor.size)


def resolve_external_data(model: Model, base=None, *, allow_outside: bool = False,
                          storage_options: dict | None = None, offsets: dict | None = None,
                          source: str | None = None, errors: list | None = None) -> list[Source]:
    """Resolve every external tensor of ``model`` (initializers, sparse initializers' values and
    indices, attribute tensors, in subgraphs, functions and training graphs).

    Args:
        model: the model; its tensors get ``external``: the Blob of exactly the tensor's bytes
            in its data file (read through the map, or range reads of a remote file).
        base: the model's directory (a local path, or a URL of the directory); default
            ``model.base_dir``.
        allow_outside: resolve locations outside that directory too (absolute paths, ``..``,
            links, hard links). Never the default (Clause 15.3).
        storage_options: fsspec options for a URL base.
        offsets: ``{id(tensor): byte offset of the TensorProto in the .onnx file}`` for error
            messages (the reader has them).
        source: the model file's name, for error messages.
        errors: a list: a tensor that cannot be resolved is left unresolved and its error
            appended here instead of raised (``onemodel check``); the others are resolved.
    Returns:
        the Sources opened (one per data file), which the caller closes (the reader puts them in
        ``model.resources``). On error every file opened here is closed again.
    Raises:
        InvalidModelError for a refused reference, a size mismatch or a checksum mismatch, or
        when there is no ``base`` (a model read from bytes); IoError when a file cannot be read.
        Each names the tensor and the location, with the tensor's proto path.
    """
    externals = [t for _, t in iter_tensors(model) if t.data_location == EXTERNAL]
    if not externals:
        return []
    base = base if base is not None else model.base_dir
    source = source if source is not None else model.source
    if base is None:
        t = externals[0]
        e = InvalidModelError(
            f"tensor {quote(t.name)} has external data, but the model was read from bytes with no "
            "base directory; pass base_dir= (the directory of the model file) or "
            "load_external=False", path=proto_path(model, t), source=source)
        if errors is None:
            raise e
        errors.append(e)
        return []
    resolver = _Resolver(base, allow_outside, storage_options)
    try:
        for t in externals:
            try:
                resolver.resolve(t)
            except OneModelError as e:
                where = None
                if offsets is not None:
                    where = offsets.get(id(t))
                if errors is None:
                    raise _located(e, model, t, where, source) from None
                errors.append(_located(e, model, t, where, source))
    except BaseException:
        resolver.close_all()
        raise
    finally:
        resolver.close_base()
    return resolver.sources


def _located(e: OneModelError, model, t, offset, source) -> OneModelError:
    loc = None
    for entry in t.external_data:
        if entry.key == "location":
            loc = entry.value
            break
    head = f"tensor {quote(t.name)}"
    if loc is not None:
        head += f", external data location {quote(loc)}"
    err = type(e)(f"{head}: {e.message}", path=e.path, offset=e.offset, source=e.source)
    return err.at(path=proto_path(model, t), offset=offset, source=source)


class _Resolver:
    """One model's resolution: the base directory descriptor and one Source per data file."""

    def __init__(self, base, allow_outside: bool, storage_options):
        self.base = base
        self.allow_outside = allow_outside
        self.storage_options = storage_options
        self.by_location: dict = {}
        self.by_identity: dict = {}
        self.sources: list[Source] = []
        self.base_fd = None
        if not is_remote(base) and not allow_outside and DIR_FD_WALK:
            directory = local_path(base)
            try:
                self.base_fd = os.open(directory, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
            except OSError as e:
                raise IoError(f"cannot open the model directory {quote(directory)}: "
                              f"{e.strerror or e}") from None

    def data_file(self, location: str) -> _DataFile:
        key = location if self.allow_outside else \
            ("/".join(location_parts(location)) if not is_remote(self.base) else location)
        df = self.by_location.get(key)
        if df is not None:
            return df
        opened = open_location(self.base, location, allow_outside=self.allow_outside,
                               storage_options=self.storage_options, base_fd=self.base_fd)
        df = self.by_identity.get(opened.identity)
        if df is not None:  # the same file under another spelling: keep the first map
            opened.source.close()
        else:
            df = _DataFile(opened)
            self.by_identity[opened.identity] = df
            self.sources.append(opened.source)
        self.by_location[key] = df
        return df

    def resolve(self, t) -> None:
        ref = parse_reference(t.external_data)
        want = expected_nbytes(t)
        df = self.data_file(ref.location)
        src = df.opened.source
        size = src.size
        if ref.offset > size:
            raise RefusedError(f"offset {ref.offset} is past the end of the {size}-byte file")
        length = ref.length if ref.length is not None else size - ref.offset
        if ref.offset + length > size:
            raise RefusedError(f"the {size}-byte file is shorter than offset {ref.offset} + "
                               f"length {length} (Clause 13.2)")
        if length != want:
            what = "length" if ref.length is not None else "the rest of the file after offset"
            raise RefusedError(f"{what} {length} does not match dims {list(t.dims)} of "
                               f"{INFO[t.data_type].name} ({want} bytes)")
        if ref.checksum is not None:
            if df.sha1 is None:
                df.sha1 = _sha1_of(src)
            if df.sha1 != ref.checksum:
                raise RefusedError(f"checksum mismatch: the file's SHA-1 is {df.sha1}, the "
                                   f"reference says {ref.checksum} (Clause 13.3)")
        t.external = Blob(src, ref.offset, length)

    def close_base(self) -> None:
        if self.base_fd is not None:
            os.close(self.base_fd)
            self.base_fd = None

    def close_all(self) -> None:
        for s in self.sources:
            s.close()
        self.sources = []


def default_base(source: Source):
    """The directory external data of a model read from ``source`` resolves against: the
    directory of a local file (absolute), the directory URL of a remote one, the compressed
    file's for a decompressed ``.zst`` source, ``None`` for bytes in memory (never the working
    directory, Clause 15.3). See :func:`onemodel.storage.place.place_of`."""
    place = place_of(source)
    return None if place is None else place[0]


__all__ = ["KEYS", "ExternalReference", "parse_reference", "location_parts", "open_location",
           "open_data_sink", "resolve_external_data", "expected_nbytes", "default_base",
           "data_file_identity", "data_file_target", "same_directory"]
