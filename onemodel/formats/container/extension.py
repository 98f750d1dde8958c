"""The ONNX-preservation extension: what a plain version 1 reading would lose.

The format of the extension is documented in docs/format-extension.md.

Section 1.2 lets a file carry fields a version 1 reader does not know: it ignores them and still
sees the same model. The extension uses that. Every manifest object of a codec class (Model,
Graph, TypedName, Node, Attribute, Tensor, SparseTensor, Type, Function) may carry a key
``"onnx"`` whose value records only where the record differs from its *natural* reading
(:mod:`.schema`): ``{field: value}`` with the record's field names (:mod:`onemodel.ir`).

Values by field kind:

=============  ==================================================================================
kind           JSON
=============  ==================================================================================
absent         ``null`` (the field is ``None``)
STR            a string; text that is not UTF-8 is ``{"bytes": base64}`` of its bytes
BYTES, BUFFER  base64
INT            integer;  F32: the unsigned integer of its bits
ARRAY          base64 of the little-endian values (``float_data``: float32 ...)
LIST_*         an array of the above
MSG            a codec class: its full manifest object (with its own ``"onnx"``); another class
               (TensorType, Shape, StringStringEntry, TrainingInfo ...): an object of the fields
               that differ from the natural child (or from an empty record when there is none)
LIST_MSG       the whole list, each element as for MSG (against an empty record)
=============  ==================================================================================

``"unknown"`` (base64) holds the record's unrecognized ONNX fields. Two keys are not fields:
``"typed"`` on a Tensor (contents in that typed-storage field, equal to what
:func:`~onemodel.ir.tensor.raw_to_typed` derives from the data-region bytes) and
``"node_order"`` on a Graph (the original node order, as indices into the manifest's ``nodes``).
Unknown keys are ignored.
"""

from __future__ import annotations

from ...errors import InvalidModelError, MalformedError, UnsupportedError, quote
from ...ir.dtypes import INFO, DataType
from ...ir.record import (
    ARRAY,
    BUFFER,
    BYTES,
    F32,
    INT,
    LIST_BYTES,
    LIST_INT,
    LIST_MSG,
    LIST_STR,
    MSG,
    STR,
    Float32,
    _same,
    buffer_view,
    f32_bits,
    record_class,
)
from ...ir.tensor import EXTERNAL, raw_to_typed
from ...lazy import np
from .manifest import (
    UINT32_MAX,
    as_bytes,
    as_int,
    as_list,
    as_obj,
    as_str,
    b64,
    bytes_list,
    int_list,
    wrong,
)
from .schema import CODEC_CLASSES, LEVEL_CLASSES, int64

KEY = "onnx"

#: Extension keys of a Tensor / Graph that are not record fields.
TYPED, NODE_ORDER, UNKNOWN = "typed", "node_order", "unknown"


def inner_level(cls_name: str, lvl: int) -> int:
    """The nesting level of the children of a ``cls_name`` object opened at ``lvl``."""
    return lvl + 1 if cls_name in LEVEL_CLASSES else lvl


# ================================================================================================
# writing: record vs natural record -> extension object
# ================================================================================================
def encode_str(s: str, path: str):
    """A STR value: the string, or ``{"bytes": base64}`` when it is not valid UTF-8."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        pass
    try:
        return {"bytes": b64(s.encode("utf-8", "surrogateescape"))}
    except UnicodeEncodeError:
        raise UnsupportedError("string holds a lone surrogate that is no byte", path=path) \
            from None


def encode_value(kind: str, of, v, path: str):
    """A scalar or scalar-list field value in the extension's JSON (table above)."""
    if v is None:
        return None
    if kind == STR:
        return encode_str(v, path)
    if kind == BYTES:
        return b64(v)
    if kind == INT:
        return int64(v, path)
    if kind == F32:
        return f32_bits(v)
    if kind == ARRAY:
        return b64(np.ascontiguousarray(np.asarray(v, dtype=of)).view(np.uint8))
    if kind == BUFFER:
        return b64(buffer_view(v))
    if kind == LIST_STR:
        return [encode_str(x, f"{path}[{i}]") for i, x in enumerate(v)]
    if kind == LIST_BYTES:
        return [b64(x) for x in v]
    if kind == LIST_INT:
        return [int64(x, f"{path}[{i}]") for i, x in enumerate(v)]
    raise AssertionError(kind)


def _same_shallow(a, b) -> bool:
    """Equality of two records of a class without a manifest object of its own, comparing
    codec-class children by presence and count only (they carry their own extension)."""
    if type(a) is not type(b) or a.unknown != b.unknown:
        return False
    for name, kind, of in a.FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        if kind == MSG:
            if (x is None) != (y is None):
                return False
            if x is not None and of not in CODEC_CLASSES and not _same_shallow(x, y):
                return False
        elif kind == LIST_MSG:
            if len(x) != len(y):
                return False
            if of not in CODEC_CLASSES and not all(_same_shallow(p, q) for p, q in zip(x, y)):
                return False
        elif kind in (LIST_STR, LIST_BYTES, LIST_INT):
            if x != y:
                return False
        elif not _same(kind, x, y):
            return False
    return True


_LISTS = frozenset((LIST_STR, LIST_BYTES, LIST_INT, LIST_MSG))
_EQ = frozenset((STR, INT, BYTES, LIST_STR, LIST_BYTES, LIST_INT))  # plain == is exact
_META: dict = {}


def _meta(cls):
    """Per class: ``(name, kind, of, empty value)`` of each field, computed once."""
    m = _META.get(cls)
    if m is None:
        m = _META[cls] = tuple((name, kind, of, [] if kind in _LISTS else None)
                               for name, kind, of in cls.FIELDS)
    return m


def list_field_none(rec) -> str | None:
    """The path (below ``rec``) of the first repeated (``LIST_*``) field that holds ``None`` in
    ``rec`` or in the children it encodes itself (those of a class without a manifest object of
    its own: TensorType, Shape ...), or ``None``. A repeated field has no absent state
    (:mod:`onemodel.ir.record`: a list, ``[]`` when empty), so such a record is not a
    well-formed model; the writer refuses it rather than write ``null`` where a reader expects
    an array."""
    for name, kind, of, _ in _meta(type(rec)):
        v = getattr(rec, name)
        if kind in _LISTS and v is None:
            return name
        if kind == MSG and v is not None and of not in CODEC_CLASSES:
            below = list_field_none(v)
            if below is not None:
                return f"{name}.{below}"
        elif kind == LIST_MSG and of not in CODEC_CLASSES:
            for i, x in enumerate(v):
                below = list_field_none(x)
                if below is not None:
                    return f"{name}[{i}].{below}"
    return None


def diff(actual, natural, w, path: str, lvl: int, skip=()) -> dict:
    """The extension object of ``actual`` against ``natural`` (a record of the same class, or
    ``None`` for an empty one). ``w`` is the writer (``w.full`` encodes codec-class children),
    ``path`` the record's path, ``lvl`` the nesting level of its children."""
    out = {}
    for name, kind, of, empty in _meta(type(actual)):
        a = getattr(actual, name)
        if a is None and kind in _LISTS:  # never null for a repeated field (list_field_none)
            raise InvalidModelError(f"repeated field {name} holds None, not a list ([] when "
                                    "empty)", path=_join(path, name))
        n = getattr(natural, name) if natural is not None else empty
        if (a is None and n is None) or name in skip:
            continue
        if kind in _EQ:
            if a == n:
                continue
            out[name] = encode_value(kind, of, a, _join(path, name))
        elif kind == MSG:
            p = _join(path, name)
            if a is None:
                out[name] = None
            elif of in CODEC_CLASSES:
                if n is None:
                    out[name] = w.full(a, p, lvl)
            else:
                d = diff(a, n, w, p, inner_level(of, lvl))
                if d or n is None:
                    out[name] = d
        elif kind == LIST_MSG:
            if not a and not n:
                continue
            p = _join(path, name)
            if of in CODEC_CLASSES:
                if len(a) != len(n):
                    out[name] = [w.full(x, f"{p}[{i}]", lvl) for i, x in enumerate(a)]
            elif len(a) != len(n) or not all(_same_shallow(x, y) for x, y in zip(a, n)):
                out[name] = [diff(x, None, w, f"{p}[{i}]", inner_level(of, lvl))
                             for i, x in enumerate(a)]
        elif not _same(kind, a, n):
            out[name] = encode_value(kind, of, a, _join(path, name))
    if actual.unknown != (natural.unknown if natural is not None else b""):
        out[UNKNOWN] = b64(actual.unknown)
    return out


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def tensor_content_ext(t, plan) -> tuple[dict, set]:
    """The extension keys for a tensor's contents, and the fields they settle.

    ``plan`` is the writer's plan for the data-region bytes (``mode``: ``raw``, ``external``,
    ``typed`` or ``none``; ``field``, ``rederivable`` for typed storage), or ``None`` for a
    STRING tensor (its contents are in the manifest; the generic comparison covers them).
    ``dims`` and ``data_type`` are never in a Tensor's extension (the v1 fields are exact; a
    reader ignores them there).
    """
    if plan is None:
        return {}, set()
    if plan.mode == "raw":
        return {}, {"raw_data"}
    if plan.mode == "typed" and plan.rederivable:
        return {TYPED: plan.field}, {"raw_data", plan.field}
    return {"raw_data": None if t.raw_data is None else b64(buffer_view(t.raw_data))}, \
        {"raw_data"}


# ================================================================================================
# reading: extension object -> record
# ================================================================================================
def decode_str(v, path: str) -> str:
    """A STR value of the extension (a string or ``{"bytes": base64}``)."""
    if type(v) is dict:
        raw = as_bytes(v.get("bytes"), f"{path}.bytes")
        return raw.decode("utf-8", "surrogateescape")
    return as_str(v, path)


def decode_value(kind: str, of, v, path: str):
    """Inverse of :func:`encode_value`; MalformedError for a value of the wrong JSON type."""
    if v is None:
        return None
    if kind == STR:
        return decode_str(v, path)
    if kind in (BYTES, BUFFER):
        return as_bytes(v, path)
    if kind == INT:
        return as_int(v, path)
    if kind == F32:
        return Float32.from_bits(as_int(v, path, 0, UINT32_MAX))
    if kind == ARRAY:
        raw = as_bytes(v, path)
        dt = np.dtype(of)
        if len(raw) % dt.itemsize:
            raise MalformedError(f"{len(raw)} bytes are not a whole number of {dt} values",
                                 path=path)
        return np.frombuffer(raw, dtype=dt)
    if kind == LIST_STR:
        return [decode_str(x, f"{path}[{i}]") for i, x in enumerate(as_list(v, path))]
    if kind == LIST_BYTES:
        return bytes_list(v, path)
    if kind == LIST_INT:
        return list(int_list(v, path))
    raise AssertionError(kind)


def apply(record, ext, r, path: str, lvl: int, skip=()) -> None:
    """Set the fields ``ext`` records on ``record`` (in place). ``r`` is the reader (``r.full``
    decodes codec-class objects), ``path`` the extension's manifest path, ``lvl`` the nesting
    level of the record's children. Keys that are no field of the record are ignored."""
    ext = as_obj(ext, path)
    kinds = record.KIND
    for key, v in ext.items():
        p = f"{path}.{key}"
        if key == UNKNOWN:
            record.unknown = as_bytes(v, p)
            continue
        if key in skip or key not in kinds:
            continue
        kind = kinds[key]
        of = _field_class(type(record), key)
        if kind == MSG:
            if v is None:
                value = None
            elif of in CODEC_CLASSES:
                value = r.full(of, v, p, lvl)
            else:
                value = getattr(record, key)
                if value is None:
                    value = record_class(of)()
                apply(value, v, r, p, inner_level(of, lvl))
        elif kind == LIST_MSG:
            items = as_list(v, p)
            if of in CODEC_CLASSES:
                value = [r.full(of, x, f"{p}[{i}]", lvl) for i, x in enumerate(items)]
            else:
                value = []
                for i, x in enumerate(items):
                    rec = record_class(of)()
                    apply(rec, x, r, f"{p}[{i}]", inner_level(of, lvl))
                    value.append(rec)
        else:
            value = decode_value(kind, _field_class(type(record), key), v, p)
            if kind in (LIST_STR, LIST_BYTES, LIST_INT) and value is None:
                raise wrong(v, "an array", p)
        setattr(record, key, value)


_FIELD_CLASS: dict = {}


def _field_class(cls, name: str):
    key = (cls, name)
    try:
        return _FIELD_CLASS[key]
    except KeyError:
        for n, _, of in cls.FIELDS:
            _FIELD_CLASS[(cls, n)] = of
        return _FIELD_CLASS[key]


def apply_tensor(t, ext: dict, r, path: str) -> None:
    """Apply a Tensor's extension, then settle where its data-region bytes went: ``raw_data``
    (natural), a typed-storage field (``"typed"``), or ``external`` (``data_location`` 1)."""
    ext = as_obj(ext, path)
    region = t.raw_data
    code, count = t.data_type, t.size
    apply(t, ext, r, path, 0, skip=(TYPED, "dims", "data_type"))
    typed = ext.get(TYPED)
    if t.raw_data is not None and t.raw_data is not region:
        info = INFO.get(code)
        if info is not None and info.bits and len(t.raw_data) != info.raw_nbytes(count):
            raise InvalidModelError(f"raw_data of {len(t.raw_data)} bytes for {count} "
                                    f"elements of {info.name}", path=f"{path}.raw_data")
    if typed is not None:
        field = as_str(typed, f"{path}.{TYPED}")
        if region is None or code == DataType.STRING or INFO[code].typed_field != field:
            raise MalformedError(f"typed storage in {quote(field)} does not fit this tensor",
                                 path=f"{path}.{TYPED}")
        if "raw_data" not in ext:
            t.raw_data = None
        setattr(t, field, raw_to_typed(code, buffer_view(region), count)[1])
    if region is not None and t.data_location == EXTERNAL:
        t.external = region


def read_node_order(v, count: int, path: str) -> list[int]:
    """A graph's ``node_order``: a permutation of ``range(count)``, or MalformedError."""
    order = int_list(v, path, 0, max(count - 1, 0))
    if len(order) != count or len(set(order)) != count:
        raise MalformedError(f"node_order is not a permutation of the {count} nodes", path=path)
    return list(order)
