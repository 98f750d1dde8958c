"""The 64-byte header of a OneModel file (OneModel format, section 1.1).

============  ======  ===============  ===================================================
Offset        Size    Field            Value
============  ======  ===============  ===================================================
0             8       magic            ``ONEMODEL``
8             4       version          u32, 1
12            4       flags            u32, 0
16            8       manifest_offset  u64, 64
24            8       manifest_length  u64, bytes of the manifest
32            8       data_offset      u64, multiple of 64, >= 64 + manifest_length, <= file length
40            8       data_length      u64, file length - data_offset
48            8       file_length      u64, the exact length of the file
56            8       reserved         zero
============  ======  ===============  ===================================================

All integers are little endian; every u64 is at most 2^63 - 1.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ...errors import MalformedError, UnsupportedError
from ...limits import CONTAINER_ALIGNMENT, MAX_HEADER_U64, MAX_MANIFEST_BYTES

MAGIC = b"ONEMODEL"
VERSION = 1
HEADER_SIZE = 64
_STRUCT = struct.Struct("<8sII6Q")

#: Field name -> byte offset in the header, for error locations.
FIELD_OFFSET = {"magic": 0, "version": 8, "flags": 12, "manifest_offset": 16,
                "manifest_length": 24, "data_offset": 32, "data_length": 40, "file_length": 48,
                "reserved": 56}

_U64 = ("manifest_offset", "manifest_length", "data_offset", "data_length", "file_length",
        "reserved")


def align(n: int, to: int = CONTAINER_ALIGNMENT) -> int:
    """``n`` rounded up to a multiple of ``to`` (bytes)."""
    return -(-n // to) * to


@dataclass(frozen=True)
class Header:
    """The header fields (section 1.1). Offsets and lengths are in bytes from the file start."""

    version: int
    flags: int
    manifest_offset: int
    manifest_length: int
    data_offset: int
    data_length: int
    file_length: int
    reserved: int = 0

    def pack(self) -> bytes:
        """The 64 header bytes."""
        return _STRUCT.pack(MAGIC, self.version, self.flags, self.manifest_offset,
                            self.manifest_length, self.data_offset, self.data_length,
                            self.file_length, self.reserved)

    @classmethod
    def for_layout(cls, manifest_length: int, data_length: int) -> "Header":
        """The header a writer emits: manifest at 64, data at the next multiple of 64 after it."""
        data_offset = align(HEADER_SIZE + manifest_length)
        return cls(VERSION, 0, HEADER_SIZE, manifest_length, data_offset, data_length,
                   data_offset + data_length)


def _fail(kind, message: str, field: str) -> None:
    raise kind(message, path=f"header.{field}", offset=FIELD_OFFSET[field])


def parse_header(head, file_size: int) -> Header:
    """Check the header bytes ``head`` against the real file length ``file_size`` (section 1.1).

    ``head`` holds the first ``min(64, file_size)`` bytes of the file. Every field is checked
    before any of them is used to read or allocate anything. Raises:

    * MalformedError: bad magic, a file shorter than 64 bytes, a u64 above 2^63 - 1, a
      ``file_length`` other than the real length, nonzero ``reserved``, ``manifest_offset`` not
      64, a manifest that does not fit, ``data_offset`` not a multiple of 64 or out of place,
      ``data_length`` other than ``file_length - data_offset``;
    * UnsupportedError: a version other than 1, nonzero flags, a manifest larger than
      :data:`~onemodel.limits.MAX_MANIFEST_BYTES`.

    Each error names the header field (``header.data_offset``) and its byte offset.
    """
    head = bytes(head[:HEADER_SIZE])
    n = min(len(MAGIC), len(head))
    if head[:n] != MAGIC[:n]:
        _fail(MalformedError, "not a OneModel file: the first 8 bytes are not 'ONEMODEL'", "magic")
    if file_size < HEADER_SIZE or len(head) < HEADER_SIZE:
        raise MalformedError(f"truncated file: {file_size} bytes, shorter than the 64-byte header",
                             path="header", offset=file_size)
    _, version, flags, *rest = _STRUCT.unpack(head)
    fields = dict(zip(_U64, rest))
    if version != VERSION:
        _fail(UnsupportedError, f"format version {version} is not supported (this reader reads "
                                f"version {VERSION})", "version")
    if flags != 0:
        _fail(UnsupportedError, f"flags 0x{flags:X} are not supported (version 1 has none)",
              "flags")
    for name in _U64:
        if fields[name] > MAX_HEADER_U64:
            _fail(MalformedError, f"{name} {fields[name]} is above 2^63 - 1", name)
    h = Header(version, flags, **fields)
    if h.file_length != file_size:
        what = "truncated" if file_size < h.file_length else "extended"
        _fail(MalformedError, f"the file is {what}: header says {h.file_length} bytes, the file "
                              f"has {file_size}", "file_length")
    if h.reserved != 0:
        _fail(MalformedError, "reserved header field is not zero", "reserved")
    if h.manifest_offset != HEADER_SIZE:
        _fail(MalformedError, f"manifest_offset is {h.manifest_offset}, not 64", "manifest_offset")
    if h.manifest_length > file_size - HEADER_SIZE:
        _fail(MalformedError, f"manifest of {h.manifest_length} bytes does not fit in the "
                              f"{file_size}-byte file", "manifest_length")
    if h.manifest_length > MAX_MANIFEST_BYTES:
        _fail(UnsupportedError, f"manifest of {h.manifest_length} bytes is larger than the "
                                f"{MAX_MANIFEST_BYTES}-byte limit", "manifest_length")
    if h.data_offset % CONTAINER_ALIGNMENT:
        _fail(MalformedError, f"data_offset {h.data_offset} is not a multiple of 64", "data_offset")
    if h.data_offset < HEADER_SIZE + h.manifest_length:
        _fail(MalformedError, f"data_offset {h.data_offset} is inside the manifest (which ends "
                              f"at {HEADER_SIZE + h.manifest_length})", "data_offset")
    if h.data_offset > file_size:
        _fail(MalformedError, f"data_offset {h.data_offset} is past the end of the "
                              f"{file_size}-byte file", "data_offset")
    if h.data_length != file_size - h.data_offset:
        _fail(MalformedError, f"data_length {h.data_length} is not file length - data_offset "
                              f"({file_size - h.data_offset})", "data_length")
    return h
