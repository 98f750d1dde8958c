"""Laying tensors out in one safetensors file, and reading back what the layout recorded.

:func:`plan` turns a list of tensors (name, ONNX element type, dims, octets) into the bytes of a
safetensors header and the file offset of each tensor, so that a writer can stream the header,
then each tensor's raw bytes (ONNX Part 1, Clause 6.3.4: little-endian, sub-byte types packed
from the least significant bit) at its offset, zeros between them.

**Alignment.** Every tensor's file offset is a multiple of ``align`` (a power of two, default 64).
The header is padded with spaces (the format allows trailing spaces) so the data region starts at
a multiple of ``align``; each tensor's data offset is then rounded up to a multiple of ``align``.
The format requires the ``data_offsets`` to tile the data region (no hole), so each gap before an
aligned tensor is covered by a *padding entry*: a ``U8`` tensor of the gap's length under a
reserved key (``__pad<n>__``; a tensor of such a name gets another key), listed in
``__metadata__["onemodel.padding"]`` (a JSON array of the keys). Its bytes are zeros. Readers that
iterate every key (``safe_open(...).keys()``) see these entries; onemodel's readers skip them.
(safetensors' own writer aligns only to 8 octets, by padding the header and ordering tensors by
element size; that does not reach 64 octets or a page when sizes are not multiples of it.)

**Keys.** A tensor's key is its name. A name met twice (initializers of the same name in two
subgraphs), the name ``__metadata__``, or a reserved padding key gets ``<name>.<n>`` instead, and
``__metadata__["onemodel.names"]`` (a JSON object key -> ONNX name) records every key that is
not the tensor's name.

**Element types.** ``__metadata__["onemodel.types"]`` (a JSON object key -> ONNX element type
name, ``"FLOAT"``) records the ONNX element type of every tensor. Types with a safetensors dtype
of the same raw layout are stored under it (:data:`NATIVE`). The others are stored as ``U8`` of
shape ``[octets]``: INT4, UINT4, INT2, UINT2 and COMPLEX128 (safetensors has no such dtype), and
FLOAT4E2M1, FLOAT6E2M3, FLOAT6E3M2, whose packing in safetensors' F4/F6 dtypes is not verified
here to be ONNX's bit stream of Clause 6.3.4 (an odd count of F4 elements also has no whole
number of octets in safetensors). STRING tensors have no raw layout (Clause 13.1) and cannot be
stored.

``__metadata__["onemodel.layout"]`` is ``"onnx-external-data"`` for a data file of an ONNX model
(:mod:`onemodel.formats.onnx.writer`, layout ``safetensors``) and ``"weights"`` for extracted
initializers (:mod:`.weights`).
"""

from __future__ import annotations

import json
import re
import struct

from ...errors import InvalidModelError, UnsupportedError, quote
from ...ir.dtypes import INFO, DataType
from .header import DTYPES

#: Default alignment of tensor offsets in a safetensors file written by onemodel (octets).
DEFAULT_ALIGN = 64

#: ONNX element type -> safetensors dtype, for the types stored under their own dtype.
NATIVE: dict[int, str] = {code: name for name, (code, _) in DTYPES.items()
                          if code not in (DataType.FLOAT4E2M1, DataType.FLOAT6E2M3,
                                          DataType.FLOAT6E3M2)}

_PAD = re.compile(r"__pad\d+__")
PADDING_KEY = "onemodel.padding"
NAMES_KEY = "onemodel.names"
TYPES_KEY = "onemodel.types"
LAYOUT_KEY = "onemodel.layout"


def stored_as(code: int, dims) -> tuple[str, list[int]]:
    """The safetensors dtype and shape a tensor of ONNX element type ``code`` and ``dims`` is
    stored under: its own dtype and dims (:data:`NATIVE`), else ``U8`` of shape ``[octets]``.
    Raises UnsupportedError for STRING or a type without a raw layout."""
    info = INFO.get(code)
    if info is None or code in (DataType.STRING, DataType.UNDEFINED):
        raise UnsupportedError(f"element type {code} has no raw layout and cannot be stored in "
                               "a safetensors file")
    if code in NATIVE:
        return NATIVE[code], [int(d) for d in dims]
    count = 1
    for d in dims:
        count *= int(d)
    return "U8", [info.raw_nbytes(count)]


def unique_keys(names) -> tuple[list[str], dict]:
    """The header key of each tensor name, in order (module documentation: a name met before,
    ``__metadata__`` or a padding key's form gets ``<name>.<n>``, the first ``n`` from 2 not
    taken), and ``{key: name}`` for the keys that are not their name."""
    used: set = {"__metadata__"}
    keys, renamed = [], {}
    for name in names:
        key, i = name, 1
        while key in used or _PAD.fullmatch(key):
            i += 1
            key = f"{name}.{i}"
        used.add(key)
        keys.append(key)
        if key != name:
            renamed[key] = name
    return keys, renamed


def _align_up(n: int, align: int) -> int:
    return -(-n // align) * align


def shard(sizes, max_shard_size: int) -> list[list[int]]:
    """Indices of ``sizes`` (octets, in order) grouped into consecutive shards of at most
    ``max_shard_size`` octets of tensor data each (a tensor larger than that is a shard by
    itself), as Hugging Face's ``max_shard_size`` splits a checkpoint."""
    groups: list[list[int]] = []
    total = 0
    for i, n in enumerate(sizes):
        if not groups or (total + n > max_shard_size and groups[-1]):
            groups.append([])
            total = 0
        groups[-1].append(i)
        total += n
    return groups


def shard_names(location: str, count: int) -> list[str]:
    """The names of ``count`` shards of data file ``location`` (``w.safetensors`` ->
    ``w-00001-of-00003.safetensors`` ..., Hugging Face's convention) and of their index
    (``w.safetensors.index.json``), the index last."""
    stem = location[:-len(".safetensors")] if location.lower().endswith(".safetensors") \
        else location
    return [f"{stem}-{i:05d}-of-{count:05d}.safetensors" for i in range(1, count + 1)] + \
        [location + ".index.json"]


_SHARD = re.compile(r"(.*)-\d{5}-of-\d{5}\.safetensors", re.IGNORECASE | re.DOTALL)


def index_of_shard(path: str) -> str | None:
    """The index beside shard ``path`` (a name :func:`shard_names` gives:
    ``d/w-00001-of-00003.safetensors`` -> ``d/w.safetensors.index.json``), or None when
    ``path`` is not named as a shard."""
    m = _SHARD.fullmatch(path)
    return None if m is None else m.group(1) + ".safetensors.index.json"


def index_json(weight_map: dict, total_size: int) -> bytes:
    """The index of a sharded checkpoint as ``transformers`` reads it:
    ``{"metadata": {"total_size": octets of tensor data}, "weight_map": {key: shard file}}``."""
    return (json.dumps({"metadata": {"total_size": total_size}, "weight_map": weight_map},
                       indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def plan(tensors, align: int = DEFAULT_ALIGN, layout: str = "onnx-external-data",
         metadata: dict | None = None, keys: list | None = None
         ) -> tuple[bytes, list[int], list[str]]:
    """Lay out ``tensors`` (a list of ``(name, element type, dims, octets)``) in one safetensors
    file, in the order given.

    Returns ``(header, offsets, keys)``: the file's first octets (length, JSON padded with spaces
    to a multiple of ``align``), each tensor's file offset (a multiple of ``align``) and its key.
    The file is ``header``, then each tensor's octets at its offset, zeros elsewhere, ending with
    the last tensor. ``metadata`` (str -> str) is added to ``__metadata__``; ``keys`` (from
    :func:`unique_keys` over more tensors, for a shard) replaces the keys made here. Raises
    UnsupportedError for a tensor that cannot be stored (STRING) or octets that do not match
    dims x element type.
    """
    if keys is None:
        keys, names = unique_keys([t[0] for t in tensors])
    else:
        names = {k: t[0] for k, t in zip(keys, tensors) if k != t[0]}
    entries: dict = {}
    types = {}
    padding = []
    rel_offsets = []
    pos = 0
    pad_no = 0
    for key, (name, code, dims, nbytes) in zip(keys, tensors):
        dtype, shape = stored_as(code, dims)
        if INFO[code].raw_nbytes(_count(dims)) != nbytes:
            raise UnsupportedError(f"tensor {quote(name)} holds {nbytes} octets, not the "
                                   f"{INFO[code].raw_nbytes(_count(dims))} of its dims "
                                   f"{list(dims)}")
        start = _align_up(pos, align) if nbytes else pos
        if start > pos:
            pad = f"__pad{pad_no}__"  # no tensor key has this form
            pad_no += 1
            padding.append(pad)
            entries[pad] = {"dtype": "U8", "shape": [start - pos], "data_offsets": [pos, start]}
        entries[key] = {"dtype": dtype, "shape": shape, "data_offsets": [start, start + nbytes]}
        types[key] = INFO[code].name
        rel_offsets.append(start)
        pos = start + nbytes
    meta = {LAYOUT_KEY: layout, TYPES_KEY: json.dumps(types, separators=(",", ":"))}
    if padding:
        meta[PADDING_KEY] = json.dumps(padding, separators=(",", ":"))
    if names:
        meta[NAMES_KEY] = json.dumps(names, separators=(",", ":"))
    if metadata:
        meta.update(metadata)
    doc = json.dumps({"__metadata__": meta, **entries}, separators=(",", ":"),
                     ensure_ascii=False).encode("utf-8")
    total = _align_up(8 + len(doc), max(align, 8))
    doc += b" " * (total - 8 - len(doc))
    data_start = total
    return struct.pack("<Q", len(doc)) + doc, [data_start + r for r in rel_offsets], keys


def _count(dims) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n


class Recorded:
    """What onemodel recorded in a safetensors header's ``__metadata__``: the padding keys, the
    ONNX name and element type of each key (both ``None`` when not recorded)."""

    __slots__ = ("padding", "names", "types", "layout", "source")

    def __init__(self, metadata: dict | None, source=None):
        meta = metadata or {}
        self.source = source
        self.layout = meta.get(LAYOUT_KEY)
        self.padding = set(_json(meta, PADDING_KEY, list, source) or ())
        self.names = _json(meta, NAMES_KEY, dict, source) or {}
        self.types = _json(meta, TYPES_KEY, dict, source) or {}

    def name(self, key: str) -> str:
        """The ONNX tensor name of ``key``."""
        return self.names.get(key, key)

    def onnx_type(self, key: str) -> int | None:
        """The ONNX element type recorded for ``key`` (None when not recorded)."""
        name = self.types.get(key)
        if name is None:
            return None
        for code, info in INFO.items():
            if info.name == name:
                return code
        raise InvalidModelError(f"__metadata__ {TYPES_KEY} names element type {quote(name)} "
                                f"for {quote(key)}, which ONNX does not have",
                                path=f'safetensors["__metadata__"]["{TYPES_KEY}"]',
                                source=self.source)


def _json(meta: dict, key: str, kind, source):
    text = meta.get(key)
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, kind) or (kind is dict and not all(
            isinstance(v, str) for v in value.values())) or (kind is list and not all(
            isinstance(v, str) for v in value)):
        raise InvalidModelError(f"__metadata__ {key} is not a JSON {kind.__name__} of strings",
                                path=f'safetensors["__metadata__"]["{key}"]', source=source)
    return value


def consistent(entry, code: int, dims, recorded: Recorded) -> str | None:
    """Why header ``entry`` cannot hold a tensor of ONNX element type ``code`` and ``dims``
    (None when it can): its dtype must be the type's own (:data:`NATIVE`, or the type DTYPES maps
    it to) with the same shape, or U8 of the tensor's octets with ``code`` recorded in
    ``__metadata__`` (or no type recorded for a UINT8 tensor)."""
    name = INFO[code].name if code in INFO else str(code)
    dims = [int(d) for d in dims]
    native = DTYPES.get(entry.dtype, (None,))[0]
    want_type = recorded.onnx_type(entry.name)
    if want_type is not None and want_type != code:
        return (f"the header records element type {INFO[want_type].name} for it, the tensor "
                f"is {name}")
    if native == code:
        if list(entry.shape) != dims:
            return f"its shape {list(entry.shape)} is not the tensor's dims {dims}"
        return None
    if entry.dtype == "U8" and want_type in (code, None):  # octets; None: not recorded
        want = INFO[code].raw_nbytes(_count(dims))
        if list(entry.shape) != [want]:
            return f"U8 shape {list(entry.shape)} is not the tensor's [{want}] octets"
        return None
    return f"its dtype {entry.dtype} does not hold {name}"


__all__ = ["DEFAULT_ALIGN", "NATIVE", "stored_as", "unique_keys", "shard", "shard_names",
           "index_of_shard", "index_json", "plan", "Recorded", "consistent"]
