"""What inference knows of one value: :class:`Value` (ONNX Part 1, Clauses 6 and 9).

A Value is a type with symbolic extents (:mod:`.dims`) and, for a small tensor whose elements
inference can follow (shapes, axes, constants), those elements: the partial data propagation
that lets ``Reshape(x, Concat(Shape(x)[0:1], [-1]))`` have a known shape.
"""

from __future__ import annotations

from ..ir.types import Type
from . import dims as D

#: Tensors with at most this many elements carry their elements (``Value.data``).
MAX_DATA = 1024

#: How many times the elements of a lazily read Value were asked for (see
#: :meth:`Value.lazy_tensor`); the engine compares it around a rule's call.
LAZY_READS = 0


class Value:
    """The inferred type of one value; immutable, hashable, compared by content.

    Attributes:
        kind: ``"tensor"``, ``"sparse_tensor"``, ``"sequence"``, ``"optional"``, ``"map"``,
            ``"opaque"``, or None (nothing known).
        elem: the element type code (Table 5) of a tensor or sparse tensor, the key type of a
            map; None when unknown.
        shape: a tuple of extents (int, :class:`~.dims.Expr` or None) or None (rank unknown),
            tensor kinds only.
        data: the tensor's elements in row-major order when known (a tuple of length
            prod(shape), each an int or Expr or None for an integer tensor, a float or a bool;
            only for tensors of at most :data:`MAX_DATA` elements), else None.
        inner: the element Value of a sequence or optional, the value Value of a map.
    """

    __slots__ = ("kind", "elem", "shape", "_data", "inner", "_src", "_hash", "signature")

    def __init__(self, kind=None, elem=None, shape=None, data=None, inner=None):
        self.kind = kind
        self.elem = elem
        self.shape = None if shape is None else tuple(shape)
        self._data = None if data is None else tuple(data)
        self.inner = inner
        self._src = None
        self._hash = hash((kind, elem, self.shape, self._data, inner))
        #: what rules may read of this Value other than lazily read elements: the Value
        #: itself, or for a lazily read one ``("tensor", elem, shape)``, equal for two
        #: initializers of one type and shape (the engine's memo of node results keys on it
        #: and keeps no result of a rule that read lazy elements, :data:`LAZY_READS`)
        self.signature = self

    @classmethod
    def lazy_tensor(cls, elem: int | None, shape, source) -> "Value":
        """A tensor whose elements ``source()`` gives (a tuple, or None when they cannot be
        had) on the first read of :attr:`data`: initializers are not read unless a rule asks.
        Two such Values are equal when they have the same source (the same tensor)."""
        v = object.__new__(cls)  # (the slots set here: no hash of the unread elements)
        v.kind, v.elem, v._data, v.inner, v._src = "tensor", elem, None, None, source
        v.shape = shape = None if shape is None else tuple(shape)
        v._hash = hash(("tensor", elem, shape, id(source)))
        v.signature = ("tensor", elem, shape)
        return v

    @property
    def data(self):
        """The elements, when known (see the class docstring)."""
        src = self._src
        if src is not None:
            global LAZY_READS
            LAZY_READS += 1
            if src is not True:
                d = src()
                self._data = None if d is None or len(d) != _count(self.shape or ()) \
                    else tuple(d)
                self._src = True  # read
        return self._data

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def tensor(cls, elem: int | None, shape=None, data=None) -> "Value":
        """A tensor of element type ``elem`` (Table 5 code or None) and ``shape`` (a sequence of
        extents, None for an unknown rank); ``data`` its elements when known."""
        if data is not None and (shape is None or len(data) != _count(shape)):
            data = None
        return cls("tensor", elem, shape, data)

    @classmethod
    def sequence(cls, inner: "Value | None") -> "Value":
        """A sequence whose elements are ``inner`` (None: unknown element type)."""
        return cls("sequence", inner=inner)

    @classmethod
    def optional(cls, inner: "Value | None") -> "Value":
        """An optional of ``inner``."""
        return cls("optional", inner=inner)

    @classmethod
    def map(cls, key: int | None, value: "Value | None") -> "Value":
        """A map from ``key`` (element type code) to ``value``."""
        return cls("map", elem=key, inner=value)

    @classmethod
    def from_type(cls, t: Type | None) -> "Value":
        """The Value of a declared :class:`~onemodel.ir.Type` (``dim_param`` -> variable,
        neither field -> unknown; a negative ``dim_value`` and a ``dim_param`` naming no
        variable, ``?``, are unknown too: :attr:`onemodel.ir.Dimension.extent`); an unset or
        empty type gives ``Value()``."""
        if t is None:
            return UNKNOWN
        k = t.kind
        if k in ("tensor", "sparse_tensor"):
            v = t.value
            shape = None
            if v.shape is not None:  # (-1 and a dim_param such as '?' are unknown)
                shape = tuple(D.Expr.var(e) if isinstance(e, str) else e
                              for e in v.shape.extents)
            return cls(k, v.elem_type or None, shape)
        if k in ("sequence", "optional"):
            inner = t.value.elem_type
            return cls(k, inner=cls.from_type(inner) if inner is not None else None)
        if k == "map":
            m = t.map_type
            return cls("map", m.key_type or None, inner=cls.from_type(m.value_type)
                       if m.value_type is not None else None)
        if k == "opaque":
            return cls("opaque")
        return UNKNOWN

    # -- reading -----------------------------------------------------------------------------
    @property
    def known(self) -> bool:
        """Whether anything is known (a kind)."""
        return self.kind is not None

    @property
    def rank(self) -> int | None:
        """The rank of a tensor whose rank is known, else None."""
        return None if self.shape is None else len(self.shape)

    @property
    def complete(self) -> bool:
        """Whether kind, element type and every extent are known (extents may be symbolic),
        for tensors; for sequences and optionals, whether the element is complete."""
        if self.kind in ("tensor", "sparse_tensor"):
            return (self.elem is not None and self.shape is not None
                    and all(d is not None for d in self.shape))
        if self.kind in ("sequence", "optional"):
            return self.inner is not None and self.inner.complete
        if self.kind == "map":
            return self.elem is not None and self.inner is not None and self.inner.complete
        return self.kind == "opaque"

    def to_type(self) -> Type | None:
        """The :class:`~onemodel.ir.Type` to write as ``value_info``: an expression or a
        variable becomes a ``dim_param`` (its text), an unknown extent a dimension with neither
        field, and so does an integer extent above :data:`.dims.MAX_DIM_VALUE` (2^63 - 1),
        which no ``dim_value`` (an int64) holds (:meth:`wide_extents` lists them). None when
        nothing is known."""
        from ..ir.types import (
            MapType,
            OpaqueType,
            OptionalType,
            SequenceType,
            SparseTensorType,
            TensorType,
        )
        if self.kind in ("tensor", "sparse_tensor"):
            cls = TensorType if self.kind == "tensor" else SparseTensorType
            t = Type()
            shape = None
            if self.shape is not None:
                from ..ir.types import Dimension, Shape
                shape = Shape(dims=[
                    (Dimension(dim_value=d) if D.fits_file(d) else Dimension())
                    if type(d) is int else Dimension(dim_param=str(d)) if _writable(d)
                    else Dimension() for d in self.shape])
            setattr(t, self.kind + "_type", cls(elem_type=self.elem or 0, shape=shape))
            return t
        if self.kind in ("sequence", "optional"):
            inner = self.inner.to_type() if self.inner is not None else None
            rec = SequenceType if self.kind == "sequence" else OptionalType
            t = Type()
            setattr(t, self.kind + "_type", rec(elem_type=inner))
            return t
        if self.kind == "map":
            inner = self.inner.to_type() if self.inner is not None else None
            return Type(map_type=MapType(key_type=self.elem or 0, value_type=inner))
        if self.kind == "opaque":
            return Type(opaque_type=OpaqueType())
        return None

    def wide_extents(self) -> list[tuple[str, int, int]]:
        """``[(where, axis, extent)]``: every integer extent of this value (or of the element
        of a sequence or optional, the value of a map: ``where`` says which, ``""`` for the
        value itself) that a file cannot record (above :data:`.dims.MAX_DIM_VALUE`, 2^63 - 1);
        :meth:`to_type` writes each as unknown."""
        found = []
        v, where = self, ""
        while v is not None:
            if v.kind in ("tensor", "sparse_tensor") and v.shape is not None:
                found += [(where, i, d) for i, d in enumerate(v.shape) if not D.fits_file(d)]
            if v.kind not in ("sequence", "optional", "map"):
                break
            v = v.inner
            where = (where + " " if where else "") + "element"
        return found

    # -- identity ----------------------------------------------------------------------------
    def __eq__(self, other):
        if type(other) is not Value or self._hash != other._hash:
            return False
        if self._src is not None or other._src is not None:
            return self is other or (self._src is other._src and self._src is not True)
        return (self.kind == other.kind and self.elem == other.elem and self.shape == other.shape
                and self._data == other._data and self.inner == other.inner)

    def __hash__(self):
        return self._hash

    def __str__(self) -> str:
        from ..ir.dtypes import name_of
        if self.kind in ("tensor", "sparse_tensor"):
            e = name_of(self.elem) if self.elem else "?"
            s = f"{self.kind}({e})" + ("" if self.shape is None else D.shape_text(self.shape))
            return s
        if self.kind in ("sequence", "optional"):
            return f"{self.kind}({self.inner if self.inner is not None else '?'})"
        if self.kind == "map":
            from ..ir.dtypes import name_of as n
            return f"map({n(self.elem) if self.elem else '?'},{self.inner or '?'})"
        return self.kind or "?"

    __repr__ = __str__


def _writable(d) -> bool:
    """Whether a symbolic extent is written as a ``dim_param``: not unknown, and not made of
    the engine's fresh variables (``?x:1``), which only stand for an extent inside one run."""
    return d is not None and not any(v.startswith("?") for v in d.variables())


def _count(shape) -> int | None:
    n = 1
    for d in shape:
        if type(d) is not int:
            return None
        n *= d
    return n


#: Nothing known.
UNKNOWN = Value()
