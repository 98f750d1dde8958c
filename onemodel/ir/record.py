"""The base of every class of the in-memory model: declared fields, equality, repr, copy.

Each class of :mod:`onemodel.ir` declares its fields once, in ``FIELDS``, as ``(name, kind, of)``
triples. The declaration drives construction, equality (bit-exact: float fields compare by bit
pattern, arrays and buffers by bytes), ``repr``, deep copy and the field-by-field comparison of
:mod:`onemodel.verify`, and it is what format plugins map their own fields onto.

Field kinds:

==========  ======================================  ===============================================
kind        Python value                            absent / empty
==========  ======================================  ===============================================
STR         ``str`` (UTF-8; bytes that are not      ``None``: the field is absent. ``""`` is an
            UTF-8 kept with ``surrogateescape``)    explicitly present empty string.
BYTES       ``bytes``                               ``None``
INT         ``int``                                 ``None``
F32         :class:`Float32` (a ``float`` that      ``None``
            keeps its 32-bit pattern); readers
            make these, writers also take a
            ``numpy.float32`` or a ``float``
MSG         a record of class ``of``                ``None``
LIST_*      ``list`` of str, bytes, int or records  ``[]``
ARRAY       1-D ``numpy.ndarray`` of dtype ``of``   ``None`` (empty)
BUFFER      bytes-like or a storage ``Blob``        ``None``
            (:func:`is_blob`)
==========  ======================================  ===============================================

Every record also has ``unknown``: the encoded bytes of fields its source format had and this model
does not (Clause 12.4), kept so that a rewrite gives back the same bytes.
"""

from __future__ import annotations

import copy as _copy
import os
import struct
from operator import is_
from typing import Any, ClassVar

from ..errors import IoError
from ..lazy import np

STR, BYTES, INT, F32, MSG = "str", "bytes", "int", "f32", "msg"
LIST_STR, LIST_BYTES, LIST_INT, LIST_MSG = "list_str", "list_bytes", "list_int", "list_msg"
ARRAY, BUFFER = "array", "buffer"

LIST_KINDS = frozenset((LIST_STR, LIST_BYTES, LIST_INT, LIST_MSG))

_CLASSES: dict[str, type["Record"]] = {}

#: Records nested deeper than this in one repr() are shown as ``Name(...)``.
_REPR_DEPTH = 16
_repr_depth = 0

_U32 = struct.Struct("<I")
_F32 = struct.Struct("<f")


class Float32(float):
    """The value of an F32 field (``AttributeProto.f``): a Python ``float`` that also keeps the
    exact IEEE-754 binary32 pattern it was read as, in ``bits`` (an unsigned 32-bit integer).

    As a float it is the float32 value widened exactly to a double, so arithmetic and
    comparisons behave as for that number. The pattern is what writers emit and what equality
    of records compares: NaN payloads (a signalling NaN included, which a float cannot hold),
    infinities and -0.0 survive a round trip. Readers build these without numpy.

        Float32(0.1)             # rounded to float32: 0.10000000149011612, bits 0x3DCCCCCD
        Float32.from_bits(0x7F800001).bits == 0x7F800001   # a signalling NaN, kept
    """

    __slots__ = ("bits",)

    def __new__(cls, value: Any = 0.0) -> "Float32":
        return cls.from_bits(f32_bits(value))

    @classmethod
    def from_bits(cls, bits: int) -> "Float32":
        """The value whose binary32 pattern is ``bits`` (0 <= bits < 2**32; struct.error
        otherwise)."""
        obj = float.__new__(cls, _F32.unpack(_U32.pack(bits))[0])
        obj.bits = bits
        return obj

    def __reduce__(self):
        return (Float32.from_bits, (self.bits,))

    def __repr__(self) -> str:
        return f"Float32({float.__repr__(self)})"


def f32_bits(value: Any) -> int:
    """The binary32 pattern (an int below 2**32) of an F32 field value: a :class:`Float32`'s
    own ``bits``, a ``numpy.float32``'s pattern, or the pattern of any other number rounded to
    float32 as numpy rounds it (numpy is imported then)."""
    bits = getattr(value, "bits", None)
    if bits is not None:
        return bits
    return int(np.float32(value).view(np.uint32))


def record_class(name: str) -> type["Record"]:
    """The record class of a given name (fields name their message class by string)."""
    return _CLASSES[name]


def is_blob(buf) -> bool:
    """True when a BUFFER value is a blob: the bytes of a storage source
    (:class:`onemodel.storage.blob.Blob`), known by its ``source`` attribute, which no bytes-like
    value (bytes, bytearray, memoryview, ndarray) has. A blob's length is ``nbytes`` (known
    without reading) and its bytes are ``view()``; ``at_hand`` says whether that reads nothing
    over a network. This is the IR's one rule for telling a Blob, so the IR imports nothing from
    storage."""
    return hasattr(buf, "source")


def buffer_view(buf) -> memoryview:
    """A memoryview of a BUFFER field's value (bytes, memoryview, ndarray, or a Blob: its
    ``view()``), of byte format. IoError when its model was closed."""
    if hasattr(buf, "source"):  # is_blob, inline
        return buf.view()
    mv = _memoryview(buf)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    return mv


def buffer_nbytes(buf) -> int:
    """The length in bytes of a BUFFER field's value (bytes, memoryview of any format, ndarray
    of any dtype, or a Blob, which is not fetched). IoError when its model was closed."""
    if isinstance(buf, (bytes, bytearray)):
        return len(buf)
    if hasattr(buf, "source"):  # is_blob, inline
        return buf.nbytes
    return _memoryview(buf).nbytes


def _memoryview(buf) -> memoryview:
    try:
        return memoryview(buf)
    except ValueError:  # a released view: Model.close() gave the file back
        raise IoError("the contents of this tensor are gone: its model was closed") from None


_SAME_SMALL = 2048      # below this many bytes memoryview == is the fastest comparison
_SAME_BLOCK = 1 << 20   # bytes numpy compares at a time (bounds its temporary array)


def same_bytes(a, b) -> bool:
    """Whether two BUFFER values (bytes, memoryview, C-contiguous ndarray or Blob, which is
    fetched) hold the same bytes.

    Small buffers compare with ``memoryview ==``; larger ones with ``numpy.array_equal`` on
    uint8 views, 1 MiB at a time: about ten times faster than ``memoryview ==`` (which compares
    item by item through the buffer protocol), with at most 1 MiB of temporary memory.
    """
    va, vb = buffer_view(a), buffer_view(b)
    n = va.nbytes
    if n != vb.nbytes:
        return False
    if n < _SAME_SMALL:
        return va == vb
    xa, xb = np.frombuffer(va, dtype=np.uint8), np.frombuffer(vb, dtype=np.uint8)
    for i in range(0, n, _SAME_BLOCK):
        if not np.array_equal(xa[i:i + _SAME_BLOCK], xb[i:i + _SAME_BLOCK]):
            return False
    return True


def is_empty(kind: str, v: Any) -> bool:
    """True when a field value of kind ``kind`` says nothing: absent (``None``), ``""``, ``0``,
    ``b""``, a float of bit pattern 0 (+0.0, not -0.0), an empty list, array or buffer.

    Absent and empty differ in the model (and on the wire); comparisons that look only at
    meaning (``verify`` loose, the ``strict_v1`` report) treat them alike through this."""
    if v is None:
        return True
    if kind == ARRAY:
        return np.asarray(v).size == 0
    if kind in LIST_KINDS:
        return not v
    if kind == F32:
        return f32_bits(v) == 0
    if kind == BUFFER:
        return buffer_nbytes(v) == 0
    return v == "" or v == 0 or v == b""


def is_empty_record(r) -> bool:
    """True when record ``r`` is absent or says nothing: every field :func:`is_empty` (a
    message field recursively) and no unknown bytes, e.g. a ``TypeProto`` with no value case.
    ``verify`` loose takes such a record for an absent one, as a plain OneModel v1 file does."""
    if r is None:
        return True
    if r.unknown:
        return False
    for name, kind, _ in r.FIELDS:
        v = getattr(r, name)
        if kind == MSG:
            if not is_empty_record(v):
                return False
        elif not is_empty(kind, v):
            return False
    return True


def _same(kind: str, a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if kind == F32:
        return f32_bits(a) == f32_bits(b)
    if kind == ARRAY:
        a, b = np.asarray(a), np.asarray(b)
        return (a.dtype == b.dtype and a.shape == b.shape
                and same_bytes(np.ascontiguousarray(a), np.ascontiguousarray(b)))
    if kind == BUFFER:
        return same_bytes(a, b)
    return a == b


class _RecordMeta(type):
    """Gives each record class ``__slots__`` for the fields it declares."""

    def __new__(mcls, name, bases, ns, **kw):
        if "__slots__" not in ns:
            ns["__slots__"] = tuple(f[0] for f in ns.get("FIELDS", ())) + tuple(ns.get("EXTRA", ()))
        return super().__new__(mcls, name, bases, ns, **kw)


class Record(metaclass=_RecordMeta):
    """Base class: fields declared in ``FIELDS``, slots, bit-exact equality, compact repr."""

    __slots__ = ("unknown",)
    FIELDS: ClassVar[tuple[tuple[str, str, Any], ...]] = ()
    EXTRA: ClassVar[tuple[str, ...]] = ()
    KIND: ClassVar[dict[str, str]] = {}

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        _CLASSES[cls.__name__] = cls
        cls.KIND = {name: kind for name, kind, _ in cls.FIELDS}
        # A fast __init__: keyword arguments for every field, fresh lists for list fields.
        params, body = [], []
        for name, kind, _ in cls.FIELDS:
            params.append(f"{name}=None")
            if kind in LIST_KINDS:
                body.append(f"    self.{name} = [] if {name} is None else {name}")
            else:
                body.append(f"    self.{name} = {name}")
        for name in cls.EXTRA:
            body.append(f"    self.{name} = None")
        body.append("    self.unknown = unknown")
        params.append("unknown=b''")
        src = "def __init__(self, *, " + ", ".join(params) + "):\n" + "\n".join(body)
        ns: dict[str, Any] = {}
        exec(compile(src, f"<{cls.__name__}.__init__>", "exec"), ns)
        init = ns["__init__"]
        init.__doc__ = f"Build a {cls.__name__}; every field is a keyword argument (see FIELDS)."
        if "__init__" not in cls.__dict__:
            cls.__init__ = init
        cls._fast_init = init

    def __eq__(self, other: object) -> bool:
        """Field by field, bit-exact; iterative (records nested any depth deep compare without
        recursion)."""
        if type(other) is not type(self):
            return NotImplemented
        pairs = [(self, other)]
        while pairs:
            x, y = pairs.pop()
            if x is y:
                continue
            if type(x) is not type(y):
                return False
            for name, kind, _ in x.FIELDS:
                a, b = getattr(x, name), getattr(y, name)
                if kind == MSG and a is not None and b is not None:
                    pairs.append((a, b))
                elif kind == LIST_MSG:
                    if len(a) != len(b):
                        return False
                    if not all(map(is_, a, b)):  # (records shared by both: equal)
                        pairs.extend(zip(a, b))
                elif kind in LIST_KINDS:
                    if len(a) != len(b) or any(p != q for p, q in zip(a, b)):
                        return False
                elif not _same(kind, a, b):
                    return False
            if x.unknown != y.unknown:
                return False
        return True

    __hash__ = None  # records are mutable

    def __repr__(self) -> str:
        global _repr_depth
        if _repr_depth >= _REPR_DEPTH:  # (records nested deeper are not spelled out)
            return f"{type(self).__name__}(...)"
        _repr_depth += 1
        try:
            return self._repr()
        finally:
            _repr_depth -= 1

    def _repr(self) -> str:
        parts = []
        for name, kind, _ in self.FIELDS:
            v = getattr(self, name)
            if v is None or (kind in LIST_KINDS and not v):
                continue
            if kind == BUFFER:
                parts.append(f"{name}=<{len(v)} bytes>")
            elif kind == ARRAY:
                parts.append(f"{name}=<{np.asarray(v).size} x {np.asarray(v).dtype}>")
            elif kind == LIST_MSG and len(v) > 4:
                parts.append(f"{name}=[{len(v)} x {type(v[0]).__name__}]")
            else:
                r = repr(v)
                parts.append(f"{name}={r if len(r) < 80 else r[:76] + '...'}")
        if self.unknown:
            parts.append(f"unknown=<{len(self.unknown)} bytes>")
        return f"{type(self).__name__}({', '.join(parts)})"

    def __copy__(self):
        new = type(self).__new__(type(self))
        for name, _, _ in self.FIELDS:
            setattr(new, name, getattr(self, name))
        for name in self.EXTRA:
            setattr(new, name, getattr(self, name))
        new.unknown = self.unknown
        return new

    def __deepcopy__(self, memo):
        """``copy.deepcopy``: :meth:`copy` (iterative: records nested any depth deep; weight
        buffers shared, never their bytes copied)."""
        new = self.copy()
        memo[id(self)] = new
        return new

    def copy(self, deep: bool = True):
        """A copy. Deep copies records and lists but shares weight buffers (never copies bytes);
        iterative (records nested any depth deep copy without recursion)."""
        if not deep:
            return _copy.copy(self)
        fast = copy_record(self)  # the same in C (onemodel/ir/_cpass.c), when built
        if fast is not None:
            return fast
        root = type(self).__new__(type(self))
        work = [(self, root)]
        while work:
            old, new = work.pop()
            for name, kind, _ in old.FIELDS:
                v = getattr(old, name)
                if kind == MSG and v is not None:
                    c = type(v).__new__(type(v))
                    work.append((v, c))
                    v = c
                elif kind == LIST_MSG:
                    copies = []
                    for x in v:
                        c = type(x).__new__(type(x))
                        work.append((x, c))
                        copies.append(c)
                    v = copies
                elif kind in LIST_KINDS:
                    v = list(v)
                setattr(new, name, v)
            for name in old.EXTRA:
                setattr(new, name, getattr(old, name))
            new.unknown = old.unknown
        return root


# -- the deep copy in C ---------------------------------------------------------------------------
_C_COPY: Any = False  # the _cpass module once looked up (None: not built)
_PLANNED = -1  # how many record classes the copy plans were made from


def copy_record(record):
    """``record.copy()`` (deep) in C (``copy`` of onemodel/ir/_cpass.c), or None when the
    extension is not built, ``ONEMODEL_PURE_PYTHON=1`` is set, or a record in it is of a class
    the copy has no plan for (the caller copies in Python then). The plans (each record
    class's slots and how a copy treats them) are made from the classes known at the first
    copy, and again when a newer class appears."""
    global _C_COPY, _PLANNED
    if _C_COPY is False:
        try:
            from . import _cpass
            _C_COPY = _cpass
        except ImportError:
            _C_COPY = None
    if _C_COPY is None or os.environ.get("ONEMODEL_PURE_PYTHON") == "1":
        return None
    if _PLANNED != len(_CLASSES):
        _C_COPY.setup_copy(_plans(_CLASSES.values()))
        _PLANNED = len(_CLASSES)
    try:
        return _C_COPY.copy(record)
    except (LookupError, TypeError):
        return None


def _plans(classes) -> list:
    """``(cls, ((slot, how), ...))`` for each record class whose every slot is a field, an
    extra or ``unknown`` (how: 0 shared, 1 a record, 2 a list of records, 3 a list)."""
    out = []
    pointer = struct.calcsize("P")  # the size of a slot
    for cls in classes:
        slots = [s for k in reversed(cls.__mro__) for s in k.__dict__.get("__slots__", ())]
        if len(set(slots)) != len(slots) or "__dict__" in slots or "__weakref__" in slots or \
                cls.__basicsize__ != object.__basicsize__ + len(slots) * pointer:
            continue  # (not copied in C)
        how = {MSG: 1, LIST_MSG: 2}
        out.append((cls, tuple((s, how.get(cls.KIND.get(s), 3 if cls.KIND.get(s) in LIST_KINDS
                                          else 0)) for s in slots)))
    return out
