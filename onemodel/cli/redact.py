"""What keeps secrets off the terminal: every line the command line prints goes through
:func:`redact`.

A URL is masked by :func:`onemodel.errors.display_url` (user information and query
values, where presigned signatures and tokens travel, become ``***``), wherever it stands in the
line: an echoed argument, an error message from any layer, a warning, a JSON document. Values of
secret storage options (``--storage-option key=...``, ``http.headers.Authorization=...``) are
masked as well, should any message quote them.

A backend's own error text (s3fs, aiohttp, botocore: every useful line of it is kept, see
``storage.remote.as_io_error``) may carry a secret outside any ``://`` URL; those forms are masked
too (:func:`_mask_credentials`): user information before a host (``alice:pw@host`` ->
``***@host``), the value after a secret's name (``token=...``, ``X-Amz-Signature=...``,
``'password': '...'``), and an ``Authorization:`` header's credential (``Bearer ***``).

Masking a line without ``://`` costs one substring search; a line with a URL uses
``storage.place`` (urllib only: no fsspec, no asyncio).
"""

from __future__ import annotations

import re

#: A URL in running text is found from its ``://``: it starts at the scheme (and the fsspec
#: chain before it, ``simplecache::s3://b/k``) and ends at white space or a quote; sentence
#: punctuation right after it is not part of it. (Searching for ``://`` first keeps a 7 MB
#: ``info --json`` line at a few milliseconds, where one regular expression took 0.6 s.)
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-_")
_REST = re.compile(r"[^\s'\"<>`]*")
_TRAILING = re.compile(r"[.,;:!?)\]}]+$")

#: Storage option keys whose values are secrets (matched in any case, anywhere in the key);
#: every value under a ``headers`` key is taken for one too (Authorization, Cookie, X-Api-Key).
_SECRET_KEY = re.compile(r"key|secret|token|passw|auth|credential|signature|sig$|session|"
                         r"cookie|sas|bearer|private", re.IGNORECASE)

#: Secret values shorter than this are not searched for in text (``true``, ``1``: masking
#: them would mangle ordinary words and numbers, and they hide nothing).
_MIN_SECRET = 4

_secrets: set[str] = set()


def _mask_urls(line: str) -> str:
    from ..errors import display_url

    parts, done, at = [], 0, line.find("://")
    while at != -1:
        start = at
        while True:
            while start > done and line[start - 1] in _SCHEME_CHARS:
                start -= 1
            if start - 2 > done and line[start - 2:start] == "::":  # a chain: its links too
                start -= 2
            else:
                break
        while start < at and not line[start].isalpha():  # a scheme starts with a letter
            start += 1
        end = _REST.match(line, at).end()
        url = line[start:end]
        tail = _TRAILING.search(url)
        if tail is not None:
            url, end = url[:tail.start()], start + tail.start()
        if start < at:  # a scheme: mask (else "://" with nothing before it is text)
            parts.append(line[done:start])
            parts.append(display_url(url))
            done = end
        at = line.find("://", max(end, at + 3))
    parts.append(line[done:])
    return "".join(parts)


#: Names whose value is a secret wherever a message writes ``NAME=value`` or ``'NAME': 'value'``
#: (whole names only, in any case: a dimension ``num_tokens=5`` is not one).
_SECRET_NAMES = frozenset((
    "password", "passwd", "pwd", "secret", "client_secret", "secret_key", "secret_access_key",
    "aws_secret_access_key", "token", "access_token", "refresh_token", "id_token",
    "session_token", "security_token", "aws_session_token", "x-amz-security-token",
    "signature", "x-amz-signature", "sig", "credential", "credentials", "x-amz-credential",
    "api_key", "apikey", "api-key", "x-api-key", "access_key", "sas", "sas_token",
    "authorization", "proxy-authorization", "cookie", "set-cookie"))
#: Of those, the HTTP headers, masked after ``NAME:`` too (``Authorization: Bearer ***``).
_HEADER_NAMES = frozenset(("authorization", "proxy-authorization", "cookie", "set-cookie",
                           "x-api-key", "x-amz-security-token"))
#: Substrings one of which every secret name holds: a line without any is not searched further
#: (a 8 MB ``info --json`` line costs one ``lower()`` and these ``in`` tests).
_STEMS = ("pass", "pwd", "secret", "token", "sig", "credential", "key", "sas", "auth", "cookie")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")
_EQUALS_VALUE = re.compile(r"(\s*=\s*)[^\s&'\"<>`,;|]+")
_QUOTED_VALUE = re.compile(r"(['\"])\s*:\s*(['\"])(?:(?!\2).)*\2")
_HEADER_VALUE = re.compile(r"\s*:\s*((?:bearer|basic|digest|token|negotiate|aws4-hmac-sha256|"
                           r"aws|sharedkey)\s+)?[^\s'\"<>`,;|]+", re.IGNORECASE)
#: ``alice:pw@host`` outside a URL, matched on the text before an ``@`` that a host name or
#: address follows (what precedes the ``:`` is a user name, not a scheme: ``https://***@h`` is
#: already masked and stays).
_USERINFO = re.compile(r"(?<![\w.%+\-/:@])[\w.%+\-]+:(?!/)(?:(?!://)[^\s@'\"<>`])+$")
_HOST_START = re.compile(r"[\w\[]")
_STOP = frozenset(" \t\r\n\f\v'\"<>`")


def _userinfo_spans(line: str) -> list[tuple[int, int, str]]:
    spans, at = [], line.find("@")
    while at != -1:
        start = at
        while start > 0 and line[start - 1] not in _STOP:
            start -= 1
        m = _USERINFO.search(line, start, at)
        if m is not None and _HOST_START.match(line, at + 1):
            spans.append((m.start(), at, "***"))
        at = line.find("@", at + 1)
    return spans


def _name_spans(line: str, low: str) -> list[tuple[int, int, str]]:
    """Where a secret's value stands after its name (``token=``, ``'token': ``,
    ``Authorization:``): ``(start, end, replacement)`` of each value."""
    spans, seen = [], set()
    for stem in _STEMS:
        at = low.find(stem)
        while at != -1:
            start, end = at, at + len(stem)
            while start > 0 and low[start - 1] in _NAME_CHARS:
                start -= 1
            while end < len(low) and low[end] in _NAME_CHARS:
                end += 1
            at = low.find(stem, end)
            if start in seen:
                continue
            seen.add(start)
            word = low[start:end].lstrip("-")
            if word not in _SECRET_NAMES:
                continue
            m = _EQUALS_VALUE.match(line, end)
            if m is not None:
                spans.append((m.start() + len(m.group(1)), m.end(), "***" + _tail(m.group(0))))
                continue
            m = _QUOTED_VALUE.match(line, end)
            if m is not None and start > 0 and line[start - 1] == m.group(1):
                q = m.group(2)
                spans.append((line.index(q, m.start() + 1) + 1, m.end() - 1, "***"))
                continue
            m = _HEADER_VALUE.match(line, end) if word in _HEADER_NAMES else None
            if m is not None:
                begin = m.start(1) + len(m.group(1)) if m.group(1) else \
                    m.end() - len(m.group(0).lstrip(" \t:").lstrip())
                spans.append((begin, m.end(), "***" + _tail(m.group(0))))
    return spans


def _mask_credentials(line: str) -> str:
    """``line`` with the secrets that stand outside a URL masked (module documentation)."""
    spans = _userinfo_spans(line) if "@" in line else []
    if "=" in line or ":" in line:
        low = line.lower()
        if any(stem in low for stem in _STEMS):
            spans += _name_spans(line, low)
    if not spans:
        return line
    parts, done = [], 0
    for start, end, text in sorted(spans):
        if start < done:  # inside a span already masked
            continue
        parts += [line[done:start], text]
        done = end
    parts.append(line[done:])
    return "".join(parts)


def _tail(value: str) -> str:
    """Sentence punctuation that ends a masked value (``token=abc.``): kept after ``***``."""
    tail = _TRAILING.search(value)
    return tail.group(0) if tail is not None else ""


def redact(line: str) -> str:
    """``line`` with every URL in it masked (``display_url``), every secret outside a URL
    masked (``alice:pw@host``, ``token=...``, ``'password': '...'``, ``Authorization: Bearer
    ...``) and every registered secret (:func:`add_secrets`) replaced by ``***``. The one
    masking function of everything the command line prints; masking twice changes nothing."""
    if "://" in line:
        line = _mask_urls(line)
    line = _mask_credentials(line)
    for secret in sorted(_secrets, key=len, reverse=True):  # "Bearer abc" before "abc"
        if secret in line:
            line = line.replace(secret, "***")
    return line


def shown(target) -> str:
    """A path or URL as the command line prints it: :func:`redact` of its text."""
    return redact(str(target))


def add_secrets(storage_options) -> None:
    """Remember the secret values of ``storage_options`` (a dict as the API takes it) so that
    :func:`redact` masks them: the string values of keys that name a secret and every header
    value, at any depth, in the text given and the forms a message may quote."""
    for value in _secret_values(storage_options, False):
        if len(value) >= _MIN_SECRET:
            _secrets.add(value)
            scheme, _, credential = value.partition(" ")  # "Bearer abc": abc alone, too
            if credential and len(credential) >= _MIN_SECRET and scheme.isalpha():
                _secrets.add(credential)


def clear_secrets() -> None:
    """Forget the secrets :func:`add_secrets` registered (each command starts afresh)."""
    _secrets.clear()


def _secret_values(value, secret: bool):
    if isinstance(value, dict):
        for k, v in value.items():
            k = str(k)
            yield from _secret_values(v, secret or k.lower() == "headers"
                                      or _SECRET_KEY.search(k) is not None)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _secret_values(v, secret)
    elif secret and value is not None and not isinstance(value, bool):
        yield str(value)
