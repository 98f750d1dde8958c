"""Where an external data file is written (ONNX Part 1, Clause 13): the write-side counterpart
of :mod:`.external_walk`.

:func:`data_file_target` says where a data file of a given location goes (a local path or a URL;
nothing is opened), :func:`open_data_sink` opens a Sink there, creating its directories by the
confined walk (:func:`.external_walk.make_dirs`), and :func:`same_directory` compares two model
directories. The location passes :func:`~.external_refs.location_parts` (``url=True`` under a
URL) unless ``allow_outside`` is given.
"""

from __future__ import annotations

import os

from ...errors import IoError, quote
from ...storage.place import is_remote, local_path, url_join
from .external_refs import location_parts
from .external_walk import make_dirs, outside_path


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
        return outside_path(directory, location)
    return os.path.join(directory, *location_parts(location))


def open_data_sink(base, location: str, *, allow_outside: bool = False,
                   storage_options: dict | None = None, progress=None, temporary: bool = True):
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
    ``temporary=False`` writes a local file at its own name, which must not exist (a staged data
    file: a name unique to the write, :mod:`.publish`).
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
        return open_sink(LocalSink(path, lock=False, temporary=temporary), progress=progress)
    parts = location_parts(location)
    if len(parts) > 1:
        make_dirs(local_path(base), parts[:-1])
    if os.path.isdir(path) and not os.path.islink(path):
        raise IoError(f"cannot write data file {quote(location)}: it is a directory")
    return open_sink(LocalSink(path, lock=False, temporary=temporary), progress=progress)


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


__all__ = ["data_file_target", "open_data_sink", "same_directory"]
