"""What keeps secrets off the terminal: every line the command line prints goes through
:func:`redact`.

A URL is masked by :func:`onemodel.storage.remote.display_url` (user information and query
values, where presigned signatures and tokens travel, become ``***``), wherever it stands in the
line: an echoed argument, an error message from any layer, a warning, a JSON document. Values of
secret storage options (``--storage-option key=...``, ``http.headers.Authorization=...``) are
masked as well, should any message quote them.

Masking a line without ``://`` costs one substring search and imports nothing; the storage
module that holds ``display_url`` is imported only for a line that has a URL.
"""

from __future__ import annotations

import re

#: A URL in running text: fsspec chains (``simplecache::s3://b/k``) included; it ends at white
#: space or a quote, and sentence punctuation right after it is not part of it.
_URL = re.compile(r"(?:[A-Za-z][\w+.-]*::)*[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]*")
_TRAILING = re.compile(r"[.,;:!?)\]}]+$")

#: Storage option keys whose values are secrets (matched in any case, anywhere in the key);
#: every value under a ``headers`` key is taken for one too (Authorization, Cookie, X-Api-Key).
_SECRET_KEY = re.compile(r"key|secret|token|passw|auth|credential|signature|sig$|session|"
                         r"cookie|sas|bearer|private", re.IGNORECASE)

#: Secret values shorter than this are not searched for in text (``true``, ``1``: masking
#: them would mangle ordinary words and numbers, and they hide nothing).
_MIN_SECRET = 4

_secrets: set[str] = set()


def _mask_url(match: re.Match) -> str:
    from ..storage.remote import display_url

    text = match.group(0)
    tail = _TRAILING.search(text)
    if tail is not None:
        text, rest = text[:tail.start()], tail.group(0)
    else:
        rest = ""
    return display_url(text) + rest


def redact(line: str) -> str:
    """``line`` with every URL in it masked (``display_url``) and every registered secret
    (:func:`add_secrets`) replaced by ``***``."""
    if "://" in line:
        line = _URL.sub(_mask_url, line)
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
