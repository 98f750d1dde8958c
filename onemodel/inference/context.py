"""What an inference rule sees besides its inputs: :class:`InferContext` (ONNX Part 1, Clause 9).

Attributes are taken as the evaluator's kernels take them (``ctx.attr(name)``: the node's value
or the default of the operator's definition at the node's opset), inputs' known elements through
:meth:`InferContext.const` and :meth:`InferContext.ints`, and the shape algebra of Clause 6.6
(multidirectional broadcasting) through :meth:`InferContext.broadcast`.
"""

from __future__ import annotations

from ..ir.attribute_values import attribute_value
from ..operators import axes, broadcast
from . import dims as D
from .value import UNKNOWN, Value

#: ``InferContext.attr(name)`` without a default: the operator definition's default
_DEFINITION = object()

_INTEGER = frozenset((2, 3, 4, 5, 6, 7, 12, 13))  # uint8 int8 uint16 int16 int32 int64 u32 u64


class InferContext:
    """The context of one node's inference, passed to a rule as its first argument.

    Attributes:
        node: the :class:`~onemodel.ir.Node`.
        opset: the version of the node's domain the model (or function) imports, an int.
        schema: the operator's definition in force (:class:`onemodel.schemas.Schema`) or None.
        inputs: the input Values, as the rule receives them.
        num_outputs: the number of outputs the node declares, empty names included.
        path: where the node is (``graph.nodes[3]``, IR field names).
    """

    __slots__ = ("node", "opset", "schema", "inputs", "num_outputs", "path", "_engine",
                 "_scope", "_generic", "_attrs", "_raw")

    def __init__(self, engine, node, opset, schema, inputs, path, scope, generic, raw=None):
        self.node = node
        self.opset = opset
        self.schema = schema
        self.inputs = inputs
        self.num_outputs = len(node.outputs)
        self.path = path
        self._engine = engine
        self._scope = scope
        self._generic = generic
        self._attrs: dict = {}
        self._raw = raw if raw is not None else {a.name: a for a in node.attributes}

    # -- attributes --------------------------------------------------------------------------
    def attr(self, name: str, default=_DEFINITION):
        """The value of attribute ``name`` as kernels get it
        (:func:`onemodel.ir.attribute_values.attribute_value`), or ``default`` when the node
        does not set it; without ``default``, the definition's default at :attr:`opset` (None
        when it gives none)."""
        if name in self._attrs:
            return self._attrs[name]
        a = self._raw.get(name)
        if a is not None:
            v = self._attrs[name] = attribute_value(a)
            return v
        if default is _DEFINITION:
            from ..operators.table import attribute_default

            return attribute_default(self.node.domain, self.node.op_type, self.opset, name)
        return default

    def has_attr(self, name: str) -> bool:
        """Whether the node sets attribute ``name``."""
        return name in self._raw

    # -- inputs ------------------------------------------------------------------------------
    def input(self, i: int) -> Value:
        """Input ``i``'s Value (``UNKNOWN`` when absent or unknown)."""
        v = self.inputs[i] if i < len(self.inputs) else None
        return UNKNOWN if v is None else v

    def present(self, i: int) -> bool:
        """Whether the node supplies input ``i`` (listed with a non-empty name)."""
        ins = self.node.inputs
        return i < len(ins) and bool(ins[i])

    def const(self, i: int):
        """Input ``i``'s elements as a numpy array of its shape and element type, when every
        element is known (an initializer, a Constant, or data inference followed); else
        None."""
        v = self.input(i)
        if v.data is None or v.shape is None or v.elem is None:
            return None
        if any(type(x) not in (int, float, bool) for x in v.data):
            return None
        import numpy as np

        from ..ir.dtypes import info
        try:
            dt = info(v.elem).dtype
        except Exception:  # an element type numpy cannot hold
            return None
        return np.array(v.data, dtype=dt).reshape([int(d) for d in v.shape])

    def ints(self, i: int) -> list | None:
        """Input ``i``'s elements as a flat list of extents (int, Expr, or None where unknown)
        when it is an integer tensor of rank 0 or 1 whose elements inference follows; else
        None (nothing known)."""
        v = self.input(i)
        if v.data is None or v.elem not in _INTEGER or v.rank not in (0, 1):
            return None
        return list(v.data)

    # -- outputs -----------------------------------------------------------------------------
    def elem(self, i: int = 0) -> int | None:
        """Output ``i``'s element type from the definition's type constraints bound by the
        inputs (Clause 10.4), or None."""
        g = self._generic[i] if i < len(self._generic) else None
        return g.elem if g is not None else None

    def tensor(self, shape, elem: int | None = None, data=None, i: int = 0) -> Value:
        """A tensor Value for output ``i``: ``shape`` (list of extents, None for unknown rank),
        ``elem`` (default :meth:`elem`), ``data`` its elements when known."""
        return Value.tensor(self.elem(i) if elem is None else elem, shape, data)

    # -- shape algebra -----------------------------------------------------------------------
    def contradiction(self, message: str) -> None:
        """Report that the node's inputs, attributes or declared types cannot all hold
        (Clause 9.4, a Clause 10 finding), at this node."""
        self._engine.contradiction(self.path, f"{_label(self.node)}: {message}")

    def unify(self, a: D.Dim, b: D.Dim, what: str = "extents") -> D.Dim:
        """Two extents the operator requires equal: the better known one (an int over an
        expression over unknown); a contradiction when they cannot be equal."""
        if D.differ(a, b):
            self.contradiction(f"{what} differ: {D.dim_text(a)} and {D.dim_text(b)}")
            return a
        if a is not None and b is not None and a != b:
            self._engine.constraint(self.path, a, b, None,
                                    f"{_label(self.node)} needs equal {what}")
        if a is None:
            return b
        if b is None or type(a) is int:
            return a
        return b if type(b) is int else a

    def broadcast(self, *values, what: str = "inputs") -> list | None:
        """The shape of the multidirectional broadcast of the given Values or shapes (Clause
        6.6): None when any rank is unknown; per position the extent other than 1, an unknown
        where symbolic extents may differ; a contradiction when two ints > 1 differ."""
        shapes = []
        for v in values:
            s = v.shape if isinstance(v, Value) else v
            if s is None:
                return None
            shapes.append(s)
        cols = broadcast.columns(shapes)
        return [self._broadcast_dim(dims, len(cols) - k, what) for k, dims in enumerate(cols)]

    def _broadcast_dim(self, dims, pos_from_end, what):
        ints = {d for d in dims if type(d) is int and d != 1}
        if len(ints) > 1:
            self.contradiction(f"{what} do not broadcast: extents {sorted(ints)} at axis "
                               f"-{pos_from_end}")
            return None
        if ints:
            k = ints.pop()
            for d in dims:
                if d is not None and type(d) is not int:
                    self._engine.constraint(self.path, d, k, (1, k),
                                            f"{_label(self.node)}: {what} broadcast")
            return k
        rest = [d for d in dims if d != 1]
        if not rest:
            return 1
        first = rest[0]
        if first is None or any(d != first for d in rest[1:]):
            return None
        return first

    def axis(self, axis: int, rank: int | None, what: str = "axis") -> int | None:
        """``axis`` in ``[-rank, rank)`` as a non-negative index; None when the rank is unknown,
        a contradiction (and None) when out of range."""
        if rank is None or axis is None:
            return None
        try:
            return axes.axis_index(int(axis), rank, what)
        except axes.AxisError as e:
            self.contradiction(str(e))
            return None

    # -- subgraphs -----------------------------------------------------------------------------
    def infer_graph(self, name: str, inputs: list) -> list:
        """Infer the subgraph held by GRAPH attribute ``name`` with its formal inputs bound to
        ``inputs`` (Values, by position; fewer than the graph declares leaves the rest as
        declared), reading names of the enclosing scopes (Clause 5.4.3). Returns the Values of
        its outputs, in order ([] when the node has no such attribute)."""
        for k, a in enumerate(self.node.attributes):
            if a.name == name and a.g is not None:
                return self._engine.infer_subgraph(a.g, f"{self.path}.attributes[{k}].g",
                                                   self._scope, inputs)
        return []


def _label(node) -> str:
    return f"{node.op_type} {node.name!r}" if node.name else node.op_type
