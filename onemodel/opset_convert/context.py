"""What a version adapter is given and may do: :class:`Step` (the rewrite of one node across
one change of its operator) and :class:`Refused` (the reason it cannot be rewritten).

An adapter is a class attached to the definition that introduced a change
(:func:`onemodel.operators.adapter`, in ``onemodel/opset_convert/adapters/<family>.py``) with
two static methods, ``up(step, node)`` (from the definition before to this one) and
``down(step, node)`` (back). Each rewrites ``node`` in place -- attributes set or removed
(:meth:`Step.set_attr`, :meth:`Step.remove_attr`), inputs given (``node.inputs``, constants
from :meth:`Step.add_constant`), nodes inserted before it (:meth:`Step.add_node`) -- or
returns a list of nodes that replace it (a decomposition, at the version the step goes to), or
raises :class:`Refused` through :meth:`Step.refuse` with the reason. A node is stepped one
adjacent definition at a time (:mod:`.engine`). An adapter attached to an operator's first
definition, with ``decomposition = True``, is its decomposition: its ``down`` returns the
older operators that compute it, used to convert below the version that introduced it.
"""

from __future__ import annotations

from ..ir import Attribute, Node, Tensor
from ..lazy import np


class Refused(Exception):
    """A node cannot be converted across one change; ``reason`` says why (one phrase)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Step:
    """The conversion of one node across one change of its operator.

    Attributes:
        node: the node being rewritten (the converted model's own: change it in place).
        domain, op_type: the operator.
        source, target: the operator set versions the node goes from and to (one adjacent
            pair of definitions apart).
        up: whether ``target > source``.
    """

    def __init__(self, scope, node: Node, domain: str, source: int, target: int):
        self.scope = scope
        self.node = node
        self.domain = domain
        self.op_type = node.op_type
        self.source, self.target = source, target
        self.up = target > source
        #: nodes to insert before the node, in order
        self.before: list[Node] = []

    # -- reading the node and its inputs --------------------------------------------------
    def attr(self, name: str, default=None):
        """The value of attribute ``name`` (:attr:`Attribute.value`: an int, float, bytes, a
        list, a Tensor), else the default of the definition the node comes from, else
        ``default``. A reference to a function's attribute (``ref_attr_name``) is refused: its
        value is the caller's."""
        a = self.node.attribute(name)
        if a is not None:
            if a.ref_attr_name:
                self.refuse(f"attribute {name!r} refers to the function's attribute "
                            f"{a.ref_attr_name!r}, whose value is not known here")
            return a.value
        from ..operators.table import attribute_default
        d = attribute_default(self.domain, self.op_type, self.source, name)
        return default if d is None else d

    def has_attr(self, name: str) -> bool:
        """Whether the node sets attribute ``name``."""
        return self.node.attribute(name) is not None

    def input(self, k: int) -> str | None:
        """The name of the node's input ``k``, or None when it is not given (absent or ``""``)."""
        ins = self.node.inputs
        return ins[k] if k < len(ins) and ins[k] else None

    def constant(self, name: str | None):
        """The value of ``name`` as a numpy array when it is a constant: an initializer no
        caller can override, a Constant node's output, or a value inference folded; else
        None."""
        return None if not name else self.scope.constant(name)

    def shape(self, name: str | None):
        """The extents of value ``name`` (ints, None where unknown) or None (rank unknown)."""
        return None if not name else self.scope.shape(name)

    def dims(self, name: str | None):
        """The extents of ``name`` as inference knows them (ints, symbolic extents that compare
        equal when they are the same, None where unknown), or None (rank unknown)."""
        return None if not name else self.scope.dims(name)

    def inferred_dims(self, node: Node, k: int):
        """The extents inference gave output ``k`` of ``node`` (any node of the model, one in a
        subgraph too: a branch of If, a body of Loop or Scan), as :meth:`dims` gives them, or
        None (the output is not a tensor, or its rank is not known)."""
        records = self.scope.conv.records.get(id(node), ())
        if not records or k >= len(records[0][1]):
            return None
        v = records[0][1][k]
        return v.shape if v is not None and v.kind == "tensor" else None

    def elements(self, name: str | None):
        """The elements of small tensor ``name`` as inference knows them (a tuple of ints,
        symbolic extents and None where unknown: a shape computed from ``Shape``), or None."""
        return None if not name else self.scope.elements(name)

    def at_least_one(self, x) -> bool:
        """Whether element ``x`` (an int or a symbolic extent) is at least 1 wherever the
        main graph's input extents are, the assumption shape inference makes of them (Clause
        9); False when that is not known."""
        from ..inference import dims as D
        from ..inference.rules._util import lower

        token = D.POSITIVE.set(self.scope.conv.positive)
        try:
            lo = lower(x)
        finally:
            D.POSITIVE.reset(token)
        return lo is not None and lo >= 1

    def note(self, text: str) -> None:
        """A note on this conversion (:attr:`Conversion.notes`, a warning of
        :func:`convert_opset`), once per distinct text."""
        notes = self.scope.conv.notes
        if text not in notes:
            notes.append(text)

    def rank(self, name: str | None) -> int | None:
        """The rank of ``name``, or None when unknown."""
        s = self.shape(name)
        return None if s is None else len(s)

    def elem(self, name: str | None) -> int | None:
        """The element type code (Table 5) of ``name``, or None when unknown."""
        return None if not name else self.scope.elem(name)

    # -- writing -----------------------------------------------------------------------------
    def set_attr(self, name: str, value, type: int | None = None) -> None:
        """Set attribute ``name`` (replacing one of that name; :meth:`Attribute.make` types)."""
        self.remove_attr(name)
        self.node.attributes.append(Attribute.make(name, value, type))

    def remove_attr(self, name: str) -> None:
        """Remove attribute ``name`` when the node sets it."""
        self.node.attributes = [a for a in self.node.attributes if a.name != name]

    def fresh(self, hint: str) -> str:
        """A value name used nowhere in the model, from ``hint``."""
        return self.scope.fresh(hint)

    def add_constant(self, value, hint: str) -> str:
        """A new constant holding ``value`` (a numpy array; int64 for axes, pads, ...): an
        initializer of the node's graph, or a Constant node before the node in a function
        body. Returns its name."""
        arr = np.asarray(value)
        name = self.fresh(f"{self.node.name or self.op_type}_{hint}")
        t = Tensor.from_numpy(np.ascontiguousarray(arr))
        t.name = name
        self.scope.add_constant(self, t)
        return name

    def declare(self, name: str, elem: int | None, shape=None) -> None:
        """State the element type (and extents, when known) of a value the adapter makes, so
        that later steps know it (no effect when ``elem`` is None)."""
        if elem is not None:
            from ..inference.value import Value
            self.scope.values[name] = Value.tensor(elem, None if shape is None else list(shape))

    def add_node(self, op_type: str, inputs: list, outputs: list, **attributes) -> Node:
        """Insert a node of the default domain before the node, at the version the step goes
        to (converted further with the node), with ``attributes`` by
        :meth:`Attribute.make`. Returns it."""
        n = Node(op_type=op_type, inputs=list(inputs), outputs=list(outputs),
                 attributes=[Attribute.make(k, v) for k, v in attributes.items()])
        self.before.append(n)
        return n

    def refuse(self, reason: str):
        """Raise :class:`Refused` with ``reason``."""
        raise Refused(reason)
