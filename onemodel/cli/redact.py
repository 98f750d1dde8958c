"""What keeps secrets off the terminal: every line the command line prints goes through
:func:`redact`.

A URL is masked by :func:`onemodel.storage.place.display_url` (user information and query
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
    from ..storage.place import display_url

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
_SECRET_NAMES = (r"password|passwd|pwd|secret|client_secret|secret_key|secret_access_key|"
                 r"aws_secret_access_key|token|access_token|refresh_token|id_token|"
                 r"session_token|security_token|aws_session_token|x-amz-security-token|"
                 r"signature|x-amz-signature|sig|credential|credentials|x-amz-credential|"
                 r"api_key|apikey|api-key|x-api-key|access_key|sas|sas_token|"
                 r"authorization|proxy-authorization|cookie|set-cookie")
#: ``alice:pw@host`` outside a URL (a host name or address follows the ``@``; what precedes the
#: ``:`` is a user name, not a scheme: ``https://***@h`` is already masked and stays).
_USERINFO = re.compile(r"(?<![\w.%+\-/:@])[\w.%+\-]+:(?!/)(?:(?!://)[^\s@'\"<>`])+@(?=[\w\[])")
#: ``token=value`` (a value ends at white space, a quote, ``&``, ``,`` or ``;``).
_NAME_EQUALS = re.compile(rf"(?<![\w\-])({_SECRET_NAMES})(\s*=\s*)[^\s&'\"<>`,;|]+",
                          re.IGNORECASE)
#: ``'token': 'value'`` and ``"token": "value"`` (a dict's repr, a JSON document).
_NAME_QUOTED = re.compile(rf"(['\"])({_SECRET_NAMES})\1(\s*:\s*)(['\"])(?:(?!\4).)*\4",
                          re.IGNORECASE)
#: ``Authorization: Bearer value`` (a header as an error text quotes it).
_HEADER = re.compile(r"(?<![\w\-])((?:proxy-)?authorization|cookie|set-cookie|x-api-key|"
                     r"x-amz-security-token)(\s*:\s*)((?:bearer|basic|digest|token|negotiate|"
                     r"aws4-hmac-sha256|aws|sharedkey)\s+)?[^\s'\"<>`,;|]+", re.IGNORECASE)


def _mask_credentials(line: str) -> str:
    """``line`` with the secrets that stand outside a URL masked (module documentation)."""
    if "@" in line:
        line = _USERINFO.sub("***@", line)
    if "=" in line:
        line = _NAME_EQUALS.sub(lambda m: m.group(1) + m.group(2) + "***" + _tail(m), line)
    if ":" in line:
        line = _NAME_QUOTED.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(1)}{m.group(3)}"
                                f"{m.group(4)}***{m.group(4)}", line)
        line = _HEADER.sub(lambda m: m.group(1) + m.group(2) + (m.group(3) or "") + "***"
                           + _tail(m), line)
    return line


def _tail(match) -> str:
    """Sentence punctuation that ends a masked value (``token=abc.``): kept after ``***``."""
    tail = _TRAILING.search(match.group(0))
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
