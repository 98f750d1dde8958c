"""Where a file lives: the path or URL of a target, source or sink, its directory and its name.

The one place that tells paths from URLs and splits them (ONNX Part 1, Clause 13.2: external
data locations are relative to the model file's directory; Clause 15.3: never to the working
directory). A target is

* a local path (``str`` or ``os.PathLike``) or a ``file://`` URL;
* an fsspec URL: ``s3://b/dir/m.onnx``, ``https://h/dir/m.onnx?sig=...``, ``memory://d/m.onnx``,
  or a chain, where the segment that names the file is the first one with a scheme
  (``simplecache::s3://b/m.onnx``, ``zip://dir/m.onnx::s3://b/a.zip``);
* a Source or Sink: a local file's is its path, a remote one's its URL (``url``), a wrapping
  sink's (``inner``: ``ZstdSink``, ``ProgressSink``) the wrapped one's, and one that carries a
  ``target`` attribute (a decompressed ``.zst`` source: the compressed file's) that; bytes in
  memory (``MemorySource``, ``BytesSink``) have none.

A directory URL ends with ``/`` in the segment that names the file (``s3://b/dir/``,
``simplecache::memory://d/``), so :func:`url_join` can put a relative location in it.
"""

from __future__ import annotations

import os
from urllib.parse import quote as url_quote
from urllib.parse import unquote, urlsplit, urlunsplit

from ..errors import InvalidModelError, UsageError, display_url, quote
from .base import Sink, Source, is_url

_FILE = "file://"


def local_path(target) -> str | None:
    """The local path ``target`` names (a path, ``os.PathLike`` or ``file://`` URL, as given:
    relative paths stay relative), or ``None`` for any other URL or object."""
    if isinstance(target, os.PathLike):
        target = os.fspath(target)
    if isinstance(target, str):
        if target.startswith(_FILE):
            return target[len(_FILE):]
        if not is_url(target):
            return target
    return None


def is_remote(target) -> bool:
    """True when ``target`` is a string naming a URL other than ``file://`` (an fsspec URL)."""
    return isinstance(target, str) and local_path(target) is None


def target_of(obj) -> str | None:
    """The path or URL ``obj`` (a target, Source or Sink; module documentation) reads or
    writes, or ``None`` for bytes in memory and objects that name no file."""
    from .local import LocalSink, LocalSource

    for _ in range(16):  # wrappers of wrappers, bounded
        if isinstance(obj, (str, os.PathLike)):
            return os.fspath(obj)
        if not isinstance(obj, (Source, Sink)):
            return None
        if "target" in getattr(obj, "__dict__", ()):
            return obj.target
        url = getattr(obj, "url", None)
        if isinstance(url, str):
            return url
        if isinstance(obj, (LocalSource, LocalSink)):
            return obj.name
        obj = getattr(obj, "inner", None)
    return None


def place_of(obj) -> tuple[str, str] | None:
    """``(directory, file name)`` of the file ``obj`` names (see :func:`target_of`): for a local
    file its absolute directory and base name, for a URL the directory URL (ending with ``/``
    in the segment that names the file; the query of an HTTP(S) URL dropped) and the file name
    (percent-decoded over HTTP(S)). ``None`` for bytes in memory: they have no directory, and
    the working directory is never used instead (Clause 15.3)."""
    target = target_of(obj)
    if target is None:
        return None
    path = local_path(target)
    if path is not None:
        path = os.path.abspath(path)
        return os.path.dirname(path), os.path.basename(path)
    segments = target.split("::")
    i = file_segment(segments)
    seg = segments[i]
    scheme = seg.split("://", 1)[0].lower() if "://" in seg else ""
    if scheme in ("http", "https"):
        s = urlsplit(seg)
        directory, _, name = s.path.rpartition("/")
        segments[i] = urlunsplit((s.scheme, s.netloc, directory + "/", "", ""))
        name = unquote(name)
    else:
        head, sep, rest = seg.rpartition("://")
        directory, slash, name = rest.rstrip("/").rpartition("/")
        segments[i] = head + sep + directory + slash
    return "::".join(segments), name


#: URL schemes whose query (``?X-Amz-Signature=...``, ``?versionId=...``) and fragment are not
#: part of the object's name.
QUERY_SCHEMES = ("http://", "https://", "s3://", "s3a://", "gs://", "gcs://")


def name_of_url(target: str) -> str:
    """The name part of ``target`` for telling its format and compression from the suffix: a
    presigned ``https://h/m.onnx?sig=...`` is named ``https://h/m.onnx``; other targets (paths,
    schemes whose paths may hold ``?``, such as ``memory://``) are returned unchanged."""
    if target.lower().startswith(QUERY_SCHEMES):
        s = urlsplit(target)
        return urlunsplit((s.scheme, s.netloc, s.path, "", ""))
    return target


def file_segment(segments: list[str]) -> int:
    """Index of the segment of a chained URL (split at ``::``) that names the file: the first
    with a scheme (``s3://`` in ``simplecache::s3://b/m.onnx``), else the first."""
    return next((i for i, s in enumerate(segments) if "://" in s), 0)


def url_join(directory: str, location: str) -> str:
    """The URL of relative ``location`` in directory URL ``directory`` (with or without a
    trailing ``/`` in the segment that names it), by
    :func:`join_location`: only the joining; ``location`` must have
    passed the rules of Clauses 13.2 and 15.3 (the ONNX package's ``location_parts(location,
    url=True)``)."""
    segments = directory.split("::")
    i = file_segment(segments)
    if not segments[i].endswith("/"):
        segments[i] += "/"
    return join_location("::".join(segments), location)


def _scheme(segment: str) -> str:
    return segment.split("://", 1)[0].lower() if "://" in segment else segment.lower()


def join_location(base_url: str, location: str) -> str:
    """The URL of external data file ``location`` beside the model at ``base_url`` (a model URL,
    or a directory URL ending in ``/``): only the joining.

    Which locations are legal (ONNX Part 1, Clauses 13.2 and 15.3: relative, no ``..``, also
    percent-encoded, no scheme or drive, no backslash) is decided by the ONNX package, which
    parses references (``onemodel.formats.onnx.external_refs.location_parts(location, url=True)``;
    storage imports nothing from formats): ``location`` must have passed it, and then the result
    lies in the model's directory or below it, on the same host or bucket. Components are
    joined as written (``.`` dropped); over HTTP(S) they are percent-encoded and the model URL's
    query is not carried over. In a chained URL (``simplecache::s3://...``) the segment that
    names the file is the one joined.

    Raises InvalidModelError naming the location when the model URL has no directory.
    """
    parts = [p for p in location.split("/") if p != "."]

    # the segment of a chained URL that names the file: the first one with a scheme
    segments = base_url.split("::")
    idx = file_segment(segments)
    seg = segments[idx]
    if _scheme(seg) in ("http", "https"):
        s = urlsplit(seg)
        directory = s.path.rsplit("/", 1)[0]
        path = directory + "/" + "/".join(url_quote(p, safe="") for p in parts)
        joined = urlunsplit((s.scheme, s.netloc, path, "", ""))
    else:
        scheme, _, rest = seg.rpartition("://")
        if "/" not in rest:
            raise InvalidModelError(f"external data location {quote(location)} cannot be "
                                    "resolved: the model URL has no directory",
                                    source=display_url(base_url))
        directory = rest.rsplit("/", 1)[0]
        joined = (scheme + "://" if scheme else "") + directory + "/" + "/".join(parts)
    segments[idx] = joined
    return "::".join(segments)


def same_file(a, b) -> bool:
    """Whether targets ``a`` and ``b`` (paths, ``os.PathLike``, ``file://`` or other URLs,
    Sources, Sinks: :func:`target_of`) name one file: local paths whose existing files are one
    (``(st_dev, st_ino)``: a symbolic link, ``..``, another spelling, a hard link, a
    case-folding file system), or that resolve alike (:func:`os.path.realpath`) where neither
    exists yet; URLs that are equal strings once the file's name is told
    (:func:`name_of_url`). Never raises."""
    return _same(_identity(a), _identity(b))


def _identity(obj):
    """What :func:`_same` compares of ``obj``: ``None`` (names no file), ``("url", name)``, or
    ``("path", path, (st_dev, st_ino) or None when it does not exist)``: one ``stat`` call."""
    t = target_of(obj)
    if t is None:
        return None
    p = local_path(t)
    if p is None:
        return ("url", name_of_url(t))
    try:
        st = os.stat(p)
    except (OSError, ValueError):
        return ("path", p, None)
    return ("path", p, (st.st_dev, st.st_ino))


def _same(a, b) -> bool:
    if a is None or b is None or a[0] != b[0]:
        return False
    if a[0] == "url":
        return a[1] == b[1]
    if a[2] is not None and b[2] is not None:
        return a[2] == b[2]
    if (a[2] is None) != (b[2] is None):
        return False  # (one exists, the other not: were they one path, both would)
    try:
        return os.path.realpath(a[1]) == os.path.realpath(b[1])
    except (OSError, ValueError):
        return False


def refuse_inputs_as_outputs(outputs, inputs) -> None:
    """Raise :class:`~onemodel.errors.UsageError` when a file a command would write is one it
    reads (:func:`same_file`): writing it would destroy the input (``hash m.onnx --manifest
    m.onnx``, a manifest over the model's data file). ``outputs`` and ``inputs`` are ``(what,
    target, ...)`` tuples, ``what`` naming the file in the message (``"--manifest"``, ``"the model
    file"``, ``"data file 'w.bin' of the model"``); a None target is skipped. Compared before
    anything is written."""

    outputs = [(what, out, _identity(out)) for what, out, *_ in outputs if out is not None]
    if not outputs:
        return
    for what_in, inp, *_ in inputs:  # (each input's file stated once: a scan has thousands)
        if inp is None:
            continue
        key = _identity(inp)
        for what_out, out, out_key in outputs:
            if _same(out_key, key):
                shown_out = display_url(str(target_of(out)))
                shown_in = display_url(str(target_of(inp)))
                same = "" if shown_in == shown_out else f" ({quote(shown_in)})"
                raise UsageError(f"{what_out} {quote(shown_out)} is {what_in}{same}, which this "
                                 "command reads: writing it would destroy it; choose another "
                                 "path")


__all__ = ["local_path", "is_remote", "target_of", "place_of", "file_segment", "url_join",
           "join_location", "same_file", "refuse_inputs_as_outputs"]
