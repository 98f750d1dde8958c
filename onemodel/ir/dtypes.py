"""The 28 element types of ONNX Part 1, Table 5: codes, bit widths, numpy dtypes and packing.

``DataType`` is the wire tag (``TensorProto.DataType``, Table B.19). For every fixed-size type
:data:`INFO` gives its width in bits, the numpy or ml_dtypes dtype that holds one element, and the
``TensorProto`` field that carries it in typed storage (Clause 6.3.4). Elements narrower than a byte
(INT4, UINT4, FLOAT4E2M1: 4 bits; INT2, UINT2: 2 bits; FLOAT6E2M3, FLOAT6E3M2: 6 bits) are packed in
raw storage as a bit stream, each element in the next free bits of the current octet counting from
the least significant bit; :func:`pack_bits` and :func:`unpack_bits` convert.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..lazy import ml_dtypes, np


class DataType(enum.IntEnum):
    """Element type tags of ONNX Part 1, Table 5."""

    UNDEFINED = 0
    FLOAT = 1
    UINT8 = 2
    INT8 = 3
    UINT16 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    STRING = 8
    BOOL = 9
    FLOAT16 = 10
    DOUBLE = 11
    UINT32 = 12
    UINT64 = 13
    COMPLEX64 = 14
    COMPLEX128 = 15
    BFLOAT16 = 16
    FLOAT8E4M3FN = 17
    FLOAT8E4M3FNUZ = 18
    FLOAT8E5M2 = 19
    FLOAT8E5M2FNUZ = 20
    UINT4 = 21
    INT4 = 22
    FLOAT4E2M1 = 23
    FLOAT8E8M0 = 24
    UINT2 = 25
    INT2 = 26
    FLOAT6E2M3 = 27
    FLOAT6E3M2 = 28


@dataclass(frozen=True)
class TypeInfo:
    """What one element type is made of.

    Attributes:
        code: the Table 5 tag.
        bits: width of one element in raw storage, in bits (0 for STRING).
        dtype_name: the numpy (``"float32"``) or ml_dtypes (``"ml_dtypes.bfloat16"``) type that
            holds one element once unpacked (``"object_"`` for STRING); :attr:`dtype` is its
            numpy dtype, resolved on first use (numpy is imported then, not before).
        typed_field: the ``TensorProto`` field of typed storage: ``float_data``, ``int32_data``,
            ``string_data``, ``int64_data``, ``double_data`` or ``uint64_data``.
        typed_per_element: typed values per element (2 for complex: real, imaginary).
    """

    code: int
    bits: int
    dtype_name: str
    typed_field: str
    typed_per_element: int = 1

    @property
    def dtype(self) -> "np.dtype":
        """The numpy dtype of one unpacked element (object for STRING)."""
        dt = _DTYPES.get(self.code)
        if dt is None:
            module, _, name = self.dtype_name.rpartition(".")
            dt = _DTYPES[self.code] = np.dtype(getattr(ml_dtypes if module else np, name))
        return dt

    @property
    def name(self) -> str:
        return DataType(self.code).name

    @property
    def subbyte(self) -> bool:
        """True for the 2-, 4- and 6-bit types, which raw storage packs several to an octet."""
        return 0 < self.bits < 8

    def raw_nbytes(self, count: int) -> int:
        """Bytes of ``count`` elements in raw storage: ``ceil(count * bits / 8)`` (Clause 6.3.4)."""
        return (count * self.bits + 7) // 8

    def typed_count(self, count: int) -> int:
        """Values of typed storage holding ``count`` elements (Clause 6.3.4, Table 7).

        2- and 4-bit types: one packed raw octet per value, ``ceil(count * bits / 8)``; 6-bit
        types: one element per value; complex: two values (real, imaginary) per element; the
        others one value per element.
        """
        if self.subbyte:
            return self.raw_nbytes(count) if self.bits in (2, 4) else count
        return count * self.typed_per_element


_DTYPES: dict = {}  # code -> numpy dtype, filled by TypeInfo.dtype


def _t(code, bits, dtype_name, field, per=1):
    return TypeInfo(int(code), bits, dtype_name, field, per)


D = DataType
#: Element type tag -> :class:`TypeInfo`, for every tag except UNDEFINED.
INFO: dict[int, TypeInfo] = {
    t.code: t
    for t in (
        _t(D.FLOAT, 32, "float32", "float_data"),
        _t(D.UINT8, 8, "uint8", "int32_data"),
        _t(D.INT8, 8, "int8", "int32_data"),
        _t(D.UINT16, 16, "uint16", "int32_data"),
        _t(D.INT16, 16, "int16", "int32_data"),
        _t(D.INT32, 32, "int32", "int32_data"),
        _t(D.INT64, 64, "int64", "int64_data"),
        _t(D.STRING, 0, "object_", "string_data"),
        _t(D.BOOL, 8, "bool_", "int32_data"),
        _t(D.FLOAT16, 16, "float16", "int32_data"),
        _t(D.DOUBLE, 64, "float64", "double_data"),
        _t(D.UINT32, 32, "uint32", "uint64_data"),
        _t(D.UINT64, 64, "uint64", "uint64_data"),
        _t(D.COMPLEX64, 64, "complex64", "float_data", 2),
        _t(D.COMPLEX128, 128, "complex128", "double_data", 2),
        _t(D.BFLOAT16, 16, "ml_dtypes.bfloat16", "int32_data"),
        _t(D.FLOAT8E4M3FN, 8, "ml_dtypes.float8_e4m3fn", "int32_data"),
        _t(D.FLOAT8E4M3FNUZ, 8, "ml_dtypes.float8_e4m3fnuz", "int32_data"),
        _t(D.FLOAT8E5M2, 8, "ml_dtypes.float8_e5m2", "int32_data"),
        _t(D.FLOAT8E5M2FNUZ, 8, "ml_dtypes.float8_e5m2fnuz", "int32_data"),
        _t(D.UINT4, 4, "ml_dtypes.uint4", "int32_data"),
        _t(D.INT4, 4, "ml_dtypes.int4", "int32_data"),
        _t(D.FLOAT4E2M1, 4, "ml_dtypes.float4_e2m1fn", "int32_data"),
        _t(D.FLOAT8E8M0, 8, "ml_dtypes.float8_e8m0fnu", "int32_data"),
        _t(D.UINT2, 2, "ml_dtypes.uint2", "int32_data"),
        _t(D.INT2, 2, "ml_dtypes.int2", "int32_data"),
        _t(D.FLOAT6E2M3, 6, "ml_dtypes.float6_e2m3fn", "int32_data"),
        _t(D.FLOAT6E3M2, 6, "ml_dtypes.float6_e3m2fn", "int32_data"),
    )
}

_FROM_NUMPY: dict = {}


def code_of_dtype(dtype) -> int | None:
    """The element type tag of a numpy dtype in native byte order (``None`` when ONNX has none),
    for :meth:`Tensor.from_numpy`."""
    if not _FROM_NUMPY:
        _FROM_NUMPY.update((t.dtype, t.code) for t in INFO.values() if t.code != D.STRING)
    return _FROM_NUMPY.get(dtype)


#: dtype (numpy spelling) of each typed-storage field of TensorProto (Annex B, Table B.18).
TYPED_FIELD_DTYPE: dict[str, str] = {
    "float_data": "<f4",
    "int32_data": "<i4",
    "int64_data": "<i8",
    "double_data": "<f8",
    "uint64_data": "<u8",
}


def info(code: int) -> TypeInfo:
    """The :class:`TypeInfo` of a tag; ``KeyError`` for UNDEFINED or a tag not in Table 5."""
    return INFO[code]


def name_of(code: int) -> str:
    """Lower-case name of a tag as ONNX prints types (``float``, ``int64``); ``dtype(99)`` else."""
    try:
        return DataType(code).name.lower()
    except ValueError:
        return f"dtype({code})"


def code_of_name(value) -> int | None:
    """The tag of an element type named by ``value`` (``"FLOAT"``, ``b"float"``: the STRING
    ``to`` attribute of Cast-1, before opset 6 made it the tag), or None when it names none."""
    name = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    try:
        return int(DataType[name.upper()])
    except KeyError:
        return None


def pack_bits(codes: np.ndarray, bits: int) -> np.ndarray:
    """Pack unsigned element codes of ``bits`` width (2, 4 or 6) into raw storage (Clause 6.3.4).

    Args:
        codes: 1-D array of integers below ``2**bits``, one per element, in element order.
        bits: element width in bits.
    Returns:
        uint8 array of ``ceil(len(codes) * bits / 8)`` octets; unused high bits of the last octet
        are zero.
    """
    codes = np.asarray(codes, dtype=np.uint8).reshape(-1) & ((1 << bits) - 1)
    n = codes.size
    if bits in (2, 4):
        per = 8 // bits
        padded = np.zeros(-(-n // per) * per, dtype=np.uint8)
        padded[:n] = codes
        groups = padded.reshape(-1, per)
        out = np.zeros(groups.shape[0], dtype=np.uint8)
        for j in range(per):
            out |= groups[:, j] << np.uint8(j * bits)
        return out
    # generic bit stream (6 bits): expand each element into its bits, LSB first, then repack
    bitplane = ((codes[:, None] >> np.arange(bits, dtype=np.uint8)) & 1).reshape(-1)
    nbytes = (n * bits + 7) // 8
    padded = np.zeros(nbytes * 8, dtype=np.uint8)
    padded[: bitplane.size] = bitplane
    return np.packbits(padded.reshape(-1, 8), axis=1, bitorder="little").reshape(-1)


def unpack_bits(packed, count: int, bits: int) -> np.ndarray:
    """Inverse of :func:`pack_bits`: ``count`` unsigned codes (uint8) from packed raw octets.

    Raises ``ValueError`` when ``packed`` holds fewer than ``ceil(count * bits / 8)`` octets.
    """
    raw = np.frombuffer(packed, dtype=np.uint8) if not isinstance(packed, np.ndarray) else packed
    need = (count * bits + 7) // 8
    if raw.size < need:
        raise ValueError(f"{raw.size} octets hold fewer than {count} elements of {bits} bits")
    raw = raw[:need]
    if bits in (2, 4):
        per = 8 // bits
        mask = np.uint8((1 << bits) - 1)
        out = np.empty((need, per), dtype=np.uint8)
        for j in range(per):
            out[:, j] = (raw >> np.uint8(j * bits)) & mask
        return out.reshape(-1)[:count]
    bitplane = np.unpackbits(raw, bitorder="little")[: count * bits].reshape(count, bits)
    weights = (1 << np.arange(bits, dtype=np.uint16)).astype(np.uint16)
    return (bitplane.astype(np.uint16) @ weights).astype(np.uint8)
