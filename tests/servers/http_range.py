"""A local HTTP server for tests: serves byte strings with Range requests, counts every request
and every body byte it sends, and can be switched into the fault modes a remote reader must
survive.

    server = RangeServer().start()
    server.files["m.onemodel"] = data
    url = server.url("m.onemodel")
    ...
    server.mode = "ignore_range"
    server.mode_after = 2      # optional: answer the first two requests normally
    server.stop()

Modes (GET requests; HEAD follows the status of ``403``/``404``):

=======================  ====================================================================
``normal``               206 with ``Content-Range`` for a satisfiable single range, 200 without
                         ``Range``, 416 with ``bytes */size`` past the end; a strong ETag
``403`` / ``404``        that status, empty body
``ignore_range``         200 and the whole body, whatever the ``Range`` header says
``wrong_content_range``  206 whose ``Content-Range`` and body start 64 bytes after the asked
                         offset (bytes from the wrong offset, honestly labelled)
``truncated``            206 with correct headers, then half the body and the connection closed
``short``                206 whose ``Content-Range`` and body stop half-way through the range
``lying``                206 with the asked ``Content-Range`` and a body of the wrong length
``other_bytes``          206 with correct headers and length, but in the one answer whose range
                         holds byte ``flip_at`` that byte is inverted (other bytes of the right
                         length, which no check of headers or lengths can notice)
=======================  ====================================================================

Redirects: ``redirects[name] = url`` answers a request for ``name`` (any mode) with ``302`` and
``Location: url``; the request is logged with its headers like any other.

Validators: every answer carries a strong ``ETag`` of the bytes served, unless ``etags`` is set
false; ``last_modified[name]``, when set, is sent as ``Last-Modified``.
"""

from __future__ import annotations

import re
import socket
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODES = ("normal", "403", "404", "ignore_range", "wrong_content_range", "truncated", "short",
         "lying", "other_bytes")

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


@dataclass
class Request:
    """One request the server answered: method, path, the Range header (or None), the status,
    the number of body bytes written to the socket and the request headers."""

    method: str
    path: str
    range: str | None
    status: int
    sent: int  # body bytes handed to the socket (counted just before each write)
    headers: dict | None = None


class RangeServer:
    """An HTTP/1.1 server on 127.0.0.1 (a free port) over the byte strings in ``files``."""

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.mode = "normal"
        self.mode_after = 0  # requests answered normally before ``mode`` applies
        self.flip_at = 0  # ``other_bytes``: the file offset whose byte is inverted, once
        self.etags = True  # send a strong ETag with every answer
        self.last_modified: dict[str, str] = {}  # Last-Modified header per file name
        self.redirects: dict[str, str] = {}  # name -> URL answered with 302
        self.log: list[Request] = []
        self._lock = threading.Lock()
        self._httpd = None
        self._thread = None

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> "RangeServer":
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    # -- counting ------------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget the log and go back to ``normal`` mode."""
        with self._lock:
            self.log.clear()
        self.mode = "normal"
        self.mode_after = 0
        self.flip_at = 0
        self.etags = True
        self.last_modified.clear()
        self.redirects.clear()

    @property
    def requests(self) -> int:
        """Requests answered since the last :meth:`reset`."""
        return len(self.log)

    @property
    def bytes_sent(self) -> int:
        """Body bytes written since the last :meth:`reset`."""
        return sum(r.sent for r in self.log)

    def _record(self, req: Request) -> None:
        with self._lock:
            self.log.append(req)


def refused_url(name: str = "m.bin") -> str:
    """An http URL on 127.0.0.1 whose port nobody listens on (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/{name}"


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        """Clients that hang up on a refused answer are expected; other errors are printed."""
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner: RangeServer

    def setup(self):
        super().setup()
        # headers and body go out as separate writes: without this, Nagle's algorithm and the
        # client's delayed ACK stall every answer by 40 ms
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args):  # keep test output clean
        pass

    def do_HEAD(self):
        self._answer(body=False)

    def do_GET(self):
        self._answer(body=True)

    def _answer(self, body: bool):
        srv = self.owner
        mode = srv.mode if len(srv.log) >= srv.mode_after else "normal"
        name = self.path.lstrip("/").split("?", 1)[0]
        rng = self.headers.get("Range")
        data = srv.files.get(name)
        # recorded before answering, and counted before each write, so a client that has its
        # answer always finds it in the log
        self._req = req = Request(self.command, name, rng, 0, 0, dict(self.headers))
        srv._record(req)
        try:
            if name in srv.redirects:
                self._head(302, 0, extra={"Location": srv.redirects[name]})
                return
            if mode in ("403", "404") or data is None:
                self._head(403 if mode == "403" else 404, 0)
                return
            size = len(data)
            etag = f'"{len(data):x}-{hash(data) & 0xFFFFFFFFFFFF:x}"'  # bytes cache their hash
            if not srv.etags:
                etag = None
            self._modified = srv.last_modified.get(name)
            span = _parse_range(rng, size) if rng else None
            if rng is None or mode == "ignore_range" or not body:
                self._head(200, size, etag=etag, ranges=True)
                if body:
                    self._send(data)
                return
            if span is None:
                self._head(416, 0, extra={"Content-Range": f"bytes */{size}"})
                return
            a, b = span  # inclusive
            if mode == "wrong_content_range":
                a, b = min(a + 64, size - 1), min(b + 64, size - 1)
            elif mode == "short" and b > a:
                b = a + (b - a) // 2
            piece = memoryview(data)[a:b + 1]  # no copy: big answers cost no memory
            length = len(piece)
            if mode == "other_bytes" and a <= srv.flip_at <= b:
                srv.mode = "normal"  # this one answer only
                changed = bytearray(piece)
                changed[srv.flip_at - a] ^= 0xFF
                piece = memoryview(bytes(changed))
            if mode == "lying":
                piece = piece[:-1] if length > 1 else bytes(piece) + b"x"
                length = len(piece)
            self._head(206, length, etag=etag,
                       extra={"Content-Range": f"bytes {a}-{b}/{size}"})
            if mode == "truncated":
                self._send(piece[:len(piece) // 2])
                self.close_connection = True
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self._send(piece)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _head(self, status: int, length: int, *, etag: str | None = None, ranges=False,
              extra: dict | None = None):
        self._req.status = status
        self.send_response(status)
        self.send_header("Content-Length", str(length))
        self.send_header("Content-Type", "application/octet-stream")
        if ranges:
            self.send_header("Accept-Ranges", "bytes")
        if etag:
            self.send_header("ETag", etag)
        if getattr(self, "_modified", None):
            self.send_header("Last-Modified", self._modified)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()

    def _send(self, data: bytes) -> None:
        view = memoryview(data)
        step = 1 << 20
        for i in range(0, len(view), step):
            piece = view[i:i + step]
            with self.owner._lock:
                self._req.sent += len(piece)
            self.wfile.write(piece)


def _parse_range(header: str, size: int) -> tuple[int, int] | None:
    """``(first, last)`` inclusive for a single ``bytes=`` range, ``None`` if unsatisfiable."""
    m = _RANGE.match(header.strip())
    if m is None or (not m.group(1) and not m.group(2)):
        return None
    if not m.group(1):  # suffix range: the last n bytes
        n = int(m.group(2))
        return (max(0, size - n), size - 1) if n and size else None
    a = int(m.group(1))
    b = int(m.group(2)) if m.group(2) else size - 1
    if a >= size or b < a:
        return None
    return a, min(b, size - 1)
