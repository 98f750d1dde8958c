"""Reading and checking a safetensors header (the format's rules, checked before anything is
used): the header length against its bound and the file, the header as UTF-8 JSON (an object,
padded with spaces at most, no duplicate key, nesting bounded), ``__metadata__`` as strings to
strings, each entry's dtype, shape and ``data_offsets``, each range's length against dtype and
shape, and the ranges tiling the data region exactly (sorted, no gap, no overlap, ending at the
end of the file).

Every refusal is a :class:`~onemodel.errors.MalformedError` (or UnsupportedError for a dtype
this table does not know or a header past :data:`MAX_HEADER_BYTES`) whose path names the entry
(``safetensors["w"].data_offsets``) and whose offset is the octet in the file.
"""

from __future__ import annotations

import json
import struct

from ...errors import MalformedError, UnsupportedError
from ...ir.dtypes import DataType
from ..json_scan import json_depth

#: The largest header accepted: the safetensors reference implementation's bound (100 MB).
MAX_HEADER_BYTES = 100_000_000
#: JSON nesting accepted in a header (an entry is three levels deep).
MAX_HEADER_DEPTH = 64

#: safetensors dtype -> (ONNX element type, bits per element). The types safetensors names;
#: an ONNX type without one is stored as U8 octets (the writer records its element type).
DTYPES: dict[str, tuple[int, int]] = {
    "BOOL": (DataType.BOOL, 8), "U8": (DataType.UINT8, 8), "I8": (DataType.INT8, 8),
    "U16": (DataType.UINT16, 16), "I16": (DataType.INT16, 16), "F16": (DataType.FLOAT16, 16),
    "BF16": (DataType.BFLOAT16, 16), "U32": (DataType.UINT32, 32),
    "I32": (DataType.INT32, 32), "F32": (DataType.FLOAT, 32), "U64": (DataType.UINT64, 64),
    "I64": (DataType.INT64, 64), "F64": (DataType.DOUBLE, 64),
    "C64": (DataType.COMPLEX64, 64),
    "F8_E4M3": (DataType.FLOAT8E4M3FN, 8), "F8_E4M3FNUZ": (DataType.FLOAT8E4M3FNUZ, 8),
    "F8_E5M2": (DataType.FLOAT8E5M2, 8), "F8_E5M2FNUZ": (DataType.FLOAT8E5M2FNUZ, 8),
    "F8_E8M0": (DataType.FLOAT8E8M0, 8), "F4": (DataType.FLOAT4E2M1, 4),
    "F6_E2M3": (DataType.FLOAT6E2M3, 6), "F6_E3M2": (DataType.FLOAT6E3M2, 6),
}


class Entry:
    """One tensor of a safetensors file.

    Attributes:
        name: its key in the header.
        dtype: the safetensors dtype (``"F32"``).
        shape: tuple of ints.
        begin, end: the octets it occupies, as offsets in the file (data region start + the
            header's ``data_offsets``).
    """

    __slots__ = ("name", "dtype", "shape", "begin", "end")

    def __init__(self, name, dtype, shape, begin, end):
        self.name, self.dtype, self.shape, self.begin, self.end = name, dtype, shape, begin, end

    @property
    def nbytes(self) -> int:
        return self.end - self.begin

    def __repr__(self):
        return f"Entry({self.name!r}, {self.dtype}, {list(self.shape)}, [{self.begin}, {self.end}))"


class Header:
    """A checked safetensors header.

    Attributes:
        entries: the tensors, in the order of their ranges.
        metadata: ``__metadata__`` (str -> str), or None when absent.
        data_start: the file offset where the data region starts (8 + header length).
        size: the file's size in octets.
    """

    __slots__ = ("entries", "metadata", "data_start", "size", "_by_name")

    def __init__(self, entries, metadata, data_start, size):
        self.entries = entries
        self.metadata = metadata
        self.data_start = data_start
        self.size = size
        self._by_name = {e.name: e for e in entries}

    def __getitem__(self, name: str) -> Entry:
        return self._by_name[name]

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def __len__(self) -> int:
        return len(self.entries)


def expected_nbytes(dtype: str, shape) -> int | None:
    """The octets a tensor of ``dtype`` and ``shape`` occupies, or None when its bits are not a
    whole number of octets (safetensors refuses that for the sub-byte types)."""
    bits = DTYPES[dtype][1]
    count = 1
    for d in shape:
        count *= d
    total = count * bits
    return total // 8 if total % 8 == 0 else None


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _Duplicate(k)
        out[k] = v
    return out


class _Duplicate(Exception):
    pass


def _reject_constant(name):
    raise ValueError(f"{name} is not a JSON number")


def parse_header(prefix: bytes, size: int, source: str | None = None, read=None) -> Header:
    """Check and parse the header of a safetensors file of ``size`` octets.

    ``prefix`` holds the file's first octets (at least 8); when it does not hold the whole
    header, ``read(offset, length)`` is called once for the rest. Raises MalformedError (path
    ``safetensors...``, offset in the file) for every rule the file breaks,
    UnsupportedError for a header past :data:`MAX_HEADER_BYTES` or a dtype outside
    :data:`DTYPES`.
    """
    where = {"source": source}
    if size < 8 or len(prefix) < 8:
        raise MalformedError(f"a safetensors file has at least 8 octets (the header length); "
                             f"this one has {size}", path="safetensors", offset=0, **where)
    (n,) = struct.unpack("<Q", bytes(prefix[:8]))
    if n > MAX_HEADER_BYTES:
        raise UnsupportedError(f"safetensors header of {n} octets is past the limit of "
                               f"{MAX_HEADER_BYTES}", path="safetensors.header", offset=0,
                               **where)
    if 8 + n > size:
        raise MalformedError(f"safetensors header of {n} octets runs past the end of the file "
                             f"({size} octets)", path="safetensors.header", offset=0, **where)
    raw = bytes(prefix[8:8 + n])
    if len(raw) < n:
        if read is None:
            raise MalformedError("the safetensors header was cut", path="safetensors.header",
                                 offset=8 + len(raw), **where)
        raw += bytes(read(8 + len(raw), n - len(raw)))
    if not raw.startswith(b"{"):
        raise MalformedError("a safetensors header is a JSON object starting with '{'",
                             path="safetensors.header", offset=8, **where)
    body = raw.rstrip(b" ")
    depth, at = json_depth(body, MAX_HEADER_DEPTH)
    if at is not None:
        raise MalformedError(f"the safetensors header nests deeper than {MAX_HEADER_DEPTH}",
                             path="safetensors.header", offset=8 + at, **where)
    try:
        text = body.decode("utf-8")
        doc = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except _Duplicate as e:
        raise MalformedError(f"the safetensors header names {json.dumps(str(e))} twice",
                             path=f"safetensors[{json.dumps(str(e))}]", offset=8, **where) \
            from None
    except UnicodeDecodeError as e:
        raise MalformedError("the safetensors header is not UTF-8", path="safetensors.header",
                             offset=8 + e.start, **where) from None
    except ValueError as e:
        pos = getattr(e, "pos", None)
        raise MalformedError(f"the safetensors header is not JSON: {getattr(e, 'msg', e)}",
                             path="safetensors.header",
                             offset=8 + len(text[:pos].encode()) if pos is not None else 8,
                             **where) from None
    if not isinstance(doc, dict):
        raise MalformedError("a safetensors header is a JSON object", path="safetensors.header",
                             offset=8, **where)
    data_start = 8 + n
    data_size = size - data_start
    metadata = doc.pop("__metadata__", None)
    if metadata is not None and (not isinstance(metadata, dict) or not all(
            isinstance(v, str) for v in metadata.values())):
        raise MalformedError("__metadata__ maps strings to strings",
                             path='safetensors["__metadata__"]', offset=8, **where)
    entries = []
    for name, e in doc.items():
        p = f"safetensors[{json.dumps(name)}]"
        if not isinstance(e, dict) or not {"dtype", "shape", "data_offsets"} <= set(e):
            raise MalformedError("an entry has the keys dtype, shape and data_offsets",
                                 path=p, offset=8, **where)
        dtype, shape, offs = e["dtype"], e["shape"], e["data_offsets"]
        if not isinstance(dtype, str):
            raise MalformedError("dtype is a string", path=p + ".dtype", offset=8, **where)
        if dtype not in DTYPES:
            raise UnsupportedError(f"unknown safetensors dtype {json.dumps(dtype)[:40]}",
                                   path=p + ".dtype", offset=8, **where)
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            raise MalformedError("shape is a list of non-negative integers", path=p + ".shape",
                                 offset=8, **where)
        if not isinstance(offs, list) or len(offs) != 2 or not all(
                type(o) is int for o in offs) or not 0 <= offs[0] <= offs[1]:
            raise MalformedError("data_offsets is [begin, end] with 0 <= begin <= end",
                                 path=p + ".data_offsets", offset=8, **where)
        want = expected_nbytes(dtype, shape)
        if want is None or want != offs[1] - offs[0]:
            raise MalformedError(
                f"{dtype}{shape} needs " + (f"{want} octets" if want is not None else
                                            "a whole number of octets")
                + f", data_offsets {offs} give {offs[1] - offs[0]}",
                path=p + ".data_offsets", offset=8, **where)
        entries.append(Entry(name, dtype, tuple(shape), data_start + offs[0],
                             data_start + offs[1]))
    entries.sort(key=lambda x: (x.begin, x.end))
    pos = data_start
    for x in entries:
        p = f"safetensors[{json.dumps(x.name)}].data_offsets"
        if x.begin != pos:
            what = "overlaps the tensor before it" if x.begin < pos else \
                f"leaves {x.begin - pos} octets unused before it"
            raise MalformedError(f"the range [{x.begin - data_start}, {x.end - data_start}) "
                                 f"{what} (the ranges tile the data region)", path=p,
                                 offset=x.begin, **where)
        pos = x.end
    if pos != size:
        raise MalformedError(
            f"the tensors end at data offset {pos - data_start} but the data region has "
            f"{data_size} octets" if pos < size else
            f"a range runs past the end of the file ({size} octets)",
            path="safetensors", offset=min(pos, size), **where)
    return Header(entries, metadata, data_start, size)


def read_header(source) -> Header:
    """The checked header of the safetensors file a storage Source holds (one read of its first
    64 KiB, a second one for a longer header). Raises what :func:`parse_header` raises, IoError
    when the source cannot be read."""
    size = source.size
    head = source.read(0, min(size, 1 << 16))
    return parse_header(head, size, getattr(source, "name", None), source.read)
