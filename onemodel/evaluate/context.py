"""What a kernel sees besides its inputs: attributes, opset, node, and a way to run subgraphs.

An attribute the node does not set has the default of the operator's definition in force at the
node's opset (:mod:`onemodel.operators`, read on the first unset attribute). Initializers and
tensor attributes are arrays of the tensors' bytes, zero-copy where the tensor allows
(:func:`tensor_value`).
"""

from __future__ import annotations

from ..ir.attribute_values import attribute_value, decode_strings, tensor_value
from ..ir.model import Node

__all__ = ["Context", "attribute_value", "decode_strings", "tensor_value", "definition_default"]


def definition_default(domain: str, op_type: str, opset: int, name: str):
    """The default of attribute ``name`` in the operator's definition in force at ``opset``
    (:func:`onemodel.operators.table.attribute_default`: the schema tables are read on the
    first unset attribute, not with the evaluator)."""
    from ..operators.table import attribute_default

    return attribute_default(domain, op_type, opset, name)


#: ``Context.attr(name)`` without a default: the operator definition's default
_DEFINITION = object()


class Context:
    """The context of one node evaluation, passed to a kernel as its first argument.

    Attributes:
        node: the :class:`~onemodel.ir.Node` being evaluated (after function attribute binding).
        opset: the version of the node's domain imported by the model (or by the function whose
            body holds the node), an int.
        attrs: attribute name -> value, typed as :func:`attribute_value` describes.
        num_outputs: number of outputs the node declares, empty names included.
        path: where the node is, ``graph.nodes[3]`` (for error messages).
    """

    __slots__ = ("node", "opset", "attrs", "num_outputs", "path", "_raw", "_runner", "_env")

    def __init__(self, node: Node, opset: int, attrs: dict, raw: dict, path: str, runner, env):
        self.node = node
        self.opset = opset
        self.attrs = attrs
        self._raw = raw
        self.num_outputs = len(node.outputs)
        self.path = path
        self._runner = runner
        self._env = env

    def attr(self, name: str, default=_DEFINITION):
        """The value of attribute ``name``, or ``default`` when the node does not set it.

        Without ``default``, an unset attribute has the default of the operator's definition in
        force at :attr:`opset` (:func:`definition_default`), or None when it gives none.
        """
        value = self.attrs.get(name, _DEFINITION)
        if value is not _DEFINITION:
            return value
        if default is _DEFINITION:
            return definition_default(self.node.domain, self.node.op_type, self.opset, name)
        return default

    def attr_bytes(self, name: str, default: bytes | None = None) -> bytes | None:
        """The raw bytes of a STRING attribute (not decoded), or ``default``."""
        a = self._raw.get(name)
        if a is None:
            return default
        return a.s if a.s is not None else b""

    def output_used(self, index: int) -> bool:
        """Whether output ``index`` has a non-empty name (a kernel may skip an unused output)."""
        outs = self.node.outputs
        return index < len(outs) and bool(outs[index])

    def run_graph(self, graph, inputs: list) -> list:
        """Evaluate ``graph`` (an attribute of this node) on ``inputs``, matched by position.

        The graph reads names of the enclosing scopes (Clause 5.4.3). Returns the values of its
        outputs, in order. Raises the errors the runner raises, with the subgraph's node path.
        """
        return self._runner.run_subgraph(graph, inputs, self._env, self.path)
