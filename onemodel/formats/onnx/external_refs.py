"""External data references (ONNX Part 1, Clause 13.2, Table 11) and the one rule of which
locations are legal (Clauses 13.2 and 15.3), for files on disk and under a URL.

* :func:`parse_reference`: a tensor's ``external_data`` entries as an :class:`ExternalReference`.
  Only the keys ``location``, ``offset``, ``length`` and ``checksum`` are accepted, each at most
  once; ``location`` is mandatory; ``offset`` and ``length`` are non-negative decimal integers
  written with ASCII digits only (no sign, space or underscore) and below 2^63; ``checksum`` is a
  SHA-1 digest in hex.
* :func:`location_parts`: a relative path of ``/``-separated components: not empty, not
  absolute, no Windows drive (``C:``), no backslash, no NUL, no ``..`` component; with
  ``url=True`` (joined to a URL by :func:`onemodel.storage.place.join_location`) also none of
  these once percent-decoded, and no scheme.
* :func:`expected_nbytes`: the bytes a reference must select (dims x element size).

Every refusal is a :class:`RefusedError` (an InvalidModelError without a location in the model;
the resolver and the writer add the tensor's path).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...errors import QUOTE_LIMIT, InvalidModelError, clip, quote
from ...ir.dtypes import INFO, DataType

#: The keys of an external data reference (Clause 13.2, Table 11); any other key is refused.
KEYS = ("location", "offset", "length", "checksum")

#: ``offset`` and ``length`` values are below this (a signed 64-bit file offset).
MAX_OFFSET = (1 << 63) - 1

_DIGITS = re.compile(r"[0-9]+")
_SHA1 = re.compile(r"[0-9A-Fa-f]{40}")
_DRIVE = re.compile(r"[A-Za-z]:")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(frozen=True)
class ExternalReference:
    """One tensor's external data reference (Clause 13.2, Table 11).

    Attributes:
        location: the relative path as written (``/``-separated).
        offset: first byte in the file (0 when the key is absent).
        length: number of bytes, or ``None`` when the key is absent (to the end of the file).
        checksum: the SHA-1 hex digest of the whole file, lower case, or ``None``.
    """

    location: str
    offset: int = 0
    length: int | None = None
    checksum: str | None = None


class RefusedError(InvalidModelError):
    """A reference refused by Clause 13.2 or 15.3 (an InvalidModelError; the message says why)."""


def _decimal(key: str, value: str | None) -> int:
    if value is None or not _DIGITS.fullmatch(value):
        raise RefusedError(f"{key} {quote(value)} is not a non-negative decimal integer")
    if len(value.lstrip("0")) > 19 or int(value) > MAX_OFFSET:
        raise RefusedError(f"{key} {clip(value, QUOTE_LIMIT)} is larger than 2^63 - 1")
    return int(value)


def parse_reference(entries) -> ExternalReference:
    """The :class:`ExternalReference` of a tensor's ``external_data`` entries.

    Raises InvalidModelError (without a location in the model; callers add it) for a key not in
    :data:`KEYS` (or absent), a key given twice, a missing or empty ``location``, an ``offset``
    or ``length`` that is not a non-negative decimal integer below 2^63, or a ``checksum`` that
    is not 40 hex digits.
    """
    seen: dict[str, str | None] = {}
    for e in entries:
        key = e.key
        if key not in KEYS:
            raise RefusedError(f"unknown key {quote(key)} in external_data (Clause 13.2 allows "
                               f"only {', '.join(KEYS)})")
        if key in seen:
            raise RefusedError(f"key {quote(key)} appears more than once in external_data")
        seen[key] = e.value
    location = seen.get("location")
    if not location:
        raise RefusedError("external_data has no location (Clause 13.2: it is mandatory)")
    offset = _decimal("offset", seen["offset"]) if "offset" in seen else 0
    length = _decimal("length", seen["length"]) if "length" in seen else None
    checksum = None
    if "checksum" in seen:
        checksum = seen["checksum"]
        if checksum is None or not _SHA1.fullmatch(checksum):
            raise RefusedError(f"checksum {quote(checksum)} is not a SHA-1 digest (40 hex digits)")
        checksum = checksum.lower()
    return ExternalReference(location, offset, length, checksum)


def location_parts(location: str, *, url: bool = False) -> tuple[str, ...]:
    """The components of a location, after the checks of Clauses 13.2 and 15.3 on its text: the
    one rule of which locations are legal, for files on disk and under a URL alike.

    Empty and ``.`` components are dropped (``./a//b`` is ``("a", "b")``). Raises
    InvalidModelError for an empty location, an absolute path, a Windows drive path, a backslash,
    a NUL character, a ``..`` component, or a location that names a directory (``a/``).

    ``url``: the location is to be joined to a URL (a model read from ``s3://``, ``https://``
    ...), where percent-encoding and schemes mean something: also refused are a location that is
    absolute or holds a ``..`` component once percent-decoded (``%2e%2e/w.bin``), and one that
    names a scheme or drive (``s3://other/w.bin``, ``x::s3://b/k``, ``c:w.bin``), so the joined
    URL stays in the model's directory, on the same host or bucket
    (:func:`onemodel.storage.place.join_location` joins it).
    """
    if not location:
        raise RefusedError("the location is empty")
    if "\x00" in location:
        raise RefusedError("the location contains a NUL character")
    if location.startswith("/"):
        raise RefusedError("the location is an absolute path (Clause 13.2: it must be relative)")
    if _DRIVE.match(location):
        raise RefusedError("the location is a Windows drive path (Clause 13.2: it must be "
                           "relative)")
    if "\\" in location:
        raise RefusedError("the location contains a backslash (a path separator on Windows; "
                           "use '/')")
    raw = location.split("/")
    if ".." in raw:
        raise RefusedError("the location contains a parent-directory component '..' "
                           "(Clause 13.2)")
    parts = tuple(p for p in raw if p not in ("", "."))
    if not parts or raw[-1] in ("", "."):
        raise RefusedError("the location does not name a file")
    if url:
        _check_url_location(location)
    return parts


def _check_url_location(location: str) -> None:
    """The rules of :func:`location_parts` with ``url`` that the text checks do not cover: no
    scheme or drive, also percent-decoded, and no absolute path or ``..`` once percent-decoded
    (a URL's path is percent-decoded by the server or the storage backend)."""
    from urllib.parse import unquote

    decoded = unquote(location)
    if any("://" in t or "::" in t or _SCHEME.match(t) for t in (location, decoded)):
        raise RefusedError("the location names a scheme or drive (Clause 13.2: it must be a "
                           "relative path)")
    if decoded.startswith("/"):
        raise RefusedError("the location is an absolute path once percent-decoded "
                           "(Clause 13.2: it must be relative)")
    if ".." in decoded.replace("\\", "/").split("/"):
        raise RefusedError("the location contains a parent-directory component '..' once "
                           "percent-decoded (Clause 13.2)")


def expected_nbytes(tensor) -> int:
    """Bytes the external contents of ``tensor`` must have: dims x element size (raw layout).

    Raises InvalidModelError for a STRING tensor (it has no raw layout, so it cannot be
    external: Clause 13.1) or an element type outside Table 5.
    """
    code = tensor.data_type or 0
    if code == DataType.STRING:
        raise RefusedError("a STRING tensor cannot have external data (it has no raw layout, "
                           "Clause 13.1)")
    info = INFO.get(code)
    if info is None or code == DataType.UNDEFINED:
        raise RefusedError(f"element type {code} has no raw layout")
    return info.raw_nbytes(tensor.size)


__all__ = ["KEYS", "MAX_OFFSET", "ExternalReference", "RefusedError", "parse_reference",
           "location_parts", "expected_nbytes"]
