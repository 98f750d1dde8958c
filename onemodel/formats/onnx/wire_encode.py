"""Encoding :mod:`onemodel.ir` records as ONNX messages (Clause 12, Annex B), byte for byte as
the protobuf serializers do.

What the official serializer emits, so a file written by ``onnx.save`` or ``torch.onnx.export``
comes back identical: known fields in increasing tag order; every present optional field, even
``""`` or ``0`` (proto2 presence); repeated fields in the form Annex B records (packed for
``float_data``, ``int32_data``, ``int64_data``, ``double_data``, ``uint64_data``; unpacked for
the others); negative integers as ten-octet varints (12.2.3); floats by their bit patterns; the
octets of unknown fields last, in the order they were read.

``raw_data`` values that are Blobs (ranges of a source: a mapped file, a remote file) or large
are not copied into the output: :func:`encode_pieces` returns them as separate pieces (the Blob
itself, or a memoryview of the buffer) that a writer streams to its sink. A message's encoding
is not copied into its parent either when it holds such a piece or is large: the parent's key
and length precede it as their own piece. So the memory an encoding takes is about the size of
the model's structure, not of its weights.
"""

from __future__ import annotations

from ...errors import InvalidModelError
from ...ir.record import buffer_nbytes, buffer_view, f32_bits
from ...lazy import np
from ...storage.blob import Blob
from ..protobuf import (
    INT32_RANGE,
    INT64_RANGE,
    UINT64_RANGE,
    encode_packed_varints,
    encode_varint,
    out_of_range,
)
from .schema import BY_CLASS, BYTES, DOUBLE, ENUM, FLOAT, INT32, INT64, MESSAGE, RAW, STRING, UINT64

#: ``raw_data`` values (bytes) at least this large are kept as separate pieces, not copied, even
#: in memory; a sub-message's encoding this large is spliced into its parent, not copied.
BIG = 1 << 16
#: ``raw_data`` values (bytes) under this size are copied into the output even when they are
#: Blobs of a local source: a piece of their own costs more time than the copy (a graph of 20,000
#: four-float initializers encodes ~30% slower), and the copy is smaller than the Tensor record
#: holding the value (~700 bytes), so the memory of an encoding stays proportional to the model's
#: structure.
SMALL = 256

_v = encode_varint
#: The values each integer kind holds (Clause 12.2; an enumeration is an int32).
_RANGES = {INT64: INT64_RANGE, INT32: INT32_RANGE, ENUM: INT32_RANGE, UINT64: UINT64_RANGE}
_TYPE_NAMES = {INT64: "int64", INT32: "int32", ENUM: "int32 (an enumeration)", UINT64: "uint64"}


def _f32_unpacked(key: bytes, values) -> bytes:
    a = np.asarray(values, dtype="<f4").reshape(-1)
    rec = np.empty(a.size, dtype=[("k", f"V{len(key)}"), ("v", "<f4")])
    rec["k"] = np.frombuffer(key, dtype=f"V{len(key)}")[0]
    rec["v"] = a
    return rec.tobytes()


def _encode(obj, msg, out: bytearray, parts: list, subst: dict | None = None) -> bytearray:
    """Append the encoding of ``obj`` (message ``msg``) to ``out``; return the bytearray that
    holds its last octets. A raw_data value kept as a piece of its own, or a sub-message that
    holds one or is large, moves ``out`` into ``parts`` (never copied, never changed again),
    appends its own pieces and the encoding goes on in a new bytearray. ``subst`` maps the
    ``id`` of a sub-record to the record encoded in its place (the content digest's tensor
    stubs); None for none."""
    for f in msg.fields:
        v = getattr(obj, f.name)
        if v is None:
            if f.repeated and f.array_dtype is None:  # a list has no absent state
                raise _NoneList()
            continue
        kind = f.kind
        if f.repeated:
            if f.array_dtype is not None:
                if len(v) == 0:
                    continue
                if f.packed:
                    if kind == FLOAT:
                        payload = np.asarray(v, dtype="<f4").tobytes()
                    elif kind == DOUBLE:
                        payload = np.asarray(v, dtype="<f8").tobytes()
                    else:
                        a = np.asarray(v)
                        _check_range(obj, f, a)
                        payload = encode_packed_varints(a)
                    out += f.key
                    out += _v(len(payload))
                    out += payload
                else:  # Attribute.floats: unpacked fixed32 values
                    out += _f32_unpacked(f.key, v)
                continue
            if not v:
                continue
            key = f.key
            if kind == MESSAGE:
                sub = f.message
                for item in v:
                    out = _encode_sub(item, sub, key, out, parts, subst)
            elif kind == STRING:
                for s in v:
                    b = s.encode("utf-8", "surrogateescape")
                    out += key
                    out += _v(len(b))
                    out += b
            elif kind == BYTES:
                for b in v:
                    out += key
                    out += _v(len(b))
                    out += b
            elif kind == FLOAT:
                out += _f32_unpacked(key, v)
            elif kind == DOUBLE:
                for x in v:
                    out += key
                    out += np.float64(x).tobytes()
            else:
                _check_range(obj, f, v)
                for x in v:
                    out += key
                    out += _v(x)
            continue
        if kind == STRING:
            b = v.encode("utf-8", "surrogateescape")
            out += f.key
            out += _v(len(b))
            out += b
        elif kind == MESSAGE:
            out = _encode_sub(v, f.message, f.key, out, parts, subst)
        elif kind in (INT64, INT32, ENUM, UINT64):
            lo, hi = _RANGES[kind]
            if not lo <= v <= hi:
                raise _OutOfRange(obj, f, v)
            out += f.key
            out += _v(v)
        elif kind == FLOAT:
            out += f.key
            out += f32_bits(v).to_bytes(4, "little")
        elif kind == DOUBLE:
            out += f.key
            out += np.float64(v).tobytes()
        elif kind == BYTES:
            out += f.key
            out += _v(len(v))
            out += v
        elif kind == RAW:
            if isinstance(v, Blob):  # a remote one is a piece whatever its size: not fetched
                n = v.nbytes
                piece = v if n >= SMALL or v.source.whole() is None else None
            else:
                n = buffer_nbytes(v)
                piece = buffer_view(v) if n >= BIG else None
            out += f.key
            out += _v(n)
            if piece is not None:
                parts.append(out)
                parts.append(piece)
                out = bytearray()
            else:
                out += buffer_view(v)
    if obj.unknown:
        out += obj.unknown
    return out


class Verbatim:
    """Octets that stand for a sub-record in :func:`encode_pieces`'s ``substitute``: the
    field's value is these octets as they are (a memoryview of the file the record was read
    from, whose encoding the caller knows equals the record's), a piece of its own, never
    copied."""

    __slots__ = ("octets",)

    def __init__(self, octets):
        self.octets = octets


def _encode_sub(item, sub, key: bytes, out: bytearray, parts: list,
                subst: dict | None = None) -> bytearray:
    """Append field ``key`` holding ``item`` (message ``sub``) after ``out``; return the
    bytearray to go on with (``out`` itself when the item's octets were copied into it)."""
    if subst is not None:
        item = subst.get(id(item), item)
        if type(item) is Verbatim:
            out += key
            out += _v(len(item.octets))
            parts.append(out)
            parts.append(item.octets)
            return bytearray()
    mark = len(parts)
    inner = _encode(item, sub, bytearray(), parts, subst)
    if len(parts) == mark:
        if len(inner) < BIG:  # small and whole: copied, once per nesting level
            out += key
            out += _v(len(inner))
            out += inner
            return out
        parts.append(inner)
    elif inner:
        parts.append(inner)
    out += key
    out += _v(pieces_size(parts[mark:]))
    first = parts[mark]
    if isinstance(first, bytearray) and len(first) < BIG:
        out += first  # the item's leading octets join the key and length (fewer, larger pieces)
        parts[mark] = out
    else:
        parts.insert(mark, out)
    return bytearray()


def _check_range(obj, f, values) -> None:
    """Raise :class:`_OutOfRange` when one of ``values`` (field ``f`` of ``obj``) is outside
    the range of the field's integer type."""
    lo, hi = _RANGES[f.kind]
    bad = out_of_range(values, lo, hi)
    if bad is not None:
        raise _OutOfRange(obj, f, bad)


class _OutOfRange(Exception):
    """An integer outside its field's range met while encoding (record, field, value)."""

    def __init__(self, obj, f, value):
        super().__init__()
        self.obj, self.field, self.value = obj, f, value


def _path_to(root, target, msg=None) -> str | None:
    """The IR path (``graph.value_info[3].type.tensor_type.shape.dims[0]``) of record
    ``target`` inside ``root`` ("" for ``root`` itself), or None when it is not there."""
    if root is target:
        return ""
    _, subs, list_subs = _list_walk(BY_CLASS[type(root)] if msg is None else msg)
    for name, sub in subs:
        v = getattr(root, name)
        if v is not None:
            below = _path_to(v, target, sub)
            if below is not None:
                return name + ("." + below if below else "")
    for name, sub in list_subs:
        for i, item in enumerate(getattr(root, name)):
            below = _path_to(item, target, sub)
            if below is not None:
                return f"{name}[{i}]" + ("." + below if below else "")
    return None


def _range_error(root, e: _OutOfRange) -> InvalidModelError:
    """The InvalidModelError of an integer outside its field's range (Clause 12.2): the value
    is refused, never masked to the field's width."""
    f = e.field
    lo, hi = _RANGES[f.kind]
    where = _path_to(root, e.obj)
    path = f.name if not where else f"{where}.{f.name}"
    return InvalidModelError(
        f"{BY_CLASS[type(e.obj)].proto_name}.{f.proto_name} holds {e.value}, outside the range "
        f"of its type {_TYPE_NAMES[f.kind]} ({lo} to {hi}): it cannot be written (Clause 12.2)",
        path=path)


class _NoneList(Exception):
    """A repeated (list) field holding None met while encoding: :func:`encode_pieces` and
    :func:`encode` find which one (:func:`none_list_error`)."""


#: message proto name -> (its list fields, its message fields, its repeated message fields)
_LIST_WALK: dict = {}


def _list_walk(msg) -> tuple:
    plan = _LIST_WALK.get(msg.proto_name)
    if plan is None:
        plan = _LIST_WALK[msg.proto_name] = (
            tuple(f.name for f in msg.fields if f.repeated and f.array_dtype is None),
            tuple((f.name, f.message) for f in msg.fields
                  if f.kind == MESSAGE and not f.repeated),
            tuple((f.name, f.message) for f in msg.fields if f.kind == MESSAGE and f.repeated))
    return plan


def none_list_path(obj, msg=None) -> str | None:
    """The path (IR field names, ``graph.nodes[0].inputs``) of the first repeated field of
    ``obj`` or of a record below it that holds None, or None when there is none. A repeated
    field has no absent state (:mod:`onemodel.ir.record`: a list, ``[]`` when empty); the
    number arrays (``float_data``, ``floats``, ...), whose empty value is None, are not such
    fields."""
    lists, subs, list_subs = _list_walk(BY_CLASS[type(obj)] if msg is None else msg)
    for name in lists:
        if getattr(obj, name) is None:
            return name
    for name, sub in subs:
        v = getattr(obj, name)
        if v is not None:
            below = none_list_path(v, sub)
            if below is not None:
                return f"{name}.{below}"
    for name, sub in list_subs:
        for i, item in enumerate(getattr(obj, name)):
            below = none_list_path(item, sub)
            if below is not None:
                return f"{name}[{i}].{below}"
    return None


def none_list_error(obj) -> InvalidModelError | None:
    """The InvalidModelError of the first repeated field holding None in ``obj``
    (:func:`none_list_path`; the message as the OneModel writer words it), or None."""
    path = none_list_path(obj)
    if path is None:
        return None
    name = path.rsplit(".", 1)[-1]
    return InvalidModelError(f"repeated field {name} holds None, not a list ([] when empty)",
                             path=path)


def _refused(obj) -> InvalidModelError:
    """The error of :class:`_NoneList` raised while encoding ``obj``."""
    return none_list_error(obj) or InvalidModelError(
        "a repeated field holds None, not a list ([] when empty)")


def encode_pieces(obj, *, substitute: dict | None = None) -> list:
    """The encoding of a record as a list of pieces: ``bytearray`` (encoded octets), the
    :class:`~onemodel.storage.blob.Blob` of a ``raw_data`` value (bytes of a source, which a
    writer hands to ``Sink.write_blob``) or a byte-format memoryview of a ``raw_data`` buffer in
    memory. ``substitute``: as :func:`encode`'s, where a value may also be a
    :class:`Verbatim` (its octets are the sub-record's encoding, a piece of their own).

    Concatenating the pieces (a Blob's bytes for a Blob) gives the message's octets. A piece of
    its own is each ``raw_data`` that is a Blob of a remote source, or a Blob of :data:`SMALL`
    bytes or more, or in memory and of :data:`BIG` bytes or more; no piece is changed after it
    was returned.

    Raises:
        InvalidModelError: a repeated field holding None (not a list), naming it; an integer
            outside the range of its field's type (int64, int32, an enumeration, uint64),
            naming the field and the value (it is never masked to the field's width).
    """
    msg = BY_CLASS[type(obj)]
    parts: list = []
    try:
        out = _encode(obj, msg, bytearray(), parts, substitute)
    except _NoneList:
        raise _refused(obj) from None
    except _OutOfRange as e:
        raise _range_error(obj, e) from None
    if out:
        parts.append(out)
    return parts


def encode(obj, *, substitute: dict | None = None) -> bytes:
    """The octets of a record as its ONNX message (a ``Model`` as ModelProto, ...).

    ``substitute``: ``id(record) -> record`` encoded in place of that sub-record wherever it
    occurs (the records themselves are not changed). Raises InvalidModelError for a repeated
    field holding None (not a list), naming it, and for an integer outside its field's range
    (:func:`encode_pieces`)."""
    return b"".join(p.view() if isinstance(p, Blob) else p
                    for p in encode_pieces(obj, substitute=substitute))


def pieces_size(pieces: list) -> int:
    """Total octets of the pieces from :func:`encode_pieces`."""
    return sum(len(p) for p in pieces)
