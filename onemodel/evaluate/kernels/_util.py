"""Helpers shared by kernel modules: axis attributes, computing narrow floats in float32, element
type attributes and scalar inputs.

Not a kernel family (it registers nothing); kernel modules import it.
"""

from __future__ import annotations

import numpy as np

from ...errors import EvaluationError, UnsupportedError
from ...ir.dtypes import INFO
from ...operators import axes


def axis_index(axis: int, rank: int, what: str = "axis") -> int:
    """The axis ``axis`` of a tensor of rank ``rank`` as an index in ``[0, rank)``; negative
    values count from the end (ONNX: accepted range ``[-rank, rank - 1]``).

    Raises InvalidModelError "``{what} {axis}`` is out of range for rank ``{rank}``" outside
    that range (always for rank 0): :func:`onemodel.operators.axes.axis_index`.
    """
    try:
        return axes.axis_index(axis, rank, what)
    except axes.AxisError as e:
        raise EvaluationError(str(e)) from None


def _keeps(dtype: np.dtype) -> bool:
    return dtype in (np.float32, np.float64) or dtype.kind in "iubc"


def wide(x: np.ndarray) -> tuple[np.ndarray, np.dtype]:
    """``(array to compute with, dtype of the result)``: float16, bfloat16 and the float8
    types are converted to float32; float32, float64, integers, bool and complex are kept."""
    if _keeps(x.dtype):
        return x, x.dtype
    return x.astype(np.float32), x.dtype


def wide_all(*xs: np.ndarray) -> tuple[tuple, np.dtype]:
    """:func:`wide` for operands of one element type (the first one's decides): the arrays to
    compute with, as a tuple, and the dtype of the result."""
    dt = xs[0].dtype
    if _keeps(dt):
        return xs, dt
    return tuple(x.astype(np.float32) for x in xs), dt


def back(y: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``y`` in ``dtype`` (the result of a computation in a :func:`wide` type); ``y`` itself
    when it already is."""
    return y if y.dtype == dtype else y.astype(dtype)


def dtype_of(code: int, default) -> np.dtype:
    """The numpy dtype of Table 5 element type ``code`` (a ``dtype`` or ``output_datatype``
    attribute's value); ``np.dtype(default)`` when ``code`` is 0 or None (unset). Raises
    UnsupportedError for a code Table 5 does not list."""
    if not code:
        return np.dtype(default)
    info = INFO.get(int(code))
    if info is None:
        raise UnsupportedError(f"element type {code} is not in Table 5")
    return info.dtype


def scalar_of(v, what: str, cast=float):
    """The one element of input ``v`` (a scalar or a one-element tensor) converted by ``cast``.
    Raises EvaluationError naming ``what`` when ``v`` has another number of elements."""
    arr = np.asarray(v)
    if arr.size != 1:
        raise EvaluationError(f"{what} must be a scalar, not shape {list(arr.shape)}")
    return cast(arr.reshape(-1)[0])
