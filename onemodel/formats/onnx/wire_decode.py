"""Decoding ONNX messages (Clause 12, Annex B) into :mod:`onemodel.ir` records, in pure Python.

The decoder follows the schema of :mod:`.schema`:

* a field may come in any order; a singular scalar that appears more than once keeps its last
  value, a singular message that appears more than once is merged into the first (12.3.2);
* a repeated scalar field is accepted packed, unpacked or both, in order of appearance (12.3.3);
* a field whose tag is unknown, or whose wire type does not fit its tag, is skipped by its wire
  type and its octets are kept in the record's ``unknown`` (12.4), as protobuf does; so is a value
  of a closed enumeration outside it;
* wire types 3 and 4, a varint over ten octets or of 2^64 or more, a field tag of 0 or above
  2^29 - 1, a length past the end of the enclosing message, an int32 value out of range, and
  nesting deeper than
  :data:`~onemodel.limits.MAX_MESSAGE_DEPTH` messages raise MalformedError with the field path
  (``ModelProto.graph.node[3].attribute[0]``) and the byte offset. Recursion is bounded by that
  depth, far below Python's own limit.
* a read past the end of the top-level message, which is the whole input, is a truncated file
  and says so (``the file is truncated: field graph (length 58411) needs 58434 bytes, the file
  has 5000``; a varint, a 32- or 64-bit value, an unknown field alike). A cut file always fails
  there: the outermost field holding the cut has a length that crosses the end. A length past
  the end of an inner message is a malformed length, whatever the file size (the lengths around
  it say the message ends within the file).
* ``raw_data`` is not copied: it becomes a :class:`~onemodel.storage.blob.Blob` of the source the
  input's bytes are (``blob_source``), or a view of the input (see :func:`decode`).

:func:`decode` runs the C version of :func:`_decode` (``_cdecode.c``, compiled at install when a
C compiler is there) on in-memory buffers: the same records and errors, about ten times faster.
``_decode`` stays the specification; remote inputs, an unbuilt extension or the environment
variable ``ONEMODEL_PURE_PYTHON=1`` use it.
"""

from __future__ import annotations

import codecs
import os

from ...errors import MalformedError
from ...ir.record import Float32
from ...lazy import np
from ...limits import MAX_MESSAGE_DEPTH
from ...storage.blob import Blob
from ..protobuf import WireError, check_tag, decode_packed_varints, read_varint, skip_field
from . import schema as _schema
from .schema import (
    BYTES,
    DOUBLE,
    ENUM,
    FLOAT,
    INT32,
    INT64,
    MESSAGE,
    MESSAGES,
    RAW,
    STRING,
    UINT64,
    Message,
)

# The C accelerator (_cdecode.c, built when a compiler is there): the same records and errors as
# _decode below, several times faster. ONEMODEL_PURE_PYTHON=1 keeps every call on _decode.
# _C_ERROR says why it is not in use (not built, or the table did not fit).
try:
    from . import _cdecode as _C
    _C.setup(_schema, WireError, MAX_MESSAGE_DEPTH, np, Blob)
    _C_ERROR = None
except Exception as exc:  # ImportError when not built; TypeError when the schema does not fit
    import importlib.util

    _C, _C_ERROR = None, f"{type(exc).__name__}: {exc}"
    if isinstance(exc, ImportError) and importlib.util.find_spec(f"{__package__}._cdecode") is None:
        _C_ERROR = ("onemodel/formats/onnx/_cdecode.c was not built at install (no C compiler, "
                    "or its build failed: pip install -v shows why)")

_utf8 = codecs.utf_8_decode
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
_F4 = "<f4"
_F8 = "<f8"


class _Ctx:
    __slots__ = ("raw", "tensors", "blob_source")

    def __init__(self, raw, blob_source):
        self.raw = raw
        self.blob_source = blob_source
        self.tensors = []  # (tensor, offset of its first byte) for the checks after decoding


#: Messages whose records go to ``check`` after decoding (a sparse tensor after its parts).
_CHECKED = frozenset(("TensorProto", "SparseTensorProto"))


def _field_error(message: str, offset: int, field) -> WireError:
    err = WireError(message, offset)
    err.segments.append(field.proto_name)
    return err


def _truncated(what: str, need: int, size: int) -> str:
    """The message for a read of the top-level message past the end of the input (Clause 12.2.5
    at the outermost level: the file was cut); ``need``: the bytes the read needs."""
    return f"the file is truncated: {what} needs {need} bytes, the file has {size}"


def _ends_in_varint(buf, pos: int, end: int) -> bool:
    """Whether the varint at ``pos`` runs past ``end`` (every octet left has its continuation
    bit, and fewer than ten are left: ten would make read_varint refuse it as too wide)."""
    return end - pos < 10 and all(buf[i] >= 0x80 for i in range(pos, end))


def _varint_cut(end: int, offset: int) -> WireError:
    return WireError(f"the file is truncated: it ends before the end of a varint, the file has "
                     f"{end} bytes", offset)


def _varint(buf, pos: int, end: int, depth: int) -> tuple[int, int]:
    """read_varint, saying the file is truncated when the top-level message ends inside it."""
    try:
        return read_varint(buf, pos, end)
    except WireError:
        if depth == 1 and _ends_in_varint(buf, pos, end):
            raise _varint_cut(end, pos) from None
        raise


def _skip_cut(buf, pos: int, end: int, wire: int) -> WireError | None:
    """The truncation error of an unknown field's value at ``pos`` of the top-level message
    that skip_field refused, or None when the refusal is not a read past the end."""
    if wire in (0, 2) and _ends_in_varint(buf, pos, end):
        return _varint_cut(end, pos)
    if wire == 2:
        n, p = read_varint(buf, pos, end)
        if n > end - p:
            return WireError(_truncated(f"a field of length {n}", p + n, end), pos)
    elif wire in (1, 5):
        width = 8 if wire == 1 else 4
        if pos + width > end:
            return WireError(_truncated(f"a {width * 8}-bit value", pos + width, end), pos)
    return None


def _past_end(f, width: int, kstart: int, pos: int, end: int, depth: int) -> WireError:
    """The error of field ``f``'s fixed-width value at ``pos`` running past ``end``."""
    if depth == 1:
        return _field_error(_truncated(f"field {f.proto_name} (a {width * 8}-bit value)",
                                       pos + width, end), kstart, f)
    return _field_error(f"field {f.proto_name} runs past the end of its message", kstart, f)


def _scalar_list(f, arr: np.ndarray, pos: int) -> np.ndarray:
    """Packed varints (uint64) as the field's integer kind, range-checked for int32."""
    if f.kind == UINT64:
        return arr
    arr = arr.view(np.int64)
    if f.kind in (INT32, ENUM):
        if arr.size and (arr.min() < _I32_MIN or arr.max() > _I32_MAX):
            raise _field_error(f"int32 field {f.proto_name} out of range", pos, f)
    return arr


def _decode(buf, pos: int, end: int, msg: Message, obj, depth: int, ctx: _Ctx) -> None:
    by_tag = msg.by_tag
    pending = None  # repeated numeric fields gathered in pieces: name -> list of arrays/values
    while pos < end:
        kstart = pos
        k = buf[pos]
        if k < 0x80:
            pos += 1
        else:
            k, pos = _varint(buf, pos, end, depth)
        wire = k & 7
        f = by_tag.get(k >> 3)
        if f is None or (f.wire != wire and not (f.repeated and wire == 2 and f.wire != 2)):
            check_tag(k >> 3, kstart)
            if wire == 3 or wire == 4:
                raise WireError(f"wire type {wire} (group) is not allowed (Clause 12.2.1)",
                                kstart)
            if wire > 5:
                raise WireError(f"invalid wire type {wire}", kstart)
            try:
                pos = skip_field(buf, pos, end, wire)
            except WireError:
                cut = _skip_cut(buf, pos, end, wire) if depth == 1 else None
                if cut is None:
                    raise
                raise cut from None
            obj.unknown += bytes(buf[kstart:pos])
            continue
        kind = f.kind
        if wire == 2:
            n = buf[pos] if pos < end else 0x80
            if n < 0x80:
                pos += 1
            else:
                try:
                    n, pos = _varint(buf, pos, end, depth)
                except WireError as err:
                    err.segments.append(f.proto_name)
                    raise
            e = pos + n
            if e > end:
                if depth == 1:
                    raise _field_error(_truncated(f"field {f.proto_name} (length {n})", e, end),
                                       kstart, f)
                raise _field_error(f"length {n} of field {f.proto_name} runs past the end of "
                                   "its message", kstart, f)
            if kind == STRING:
                s = _utf8(buf[pos:e], "surrogateescape", True)[0]  # final: keep a cut-off tail
                if f.repeated:
                    getattr(obj, f.name).append(s)
                else:
                    if f.oneof:
                        _clear_oneof(msg, obj, f)
                    setattr(obj, f.name, s)
            elif kind == MESSAGE:
                sub_msg = f.message
                if depth >= MAX_MESSAGE_DEPTH:
                    raise WireError(f"messages nested deeper than {MAX_MESSAGE_DEPTH}", kstart)
                if f.repeated:
                    lst = getattr(obj, f.name)
                    sub = sub_msg.cls()
                    lst.append(sub)
                    idx = len(lst) - 1
                else:
                    sub = getattr(obj, f.name)
                    if sub is None:
                        if f.oneof:
                            _clear_oneof(msg, obj, f)
                        sub = sub_msg.cls()
                        setattr(obj, f.name, sub)
                    idx = None
                try:
                    _decode(buf, pos, e, sub_msg, sub, depth + 1, ctx)
                except WireError as err:
                    err.segments.append(f.proto_name if idx is None
                                        else f"{f.proto_name}[{idx}]")
                    raise
                if sub_msg.proto_name in _CHECKED:
                    ctx.tensors.append((sub, kstart))
            elif kind == BYTES:
                b = bytes(buf[pos:e])
                if f.repeated:
                    getattr(obj, f.name).append(b)
                else:
                    setattr(obj, f.name, b)
            elif kind == RAW:
                if ctx.raw is not None:
                    obj.raw_data = ctx.raw(pos, e)
                elif ctx.blob_source is not None:
                    obj.raw_data = Blob(ctx.blob_source, pos, n)
                else:
                    obj.raw_data = buf[pos:e]
            else:  # a packed run of a repeated scalar field
                if kind == FLOAT or kind == DOUBLE:
                    width = 4 if kind == FLOAT else 8
                    if n % width:
                        raise _field_error(f"packed {f.proto_name} of {n} octets is not a "
                                           f"multiple of {width}", kstart, f)
                    arr = np.frombuffer(buf[pos:e], dtype=_F4 if kind == FLOAT else _F8)
                else:
                    try:
                        packed = decode_packed_varints(buf, pos, e)
                    except WireError as err:
                        err.segments.append(f.proto_name)
                        raise
                    arr = _scalar_list(f, packed, kstart)
                if f.array_dtype is None:  # a list field (dims, ints, ...): keep the order
                    getattr(obj, f.name).extend(arr.tolist())
                else:
                    if pending is None:
                        pending = {}
                    pending.setdefault(f.name, []).append(arr)
            pos = e
            continue
        # wire types 0, 1, 5: one scalar value
        if wire == 0:
            v = buf[pos] if pos < end else 0x80
            if v < 0x80:
                pos += 1
            else:
                try:
                    v, pos = _varint(buf, pos, end, depth)
                except WireError as err:
                    err.segments.append(f.proto_name)
                    raise
            if kind != UINT64:
                if v >= (1 << 63):
                    v -= 1 << 64
                if kind != INT64 and (v < _I32_MIN or v > _I32_MAX):
                    raise _field_error(f"int32 field {f.proto_name} out of range: {v}", kstart,
                                       f)
                if kind == ENUM and v not in f.enum_values:
                    obj.unknown += bytes(buf[kstart:pos])  # closed enum: kept as unknown
                    continue
        elif wire == 5:
            if pos + 4 > end:
                raise _past_end(f, 4, kstart, pos, end, depth)
            v = (Float32.from_bits(int.from_bytes(buf[pos:pos + 4], "little")) if not f.repeated
                 else np.frombuffer(buf[pos:pos + 4], dtype=_F4)[0])
            pos += 4
        else:
            if pos + 8 > end:
                raise _past_end(f, 8, kstart, pos, end, depth)
            v = np.frombuffer(buf[pos:pos + 8], dtype=_F8)[0]
            pos += 8
        if f.repeated:
            if f.array_dtype is not None:
                if pending is None:
                    pending = {}
                pending.setdefault(f.name, []).append(v)
            else:
                getattr(obj, f.name).append(v)
        else:
            if f.oneof:
                _clear_oneof(msg, obj, f)
            setattr(obj, f.name, v)
    if pending:
        _finish_pending(msg, obj, pending)


def _finish_pending(msg: Message, obj, pending: dict) -> None:
    for name, parts in pending.items():
        f = next(x for x in msg.fields if x.name == name)
        arrays = [p if isinstance(p, np.ndarray) else np.asarray([p]) for p in parts]
        old = getattr(obj, name)
        if old is not None:
            arrays.insert(0, old)
        dtype = np.dtype(f.array_dtype)
        if len(arrays) == 1:
            a = arrays[0]
            setattr(obj, name, a if a.dtype == dtype else a.astype(dtype))
        else:
            setattr(obj, name, np.concatenate([a.astype(dtype, copy=False) for a in arrays]))


def _clear_oneof(msg: Message, obj, f) -> None:
    for other in msg.oneofs[f.oneof]:
        if other != f.name:
            setattr(obj, other, None)


def decode(data, message: str = "ModelProto", *, raw=None, source: str | None = None,
           blob_source=None, check=None):
    """Decode one message of type ``message`` (an Annex B name) from ``data``.

    Args:
        data: bytes-like (bytes, memoryview of a mapped file, ...), or an object with
            ``__getitem__`` for ints and slices and ``__len__`` (a lazily fetched remote file).
        message: the proto name of the top-level message, e.g. ``ModelProto``, ``TensorProto``,
            ``SequenceProto``.
        raw: ``raw(start, end) -> buffer`` making the value of each ``raw_data`` field.
        source: path or URL, for error messages.
        blob_source: the storage Source whose bytes ``data`` are: without ``raw``, each
            ``raw_data`` is ``Blob(blob_source, offset, nbytes)`` (its range of the source,
            which writers copy file to file). Without either, a zero-copy slice of ``data``.
        check: ``check(root, tensors)`` called after decoding with every decoded TensorProto
            and SparseTensorProto (a sparse tensor after its values and indices) and its offset
            (the reader's content checks).
    Returns:
        the record (``Model`` for ModelProto, ``Tensor`` for TensorProto, ...).
    Raises:
        MalformedError with the field path and offset for any violation of Clause 12.
    """
    msg = MESSAGES[message]
    if not isinstance(data, (bytes, bytearray, memoryview)) and not hasattr(data, "__getitem__"):
        data = memoryview(data)
    if isinstance(data, (bytes, bytearray)):
        data = memoryview(data)
    if isinstance(data, memoryview) and (data.ndim != 1 or data.itemsize != 1):
        data = data.cast("B")
    ctx = _Ctx(raw, blob_source)
    try:
        if (_C is not None and type(data) is memoryview and data.c_contiguous
                and data.format == "B" and os.environ.get("ONEMODEL_PURE_PYTHON") != "1"):
            obj = _C.decode(data, message, raw, blob_source, ctx.tensors)
        else:
            obj = msg.cls()
            _decode(data, 0, len(data), msg, obj, 1, ctx)
    except WireError as err:
        path = ".".join([message] + err.segments[::-1])
        raise MalformedError(err.message, path=path, offset=err.offset, source=source) from None
    if msg.proto_name in _CHECKED:
        ctx.tensors.append((obj, 0))
    if check is not None:
        check(obj, ctx.tensors)
    return obj
