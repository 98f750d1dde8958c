"""What a kernel sees besides its inputs: attributes, opset, node, and a way to run subgraphs.

An attribute the node does not set has the default of the operator's definition in force at the
node's opset (:mod:`onemodel.schemas`, read on the first unset attribute). Initializers and
tensor attributes are arrays of the tensors' bytes, zero-copy where the tensor allows
(:func:`tensor_value`).
"""

from __future__ import annotations

import functools

import numpy as np

from ..ir.model import Attribute, Node, decode_attribute


def decode_strings(arr: np.ndarray) -> np.ndarray:
    """An object array with every ``bytes`` element decoded to ``str`` (UTF-8, undecodable bytes
    kept with ``surrogateescape``); other arrays are returned as they are.

    Inside the evaluator a STRING tensor is an object array of ``str``.
    """
    if arr.dtype != object or not arr.size:
        return arr
    flat = arr.reshape(-1)
    if not any(isinstance(v, bytes) for v in flat):
        return arr
    out = np.empty(flat.shape, dtype=object)
    out[:] = [v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else v for v in flat]
    return out.reshape(arr.shape)


def tensor_value(t) -> np.ndarray:
    """The values of an ir Tensor or SparseTensor as the evaluator holds them: a zero-copy
    ndarray where the tensor allows, dense for a sparse tensor, strings as ``str``.

    A view whose start is not a multiple of its element size (``raw_data`` at an odd offset of
    an ONNX file; the OneModel container aligns every tensor to 64 bytes) is copied once here:
    numpy's BLAS paths refuse misaligned arrays and fall back to loops 100 times slower.
    """
    arr = t.to_dense() if hasattr(t, "to_dense") else t.numpy()
    if not arr.flags.aligned:
        arr = arr.copy()
    return decode_strings(arr)


#: ``Context.attr(name)`` without a default: the operator definition's default
_DEFINITION = object()


@functools.lru_cache(maxsize=None)
def _definition_defaults(domain: str, op_type: str, opset: int) -> dict:
    from .. import schemas  # the table is read on the first unset attribute, not at import

    s = schemas.get(op_type, domain, opset) if type(opset) is int and opset >= 1 else None
    return s.defaults if s is not None else {}


def definition_default(domain: str, op_type: str, opset: int, name: str):
    """The default of attribute ``name`` in the definition of ``op_type`` in force at ``opset``
    (:func:`onemodel.schemas.get`), as kernels get attribute values (FLOAT the float32 value
    the definition stores, a list the caller's own); None when the definition gives none or
    there is no definition (a custom domain)."""
    d = _definition_defaults(domain or "", op_type, opset).get(name)
    return list(d) if type(d) is list else d


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def attribute_value(attr: Attribute):
    """An attribute's value as kernels get it (see :class:`Context`), decoded by
    :func:`onemodel.ir.model.decode_attribute` with strings as ``str`` and tensors as ndarrays.

    FLOAT -> float, INT -> int, STRING -> str (UTF-8, undecodable bytes kept with
    ``surrogateescape``), FLOATS -> list[float], INTS -> list[int], STRINGS -> list[str],
    TENSOR -> ndarray (zero-copy where the tensor allows; STRING elements as str),
    TENSORS -> list of ndarrays,
    GRAPH -> ir.Graph, GRAPHS -> list of ir.Graph, SPARSE_TENSOR -> dense ndarray,
    SPARSE_TENSORS -> list of dense ndarrays, TYPE_PROTO -> ir.Type, TYPE_PROTOS -> list of ir.Type.
    A list is the kernel's own (changing it leaves the node's attribute as it is).
    """
    value = decode_attribute(attr, string=_text, tensor=tensor_value)
    return list(value) if type(value) is list else value


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
