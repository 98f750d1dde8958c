"""The models a scan reads: ``SOURCE...`` expanded into one sorted list (docs/scan.md#sources).

A SOURCE is, tried in this order:

* ``@LIST``: a local file or URL listing sources, one a line (blank lines and lines starting
  with ``#`` skipped); each line is expanded as a SOURCE itself (a line starting with ``@`` is
  refused: lists do not nest);
* a URL (``s3://bucket/models/``, ``https://host/m.onnx``, any fsspec protocol): one ending in
  ``/`` or naming a directory is a prefix, listed recursively; one holding ``*``, ``?`` or
  ``[`` a glob; any other one model (an http(s) URL is never listed: HTTP has no listing);
* a local path holding ``*``, ``?`` or ``[``: a glob (``**`` matches directories recursively);
* a local directory: walked recursively (symbolic links to directories are not followed);
* any other local path: one model, whatever its name (a FIFO too: its row says why it cannot
  be read). A path given as a SOURCE that does not exist is refused (a mistyped name should
  not look like a scan that ran); a missing file named in a list is a row (a fleet's list goes
  on without it).

From a listing (a directory, a prefix, a glob) only the files named like models count: the
suffixes of the registered formats (``.onnx``, ``.onemodel``), also followed by ``.zst``.
External data files (``.data``, ``.bin``, ``.safetensors``...) are never models of their own;
a FIFO or device named like a model is listed, and its row is an Io error (opening it never
blocks). The list is sorted by the source string and holds each source once.
"""

from __future__ import annotations

import glob
import os

from ..errors import UsageError

#: The characters that make a SOURCE a glob.
GLOB_CHARACTERS = frozenset("*?[")


def model_suffixes() -> tuple[str, ...]:
    """The file name suffixes of models in a listing: every registered format's suffixes
    (``.onnx``, ``.onemodel``), each also followed by ``.zst``; lower case."""
    from ..formats import plugins
    from ..storage.compressed import ZSTD_SUFFIX

    base = sorted({s.lower() for p in plugins() for s in p.suffixes})
    return tuple(base + [s + ZSTD_SUFFIX for s in base])


def _is_model_name(name: str, suffixes: tuple[str, ...]) -> bool:
    return name.lower().endswith(suffixes)


def _is_url(source: str) -> bool:
    from ..storage.place import is_remote

    return is_remote(source)


def expand(sources, *, storage_options: dict | None = None) -> list[str]:
    """Every model the SOURCEs name (module docstring), sorted, each once.

    Raises UsageError for a list that nests another, an empty SOURCE or a local path SOURCE
    that does not exist (not for a line of a list); IoError or
    UnsupportedError (the messages of :mod:`onemodel.storage`) when a list file, a prefix or a
    glob of a URL cannot be read or listed. A local glob matching nothing expands to nothing.
    """
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    suffixes = model_suffixes()
    found: set[str] = set()
    for source in sources:
        source = os.fspath(source)
        if source.startswith("@"):
            for line in _read_list(source[1:], storage_options):
                if line.startswith("@"):
                    raise UsageError(f"the list {source[1:]} names another list ({line}): "
                                     "lists do not nest")
                found.update(_expand_one(line, suffixes, storage_options))
        else:
            if (not _is_url(source) and not GLOB_CHARACTERS & set(source)
                    and not os.path.lexists(source)):
                from ..errors import quote

                raise UsageError(f"no such file or directory: {quote(source)}")
            found.update(_expand_one(source, suffixes, storage_options))
    return sorted(found)


def _read_list(target: str, storage_options: dict | None) -> list[str]:
    """The lines of the list file ``target`` (a path or URL), stripped, without blank lines
    and ``#`` comments."""
    from ..storage import open_source

    if not target:
        raise UsageError("'@' names no list file")
    source = open_source(target, storage_options=storage_options, compression=None)
    try:
        text = bytes(source.read(0, source.size)).decode("utf-8", errors="replace")
    finally:
        source.close()
    lines = (line.strip() for line in text.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _expand_one(source: str, suffixes: tuple[str, ...], storage_options) -> list[str]:
    if not source:
        raise UsageError("empty SOURCE")
    if _is_url(source):
        return _expand_url(source, suffixes, storage_options)
    if GLOB_CHARACTERS & set(source):
        out = []
        for match in glob.glob(source, recursive=True):
            if os.path.isdir(match):
                out += _walk(match, suffixes)
            elif _is_model_name(match, suffixes):
                out.append(match)
        return out
    if os.path.isdir(source):
        return _walk(source, suffixes)
    return [source]


def _walk(directory: str, suffixes: tuple[str, ...]) -> list[str]:
    """The files under ``directory`` named like models, recursively (links to directories
    not followed; a directory that cannot be listed is skipped, as ``os.walk`` does)."""
    out = []
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        out += [os.path.join(root, f) for f in files if _is_model_name(f, suffixes)]
    return out


def _expand_url(url: str, suffixes: tuple[str, ...], storage_options) -> list[str]:
    from ..storage.remote import as_io_error, filesystem

    protocol = url.split("::", 1)[0].split("://", 1)[0].lower()
    if protocol in ("http", "https"):
        return [url]  # HTTP has no listing: one model
    globbed = bool(GLOB_CHARACTERS & set(url.split("://", 1)[-1]))
    fs, path = filesystem(url, storage_options)
    try:
        if globbed:
            paths = [p for p in fs.glob(path) if not fs.isdir(p)]
        elif url.endswith("/") or fs.isdir(path):
            paths = fs.find(path)
        else:
            return [url]
    except Exception as e:  # a backend raises anything: one Io line
        raise as_io_error(e, url, "list") from None
    return [fs.unstrip_protocol(p) for p in paths if _is_model_name(p, suffixes)]
