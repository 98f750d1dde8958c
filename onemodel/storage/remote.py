"""fsspec URLs as byte sources and sinks: range reads, coalesced fetches, staged uploads.

Any URL fsspec understands is accepted (``s3://``, ``gs://``, ``https://``, ``memory://``,
chained URLs such as ``simplecache::s3://b/m.onemodel``). Storage options are passed to the
backend as given; credentials otherwise come from each backend's usual environment variables
(``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ``GOOGLE_APPLICATION_CREDENTIALS`` ...).

Reading (:class:`RemoteSource`) never downloads the whole object, unless it is small
(:data:`WHOLE_OBJECT_BYTES`). The first :data:`HEAD_BYTES` bytes are fetched once and kept, so
a reader's header read and a small manifest read cost one request; every other read is one
range request whose answer is checked to be exactly the bytes asked for. ``fetch_many`` merges
neighbouring ranges (gaps of at most :data:`COALESCE_GAP` bytes) into few requests issued
concurrently. Reads that follow each other
through the file (a converter streaming tensors in order, a parser walking a large structure)
are served from a read-ahead window that grows to :data:`READAHEAD_MAX`, so they too cost few
requests; a random read fetches exactly its bytes.

Over HTTP(S) the range requests are made here, on fsspec's own aiohttp session, so that every
answer is checked before its body is read: status 206 with a ``Content-Range`` naming exactly
the requested bytes. A server that ignores ``Range`` (status 200 with the whole body) is refused
without transferring the body, rather than silently downloading everything or handing back bytes
from the wrong offset. Opening an HTTP source costs one request: the object's size comes from the
``Content-Range`` of the first read. Other backends take the size from ``fs.info`` (one metadata
request, e.g. S3 HEAD) and read with ``fs.cat_file``/``fs.cat_ranges``; lengths are checked.

Writing (:class:`RemoteSink`) streams: bytes go to the backend as they are written (multipart
uploads on S3), and the object appears only on :meth:`RemoteSink.commit`. See the class for how
an aborted upload leaves no object that looks complete.

A model's tensors are read long after it was opened, so every read checks that the object is
still the one that was opened (:class:`RemoteSource`): a replaced object is an IoError, never a
mix of two versions.

Every backend failure becomes :class:`~onemodel.errors.IoError` naming the URL; a missing backend
package becomes a one-line :class:`~onemodel.errors.UnsupportedError` naming what to install, and
a storage option the backend does not take a :class:`~onemodel.errors.UsageError` naming it.
"""

from __future__ import annotations

import asyncio
import posixpath
import re
import uuid

from ..errors import (
    IoError,
    OneModelError,
    UnsupportedError,
    UsageError,
    clip,
    display_url,
)
from ..limits import KiB, MiB
from .base import Sink, Source

#: Bytes fetched by the first read of a remote source and kept: enough for the OneModel header
#: and a small manifest, or the start of an ONNX file, so opening costs one request.
HEAD_BYTES = 64 * KiB

#: An object of at most this many bytes whose size is known at open (every backend but HTTP) is
#: fetched whole by its first read and kept, as its head: one request, where its structure read
#: by ranges would take several (each an object store's 10-30 ms of first-byte latency, the time
#: of 0.1-3 MB of transfer), and every later read of it (the tensors of a digest) is served from
#: it, so each byte is fetched once.
WHOLE_OBJECT_BYTES = 4 * MiB

#: Two ranges of one ``fetch_many`` call whose gap is at most this many bytes are fetched by one
#: request (the gap is transferred and dropped).
COALESCE_GAP = 1 * MiB

#: Coalescing stops growing a request past this many bytes (a single larger range is still one
#: request), so large loads run as several concurrent requests.
MAX_REQUEST_BYTES = 64 * MiB

#: Reads that start at most this many bytes after the previous read ended count as sequential
#: (tensors one after the other, with alignment padding between them; the records of an ONNX
#: file whose tensors are small, read through a BlockView that skips their values): the gap is
#: fetched with the read-ahead window rather than skipped by a new request. A request costs an
#: object store's first-byte latency (10-30 ms), the time of 0.1-3 MB of transfer at one
#: connection's 10-100 MB/s, so a gap under 256 KiB costs less time read than skipped; larger
#: gaps (tensors of 256 KiB and more) are skipped, so bytes are not read for nothing. A scan of
#: 20 ONNX models of 4 MiB with 50 initializers each on the moto server: 51 requests and
#: 217 ms a model with 4 KiB of slack (one per initializer), 6 requests and 37 ms with
#: 256 KiB (benchmarks/scan.py --s3).
SEQUENTIAL_SLACK = 256 * KiB

#: First read-ahead of a sequential run of reads, in bytes; it doubles with each further
#: sequential read that misses the window, up to :data:`READAHEAD_MAX`. A random read fetches
#: exactly what it asks for.
READAHEAD_MIN = 256 * KiB

#: Largest read-ahead window, in bytes: reading tensors one after the other in file order costs
#: about one request per this many bytes, and memory for one window.
READAHEAD_MAX = 16 * MiB

#: Range requests of one ``fetch_many`` call in flight at once.
CONCURRENCY = 8

#: Backends whose files stage an upload (a multipart or resumable upload) that becomes an object
#: only when the file is closed, and that ``discard()`` throws away.
_STAGED_PROTOCOLS = frozenset({"s3", "s3a", "gs", "gcs", "abfs", "abfss", "az", "adl"})

#: What to install for a backend fsspec cannot import.
_INSTALL_HINTS = {
    "s3": 'install the "s3" extra: pip install "onemodel-onnx[s3]"',
    "s3a": 'install the "s3" extra: pip install "onemodel-onnx[s3]"',
    "gs": "install gcsfs: pip install gcsfs",
    "gcs": "install gcsfs: pip install gcsfs",
    "http": 'install the "http" extra: pip install "onemodel-onnx[http]"',
    "https": 'install the "http" extra: pip install "onemodel-onnx[http]"',
    "az": "install adlfs: pip install adlfs",
    "abfs": "install adlfs: pip install adlfs",
    "abfss": "install adlfs: pip install adlfs",
}


def _protocol(url: str) -> str:
    first = url.split("::", 1)[0]
    return first.split("://", 1)[0].lower() if "://" in first else first.lower()


def _protocols(fs) -> set[str]:
    p = fs.protocol
    return {p} if isinstance(p, str) else set(p)


def filesystem(url: str, storage_options: dict | None = None):
    """``(fs, path)`` for ``url`` through ``fsspec.core.url_to_fs``, with the options
    :func:`options_for` picks for it.

    Raises UnsupportedError for an unknown scheme or a backend that is not installed (naming
    the extra to install), IoError when the backend cannot be set up.
    """
    import fsspec.core

    name = display_url(url)
    try:
        return fsspec.core.url_to_fs(url, **_guard_redirects(url, options_for(url,
                                                                              storage_options)))
    except ImportError:
        # in a chain (simplecache::http://...) the link whose backend is missing is named
        links = [_protocol(link) for link in url.split("::")]
        proto = next((p for p in reversed(links) if p in _INSTALL_HINTS), links[0])
        hint = _INSTALL_HINTS.get(proto, "install the fsspec backend for it")
        raise UnsupportedError(f"no backend for {proto}:// URLs; {hint}", source=name) from None
    except ValueError as e:
        if "protocol not known" in str(e).lower():
            raise UnsupportedError(f"unknown URL scheme {_protocol(url)!r}", source=name) \
                from None
        raise as_io_error(e, url, "open") from None
    except OneModelError:
        raise
    except Exception as e:  # backend constructors raise anything
        raise as_io_error(e, url, "open") from None


def _guard_redirects(url: str, options: dict) -> dict:
    """``options`` with, for every http(s) link of ``url``, a ``get_client`` that keeps the
    headers the user set from any origin but that link's (:mod:`.redirects`); a ``get_client``
    the caller gave is left as it is."""
    links = url.split("::")
    for i, link in enumerate(links):
        proto = _protocol(link)
        if proto not in ("http", "https") or "://" not in link:
            continue
        from .redirects import guarded_client
        if len(links) == 1:
            options = {**options}
            options.setdefault("get_client", guarded_client(link))
        else:
            section = dict(options.get(proto) or {})
            section.setdefault("get_client", guarded_client(link))
            options = {**options, proto: section}
    return options


#: Protocol names that are the same backend, for matching option sections.
_ALIASES = {"https": "http", "s3a": "s3", "gcs": "gs", "abfss": "abfs"}


def options_for(url: str, storage_options: dict | None) -> dict:
    """The storage options that apply to ``url``.

    Options may be flat (``{"key": ..., "secret": ...}``: given to the URL's backend as they
    are) or in sections named by protocol (``{"s3": {...}, "http": {"headers": {...}}}``), so one
    set of options can serve a conversion between two backends. A URL's own section is merged
    over the flat options (``https`` matches ``http``, ``s3a`` matches ``s3``, ``gcs`` matches
    ``gs``); other protocols' sections are left out. In a chained URL every link keeps its own
    section, as fsspec expects.
    """
    if not storage_options:
        return {}
    from fsspec.registry import known_implementations, registry

    protocols = set(known_implementations) | set(registry)
    raw = [_protocol(seg) if "://" in seg else seg.lower() for seg in url.split("::")]
    chain = [_ALIASES.get(p, p) for p in raw]
    flat, own, sections = {}, {}, {}
    for k, v in storage_options.items():
        if k in protocols and isinstance(v, dict):
            key = _ALIASES.get(k, k)
            if key in chain:
                if len(chain) == 1:
                    own.update(v)
                else:
                    sections[raw[chain.index(key)]] = v
        else:
            flat[k] = v
    return {**flat, **own, **sections}


_UNEXPECTED_KEYWORD = re.compile(r"unexpected keyword argument '([^']+)'")


def as_io_error(exc: BaseException, url: str, action: str = "read") -> Exception:
    """An IoError for a backend exception (fsspec, aiohttp, botocore, OSError) naming ``url``.

    Not found (404, FileNotFoundError) and access denied (401/403, PermissionError) are said
    in those words; a refused connection says it could not connect. A ``TypeError`` about an
    unexpected keyword argument (a storage option the backend does not take: s3fs and aiohttp
    only find out when the first request is made) is a
    :class:`~onemodel.errors.UsageError` naming the option instead.
    """
    name = display_url(url)
    bad = _UNEXPECTED_KEYWORD.search(str(exc)) if isinstance(exc, TypeError) else None
    if bad is not None:
        proto = _protocol(url.split("::")[-1]) if "::" in url else _protocol(url)
        return UsageError(f"storage option {bad.group(1)!r} is not taken by the {proto}:// "
                          f"backend (check its spelling and its section: docs/storage.md) "
                          f"in {name}")
    status = getattr(exc, "status", None)
    if isinstance(exc, FileNotFoundError) or status in (404, 410):
        return IoError(f"cannot {action}: not found", source=name)
    if isinstance(exc, PermissionError) or status in (401, 403):
        return IoError(f"cannot {action}: access denied", source=name)
    kind = type(exc).__name__.lower()
    if "payload" in kind or "disconnect" in kind or isinstance(exc, ConnectionResetError):
        return IoError(f"cannot {action}: the connection closed before the response was "
                       f"complete", source=name)
    if isinstance(exc, ConnectionRefusedError) or "connect" in kind:
        return IoError(f"cannot {action}: cannot connect ({_short(exc)})", source=name)
    if isinstance(exc, asyncio.TimeoutError) or "timeout" in kind:
        return IoError(f"cannot {action}: timed out", source=name)
    if status is not None:
        return IoError(f"cannot {action}: HTTP status {status}", source=name)
    return IoError(f"cannot {action}: {_short(exc)}", source=name)


#: Lines of a backend's error text an IoError keeps, and characters of each line.
ERROR_LINES = 6
ERROR_LINE_CHARS = 300


def _short(exc: BaseException) -> str:
    """A backend exception as part of a one-line message: ``Type: first line | second line``.

    Every useful line of its text is kept (s3fs and botocore put the reason on the second line
    and later ones: the request, the endpoint): blank lines, repeated lines and traceback lines
    are dropped, at most :data:`ERROR_LINES` lines are kept (then ``| (N more lines)``), each cut
    to :data:`ERROR_LINE_CHARS` characters (:func:`~onemodel.errors.clip`, which masks a URL
    in a line it cuts). The command line masks every line it prints with its one masking
    function, ``onemodel.cli.redact.redact`` (URLs, and secrets outside them: ``alice:pw@host``,
    ``token=...``, ``Authorization: Bearer ...``), the lines kept here included."""
    lines: list[str] = []
    for raw in str(exc).splitlines():
        line = raw.strip()
        if not line or line in lines or line.startswith(("Traceback (", 'File "')):
            continue
        lines.append(line)
    if not lines:
        return type(exc).__name__
    more = len(lines) - ERROR_LINES
    kept = [clip(line, ERROR_LINE_CHARS) for line in lines[:ERROR_LINES]]
    if more > 0:
        kept.append(f"({more} more line{'s' if more != 1 else ''})")
    return f"{type(exc).__name__}: {' | '.join(kept)}"


_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$", re.IGNORECASE)
_UNSATISFIED_RANGE = re.compile(r"^\s*bytes\s+\*/(\d+)\s*$", re.IGNORECASE)


def coalesce(ranges: list[tuple[int, int]], gap: int = COALESCE_GAP,
             limit: int = MAX_REQUEST_BYTES) -> list[tuple[int, int, list[int]]]:
    """Group ``(offset, length)`` ranges into requests ``(start, end, members)``.

    Ranges are taken in offset order; a range joins the current request when it starts at most
    ``gap`` bytes after the request's end and the request stays within ``limit`` bytes.
    ``members`` are indices into ``ranges``. Empty ranges join no request.
    """
    order = sorted((i for i, (o, n) in enumerate(ranges) if n > 0), key=lambda i: ranges[i][0])
    groups: list[tuple[int, int, list[int]]] = []
    for i in order:
        o, n = ranges[i]
        if groups:
            start, end, members = groups[-1]
            new_end = max(end, o + n)
            if o - end <= gap and new_end - start <= limit:
                groups[-1] = (start, new_end, members + [i])
                continue
        groups.append((o, o + n, [i]))
    return groups


class RemoteSource(Source):
    """Bytes of an fsspec URL, read with range requests; nothing is downloaded whole.

    Args:
        url: the URL (``s3://bucket/key``, ``https://host/path``, ``memory://...``, chains).
        storage_options: passed to the fsspec backend (credentials, ``endpoint_url`` ...).
        progress: optional callable given the number of bytes each request transferred.
        head_bytes: size of the first read, kept and reused (default :data:`HEAD_BYTES`).

    ``read(offset, length)`` returns exactly ``length`` bytes as a read-only memoryview and
    raises MalformedError for a range past the end, IoError for anything the backend or server
    does wrong (not found, access denied, refused connection, a status or ``Content-Range``
    other than the one asked for, a truncated or short answer) and for an object that changed
    since it was opened: the object's identity is pinned at open and checked on every read
    (HTTP: strong ETag or Last-Modified; S3: ``If-Match`` ETag, and the ``VersionId`` in a
    versioned bucket, which reads the opened version; other backends: ``fs.info`` ETag,
    generation or modification time, compared after each read). ``whole()`` is ``None``, so
    readers make :class:`~onemodel.storage.blob.Blob` tensors fetched on first use.
    """

    def __init__(self, url: str, storage_options: dict | None = None, *, progress=None,
                 head_bytes: int = HEAD_BYTES):
        self.url = url
        self.name = display_url(url)
        self.progress = progress
        self.requests = 0            # range requests made (for tests and benchmarks)
        self.bytes_fetched = 0       # bytes those requests transferred
        self._head_bytes = head_bytes
        self._head: memoryview | None = None
        self._etag: tuple | None = None  # HTTP: (header, value) pinned by the first answer
        self._window: tuple[int, memoryview] | None = None  # (offset, bytes) of the read-ahead
        self._last_end: int | None = None               # end of the last read past the head
        self._readahead = READAHEAD_MIN
        self._s3_pin: dict | None = None  # S3: IfMatch (and VersionId) of every GET
        self._identity: tuple | None = None  # other backends: what fs.info said at open
        self.fs, self.path = filesystem(url, storage_options)
        kind = type(self.fs).__name__
        self._http = kind == "HTTPFileSystem"
        if self._http:
            self.size = -1  # learnt from the first answer's Content-Range
            self._load_head()
            return
        info = self._info("open")
        self.size = _size_of(info, self.name)
        if self.size <= WHOLE_OBJECT_BYTES:  # one request for all of a small object
            self._head_bytes = max(self._head_bytes, self.size)
        if kind == "S3FileSystem" and info.get("ETag"):
            self._s3_pin = {"IfMatch": info["ETag"]}
            if info.get("VersionId") and info["VersionId"] != "null":
                self._s3_pin["VersionId"] = info["VersionId"]
        elif kind not in _WHOLE_COPY_FILESYSTEMS:
            self._identity = _identity_of(info)

    # -- size, identity and head ---------------------------------------------------------------
    def _info(self, action: str) -> dict:
        try:
            if action != "open":
                self.fs.invalidate_cache(self.path)  # the backend's listing cache is stale
            return self.fs.info(self.path)
        except Exception as e:
            raise as_io_error(e, self.url, action) from None

    def _check_unchanged(self, offset: int) -> None:
        """After a read through a generic backend: the object's identity (ETag, generation,
        modification time, size ... as ``fs.info`` reports them) is still the one seen at
        open, so the bytes just read are all of the object that was opened."""
        if self._identity is None:
            return
        now = self._info("read")
        if _identity_of(now) != self._identity:
            raise _changed("its " + _what_changed(self._identity, _identity_of(now)),
                           offset, self.name)

    def _load_head(self) -> memoryview:
        if self._head is None:
            if self._http:
                self._head = self._http_fetch(0, self._head_bytes, first=True)
            else:
                n = min(self.size, self._head_bytes)
                self._head = self._fetch_ranges([(0, n)])[0] if n else memoryview(b"")
        return self._head

    # -- Source interface ----------------------------------------------------------------------
    def read(self, offset: int, length: int) -> memoryview:
        """Exactly ``length`` bytes at ``offset``.

        From the kept head when they lie in it; from the read-ahead window when a previous
        sequential read fetched them; else one range request: of exactly these bytes for a
        random read, of a growing window for sequential reads (see :data:`READAHEAD_MAX`).
        """
        self._check_range(offset, length)
        if length == 0:
            return memoryview(b"")
        end = offset + length
        if end <= min(self.size, self._head_bytes):
            return memoryview(self._load_head())[offset:end]
        win = self._window
        if win is not None and win[0] <= offset and end <= win[0] + len(win[1]):
            self._last_end = end
            return memoryview(win[1])[offset - win[0]:end - win[0]]
        last = self._last_end
        self._last_end = end
        if last is None or not 0 <= offset - last <= SEQUENTIAL_SLACK:
            self._readahead = READAHEAD_MIN
            return memoryview(self._fetch_ranges([(offset, end)])[0])
        # sequential: fetch on from where the window ends (nothing is fetched twice), at least
        # the read-ahead size, and keep what was fetched as the new window
        start, tail = offset, None
        if win is not None and win[0] <= offset < win[0] + len(win[1]):
            start = win[0] + len(win[1])
            tail = bytes(win[1][offset - win[0]:])  # a copy: a view would keep the old window
        self._window = win = None  # the old window goes before the new one comes
        stop = min(self.size, max(end, start + self._readahead))
        self._readahead = min(2 * self._readahead, READAHEAD_MAX)
        body = self._fetch_ranges([(start, stop)])[0]
        self._window = (start, body)
        if tail is None:
            return body[:length]
        out = bytearray(length)  # a read across the old window's end: its tail + the new start
        out[:len(tail)] = tail
        out[len(tail):] = body[:end - start]
        return memoryview(out).toreadonly()

    def fetch_many(self, ranges: list[tuple[int, int]]) -> list[memoryview]:
        """Exactly the bytes of each ``(offset, length)``, fetched by few coalesced requests.

        Ranges inside the kept head or the read-ahead window cost nothing; the others are
        grouped by :func:`coalesce`
        and the groups fetched concurrently. Each result is a zero-copy slice of its group's
        answer. Raises MalformedError for a range past the end, IoError.
        """
        for o, n in ranges:
            self._check_range(o, n)
        out: list[memoryview | None] = [None] * len(ranges)
        rest = []
        head_end = min(self.size, self._head_bytes)
        win = self._window
        for i, (o, n) in enumerate(ranges):
            if n == 0:
                out[i] = memoryview(b"")
            elif o + n <= head_end and self._head is not None:
                out[i] = memoryview(self._head)[o:o + n]
            elif win is not None and win[0] <= o and o + n <= win[0] + len(win[1]):
                out[i] = memoryview(win[1])[o - win[0]:o + n - win[0]]
            else:
                rest.append(i)
        groups = coalesce([ranges[i] for i in rest])
        bodies = self._fetch_ranges([(s, e) for s, e, _ in groups])
        for (start, _end, members), body in zip(groups, bodies):
            view = memoryview(body)
            for m in members:
                o, n = ranges[rest[m]]
                out[rest[m]] = view[o - start:o - start + n]
        return out  # type: ignore[return-value]

    def close(self) -> None:
        """Drop the read-ahead window; views already handed out stay valid."""
        self._window = None

    # -- fetching ------------------------------------------------------------------------------
    def _fetch_ranges(self, spans: list[tuple[int, int]]) -> list[memoryview]:
        """Bodies of ``[start, end)`` spans as read-only memoryviews, each checked to be exactly
        ``end - start`` bytes."""
        if not spans:
            return []
        if self._http:
            if len(spans) == 1:
                return [self._http_fetch(*spans[0])]
            from fsspec.asyn import sync
            try:
                return sync(self.fs.loop, self._http_gather, spans)
            except OneModelError:
                raise
            except Exception as e:
                raise as_io_error(e, self.url) from None
        try:
            if self._s3_pin is not None:
                from fsspec.asyn import sync
                bodies = sync(self.fs.loop, self._s3_gather, spans)
            elif len(spans) == 1:
                s, e = spans[0]
                bodies = [self.fs.cat_file(self.path, start=s, end=e)]
            else:
                bodies = self.fs.cat_ranges([self.path] * len(spans), [s for s, _ in spans],
                                            [e for _, e in spans], on_error="return")
        except OneModelError:
            raise
        except Exception as e:
            if _precondition_failed(e):
                raise _changed("its ETag changed", spans[0][0], self.name) from None
            raise as_io_error(e, self.url) from None
        for (s, e), body in zip(spans, bodies):
            if isinstance(body, BaseException):
                raise as_io_error(body, self.url) from None
            self._account(len(body))
            if len(body) != e - s:
                raise IoError(f"asked for {e - s} bytes at offset {s}, got {len(body)}",
                              offset=s, source=self.name)
        self._check_unchanged(spans[0][0])
        return [memoryview(b).toreadonly() for b in bodies]

    async def _s3_gather(self, spans):
        sem = asyncio.Semaphore(CONCURRENCY)

        async def one(s, e):
            async with sem:
                return await self._s3_get(s, e)
        return await asyncio.gather(*(one(s, e) for s, e in spans))

    async def _s3_get(self, start: int, end: int) -> bytes:
        """One ranged S3 GetObject of ``[start, end)`` of the object as it was opened:
        ``If-Match`` its ETag (S3 answers 412 once the object was overwritten) and, in a
        versioned bucket, its ``VersionId`` (the opened version is read even after an
        overwrite). The answer's ETag is compared too, for servers that ignore If-Match."""
        bucket, key, version = self.fs.split_path(self.path)
        pin = dict(self._s3_pin)
        if version:
            pin["VersionId"] = version
        resp = await self.fs._call_s3("get_object", Bucket=bucket, Key=key,
                                      Range=f"bytes={start}-{end - 1}", **pin)
        try:
            if resp.get("ETag") and resp["ETag"] != self._s3_pin["IfMatch"]:
                raise _changed("its ETag changed", start, self.name)
            return await resp["Body"].read()
        finally:
            resp["Body"].close()

    def _account(self, n: int) -> None:
        self.requests += 1
        self.bytes_fetched += n
        if self.progress is not None:
            self.progress(n)

    def _http_fetch(self, start: int, end: int, first: bool = False) -> memoryview:
        from fsspec.asyn import sync
        try:
            return sync(self.fs.loop, self._http_get, start, end, first)
        except OneModelError:
            raise
        except Exception as e:
            raise as_io_error(e, self.url, "open" if first else "read") from None

    async def _http_gather(self, spans):
        sem = asyncio.Semaphore(CONCURRENCY)

        async def one(s, e):
            async with sem:
                return await self._http_get(s, e, False)
        return await asyncio.gather(*(one(s, e) for s, e in spans))

    async def _http_get(self, start: int, end: int, first: bool) -> memoryview:
        """One ranged GET of ``[start, end)``; the answer is checked before its body is read.

        With ``first`` the object's size is not known yet: it is taken from the answer, and
        ``end`` may lie past the end of the object.
        """
        session = await self.fs.set_session()
        kw = dict(self.fs.kwargs)
        headers = dict(kw.pop("headers", None) or {})
        headers["Range"] = f"bytes={start}-{end - 1}"
        headers["Accept-Encoding"] = "identity"
        async with session.get(self.fs.encode_url(self.path), headers=headers, **kw) as r:
            try:
                want = self._check_answer(r, start, end, first)
                body, overlong = await _read_body(r, want)
            except BaseException:
                r.close()  # drop the connection rather than read a body we refuse
                raise
        self._account(len(body))
        if len(body) < want:
            raise IoError(f"the response ended after {len(body)} of the {want} bytes asked "
                          f"for", offset=start, source=self.name)
        if overlong:
            raise IoError(f"the response is longer than the {want} bytes asked for",
                          offset=start, source=self.name)
        return body

    def _check_answer(self, r, start: int, end: int, first: bool) -> int:
        """Check an answer's status and headers against the request for ``[start, end)``;
        the number of body bytes to read. Raises IoError naming what is wrong."""
        action = "open" if first else "read"
        want = end - start
        self._check_validator(r.headers, start)
        if r.status == 206:
            m = _CONTENT_RANGE.match(r.headers.get("Content-Range", ""))
            if m is None:
                raise IoError(f"the server answered the range request for bytes "
                              f"{start}-{end - 1} without a valid Content-Range",
                              offset=start, source=self.name)
            first_byte, last_byte = int(m.group(1)), int(m.group(2))
            total = None if m.group(3) == "*" else int(m.group(3))
            if first:
                if total is None:
                    raise IoError("cannot open: the server does not state the object's size",
                                  source=self.name)
                self.size = total
                want = min(want, total - start)
            elif total is not None and total != self.size:
                raise IoError(f"the object changed size while being read ({self.size} "
                              f"then {total} bytes)", offset=start, source=self.name)
            if first_byte != start or last_byte - first_byte + 1 != want:
                raise IoError(f"asked for bytes {start}-{start + want - 1}, the server "
                              f"sent bytes {first_byte}-{last_byte}",
                              offset=start, source=self.name)
            return want
        if r.status == 200:
            length = r.headers.get("Content-Length", "")
            # the whole object in answer to a range request: acceptable only when it is no
            # more than what was asked for from offset 0 (the object is that small)
            if not (start == 0 and length.isdigit() and int(length) <= want
                    and (first or int(length) == self.size)):
                raise IoError(f"the server ignored the range request for bytes "
                              f"{start}-{end - 1} and sent the whole object (it does not "
                              f"serve byte ranges, as 'python -m http.server'); refusing to "
                              f"download it here: open 'simplecache::{self.name}' to "
                              f"download it whole into a local cache first",
                              offset=start, source=self.name)
            if first:
                self.size = int(length)
            return int(length)
        if r.status == 416 and first:
            m = _UNSATISFIED_RANGE.match(r.headers.get("Content-Range", ""))
            if m is None or int(m.group(1)) != 0:
                raise IoError("cannot open: the server refused the first range request "
                              "(status 416)", source=self.name)
            self.size = 0
            return 0
        if r.status in (404, 410):
            raise IoError(f"cannot {action}: not found", source=self.name)
        if r.status in (401, 403):
            raise IoError(f"cannot {action}: access denied{_elsewhere(r)}", source=self.name)
        raise IoError(f"cannot {action}: HTTP status {r.status}{_elsewhere(r)}", offset=start,
                      source=self.name)

    def _check_validator(self, headers, offset: int) -> None:
        """Pin the object's validator from the first answer and compare every later one: its
        strong ``ETag``, or, from a server that sends none, its ``Last-Modified`` time."""
        etag = headers.get("ETag")
        if etag and not etag.startswith("W/"):
            seen, what = ("ETag", etag), "its ETag changed"
        elif headers.get("Last-Modified"):
            seen, what = ("Last-Modified", headers["Last-Modified"]), \
                "its modification time (Last-Modified) changed"
        else:
            return
        if self._etag is None:
            self._etag = seen
        elif seen != self._etag:
            raise _changed(what, offset, self.name)


def _elsewhere(r) -> str:
    """For an answer that came from another origin than the URL asked for (a redirect was
    followed), `` at ORIGIN/PATH, where a redirect led (the headers set by storage options are
    not sent to another origin)``; else empty."""
    if not getattr(r, "history", None):
        return ""
    from .redirects import origin, shown
    if origin(r.history[0].url) == origin(r.url):
        return ""
    return (f" at {shown(r.url)}, another origin a redirect led to (the headers set by "
            "storage options are not sent there: docs/storage.md)")


#: fsspec filesystems that copy the whole object on first use (later reads see that copy, so
#: they cannot mix versions): no identity check per read.
_WHOLE_COPY_FILESYSTEMS = frozenset({"SimpleCacheFileSystem", "WholeFileCacheFileSystem"})

#: Keys of ``fs.info`` that change when an object is replaced, in the order they are shown.
_IDENTITY_KEYS = ("ETag", "etag", "VersionId", "generation", "md5Hash", "mtime",
                  "LastModified", "last_modified", "updated", "created", "ino", "size")


def _size_of(info: dict, name: str) -> int:
    if info.get("type") == "directory":
        raise IoError("cannot open: not a file", source=name)
    size = info.get("size")
    if not isinstance(size, int) or size < 0:
        raise IoError("cannot open: the backend does not report the object's size",
                      source=name)
    return size


def _identity_of(info: dict) -> tuple | None:
    """The ``(key, value)`` pairs of ``info`` that identify one version of an object, or
    ``None`` when the backend reports none but the size (nothing to pin)."""
    pairs = tuple((k, str(info[k])) for k in _IDENTITY_KEYS if info.get(k) is not None)
    return pairs if any(k != "size" for k, _ in pairs) else None


_IDENTITY_WORDS = {"etag": "ETag", "versionid": "version", "md5hash": "MD5", "ino": "inode",
                   "mtime": "modification time", "lastmodified": "modification time",
                   "last_modified": "modification time", "updated": "modification time",
                   "created": "modification time"}


def _what_changed(before: tuple, after: tuple | None) -> str:
    old, new = dict(before), dict(after or ())
    words = []
    for k, _ in before:
        word = _IDENTITY_WORDS.get(k.lower(), k)
        if old.get(k) != new.get(k) and word not in words:
            words.append(word)
    return " and ".join(words or ["identity"]) + " changed"


def _changed(why: str, offset: int, name: str) -> IoError:
    return IoError(f"the object changed since it was opened ({why}); its bytes would mix two "
                   "versions: open it again", offset=offset, source=name)


def _precondition_failed(exc: BaseException) -> bool:
    """Whether a backend error is S3's answer to a failed If-Match (412 PreconditionFailed)."""
    for e in (exc, exc.__cause__):
        err = getattr(e, "response", None)
        if isinstance(err, dict):
            code = str(err.get("Error", {}).get("Code", ""))
            status = err.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("PreconditionFailed", "412") or status == 412:
                return True
    return False


async def _read_body(response, n: int) -> tuple[memoryview, bool]:
    """The body, read into one buffer of the ``n`` bytes expected (``n`` was checked against
    the request before): ``(read-only view of what arrived, whether more followed)``."""
    buf = bytearray(n)
    got = 0
    while got < n:
        chunk = await response.content.read(min(n - got, 4 * MiB))
        if not chunk:
            break
        buf[got:got + len(chunk)] = chunk
        got += len(chunk)
    overlong = got == n and bool(await response.content.read(1))
    return memoryview(buf)[:got].toreadonly(), overlong


class RemoteSink(Sink):
    """Bytes streamed to an fsspec URL, published as one object by :meth:`commit`.

    Args:
        url: the destination URL.
        storage_options: passed to the fsspec backend.
        block_size: upload part size in bytes for backends that upload in parts (S3: at least
            5 MiB; the backend's default, 50 MiB for s3fs, when ``None``).

    How an aborted or failed write leaves no object that looks complete:

    * object stores whose files stage the upload (S3, GCS, Azure: multipart or resumable
      uploads) are written at the destination key directly. The object exists only once the
      upload is completed by :meth:`commit` (S3 ``CompleteMultipartUpload`` or a single PUT);
      :meth:`abort` calls the file's ``discard()``, which aborts the multipart upload.
    * every other backend (``memory://``, ...) is written to a temporary sibling
      ``.<name>.<random>.partial`` that :meth:`commit` moves over the destination and
      :meth:`abort` deletes.

    Raises IoError (UnsupportedError when the backend cannot write, e.g. plain HTTP).
    """

    def __init__(self, url: str, storage_options: dict | None = None, *,
                 block_size: int | None = None):
        self.url = url
        self.name = display_url(url)
        self.fs, self.path = filesystem(url, storage_options)
        self._staged = bool(_protocols(self.fs) & _STAGED_PROTOCOLS)
        if self._staged:
            self._target = self.path
        else:
            parent, base = posixpath.split(self.path.rstrip("/"))
            tmp = f".{base}.{uuid.uuid4().hex[:12]}.partial"
            self._target = posixpath.join(parent, tmp) if parent else tmp
        kwargs = {"block_size": block_size} if block_size else {}
        try:
            self._f = self.fs.open(self._target, "wb", **kwargs)
        except NotImplementedError:
            raise UnsupportedError("cannot write to this kind of URL", source=self.name) \
                from None
        except Exception as e:
            raise as_io_error(e, url, "create") from None
        self._pos = 0

    def write(self, data) -> None:
        if self._f is None:
            raise IoError("cannot write: the upload was already committed or aborted",
                          source=self.name)
        view = memoryview(data)
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B")
        try:
            self._f.write(view)
        except Exception as e:
            self.abort()
            raise as_io_error(e, self.url, "write") from None
        self._pos += view.nbytes

    def tell(self) -> int:
        return self._pos

    def commit(self) -> None:
        f, self._f = self._f, None
        if f is None:
            return
        try:
            f.close()
            if not self._staged:
                self.fs.mv(self._target, self.path)
        except Exception as e:
            self._discard(f)
            raise as_io_error(e, self.url, "write") from None

    def abort(self) -> None:
        f, self._f = self._f, None
        if f is not None:
            self._discard(f)

    def _discard(self, f) -> None:
        """Throw the upload away; errors here are secondary and dropped."""
        try:
            if self._staged:
                f.discard()
                f.closed = True  # nothing left to flush when the file is collected
            else:
                try:
                    f.close()
                finally:
                    if self.fs.exists(self._target):
                        self.fs.rm(self._target)
        except Exception:
            pass
