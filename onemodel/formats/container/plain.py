"""What a plain OneModel version 1 file cannot hold, and the report of what ``strict_v1`` left out.

A plain version 1 file (no ONNX-preservation extension, docs/format-extension.md) keeps the graph
and every tensor's values, but it has no place for some fields of the in-memory model
(:mod:`onemodel.ir`). This module is the one place that says which:

* :data:`V1_UNHELD`: ``(record class name, field name)`` pairs a v1 manifest object never holds,
  whatever the value (node and value metadata, training information, denotations, where a
  tensor's contents were stored ...);
* :func:`v1_unheld`: those fields of one record, plus the ones its own v1 object leaves out: an
  attribute holds only the value field its v1 ``type`` selects, a type only its first kind.

Values of held fields can still change in a plain file (format-extension.md, section 6): a string
that is present but ``""`` reads back as absent, ``ir_version`` below 3 is written as 3, text that
is not UTF-8 gets U+FFFD, a negative ``dim_value`` is written as unknown, a value's type that is
present with no kind set reads back as absent, nodes are put in dependency order.
:func:`left_out` reports those too, with the manifest path.
:func:`onemodel.verify.compare_models` with ``loose=True`` ignores exactly the fields of
:func:`v1_unheld`, plus absent-vs-empty values and unknown fields.
"""

from __future__ import annotations

import json
import re

from ...errors import quote
from ...ir.model import VALUE_FIELD, AttributeType
from ...ir.record import (
    ARRAY,
    BUFFER,
    F32,
    LIST_BYTES,
    LIST_INT,
    LIST_KINDS,
    LIST_MSG,
    LIST_STR,
    MSG,
    STR,
    _same,
    is_empty,
    record_class,
)
from ...ir.tensor import EXTERNAL, EXTERNAL_FIELDS, TYPED_FIELDS
from ...ir.types import KINDS as TYPE_KINDS
from ...lazy import np
from . import extension
from .schema import CODEC_CLASSES, v1_attribute_type

#: Where a tensor's contents were stored. The data region holds the contents themselves (in raw
#: layout); these fields say only where the ONNX file kept them.
TENSOR_STORAGE = frozenset(TYPED_FIELDS + EXTERNAL_FIELDS)

#: ``(record class name, field name)``: fields a plain version 1 manifest object has no place for.
V1_UNHELD = frozenset(
    [("Model", "training_info"), ("Model", "configurations"),
     ("Graph", "quantization_annotations"), ("Graph", "metadata_props"),
     ("ValueInfo", "doc_string"), ("ValueInfo", "metadata_props"),
     ("Node", "metadata_props"), ("Node", "device_configurations"),
     ("Tensor", "segment"), ("Tensor", "metadata_props"),
     ("Type", "denotation"), ("Dimension", "denotation"),
     ("Function", "value_info"), ("Function", "metadata_props")]
    + [("Tensor", f) for f in TENSOR_STORAGE])

_BY_CLASS: dict[str, frozenset] = {}
for _cls, _field in V1_UNHELD:
    _BY_CLASS[_cls] = _BY_CLASS.get(_cls, frozenset()) | {_field}
_EMPTY: frozenset = frozenset()

_ATTRIBUTE_VALUES = frozenset(VALUE_FIELD.values())


def v1_unheld(record) -> frozenset:
    """Names of the fields of ``record`` that its plain version 1 object cannot hold.

    The fields of :data:`V1_UNHELD` for its class; for an Attribute also every value field but
    the one its v1 ``type`` selects (all of them for a reference, ``ref_attr_name``); for a Type
    every kind after the first one set (tensor, sequence, map, optional, sparse tensor, opaque).
    """
    name = type(record).__name__
    fixed = _BY_CLASS.get(name, _EMPTY)
    if name == "Attribute":
        if record.ref_attr_name:
            return fixed | _ATTRIBUTE_VALUES
        kept = VALUE_FIELD[AttributeType(v1_attribute_type(record))]
        return fixed | (_ATTRIBUTE_VALUES - {kept})
    if name == "Type":
        first = record.kind
        if first is not None:
            return fixed | frozenset(k for k in TYPE_KINDS if k != f"{first}_type")
    return fixed


# ================================================================================================
# the strict_v1 report
# ================================================================================================
#: Manifest keys of held fields whose record field is named differently (format section 2).
#: ``""``: the child's fields are written in the parent's object (a Type's tensor type, a shape's
#: dimensions).
_KEYS = {"doc_string": "doc", "op_type": "op", "ref_attr_name": "ref", "data_type": "dtype",
         ("Model", "opset_imports"): "opsets", ("Function", "opset_imports"): "opsets",
         ("Model", "metadata_props"): "metadata", ("TensorType", "elem_type"): "elem",
         ("SparseTensorType", "elem_type"): "elem", ("MapType", "key_type"): "key",
         ("Shape", "dims"): ""}
_KEYS.update((("Type", k), "") for k in TYPE_KINDS)

class _Children(dict):
    """``(class name, field name)`` -> the class name of a MSG / LIST_MSG field's records."""

    def __missing__(self, key):
        cls, name = key
        of = dict((f, o) for f, _, o in record_class(cls).FIELDS).get(name)
        self[key] = of
        return of


_CHILD = _Children()
#: Nouns for grouped lines, by record class.
_NOUNS = {"Model": "models", "Graph": "graphs", "ValueInfo": "typed names", "Node": "nodes",
          "Attribute": "attributes", "Tensor": "tensors", "SparseTensor": "sparse tensors",
          "Type": "types", "Function": "functions", "OperatorSetId": "opset imports",
          "StringStringEntry": "entries", "Dimension": "dimensions"}
#: Lines with the same subject on this many objects or more are one line.
GROUP_AT = 3
_INDEX = re.compile(r"^(.*)\[(\d+)\]([^\[\]]*)$")


class _Item:
    """One thing left out: on the object at ``where`` (a manifest path), ``subject`` (a field
    name, or several), what about it (``detail``; ``summary`` when grouped), ``count`` entries."""

    __slots__ = ("cls", "where", "subject", "held", "detail", "summary", "count")

    def __init__(self, cls, where, subject, held, detail, summary=None, count=None):
        self.cls, self.where, self.subject, self.held = cls, where, subject, held
        self.detail, self.count = detail, count
        self.summary = summary if summary is not None else detail

    def key(self):
        return (self.cls, self.subject, self.held, self.summary)

    def place(self) -> str:
        return f"{self.where}.{self.subject}" if self.held else self.where

    def line(self) -> str:
        if self.held:
            return f"{self.place()}: {self.detail}"
        return f"{self.where}: {self.subject}" + (f" ({self.detail})" if self.detail else "")


def _entries(n: int) -> str:
    return f"{n} entr{'y' if n == 1 else 'ies'}"


def _show(kind, v) -> str:
    if v is None:
        return "absent"
    if kind == F32:
        return repr(float(v))
    if kind == ARRAY:
        n = np.asarray(v).size
        return f"an array of {n} values" if n else "an empty array"
    if kind == BUFFER:
        return f"{len(v)} bytes"
    r = json.dumps(v, ensure_ascii=False) if kind == STR else repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def _not_utf8(kind, v) -> bool:
    if kind != STR or v is None:
        return False
    try:
        v.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def _value_change(kind, a, n) -> str:
    """What happens to a held value ``a`` that a plain reader reads as ``n``."""
    if _not_utf8(kind, a):
        return "not valid UTF-8 in the ONNX file; written with U+FFFD for the invalid bytes"
    if a is None:
        if kind == MSG:
            return "absent in the ONNX file; written as an empty placeholder"
        return f"absent in the ONNX file; a plain reader reads {_show(kind, n)}"
    if n is None and type(a).__name__ == "Type" and a.kind is None:
        return ("present with no kind set (an empty TypeProto) in the ONNX file; a plain reader "
                "reads no type")
    if n is None and is_empty(kind, a):
        return (f"explicitly {_show(kind, a)} in the ONNX file; a plain reader reads it as "
                "absent (same meaning, only its presence differs)")
    return f"{_show(kind, a)} in the ONNX file; a plain reader reads {_show(kind, n)}"


class _Report:
    def __init__(self):
        self.items: list[_Item] = []

    def add(self, *args, **kw) -> None:
        self.items.append(_Item(*args, **kw))

    # -- one manifest object's extension --------------------------------------------------------
    def extension(self, ext: dict, rec, natural, where: str) -> None:
        if rec is None:  # an extension object the writer added later (node_order)
            for k in ext:
                self.special(k, ext, None, where)
            return
        cls = type(rec).__name__
        unheld = v1_unheld(rec)
        storage = [k for k in ext if k in TENSOR_STORAGE or k in ("raw_data", extension.TYPED)]
        if cls == "Tensor" and storage:
            self.tensor_storage(rec, ext, where)
        extra = []
        for k in ext:
            if k in storage and cls == "Tensor":
                continue
            if k in (extension.UNKNOWN, extension.TYPED, extension.NODE_ORDER):
                self.special(k, ext, rec, where)
            elif k in unheld and (cls, k) not in V1_UNHELD:
                extra.append(k)  # an attribute's other value fields, a type's other kinds
            elif k in rec.KIND:
                self.field(rec, natural, k, where, unheld)
        if extra:
            if cls == "Attribute":
                what = ("values of a reference attribute" if rec.ref_attr_name else
                        "values beyond the one its v1 type "
                        f"{AttributeType(v1_attribute_type(rec)).name} selects")
            else:
                what = "kinds beyond the first one set"
            self.add(cls, where, ", ".join(extra), False, what, summary=what)

    def special(self, k: str, ext: dict, rec, where: str) -> None:
        cls = type(rec).__name__ if rec is not None else "Graph"
        if k == extension.UNKNOWN:
            n = len(rec.unknown) if rec is not None else 0
            self.add(cls, where, "unknown", False,
                     f"{n} bytes of ONNX fields onemodel does not know",
                     summary="ONNX fields onemodel does not know")
        elif k == extension.NODE_ORDER:
            self.add(cls, where, "node order", False,
                     "the original order; the plain file lists nodes in dependency order")

    def tensor_storage(self, t, ext: dict, where: str) -> None:
        """Where a tensor's contents were stored, which the plain file does not keep."""
        field = t.typed_field()
        if t.data_location == EXTERNAL or t.external_data:
            loc = next((e.value for e in t.external_data if e.key == "location"), None)
            self.add("Tensor", where, "external_data", False,
                     f"the reference to {quote(loc)}; the contents are in the data region",
                     summary="references; the contents are in the data region")
        elif field is not None and field != "string_data":
            if t.raw_data is not None:
                what = "set besides raw_data; the plain file keeps raw_data only"
            elif extension.TYPED in ext:
                what = "typed storage; the data region holds the same contents in raw layout"
            else:
                what = ("typed storage that the raw bytes do not give back as it is (e.g. "
                        "values out of the element type's range); the data region holds its "
                        "conversion to raw layout")
            self.add("Tensor", where, field, False, what)
        elif t.raw_data is None:
            self.add("Tensor", where, "raw_data", True,
                     "absent (no contents); a plain reader reads empty raw_data")

    def field(self, rec, natural, k: str, where: str, unheld) -> None:
        """Field ``k`` of ``rec`` (at manifest path ``where``), which differs from its natural
        reading ``natural``."""
        cls = type(rec).__name__
        kind = rec.KIND[k]
        a = getattr(rec, k)
        n = getattr(natural, k) if natural is not None else None
        if k in unheld:
            if kind in LIST_KINDS:
                if a:
                    self.add(cls, where, k, False, _entries(len(a)), summary="",
                             count=len(a))
            elif a is not None:
                self.add(cls, where, k, False, "")
            return
        key = _KEYS.get((cls, k), _KEYS.get(k, k))
        of = _CHILD[(cls, k)]
        n_items = n if n is not None else []
        if kind == LIST_MSG and (of in CODEC_CLASSES or len(a) != len(n_items)):
            self.add(cls, where, key, True,
                     f"{len(a)} in the ONNX file; a plain reader reads {len(n_items)}")
        elif kind == LIST_MSG:
            for i, (x, y) in enumerate(zip(a, n_items)):
                self.record(x, y, f"{where}[{i}]" if key == "" else f"{where}.{key}[{i}]")
        elif kind == MSG and a is not None and n is not None and of not in CODEC_CLASSES:
            self.record(a, n, where if key == "" else f"{where}.{key}")
        else:
            self.add(cls, where, key or k, True, _value_change(kind, a, n))

    def record(self, a, n, where: str) -> None:
        """A record without a manifest object of its own (an opset import, a tensor type, a
        dimension ...) against its natural reading ``n``: every field that differs."""
        unheld = v1_unheld(a)
        for name, kind, of in a.FIELDS:
            x, y = getattr(a, name), getattr(n, name)
            if kind == MSG:
                if (x is None and y is None) or (x is not None and y is not None
                                                 and of in CODEC_CLASSES):
                    continue
            elif kind == LIST_MSG:
                if (not x and not y) or (of in CODEC_CLASSES and len(x) == len(y)):
                    continue
            elif kind in (LIST_STR, LIST_BYTES, LIST_INT):
                if x == y:
                    continue
            elif _same(kind, x, y):
                continue
            self.field(a, n, name, where, unheld)
        if a.unknown != n.unknown:
            self.add(type(a).__name__, where, "unknown", False,
                     f"{len(a.unknown)} bytes of ONNX fields onemodel does not know",
                     summary="ONNX fields onemodel does not know")

    # -- the lines -----------------------------------------------------------------------------
    def lines(self) -> list[str]:
        groups: dict = {}
        for it in self.items:
            groups.setdefault(it.key(), []).append(it)
        out, done = [], set()
        for it in self.items:
            k = it.key()
            group = groups[k]
            if len(group) < GROUP_AT:
                out.append(it.line())
                continue
            if k in done:
                continue
            done.add(k)
            out.append(_group_line(group))
        return out


def _group_line(group: list[_Item]) -> str:
    first = group[0]
    noun = _NOUNS.get(first.cls, "objects")
    places = _places([it.place() for it in group])
    if first.held:
        return f"{first.subject} of {len(group)} {noun}: {first.summary} ({places})"
    counted = [it.count for it in group if it.count is not None]
    what = f" ({_entries(sum(counted))} in all)" if counted else \
        (f" ({first.summary})" if first.summary else "")
    return f"{first.subject} of {len(group)} {noun}{what}: {places}"


def _places(paths: list[str], most: int = 4) -> str:
    """Paths with consecutive indices merged: ``manifest.graph.nodes[0-13]``."""
    runs: dict = {}
    loose = []
    for p in paths:
        m = _INDEX.match(p)
        if m is None:
            loose.append(p)
        else:
            runs.setdefault((m.group(1), m.group(3)), []).append(int(m.group(2)))
    shown = []
    for (head, tail), idx in runs.items():
        idx = sorted(set(idx))
        spans, start = [], idx[0]
        for prev, cur in zip(idx, idx[1:] + [None]):
            if cur != prev + 1:
                spans.append(str(start) if start == prev else f"{start}-{prev}")
                start = cur
        if len(spans) > 6:
            spans = spans[:5] + [f"... {len(idx)} in all"]
        shown.append(f"{head}[{', '.join(spans)}]{tail}")
    shown += loose
    if len(shown) > most:
        shown = shown[:most - 1] + [f"and {len(shown) - most + 1} more places"]
    return ", ".join(shown)


def left_out(tree, path: str, naturals: dict) -> list[str]:
    """Remove every extension object from the manifest ``tree`` and say what each held.

    ``naturals`` maps ``id(extension object)`` to ``(record, its natural reading)`` (the writer
    keeps them). Returns one line per thing left out, ``manifest.graph.nodes[3]: metadata_props
    (2 entries)`` or ``manifest.opsets[0].domain: explicitly '' in the ONNX file; ...``, lines with
    the same subject on :data:`GROUP_AT` or more objects merged into one (``metadata_props of 14
    nodes (86 entries in all): manifest.graph.nodes[0-13]``), in manifest order.
    """
    report = _Report()
    stack = [(tree, path)]
    while stack:
        v, p = stack.pop()
        if type(v) is dict:
            ext = v.pop(extension.KEY, None)
            if ext:
                rec, natural = naturals.get(id(ext), (None, None))
                report.extension(ext, rec, natural, p)
            stack.extend((x, f"{p}.{k}") for k, x in reversed(list(v.items())))
        elif type(v) is list:
            stack.extend((x, f"{p}[{i}]") for i, x in reversed(list(enumerate(v))))
    return report.lines()


__all__ = ["V1_UNHELD", "TENSOR_STORAGE", "v1_unheld", "left_out", "GROUP_AT"]
