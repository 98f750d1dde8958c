"""Tensors: ``Tensor``, ``SparseTensor`` and ``Segment`` (Annex B.2.16 to B.2.18, Clause 6.3.4).

A :class:`Tensor` keeps its contents in the storage it was given and never copies them by itself:

* **raw storage** (``raw_data``): the little-endian bytes, row-major, sub-byte types packed
  (Clause 6.3.4). When the model was read from a file, a byte source or a URL, ``raw_data`` is a
  storage Blob (the bytes' range of that source, see :func:`~onemodel.ir.record.buffer_view`):
  :meth:`Tensor.numpy` is a zero-copy view of the map or the bytes in memory, and a Blob of a
  remote source is fetched on first use (one range read, then kept); a value a user assigns
  (bytes, a memoryview, an array) is bytes in memory.
* **typed storage** (``float_data``, ``int32_data``, ``int64_data``, ``double_data``,
  ``uint64_data``, ``string_data``): numbers in the field of Table B.18 that fits the element type,
  narrow types as Table 7 states.
* **external** (``data_location == 1`` with ``external_data`` entries, Clause 13): the reference is
  kept as written; the resolved bytes are in :attr:`Tensor.external` once a reader resolved them
  (a Blob of the data file).

Bytes in a source are always a Blob, so a writer copies them from the source exactly when the
value is a Blob; a user who assigns new bytes replaces the Blob. Nothing else records where
bytes came from.

Elements narrower than a byte unpack only when :meth:`Tensor.numpy` is called.
"""

from __future__ import annotations

from math import prod

from ..errors import InvalidModelError, OneModelError, UnsupportedError, quote
from ..lazy import ml_dtypes, np
from ..limits import MAX_ELEMENT_COUNT
from .dtypes import (
    INFO,
    TYPED_FIELD_DTYPE,
    DataType,
    code_of_dtype,
    name_of,
    pack_bits,
    unpack_bits,
)
from .record import (
    ARRAY,
    BUFFER,
    INT,
    LIST_BYTES,
    LIST_INT,
    LIST_MSG,
    MSG,
    STR,
    Record,
    buffer_nbytes,
    buffer_view,
    is_blob,
)

EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL (Table B.20)
#: The numeric typed-storage fields of TensorProto (Table 7; ``string_data`` is the STRING one).
TYPED_FIELDS = ("float_data", "int32_data", "int64_data", "double_data", "uint64_data")
#: The fields of an external reference (Clause 13).
EXTERNAL_FIELDS = ("data_location", "external_data")
#: Every field that says where and how a tensor's contents are stored (rather than what they
#: are): raw, typed and string storage and the external reference.
STORAGE_FIELDS = ("raw_data",) + TYPED_FIELDS + ("string_data",) + EXTERNAL_FIELDS

_INT64_END = 1 << 63  # an element count at or past this does not fit a signed 64-bit integer


def dims_text(dims, most: int = 6) -> str:
    """``dims`` for a message: the list, or its first ``most`` entries and the count."""
    dims = list(dims[:most + 1])  # slicing first keeps a huge dims list from being copied
    if len(dims) <= most:
        return str(dims)
    return "[" + ", ".join(str(d) for d in dims[:most]) + ", ...]"


def _limit_text(limit: int) -> str:
    return f"2^{limit.bit_length() - 1}" if limit & (limit - 1) == 0 else str(limit)


def element_count(dims, path: str | None = None, limit: int = MAX_ELEMENT_COUNT) -> int:
    """The element count of a tensor of shape ``dims`` (ints): their product, 1 for ``[]``.

    One pass with the running product capped at 2^63, so the arithmetic stays small whatever
    ``dims`` holds (60 000 dims of 2^62 cost microseconds, not seconds). Raises
    InvalidModelError for a negative dimension (``path`` + ``[i]``) or a product of 2^63 or more
    (it overflows the int64 of Clause 6.3.4), UnsupportedError for a product of ``limit`` or more
    (default :data:`~onemodel.limits.MAX_ELEMENT_COUNT`, OneModel format 2.5 and 3.1). Messages
    quote at most the first few dims.
    """
    if len(dims) <= 16 and (not dims or min(dims) >= 0):  # the common case, one C call
        count = prod(dims)  # (16 dims below 2^64 each: at most 1024 bits)
        if count < limit and count < _INT64_END:
            return count
    count = 1
    for i, d in enumerate(dims):
        if d < 0:
            raise InvalidModelError(f"dimension {d} at index {i} of dims {dims_text(dims)} is "
                                    "negative", path=f"{path}[{i}]" if path else None)
        if count:
            count = min(count * d, _INT64_END)
    if count >= _INT64_END:
        raise InvalidModelError(f"dims {dims_text(dims)} give an element count that overflows "
                                "64 bits", path=path)
    if count >= limit:
        raise UnsupportedError(f"dims {dims_text(dims)} give {count} elements, "
                               f"{_limit_text(limit)} or more (the limit)", path=path)
    return count


class Segment(Record):
    """``TensorProto.Segment``: the element range ``[begin, end)`` a chunked tensor holds."""

    FIELDS = (("begin", INT, None), ("end", INT, None))


class Tensor(Record):
    """A dense tensor: element type, dims and contents (``TensorProto``, Annex B.2.16).

    Fields mirror ``TensorProto``; the ones most code needs are ``name``, ``dims`` (list of int,
    elements per axis), ``data_type`` (Table 5 tag) and the contents described in the module doc.
    Use :meth:`numpy` for the values and :meth:`raw_view` for the raw-storage bytes.
    """

    FIELDS = (
        ("dims", LIST_INT, None),
        ("data_type", INT, None),
        ("segment", MSG, "Segment"),
        ("float_data", ARRAY, "<f4"),
        ("int32_data", ARRAY, "<i4"),
        ("string_data", LIST_BYTES, None),
        ("int64_data", ARRAY, "<i8"),
        ("name", STR, None),
        ("doc_string", STR, None),
        ("raw_data", BUFFER, None),
        ("external_data", LIST_MSG, "StringStringEntry"),
        ("data_location", INT, None),
        ("double_data", ARRAY, "<f8"),
        ("uint64_data", ARRAY, "<u8"),
        ("metadata_props", LIST_MSG, "StringStringEntry"),
    )
    #: ``external``: the resolved bytes of an external tensor (a Blob of the data file, or a
    #: buffer a user assigned), set by the reader that resolved the reference; not part of the
    #: model.
    EXTRA = ("external",)

    # -- description ------------------------------------------------------------------------
    @property
    def dtype(self) -> DataType:
        """Element type as :class:`DataType` (UNDEFINED when ``data_type`` is absent)."""
        try:
            return DataType(self.data_type or 0)
        except ValueError:
            raise UnsupportedError(f"element type {self.data_type} is not in Table 5",
                                   path=self.name) from None

    @property
    def shape(self) -> tuple[int, ...]:
        """``tuple(dims)``."""
        return tuple(self.dims)

    @property
    def size(self) -> int:
        """Number of elements: the product of ``dims`` (1 for a scalar).

        Raises what :func:`element_count` raises (a negative dimension, 2^60 or more elements).
        """
        try:
            return element_count(self.dims)
        except OneModelError:  # again, for the message with the path (rare: not built each time)
            return element_count(self.dims, f"{self.name}.dims" if self.name else None)

    @property
    def nbytes(self) -> int:
        """Bytes of the contents in raw storage, ``ceil(size * bits / 8)``; 0 for STRING."""
        info = INFO.get(self.data_type or 0)
        return info.raw_nbytes(self.size) if info else 0

    @property
    def is_external(self) -> bool:
        """True when the contents are in an external file (``data_location == EXTERNAL``)."""
        return self.data_location == EXTERNAL

    @property
    def storage(self) -> str:
        """Where the contents are: ``raw``, ``typed``, ``strings``, ``external`` or ``none``."""
        if self.data_location == EXTERNAL:
            return "external"
        if self.raw_data is not None:
            return "raw"
        if self.string_data:
            return "strings"
        return "typed" if self.typed_fields() else "none"

    def typed_fields(self) -> list[str]:
        """The numeric typed-storage fields (:data:`TYPED_FIELDS`) that hold values (normally
        none or one; more is an error :func:`tensor_problem` reports)."""
        return [f for f in TYPED_FIELDS if (v := getattr(self, f)) is not None and len(v)]

    def typed_field(self) -> str | None:
        """Name of the typed-storage field holding the contents (the first of
        :meth:`typed_fields`, else ``string_data`` when it has strings), or ``None``."""
        fields = self.typed_fields()
        if fields:
            return fields[0]
        return "string_data" if self.string_data else None

    # -- contents ---------------------------------------------------------------------------
    def raw_view(self) -> memoryview:
        """The contents in raw storage layout (Clause 6.3.4), as a memoryview of ``nbytes`` bytes.

        Zero-copy for raw and external storage; typed storage is converted (a new buffer).
        Raises InvalidModelError for an unresolved external tensor or contents that do not
        match dims and element type, UnsupportedError for STRING (it has no raw layout).
        """
        if self.data_type == DataType.STRING:
            raise UnsupportedError("STRING tensors have no raw storage layout", path=self.name)
        if self.data_location == EXTERNAL:
            if self.external is None:
                raise InvalidModelError("external data of this tensor was not resolved "
                                        "(the model was read without a base directory)",
                                        path=self.name)
            return buffer_view(self.external)
        if self.raw_data is not None:
            return buffer_view(self.raw_data)
        field = self.typed_field()
        if field is None:
            if self.size == 0:
                return memoryview(b"")
            raise InvalidModelError(f"tensor of {self.size} elements has no contents",
                                    path=self.name)
        return memoryview(typed_to_raw(self.data_type, field, getattr(self, field), self.size))

    def numpy(self) -> np.ndarray:
        """The values as a read-only ndarray of shape ``dims``.

        dtype is the numpy or ml_dtypes type of the element type (``INFO[code].dtype``); STRING
        gives an object array of bytes. Raw and external storage of byte-aligned types give a
        zero-copy view of the bytes; sub-byte types unpack to one element per byte; typed
        storage converts. The array is never writable, so it cannot change the model behind its
        back: ``.copy()`` it to modify. Raises InvalidModelError when the contents do not match
        ``dims``, UnsupportedError for an element type outside Table 5 or UNDEFINED.
        """
        arr = self._values().view()
        arr.flags.writeable = False
        return arr

    def _values(self) -> np.ndarray:
        code = self.data_type or 0
        info = INFO.get(code)
        if info is None:
            raise UnsupportedError(f"element type {code} has no values", path=self.name)
        count = self.size
        if code == DataType.STRING:
            if len(self.string_data) != count:
                raise InvalidModelError(f"{len(self.string_data)} strings for {count} elements",
                                        path=self.name)
            arr = np.empty(count, dtype=object)
            arr[:] = list(self.string_data)
            return arr.reshape(self.dims)
        if self.data_location != EXTERNAL and self.raw_data is None:
            field = self.typed_field()
            if field is not None:
                return typed_to_array(code, field, getattr(self, field), count,
                                      self.name).reshape(self.dims)
        raw = self.raw_view()
        if len(raw) != info.raw_nbytes(count):
            raise InvalidModelError(f"{len(raw)} bytes of contents for {count} elements of "
                                    f"{info.name} ({info.raw_nbytes(count)} bytes)",
                                    path=self.name)
        if info.subbyte:
            return unpack_bits(raw, count, info.bits).view(info.dtype).reshape(self.dims)
        return np.frombuffer(raw, dtype=info.dtype.newbyteorder("<")).reshape(self.dims)

    def tobytes(self) -> bytes:
        """The contents in raw storage layout as a new ``bytes`` object (a copy)."""
        return bytes(self.raw_view())

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def from_numpy(cls, array: np.ndarray, name: str | None = None,
                   data_type: int | None = None, saturate: bool = True) -> "Tensor":
        """A tensor in raw storage holding ``array``'s values (object arrays: STRING).

        A C-contiguous little-endian array is referenced, not copied; sub-byte types are packed
        (a copy). ``data_type`` overrides the tag inferred from ``array.dtype``; values of
        another dtype are converted to it, to a float8 type as Cast converts them
        (:func:`to_float8`: ``saturate`` True, the default, clamps values beyond the range and
        +-Inf to +-FLT_MAX; False gives NaN, or +-Inf for FLOAT8E5M2). Raises
        UnsupportedError for a dtype with no ONNX element type.
        """
        array = np.asarray(array)
        if array.dtype == object or array.dtype.kind in "US":
            flat = [x if isinstance(x, bytes) else str(x).encode() for x in array.reshape(-1)]
            return cls(name=name, dims=list(array.shape), data_type=int(DataType.STRING),
                       string_data=flat)
        code = data_type if data_type is not None else code_of_dtype(array.dtype.newbyteorder("="))
        if code is None:
            raise UnsupportedError(f"numpy dtype {array.dtype} has no ONNX element type")
        info = INFO[code]
        if code in _FLOAT8 and array.dtype != info.dtype:
            array = to_float8(array, code, saturate)
        if info.subbyte:
            codes = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
            raw = pack_bits(codes, info.bits)
        else:
            arr = np.ascontiguousarray(array, dtype=info.dtype.newbyteorder("<"))
            raw = arr.reshape(-1).view(np.uint8)
        return cls(name=name, dims=list(array.shape), data_type=int(code), raw_data=raw)


class SparseTensor(Record):
    """A sparse tensor (``SparseTensorProto``, Annex B.2.18).

    ``values`` holds the non-default values (its ``name`` names the sparse tensor), ``indices``
    the INT64 positions, either ``[NNZ]`` linear or ``[NNZ, rank]`` coordinates, and ``dims`` the
    dense shape.
    """

    FIELDS = (("values", MSG, "Tensor"), ("indices", MSG, "Tensor"), ("dims", LIST_INT, None))

    @property
    def name(self) -> str | None:
        """The values tensor's name, which is the sparse tensor's."""
        return self.values.name if self.values is not None else None

    def to_dense(self) -> np.ndarray:
        """The dense ndarray of shape ``dims``: zeros (``b""`` for STRING) with ``values``
        placed at ``indices``; dtype as :meth:`Tensor.numpy` gives for the values.

        Checks first what :func:`sparse_problem` checks, index ranges included. Raises
        InvalidModelError naming the sparse tensor in the message (values not 1-D ``[NNZ]``,
        indices not INT64 ``[NNZ]`` or ``[NNZ, rank]``, an index outside ``dims``; no path, so
        a caller adds where the sparse tensor sits), UnsupportedError for a dense form of 2^60
        elements or more or one that does not fit in memory.
        """
        problem = sparse_problem(self, fetch=True)
        if problem is not None:
            cls, message, field = problem
            raise cls(f"sparse tensor {quote(self.name)}: {field}: {message}")
        vals = self.values.numpy().reshape(-1)
        count = element_count(self.dims)
        try:
            if self.values.data_type == DataType.STRING:
                dense = np.full(count, b"", dtype=object)
            else:
                dense = np.zeros(count, dtype=vals.dtype)
        except MemoryError:
            raise UnsupportedError(f"sparse tensor {quote(self.name)}: the dense form of {count} "
                                   "elements does not fit in memory") from None
        if vals.size:
            idx = self.indices.numpy()
            if idx.ndim == 2:
                idx = (np.ravel_multi_index(tuple(idx.T), self.dims) if self.dims
                       else np.zeros(len(idx), dtype=np.intp))
            dense[idx] = vals
        return dense.reshape(self.dims)


def _at_hand(t: Tensor) -> bool:
    """True when ``t``'s contents are in memory or mapped (not external, not a range of a remote
    file still to fetch: a Blob's ``at_hand``)."""
    raw = t.raw_data
    return t.data_location != EXTERNAL and (not is_blob(raw) or raw.at_hand)


def sparse_problem(st: SparseTensor, check_range: bool = True,
                   fetch: bool = False) -> tuple[type, str, str] | None:
    """``(error class, message, field)`` for the first problem of sparse tensor ``st``, or
    ``None``; ``field`` is ``values``, ``indices`` or ``dims``.

    The structure of Annex B.2.18: ``dims`` as :func:`element_count` wants them; ``values``
    present and 1-D ``[NNZ]``; ``indices`` INT64 of dims ``[NNZ]`` (linear positions) or
    ``[NNZ, rank]`` (one coordinate per dim), absent only when NNZ is 0. With ``check_range``
    the indices are also compared with ``dims`` (no negative index; linear < the element count,
    each coordinate < its dim) when their contents are at hand: bytes in memory, a Blob of a
    mapped file or typed values, not external data or a range of a remote file still to fetch,
    whose bytes are read only with ``fetch``.
    Checking the values and indices tensors themselves is :func:`tensor_problem`'s part.
    """
    values, indices = st.values, st.indices
    if values is None:
        return InvalidModelError, "a sparse tensor needs values", "values"
    try:
        count = element_count(st.dims)
    except OneModelError as e:
        return type(e), e.message, "dims"
    if len(values.dims) != 1 or values.dims[0] < 0:
        return InvalidModelError, (f"values of dims {dims_text(values.dims)}; a sparse tensor's "
                                   "values are 1-D [NNZ]"), "values"
    nnz = values.dims[0]
    if indices is None:
        if nnz:
            return InvalidModelError, f"{nnz} values and no indices", "indices"
        return None
    if indices.data_type != DataType.INT64:
        return InvalidModelError, (f"indices of element type {name_of(indices.data_type or 0)}; "
                                   "int64 expected"), "indices"
    rank = len(st.dims)
    idims = list(indices.dims[:3])
    if idims == [nnz]:
        linear = True
    elif idims == [nnz, rank]:
        linear = False
    else:
        return InvalidModelError, (f"indices of dims {dims_text(indices.dims)} for {nnz} values "
                                   f"of a rank-{rank} tensor: [{nnz}] (linear) or "
                                   f"[{nnz}, {rank}] (coordinates) expected"), "indices"
    if not check_range or nnz == 0 or not (fetch or _at_hand(indices)):
        return None
    if count == 0:
        return InvalidModelError, (f"{nnz} values in a tensor of dims {dims_text(st.dims)}, "
                                   "which has no elements"), "indices"
    try:
        idx = indices.numpy()
    except OneModelError as e:
        return type(e), e.message, "indices"
    bad = (idx < 0) | (idx >= (count if linear else np.asarray(st.dims, dtype=np.int64)))
    if not bad.any():
        return None
    if linear:
        i = int(np.argmax(bad))
        return InvalidModelError, (f"index {int(idx[i])} at position {i} is outside the {count} "
                                   f"elements of dims {dims_text(st.dims)}"), "indices"
    i, j = (int(x) for x in np.argwhere(bad)[0])
    return InvalidModelError, (f"coordinate {int(idx[i, j])} of index {i} is outside dim {j} "
                               f"({st.dims[j]}) of dims {dims_text(st.dims)}"), "indices"


def tensor_problem(t: "Tensor") -> tuple[type, str] | None:
    """``(error class, message)`` for the first problem of tensor ``t``, or ``None``.

    The content rules every reader applies to every tensor (Clause 6.2, 6.3.4, 13.1; Annex
    B.2.16): element type in Table 5 (UnsupportedError), dims as :func:`element_count` wants
    them, at most one storage form, none beside external data, and contents whose size matches
    dims and element type: ``raw_nbytes`` bytes of raw_data, the typed field of Table 7 with
    ``typed_count`` values, one string per element (InvalidModelError). A segment's or an
    external tensor's size is not checked here (the resolver checks external sizes). The caller
    raises the problem with its own field path.
    """
    dims = t.dims
    try:
        count = element_count(dims)
    except OneModelError as e:
        return type(e), e.message
    code = t.data_type or 0
    typed = t.typed_fields()
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
        n = buffer_nbytes(t.raw_data)
        want = info.raw_nbytes(count)
        if n != want:
            return InvalidModelError, (f"raw_data holds {n} bytes; dims {dims_text(dims)} of "
                                       f"{info.name} need {want}")
        return None
    if typed:
        field = typed[0]
        if field != info.typed_field:
            return InvalidModelError, (f"{info.name} contents in {field}; {info.typed_field} "
                                       "expected")
        have = len(getattr(t, field))
        want = info.typed_count(count)
        if have != want:
            return InvalidModelError, _count_message(have, field, count, info.name, want)
        return None
    if count:
        return InvalidModelError, f"tensor of {count} elements has no contents"
    return None


def _count_message(have: int, field: str, count: int, name: str, want: int) -> str:
    """A typed field holding the wrong number of values; the expected number of values is
    given only when it differs from the element count (packed and complex types)."""
    expected = f" ({want} expected)" if want != count else ""
    return f"{have} values in {field} for {count} elements of {name}{expected}"


# -- typed storage <-> values ----------------------------------------------------------------
def _typed_array(field: str, values) -> np.ndarray:
    return np.asarray(values, dtype=TYPED_FIELD_DTYPE[field])


def typed_to_array(code: int, field: str, values, count: int, where=None) -> np.ndarray:
    """Values of typed storage (Clause 6.3.4, Table 7) as a flat ndarray of the element dtype.

    Args:
        code: element type tag. field: the TensorProto field the values came from.
        values: the field's numbers. count: element count (the product of dims).
    Raises InvalidModelError when the field does not fit the element type or holds a wrong
    number of values.
    """
    info = INFO[code]
    if field != info.typed_field:
        raise InvalidModelError(f"{info.name} contents in {field}; {info.typed_field} expected",
                                path=where)
    v = _typed_array(field, values)
    need = info.typed_count(count)
    if v.size != need:
        raise InvalidModelError(_count_message(v.size, field, count, info.name, need),
                                path=where)
    if info.subbyte:
        if info.bits not in (2, 4):
            return (v.astype(np.uint8) & ((1 << info.bits) - 1)).view(info.dtype)
        return unpack_bits(v.astype(np.uint8), count, info.bits).view(info.dtype)
    if info.typed_per_element == 2:
        return v.view(info.dtype)
    if code in (DataType.FLOAT16, DataType.BFLOAT16):
        return v.astype(np.uint16).view(info.dtype)
    if info.bits == 8 and info.dtype.kind not in "iub":  # the float8 types
        return v.astype(np.uint8).view(info.dtype)
    if code == DataType.BOOL:
        return v != 0
    return v.astype(info.dtype, copy=False)


_FLOAT8 = (DataType.FLOAT8E4M3FN, DataType.FLOAT8E4M3FNUZ, DataType.FLOAT8E5M2,
           DataType.FLOAT8E5M2FNUZ)


def to_float8(x: np.ndarray, code: int, saturate: bool = True,
              fnuz_inf_nan: bool = False) -> np.ndarray:
    """``x`` (any real dtype) rounded to the float8 type ``code`` (FLOAT8E4M3FN, FLOAT8E4M3FNUZ,
    FLOAT8E5M2, FLOAT8E5M2FNUZ; Clause 6.3.2) by the tables of the Cast definition: round to
    nearest even; with ``saturate`` values beyond the largest finite value, and +-Inf, become
    +-FLT_MAX (Cast-24), except that ``fnuz_inf_nan`` (Cast-19 to Cast-23) maps +-Inf to NaN for
    the two FNUZ types; without ``saturate``, out of range is NaN (+-Inf for E5M2).
    Returns an ml_dtypes array of the same shape."""
    dt = INFO[code].dtype
    src = np.asarray(x)
    if src.dtype.kind not in "f" or src.dtype == np.float16:
        src = src.astype(np.float32)
    if saturate:
        hi = float(ml_dtypes.finfo(dt).max)
        fnuz = code in (DataType.FLOAT8E4M3FNUZ, DataType.FLOAT8E5M2FNUZ)
        inf = np.isinf(src) if fnuz_inf_nan and fnuz else None
        src = np.clip(src, -hi, hi)
        if inf is not None and inf.any():
            src = np.where(inf, np.nan, src).astype(src.dtype, copy=False)
    return narrow_float(src, dt)


def narrow_float(x: np.ndarray, dt) -> np.ndarray:
    """``x`` (a float array) as the narrow float type ``dt`` (bfloat16, the float8, float6 and
    float4 types of ml_dtypes), rounded once to nearest even (Clause 6.3.2). ml_dtypes converts
    a float64 through float32, which rounds twice: -431.99999999999994 became -448 in
    FLOAT8E4M3FN, not -416, and 1 + 2^-8 + 2^-40 became 1.0 in bfloat16, not 1.0078125. A
    float wider than float32 is therefore first rounded in float64 to ``dt``'s precision at
    its exponent (:func:`round_to_precision`); the float32 of that value is exact and its
    conversion by ml_dtypes rounds no more. Same shape; ``dt`` array."""
    if x.dtype.kind == "f" and x.dtype.itemsize > 4:
        info = ml_dtypes.finfo(dt)
        x = round_to_precision(x.astype(np.float64, copy=False), int(info.nmant),
                               int(info.minexp))
    return x.astype(dt)


def round_to_precision(v: np.ndarray, nmant: int, minexp: int) -> np.ndarray:
    """float64 ``v`` rounded to nearest, ties to even, to a binary format of ``nmant`` stored
    mantissa bits and smallest normal exponent ``minexp`` (unbounded above): the quantum at
    ``v`` is ``2^(max(e, minexp) - nmant)`` with ``e`` the exponent of ``v``'s leading bit
    (subnormals keep the quantum of ``minexp``). Scaling by powers of two is exact in float64,
    so the one rounding is ``rint``'s. +-0, +-Inf and NaN are kept; float64 result."""
    _, e = np.frexp(v)                         # v = m * 2^e, 0.5 <= |m| < 1
    q = np.maximum(e.astype(np.int64) - 1, minexp) - nmant
    return np.ldexp(np.rint(np.ldexp(v, -q)), q)


def typed_extra_bits(t) -> tuple[int, int] | None:
    """The first value of a narrow element type's typed storage (``int32_data`` of INT4, UINT4,
    INT2, UINT2, FLOAT4E2M1, FLOAT6E2M3, FLOAT6E3M2) with bits set outside those Table 7 gives
    its elements (bits 0 to 7 for the 2- and 4-bit types, 0 to 5 for the 6-bit ones), as
    ``(index, value)``; None when every value is canonical or the tensor has no such storage.

    Clause 6.3.4 says every other bit SHALL be zero; a reader takes the elements from their own
    bits only (:func:`typed_to_array`), so a value sign-extended from its octet (-15 for the
    octet 0xF1 holding the INT4 elements 1 and -1) or out of range reads as its low bits.
    """
    info = INFO.get(t.data_type or 0)
    if info is None or not info.subbyte or t.raw_data is not None or t.int32_data is None \
            or not len(t.int32_data) or t.data_location == EXTERNAL:
        return None
    v = _typed_array("int32_data", t.int32_data)
    mask = 0xFF if info.bits in (2, 4) else (1 << info.bits) - 1
    bad = np.flatnonzero(v.astype(np.int64) & ~mask)
    return (int(bad[0]), int(v[bad[0]])) if bad.size else None


def canonical_typed(t) -> np.ndarray | None:
    """The canonical ``int32_data`` (Clause 6.3.4, Table 7: only the elements' bits set) of a
    tensor :func:`typed_extra_bits` finds fault with, the same elements; None for any other."""
    if typed_extra_bits(t) is None:
        return None
    info = INFO[t.data_type]
    mask = 0xFF if info.bits in (2, 4) else (1 << info.bits) - 1
    return (_typed_array("int32_data", t.int32_data).astype(np.int64) & mask).astype(np.int32)


def typed_to_raw(code: int, field: str, values, count: int) -> np.ndarray:
    """Typed storage converted to raw storage bytes (uint8 array of ``raw_nbytes(count)``)."""
    info = INFO[code]
    if info.subbyte and info.bits in (2, 4):
        v = _typed_array(field, values)
        need = info.typed_count(count)
        if v.size != need:
            raise InvalidModelError(_count_message(v.size, field, count, info.name, need))
        return v.astype(np.uint8)
    arr = typed_to_array(code, field, values, count)
    if info.subbyte:
        return pack_bits(arr.view(np.uint8), info.bits)
    return np.ascontiguousarray(arr).reshape(-1).view(np.uint8)


def raw_to_typed(code: int, raw, count: int) -> tuple[str, np.ndarray]:
    """Raw storage bytes converted to typed storage: ``(field name, values)`` (Clause 6.3.4).

    The inverse of :func:`typed_to_raw` for values a producer writes (Table 7): narrow floats as
    the unsigned integer of their bits, 2- and 4-bit types one raw octet per int32, 6-bit types
    one element per int32. Raises UnsupportedError for STRING.
    """
    info = INFO[code]
    if code == DataType.STRING:
        raise UnsupportedError("STRING tensors have no raw storage layout")
    raw = np.frombuffer(raw, dtype=np.uint8)
    field = info.typed_field
    if info.subbyte:
        if info.bits in (2, 4):
            return field, raw.astype(np.int32)
        return field, unpack_bits(raw, count, info.bits).astype(np.int32)
    arr = raw.view(info.dtype.newbyteorder("<"))
    if info.typed_per_element == 2:
        return field, arr.view(TYPED_FIELD_DTYPE[field]).copy()
    if field == "int32_data":
        if code in (DataType.FLOAT16, DataType.BFLOAT16):
            return field, arr.view(np.uint16).astype(np.int32)
        if info.bits == 8 and info.dtype.kind not in "iu":
            return field, arr.view(np.uint8).astype(np.int32)
        return field, arr.astype(np.int32)
    return field, arr.astype(TYPED_FIELD_DTYPE[field])


__all__ = ["Tensor", "SparseTensor", "Segment", "EXTERNAL", "TYPED_FIELDS",
           "EXTERNAL_FIELDS", "STORAGE_FIELDS", "element_count",
           "dims_text", "tensor_problem", "sparse_problem", "typed_to_array", "typed_to_raw",
           "raw_to_typed", "typed_extra_bits", "canonical_typed"]
