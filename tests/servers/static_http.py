"""``python -m http.server`` in a thread: the standard library's own file server
(``http.server.SimpleHTTPRequestHandler``), which answers every GET with status 200 and the whole
file, ignoring ``Range``; it sends ``Last-Modified`` and no ETag.

    with StaticServer(directory) as server:
        url = server.url("m.onnx")
"""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep test output clean
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        """A client hanging up on the whole body it refused is expected."""


class StaticServer:
    """The files of ``directory`` served on 127.0.0.1 as ``python -m http.server`` serves them."""

    def __init__(self, directory):
        handler = functools.partial(_Quiet, directory=str(directory))
        self._server = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> "StaticServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/{name}"
