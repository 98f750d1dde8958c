"""Types of values (Clause 6): ``Type`` and its kinds, ``Shape`` and ``Dimension``.

:class:`Type` mirrors ``TypeProto`` (Annex B.2.21): exactly one of ``tensor_type``,
``sequence_type``, ``map_type``, ``optional_type``, ``sparse_tensor_type`` or ``opaque_type`` is
set, plus an optional type ``denotation`` (Clause 6.7). A shape is absent (unknown rank) or a
:class:`Shape` whose dims are each a fixed extent (``dim_value``), a dimension variable
(``dim_param``, Clause 6.5.2) or unknown (neither), each with an optional denotation.
"""

from __future__ import annotations

import re

from .dtypes import name_of
from .record import INT, LIST_MSG, MSG, STR, Record

_NAMES_SOMETHING = re.compile(r"[A-Za-z_]")


def names_variable(dim_param: str | None) -> bool:
    """Whether a ``dim_param`` names a dimension variable: it holds an identifier (a letter or
    ``_``: ``batch``, ``unk__12``, and the expressions of them that onnxruntime's symbolic
    shape inference and ``onemodel infer`` write, ``seq + 1``). One that holds none (``?``,
    ``-1``, ``*``, empty) is an exporter's spelling of "unknown" (the PaddleOCR classifier
    declares ``[-1, 3, ?, ?]``): Clause 6.5.2 asks that a variable's name be an identifier
    (SHOULD), and reading two ``?`` as one variable would make its height and width one
    extent. Such a dimension is read as unknown (:attr:`Dimension.extent`), with a warning
    where the caller's inputs are checked and from ``onemodel check`` (OM405)."""
    return bool(dim_param) and _NAMES_SOMETHING.search(dim_param) is not None

KINDS = ("tensor_type", "sequence_type", "map_type", "optional_type", "sparse_tensor_type",
         "opaque_type")


class Dimension(Record):
    """One dimension: ``dim_value`` (int >= 0), ``dim_param`` (str), or neither (unknown)."""

    FIELDS = (("dim_value", INT, None), ("dim_param", STR, None), ("denotation", STR, None))

    @property
    def value(self) -> int | str | None:
        """The extent: an int, a dimension variable name, or ``None`` when unknown."""
        if self.dim_value is not None:
            return self.dim_value
        return self.dim_param

    @property
    def extent(self) -> int | str | None:
        """The extent as inference and the evaluator read it: a non-negative ``dim_value``, a
        dimension variable's name (a ``dim_param`` that :func:`names_variable`), or ``None``
        for unknown, which a negative ``dim_value`` (-1, PaddlePaddle's "any"; Clause 6.5.1
        allows none) and a ``dim_param`` naming no variable (``?``) are read as."""
        v = self.dim_value
        if v is not None:
            return v if v >= 0 else None
        p = self.dim_param
        return p if names_variable(p) else None

    def __str__(self) -> str:
        v = self.value
        return "?" if v is None else str(v)


class Shape(Record):
    """A tensor shape: an ordered list of :class:`Dimension` (``TensorShapeProto``)."""

    FIELDS = (("dims", LIST_MSG, "Dimension"),)

    @classmethod
    def of(cls, dims) -> "Shape":
        """A shape from a list of ints, strings (dimension variables) and ``None`` (unknown)."""
        out = []
        for d in dims:
            if d is None:
                out.append(Dimension())
            elif isinstance(d, str):
                out.append(Dimension(dim_param=d))
            else:
                out.append(Dimension(dim_value=int(d)))
        return cls(dims=out)

    @property
    def values(self) -> list[int | str | None]:
        """The dims as ints, strings and ``None``."""
        return [d.value for d in self.dims]

    @property
    def extents(self) -> list[int | str | None]:
        """The dims as inference and the evaluator read them (:attr:`Dimension.extent`):
        non-negative ints, dimension variable names and ``None`` (unknown)."""
        return [d.extent for d in self.dims]

    def __str__(self) -> str:
        return "[" + ",".join(str(d) for d in self.dims) + "]"


class TensorType(Record):
    """``TypeProto.Tensor``: ``elem_type`` (Table 5 tag) and an optional ``shape``."""

    FIELDS = (("elem_type", INT, None), ("shape", MSG, "Shape"))


class SparseTensorType(Record):
    """``TypeProto.SparseTensor``: ``elem_type`` and an optional ``shape``."""

    FIELDS = (("elem_type", INT, None), ("shape", MSG, "Shape"))


class SequenceType(Record):
    """``TypeProto.Sequence``: the type of every element, ``elem_type``."""

    FIELDS = (("elem_type", MSG, "Type"),)


class MapType(Record):
    """``TypeProto.Map``: ``key_type`` (an integral or STRING tag) and ``value_type``."""

    FIELDS = (("key_type", INT, None), ("value_type", MSG, "Type"))


class OptionalType(Record):
    """``TypeProto.Optional``: the type of the value when present, ``elem_type``."""

    FIELDS = (("elem_type", MSG, "Type"),)


class OpaqueType(Record):
    """``TypeProto.Opaque``: a type named by ``domain`` and ``name`` (Clause 6.8.4)."""

    FIELDS = (("domain", STR, None), ("name", STR, None))


class Type(Record):
    """The type of a value (``TypeProto``): one kind field set, and an optional denotation."""

    FIELDS = (
        ("tensor_type", MSG, "TensorType"),
        ("sequence_type", MSG, "SequenceType"),
        ("map_type", MSG, "MapType"),
        ("denotation", STR, None),
        ("opaque_type", MSG, "OpaqueType"),
        ("sparse_tensor_type", MSG, "SparseTensorType"),
        ("optional_type", MSG, "OptionalType"),
    )

    @classmethod
    def tensor(cls, elem_type: int, shape=None) -> "Type":
        """A tensor type; ``shape`` a list of int / str / None, or ``None`` for unknown rank."""
        return cls(tensor_type=TensorType(elem_type=int(elem_type),
                                          shape=None if shape is None else Shape.of(shape)))

    @property
    def kind(self) -> str | None:
        """``tensor``, ``sparse_tensor``, ``sequence``, ``map``, ``optional``, ``opaque``
        (the first set, in :data:`KINDS` order), or None when none is set."""
        for k in KINDS:
            if getattr(self, k) is not None:
                return k[: -len("_type")]
        return None

    @property
    def value(self):
        """The record of the kind that is set (a TensorType, SequenceType, ...), or ``None``."""
        for k in KINDS:
            v = getattr(self, k)
            if v is not None:
                return v
        return None

    @property
    def elem_type(self) -> int | None:
        """Element type tag of a tensor or sparse tensor type, else ``None``."""
        v = self.tensor_type or self.sparse_tensor_type
        return v.elem_type if v is not None else None

    @property
    def shape(self) -> Shape | None:
        """Shape of a tensor or sparse tensor type (``None``: unknown rank or not a tensor)."""
        v = self.tensor_type or self.sparse_tensor_type
        return v.shape if v is not None else None

    def __str__(self) -> str:
        k = self.kind
        if k in ("tensor", "sparse_tensor"):
            v = self.value
            s = f"{k}({name_of(v.elem_type or 0)})"
            return s + (str(v.shape) if v.shape is not None else "")
        if k in ("sequence", "optional"):
            inner = self.value.elem_type
            return f"{k}({inner if inner is not None else '?'})"
        if k == "map":
            m = self.map_type
            return f"map({name_of(m.key_type or 0)},{m.value_type if m.value_type else '?'})"
        if k == "opaque":
            return f"opaque({self.opaque_type.domain or ''}.{self.opaque_type.name or ''})"
        return "?"
