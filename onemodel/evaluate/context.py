"""What a kernel sees besides its inputs: attributes, opset, node, and a way to run subgraphs."""

from __future__ import annotations

import numpy as np

from ..ir.model import Attribute, AttributeType, Node

A = AttributeType


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


def attribute_value(attr: Attribute):
    """An attribute's value as kernels get it (see :class:`Context`).

    FLOAT -> float, INT -> int, STRING -> str (UTF-8, undecodable bytes kept with
    ``surrogateescape``), FLOATS -> list[float], INTS -> list[int], STRINGS -> list[str],
    TENSOR -> ndarray (zero-copy where the tensor allows; STRING elements as str),
    TENSORS -> list of ndarrays,
    GRAPH -> ir.Graph, GRAPHS -> list of ir.Graph, SPARSE_TENSOR -> dense ndarray,
    SPARSE_TENSORS -> list of dense ndarrays, TYPE_PROTO -> ir.Type, TYPE_PROTOS -> list of ir.Type.
    """
    t = attr.type or 0
    if t == A.FLOAT:
        return 0.0 if attr.f is None else float(attr.f)
    if t == A.INT:
        return 0 if attr.i is None else int(attr.i)
    if t == A.STRING:
        return (attr.s or b"").decode("utf-8", "surrogateescape")
    if t == A.FLOATS:
        return [] if attr.floats is None else np.asarray(attr.floats, np.float32).tolist()
    if t == A.INTS:
        return list(attr.ints)
    if t == A.STRINGS:
        return [s.decode("utf-8", "surrogateescape") for s in attr.strings]
    if t == A.TENSOR:
        return None if attr.t is None else tensor_value(attr.t)
    if t == A.TENSORS:
        return [tensor_value(x) for x in attr.tensors]
    if t == A.GRAPH:
        return attr.g
    if t == A.GRAPHS:
        return list(attr.graphs)
    if t == A.SPARSE_TENSOR:
        return None if attr.sparse_tensor is None else tensor_value(attr.sparse_tensor)
    if t == A.SPARSE_TENSORS:
        return [tensor_value(x) for x in attr.sparse_tensors]
    if t == A.TYPE_PROTO:
        return attr.tp
    if t == A.TYPE_PROTOS:
        return list(attr.type_protos)
    return attr.value


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

    def attr(self, name: str, default=None):
        """The value of attribute ``name``, or ``default`` when the node does not set it."""
        return self.attrs.get(name, default)

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
