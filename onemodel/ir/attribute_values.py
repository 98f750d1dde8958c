"""Values of attributes and tensors as numpy holds them, for the evaluator's kernels and
inference's rules (ONNX Part 1, Clauses 6 and 8.2).

Initializers and tensor attributes are arrays of the tensors' bytes, zero-copy where the tensor
allows (:func:`tensor_value`); STRING elements are ``str``.
"""

from __future__ import annotations

from ..lazy import np
from .model import Attribute, decode_attribute


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
