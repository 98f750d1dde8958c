"""HTTP redirects: the headers a user set never reach another origin.

Storage options put secrets in request headers (``http.headers.Authorization``,
``X-Api-Key``, ``Cookie``, ...; docs/storage.md). aiohttp follows redirects and drops only
``Authorization`` (and URL user information) when one leads to another host; every other header
would go along. Every HTTP(S) session onemodel opens is made by :func:`guarded_client`, whose
middleware runs before each request, the redirected ones included: a request to another origin
(scheme, host and port) than the URL the user opened carries only the headers of
:data:`PASSED_HEADERS` (the range asked for, the encoding), never one the user set, whichever
way it was set (the ``headers`` option, the session's ``client_kwargs.headers``). The redirect
is followed, so a model served through a CDN (a store answering 302 with a signed URL of
another host) still opens; a server there that wants the credentials answers 401 or 403, which
is reported as access denied.

Every redirect is logged on the ``onemodel.storage`` logger at DEBUG level (the command line
prints it under ``--debug``): status, the origin and path it leads to (never a query, user
information or a header value) and the names of the headers dropped.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from ..errors import UnsupportedError

log = logging.getLogger("onemodel.storage")

#: Request headers (lower case) that a request to another origin than the one opened still
#: carries: those onemodel, fsspec and aiohttp set themselves, none of which is a secret.
PASSED_HEADERS = frozenset({"range", "accept-encoding", "accept", "user-agent", "host",
                            "connection", "content-length", "content-type", "if-match",
                            "if-none-match", "if-range"})


def origin(url) -> tuple[str, str, int | None]:
    """``(scheme, host, port)`` of an http(s) URL (a string or a yarl URL), the port made
    explicit (80, 443) so that ``http://h`` and ``http://h:80`` are one origin."""
    s = urlsplit(str(url))
    scheme = s.scheme.lower()
    try:
        port = s.port
    except ValueError:
        port = None
    if port is None:
        port = {"http": 80, "https": 443}.get(scheme)
    return scheme, (s.hostname or "").lower(), port


def shown(url) -> str:
    """``scheme://host:port/path`` of ``url`` for a log line: no user information, no query
    (where signatures travel), no fragment."""
    s = urlsplit(str(url))
    host = s.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = f":{s.port}" if s.port is not None else ""
    except ValueError:
        port = ""
    return f"{s.scheme}://{host}{port}{s.path}"


def _middleware(home):
    async def drop_headers_elsewhere(req, handler):
        if origin(req.url) != home:
            dropped = sorted({k for k in req.headers if k.lower() not in PASSED_HEADERS})
            for k in dropped:
                req.headers.popall(k, None)
            if dropped:
                log.debug("request to another origin than the one opened, %s: headers not "
                          "sent: %s", shown(req.url), ", ".join(dropped))
        return await handler(req)
    return drop_headers_elsewhere


async def _on_redirect(session, ctx, params) -> None:
    r = params.response
    target = r.headers.get("Location", "")
    try:
        to = r.url.join(type(r.url)(target)) if target else None
    except ValueError:
        to = None
    where = "another origin" if to is None or origin(to) != origin(params.url) else \
        "the same origin"
    log.debug("HTTP %s redirect from %s to %s (%s)", r.status, shown(params.url),
              shown(to) if to is not None else "an invalid location", where)


def _middlewares_supported() -> bool:
    """Whether the installed aiohttp takes client middlewares (3.12 and later): run for every
    request, redirected ones included, they are what drops the headers."""
    import inspect

    import aiohttp

    return "middlewares" in inspect.signature(aiohttp.ClientSession.__init__).parameters


_CLIENTS: dict = {}


def guarded_client(url: str):
    """A ``get_client`` for fsspec's HTTPFileSystem opened on ``url``: it makes the aiohttp
    session with the middleware that drops every header but :data:`PASSED_HEADERS` from a
    request to another origin than ``url``'s, and a trace that logs each redirect (module
    documentation). One function per origin, so fsspec's cache of filesystems keeps working."""
    home = origin(url)
    fn = _CLIENTS.get(home)
    if fn is not None:
        return fn

    async def get_client(**kwargs):
        import aiohttp

        if not _middlewares_supported():
            raise UnsupportedError(
                f"aiohttp {aiohttp.__version__} cannot keep the headers set by storage options "
                "from another origin a redirect leads to: aiohttp 3.12 or later is needed "
                '(pip install -U "aiohttp>=3.12")', source=shown(url))
        trace = aiohttp.TraceConfig()
        trace.on_request_redirect.append(_on_redirect)
        kwargs["trace_configs"] = [*(kwargs.get("trace_configs") or ()), trace]
        kwargs["middlewares"] = (*(kwargs.get("middlewares") or ()), _middleware(home))
        return aiohttp.ClientSession(**kwargs)

    _CLIENTS[home] = get_client
    return get_client
