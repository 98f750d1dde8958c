"""Content checks of every decoded TensorProto (Clause 6.2, 6.3.4, 13.1; Annex B.2.16).

Run by the reader on every tensor, wherever it sits, before the model is handed out: the rules
of :func:`onemodel.ir.tensor.tensor_problem` (element type in Table 5, dims non-negative, element
count within :data:`~onemodel.limits.MAX_ELEMENT_COUNT`, exactly one storage form, contents whose
size matches dims and element type), with a C prefilter that passes over plainly valid tensors.
"""

from __future__ import annotations

import os

from ...ir.dtypes import INFO, DataType
from ...ir.tensor import SparseTensor, sparse_problem, tensor_problem
from .paths import proto_path
from .wire_decode import _C

#: Bits per element of each Table 5 code (0: STRING or not in Table 5), for the C prefilter.
_BITS = bytes(INFO[c].bits if c in INFO and c != DataType.STRING else 0
              for c in range(max(INFO) + 1))


def check_tensors(root, tensors, source: str | None = None, *,
                  errors: list | None = None) -> None:
    """Raise the first problem of any tensor in ``tensors`` (``(tensor, offset)`` pairs; sparse
    tensors are checked by :func:`~onemodel.ir.tensor.sparse_problem`, index ranges included
    when the indices are at hand), with its proto path inside ``root`` and its offset.

    With ``errors`` (a list) nothing is raised: the error of every tensor with a problem is
    appended to it, in the order of ``tensors`` (``onemodel check``).

    With the C decoder built, ``_cdecode.first_unchecked`` passes over the tensors that are
    plainly valid (raw_data of the right size, nothing else) and :func:`tensor_problem` looks at
    the rest; the outcome is the same as running it on every tensor."""
    fast = _C is not None and os.environ.get("ONEMODEL_PURE_PYTHON") != "1"
    i, n = 0, len(tensors)
    while i < n:
        if fast:
            i = _C.first_unchecked(tensors, i, _BITS)
            if i >= n:
                break
        t, offset = tensors[i]
        if type(t) is SparseTensor:
            problem = sparse_problem(t)
            if problem is not None:
                cls, message, field = problem
                e = cls(message, path=f"{proto_path(root, t)}.{field}", offset=offset,
                        source=source)
                if errors is None:
                    raise e
                errors.append(e)
        else:
            problem = tensor_problem(t)
            if problem is not None:
                cls, message = problem
                e = cls(message, path=proto_path(root, t), offset=offset, source=source)
                if errors is None:
                    raise e
                errors.append(e)
        i += 1
