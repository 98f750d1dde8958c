"""Content checks of every decoded TensorProto (Clause 6.2, 6.3.4, 13.1; Annex B.2.16).

Run by the reader on every tensor, wherever it sits, before the model is handed out: element
type in Table 5, dims non-negative, element count within :data:`~onemodel.limits.MAX_ELEMENT_COUNT`,
exactly one storage form, and contents whose size matches dims and element type.
"""

from __future__ import annotations

import os

from ...errors import InvalidModelError, OneModelError, UnsupportedError
from ...ir.dtypes import INFO, DataType
from ...ir.record import LazyBuffer
from ...ir.tensor import EXTERNAL, TYPED_FIELDS, dims_text, element_count
from .decode import _C
from .paths import proto_path

#: Bits per element of each Table 5 code (0: STRING or not in Table 5), for the C prefilter.
_BITS = bytes(INFO[c].bits if c in INFO and c != DataType.STRING else 0
              for c in range(max(INFO) + 1))


def tensor_problem(t) -> tuple[type, str] | None:
    """``(error class, message)`` for the first problem of tensor ``t``, or ``None``."""
    dims = t.dims
    try:
        count = element_count(dims)
    except OneModelError as e:
        return type(e), e.message
    code = t.data_type or 0
    typed = [f for f in TYPED_FIELDS if (v := getattr(t, f)) is not None and len(v)]
    forms = len(typed) + (t.raw_data is not None) + bool(t.string_data)
    external = t.data_location == EXTERNAL
    if external and forms:
        return InvalidModelError, "external tensor also carries contents in the file (Clause 13.1)"
    if code == 0:
        if forms or external:
            return InvalidModelError, "tensor has contents but no element type (data_type)"
        return None
    info = INFO.get(code)
    if info is None:
        return UnsupportedError, f"element type {code} is not in Table 5"
    if forms > 1:
        return InvalidModelError, "contents in more than one storage field (Clause 6.3.4)"
    if t.segment is not None or external:
        return None  # a segment holds part of the tensor; external sizes are checked on resolve
    if code == DataType.STRING:
        if t.raw_data is not None or typed:
            return InvalidModelError, "STRING tensor with contents outside string_data"
        if len(t.string_data) != count:
            return InvalidModelError, f"{len(t.string_data)} strings for {count} elements"
        return None
    if t.string_data:
        return InvalidModelError, f"{info.name} tensor with contents in string_data"
    if t.raw_data is not None:
        n = t.raw_data.nbytes if isinstance(t.raw_data, LazyBuffer) else len(t.raw_data)
        want = info.raw_nbytes(count)
        if n != want:
            return InvalidModelError, (f"raw_data holds {n} bytes; dims {dims_text(dims)} of "
                                       f"{info.name} need {want}")
        return None
    if typed:
        field = typed[0]
        if field != info.typed_field:
            return InvalidModelError, f"{info.name} contents in {field}; {info.typed_field} expected"
        have = len(getattr(t, field))
        if info.subbyte:
            per = 8 // info.bits if info.bits in (2, 4) else 1
            want = -(-count // per)
        else:
            want = count * info.typed_per_element
        if have != want:
            return InvalidModelError, f"{have} values in {field} for {count} elements of {info.name}"
        return None
    if count:
        return InvalidModelError, f"tensor of {count} elements has no contents"
    return None


def check_tensors(root, tensors, source: str | None = None) -> None:
    """Raise the first problem of any tensor in ``tensors`` (``(tensor, offset)`` pairs), with
    its proto path inside ``root`` and its offset.

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
        problem = tensor_problem(t)
        if problem is not None:
            cls, message = problem
            raise cls(message, path=proto_path(root, t), offset=offset, source=source)
        i += 1
