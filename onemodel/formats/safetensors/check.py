"""ONNX external data that lies in a safetensors file: the header checked, every reference checked
against the header entry it points at (ONNX Part 1, Clause 13; docs/safetensors.md).

An external data file is taken for a safetensors file when it starts like one
(:func:`looks_like_safetensors`: an 8-octet header length that fits the file, then ``{``). Its
header is then checked by the format's rules (:func:`.header.parse_header`): for a location
ending in ``.safetensors`` a refusal is the model's refusal; a file of another name whose first
octets only happen to look like a header and that breaks the rules is plain Clause 13 data.

Each reference into a safetensors file must select exactly one entry's range (the ``[begin, end)``
of its ``data_offsets`` in the file), that entry must be the tensor's (its key is the tensor's
name, or the name ``__metadata__["onemodel.names"]`` records for the key: a header is never
trusted to label the bytes of another tensor, so swapped shards or a relabelled header are
refused), and it must hold the tensor (:func:`.layout.consistent`): the dtype of the tensor's
element type with the same shape, or ``U8`` of the tensor's octets with that element type
recorded in ``__metadata__`` (or none recorded: raw octets, as other writers store types
safetensors lacks). Otherwise the reference is
refused with InvalidModelError naming the tensor and the entry.

The checked header of each data file is remembered for its Source (:func:`index_of`), for
``onemodel info``.
"""

from __future__ import annotations

import json
import struct
import weakref

from ...errors import InvalidModelError, OneModelError, quote
from ...ir.dtypes import INFO
from .header import Header, parse_header
from .layout import Recorded, consistent

_INDEX: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def looks_like_safetensors(head, size: int) -> bool:
    """Whether a file of ``size`` octets starting with ``head`` starts like a safetensors file:
    a little-endian header length ``n`` with ``8 + n <= size`` and ``{`` at octet 8."""
    if len(head) < 9 or size < 9:
        return False
    (n,) = struct.unpack("<Q", bytes(head[:8]))
    return 1 <= n <= size - 8 and head[8:9] == b"{"


class Index:
    """A data file's checked safetensors header and what onemodel recorded in it.

    Attributes:
        header: the :class:`~.header.Header`.
        recorded: the :class:`~.layout.Recorded` metadata.
        location: the data file's location, as the references spell it.
        checked: how many references were checked against the header.
    """

    __slots__ = ("header", "recorded", "location", "checked", "_by_range", "__weakref__")

    def __init__(self, header: Header, location: str):
        self.header = header
        self.location = location
        self.recorded = Recorded(header.metadata, location)
        self.checked = 0
        self._by_range: dict = {}
        for e in header.entries:
            self._by_range.setdefault((e.begin, e.end), []).append(e)

    @property
    def tensors(self) -> int:
        """Entries of the header that are not padding."""
        return sum(1 for e in self.header.entries if e.name not in self.recorded.padding)

    def check(self, tensor, offset: int, length: int) -> None:
        """Check that the reference ``[offset, offset + length)`` of ``tensor`` selects one
        header entry that holds it: the entry's name is the tensor's (its key, or the name
        ``__metadata__["onemodel.names"]`` records for the key), its dtype and shape hold the
        tensor's element type and dims. Raises InvalidModelError naming the tensor, the file
        and the header entry (``safetensors["key"]``)."""
        entries = self._by_range.get((offset, offset + length))
        if not entries:
            raise InvalidModelError(
                f"the reference selects octets [{offset}, {offset + length}) of safetensors "
                f"file {quote(self.location)}, which are not the range of any header entry")
        want = tensor.name or ""
        named = [e for e in entries if self.recorded.name(e.name) == want]
        if not named:
            e = entries[0]
            called = self.recorded.name(e.name)
            also = "" if called == e.name else f" (recorded as tensor {quote(called)})"
            raise InvalidModelError(
                f"the reference selects octets [{offset}, {offset + length}) of safetensors "
                f"file {quote(self.location)}, whose header entry there is "
                f"safetensors[{_key(e.name)}]{also}, not tensor {quote(want)}: the file's "
                "header names another tensor for these bytes (swapped or relabelled data "
                "files?)")
        why = None
        for e in named:
            why = consistent(e, tensor.data_type, tensor.dims, self.recorded)
            if why is None:
                self.checked += 1
                return
        e = named[0]
        raise InvalidModelError(
            f"safetensors entry safetensors[{_key(e.name)}] of {quote(self.location)} at its "
            f"range does not hold this {INFO[tensor.data_type].name}{list(tensor.dims)} "
            f"tensor: {why}")


def _key(name: str) -> str:
    """A header key as the paths of :mod:`.header` write it (``"w"``, JSON-quoted)."""
    return json.dumps(name, ensure_ascii=False)


def open_index(source, location: str) -> Index | None:
    """The :class:`Index` of data file ``source`` (a storage Source) when it is a safetensors
    file, else None. The header is read with one read of the first 64 KiB (a second one for a
    longer header). Raises what :func:`~.header.parse_header` raises (MalformedError or
    UnsupportedError, the path naming the header entry) for a location ending in
    ``.safetensors``; IoError when the file cannot be read."""
    size = source.size
    head = source.read(0, min(size, 1 << 16))
    if not looks_like_safetensors(head, size):
        if location.lower().endswith(".safetensors"):
            parse_header(head, size, location, source.read)  # raises: says why it is not one
        return None
    try:
        header = parse_header(head, size, location, source.read)
    except OneModelError:
        if location.lower().endswith(".safetensors"):
            raise
        return None
    index = Index(header, location)
    _INDEX[source] = index
    return index


def index_of(source) -> Index | None:
    """The :class:`Index` :func:`open_index` made for ``source``, or None."""
    try:
        return _INDEX.get(source)
    except TypeError:
        return None


__all__ = ["Index", "looks_like_safetensors", "open_index", "index_of"]
