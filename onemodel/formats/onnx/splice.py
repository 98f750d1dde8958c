"""Models written without encoding again what the file they were read from holds (Clause 12):
the main graph's new ``value_info`` entries spliced into its octets, and the outputs whose type
was completed encoded again in their places (``onemodel infer``: :func:`splice_value_info`),
or the model's other fields encoded around the main graph's octets as read (``onemodel convert
--opset`` when no node changed: :func:`splice_graph`).

A ModelProto's fields are walked at the top level to find its ``graph`` (field 7); the graph's
fields are walked to find where ``value_info`` entries go in the order the writer (and the
protobuf serializers) emit fields: after the last field the writer puts no later than
``value_info``, before ``quantization_annotation``, ``metadata_props`` and unknown fields. The
result is the input's octets with the graph's length prefix changed and the new entries
inserted there; for a file in the writer's canonical form it equals what
:func:`.wire_encode.encode` gives for the model with the entries appended (tested), and
everything else (every other octet of the file, the weights included) is copied, never
decoded again. Only the structure of the walk is read: one varint key and length per field.
"""

from __future__ import annotations

import os

from ..protobuf import LEN, WireError, encode_varint, read_varint, skip_field
from . import wire_decode
from .schema import MESSAGES
from .wire_encode import Verbatim, encode, encode_pieces

_MODEL_GRAPH = 7
_ONE_OCTET = [encode_varint(i) for i in range(0x80)]
_VALUE_INFO_KEY = encode_varint(13 << 3 | LEN)
_TYPE_KEY = encode_varint(2 << 3 | LEN)
_GRAPH_OUTPUT = 12
_OUTPUT_KEY = encode_varint(_GRAPH_OUTPUT << 3 | LEN)


def _graph_tags_before_value_info() -> frozenset:
    """GraphProto field tags the writer emits before (or as) ``value_info``."""
    tags = []
    for f in MESSAGES["GraphProto"].fields:
        tags.append(f.tag)
        if f.proto_name == "value_info":
            break
    return frozenset(tags)


def _accelerator():
    """The C decoder's module (``_cdecode.c``: :func:`insertion_point` and
    :func:`value_info_octets` in C, the same results), or None: not built, or turned off by
    ``ONEMODEL_PURE_PYTHON=1``."""
    c = wire_decode._C
    return c if c is not None and os.environ.get("ONEMODEL_PURE_PYTHON") != "1" else None


def _field_at(data, pos: int, end: int) -> tuple[int, int, int, int]:
    """``(tag, wire, value start, next field)`` of the field at ``pos``."""
    k, p = read_varint(data, pos, end)
    wire = k & 7
    start = p
    if wire == LEN:
        n, start = read_varint(data, p, end)
        return k >> 3, wire, start, start + n
    return k >> 3, wire, start, skip_field(data, p, end, wire)


def graph_span(data) -> tuple[int, int, int] | None:
    """``(field start, value start, value end)`` of the ModelProto's last ``graph`` field (a
    parser merges repeated singular messages; the writer emits one), None when there is none.
    Raises WireError for octets that are not a message."""
    pos, end, found = 0, len(data), None
    while pos < end:
        tag, wire, start, nxt = _field_at(data, pos, end)
        if tag == _MODEL_GRAPH and wire == LEN:
            if found is not None:
                return None  # two graph fields: merged by parsers; not spliced
            found = (pos, start, nxt)
        pos = nxt
    return found


def insertion_point(data, start: int, end: int) -> int:
    """Where new ``value_info`` entries go in the GraphProto octets ``data[start:end]``: after
    the last field of a tag the writer emits no later than ``value_info``."""
    before = _graph_tags_before_value_info()
    c = _accelerator()
    if c is not None and max(before) < 64:
        try:
            return c.insertion_point(data, start, end, sum(1 << t for t in before))
        except WireError:
            pass  # the walk below raises it, with its message
    pos, at = start, start
    while pos < end:
        # the common field inline: a one-octet key of a length-delimited field with a length
        # of one or two octets (a node, an initializer); any other through _field_at
        k = data[pos]
        if k & 0x87 == LEN and pos + 2 < end:
            n = data[pos + 1]
            if n < 0x80:
                nxt = pos + 2 + n
            else:
                n2 = data[pos + 2]
                nxt = pos + 3 + ((n & 0x7F) | n2 << 7) if n2 < 0x80 else -1
            if pos < nxt <= end:
                if k >> 3 in before:
                    at = nxt
                pos = nxt
                continue
        tag, _, _, nxt = _field_at(data, pos, end)
        if tag in before:
            at = nxt
        pos = nxt
    return at


def value_info_octets(entries) -> bytes:
    """The octets of ``value_info`` fields (key 13) holding ``entries`` (ir ValueInfo records),
    encoding each distinct Type record once (entries often share one)."""
    c = _accelerator()
    if c is not None and type(entries) is list:
        return c.value_info_octets(entries, _type_field, _entry_field)
    out = bytearray()
    typed: dict[int, bytes] = {}
    name_key = encode_varint(1 << 3 | LEN)
    small = _ONE_OCTET  # (the varint of a length below 128, without a call)
    for vi in entries:
        if vi.doc_string is not None or vi.metadata_props or vi.unknown:
            out += _entry_field(vi)
            continue
        t = typed.get(id(vi.type))
        if t is None:
            t = typed[id(vi.type)] = _type_field(vi.type)
        name = vi.name.encode("utf-8", "surrogateescape")
        n = len(name)
        head = name_key + (small[n] if n < 0x80 else encode_varint(n))
        size = len(head) + n + len(t)  # the entry's body: its name field, then its type field
        out += _VALUE_INFO_KEY
        out += small[size] if size < 0x80 else encode_varint(size)
        out += head
        out += name
        out += t
    return bytes(out)


def splice_value_info(data, entries, outputs: dict | None = None) -> list | None:
    """The pieces (memoryviews of ``data`` and new octets) of the ModelProto ``data`` with
    ``entries`` appended to its main graph's ``value_info`` and, for each ``{k: ValueInfo}`` of
    ``outputs``, the graph's ``k``-th ``output`` field replaced by that record's encoding (in
    its place: ``onemodel infer`` completing an output's type); None when the file has no
    graph or more than one graph field, or fewer outputs than an index asks (then encode the
    model instead). Raises WireError when ``data`` is not a well-formed message at the levels
    walked."""
    view = memoryview(data)
    span = graph_span(view)
    if span is None:
        return None
    field_start, start, end = span
    at = insertion_point(view, start, end)
    edits = [(at, at, value_info_octets(entries))]
    if outputs:
        spans = output_spans(view, start, end)
        if max(outputs) >= len(spans):
            return None
        edits += [(*spans[k], _field(_OUTPUT_KEY, vi)) for k, vi in outputs.items()]
        edits.sort(key=lambda e: e[:2])  # (the outputs end no later than ``at``)
    body: list = []
    pos = start
    for first, after, octets in edits:
        body += [view[pos:first], octets]
        pos = after
    body.append(view[pos:end])
    head = encode_varint(_MODEL_GRAPH << 3 | LEN) + encode_varint(sum(map(len, body)))
    return [view[:field_start], head, *body, view[end:]]


def output_spans(data, start: int, end: int) -> list[tuple[int, int]]:
    """``(field start, next field)`` of each ``output`` field (key 12) of the GraphProto
    octets ``data[start:end]``, in order."""
    spans = []
    pos = start
    while pos < end:
        tag, wire, _, nxt = _field_at(data, pos, end)
        if tag == _GRAPH_OUTPUT and wire == LEN:
            spans.append((pos, nxt))
        pos = nxt
    return spans


def splice_graph(data, model) -> list | None:
    """The pieces (as :func:`.wire_encode.encode_pieces` gives them) of ModelProto ``model``
    with its main graph's value the octets of the graph of the ModelProto ``data`` (a
    memoryview piece, not decoded or copied): for a ``model`` whose graph the caller knows is
    the one ``data`` encodes (equal records). None when ``data`` has no graph or more than one
    graph field. Raises WireError when ``data`` is not a well-formed message at the top level,
    and what :func:`.wire_encode.encode_pieces` raises."""
    view = memoryview(data)
    span = graph_span(view)
    if span is None or model.graph is None:
        return None
    _, start, end = span
    return encode_pieces(model, substitute={id(model.graph): Verbatim(view[start:end])})


def source_octets(model, src, dst) -> memoryview | None:
    """The octets of the ONNX file ``model`` was read from (``src``), whole in memory or
    mapped, when a file spliced from them can be written at ``dst`` as they are: None when
    ``model`` was read
    from another format or from a source that is not whole (a URL), or when its external data
    references would not hold from ``dst`` (another directory; the writer's ``keep`` layout
    copies the data files beside it then)."""
    if model.format != "onnx":
        return None
    sources = model.resources or []
    whole = sources[0].whole() if sources and hasattr(sources[0], "whole") else None
    if whole is None:
        return None
    from ...ir import iter_tensors
    from ...storage import has_zstd_suffix
    from ...storage.place import name_of_url

    # (the reader adds each external data file it opened to model.resources); a .zst output
    # is one stream: the writer puts every tensor in it
    if len(sources) > 1 and any(t.is_external for _, t in iter_tensors(model)) and \
            (not _same_directory(src, dst) or has_zstd_suffix(name_of_url(os.fspath(dst)))):
        return None
    return whole


def _same_directory(a, b) -> bool:
    """Whether local paths ``a`` and ``b`` are files of one directory."""
    from ...storage.place import is_url

    if is_url(a) or is_url(b):
        return False
    da, db = (os.path.dirname(os.path.abspath(os.fspath(p))) for p in (a, b))
    try:
        return os.path.samefile(da, db)
    except OSError:
        return da == db


def _type_field(t) -> bytes:
    """The octets of a ValueInfoProto's ``type`` field (key 2) holding Type record ``t``."""
    body = encode(t)
    return _TYPE_KEY + encode_varint(len(body)) + body


def _entry_field(vi) -> bytes:
    """The octets of a GraphProto ``value_info`` field (key 13) holding ValueInfo ``vi``."""
    return _field(_VALUE_INFO_KEY, vi)


def _field(key: bytes, record) -> bytes:
    """The octets of a length-delimited field of ``key`` holding ``record``."""
    body = encode(record)
    return key + encode_varint(len(body)) + body


__all__ = ["splice_value_info", "splice_graph", "source_octets", "value_info_octets",
           "graph_span", "insertion_point", "output_spans", "WireError"]
