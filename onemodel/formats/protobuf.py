"""The wire encoding of ONNX Part 1, Clause 12: varints, field keys, packed runs, skipping.

Only what Clause 12 states: wire types 0 (varint), 1 (64-bit), 2 (length-delimited) and 5
(32-bit). Wire types 3 and 4 are rejected (12.2.1); a varint longer than ten octets, or of ten
octets whose tenth is above 1 (a value of 2^64 or more, which no varint encodes), is rejected
(12.2.2); a length that runs past the end of its enclosing message is rejected (12.2.5). A field
key's tag is at most :data:`MAX_TAG` (2^29 - 1, so a key fits 32 bits); the message decoder
rejects a larger one.

Errors raised here are :class:`WireError`; the message decoder turns them into
:class:`~onemodel.errors.MalformedError` with the field path.
"""

from __future__ import annotations

from ..lazy import np

VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5
U64 = (1 << 64) - 1
#: The range of each integer scalar type of Clause 12.2 (``int32`` also holds enumerations).
INT64_RANGE = (-(1 << 63), (1 << 63) - 1)
INT32_RANGE = (-(1 << 31), (1 << 31) - 1)
UINT64_RANGE = (0, U64)
#: The largest field tag (2^29 - 1): a field key ``tag * 8 + wire`` then fits 32 bits.
MAX_TAG = (1 << 29) - 1


class WireError(Exception):
    """A violation of Clause 12 at byte ``offset``; ``segments`` collects the field path."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.message = message
        self.offset = offset
        self.segments: list[str] = []


def read_varint(buf, pos: int, end: int) -> tuple[int, int]:
    """Decode the varint at ``pos`` (Clause 12.2.2): ``(value, next position)``.

    ``value`` is in ``[0, 2**64)``. Raises WireError (at the varint's first octet) when the
    varint is longer than ten octets, encodes 2**64 or more (a tenth octet above 1), or runs past
    ``end``.
    """
    if pos >= end:
        raise WireError("varint runs past the end of its message", pos)
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    start = pos
    result = b & 0x7F
    shift = 7
    pos += 1
    while True:
        if pos >= end:
            raise WireError("varint runs past the end of its message", start)
        b = buf[pos]
        pos += 1
        if shift == 63 and b > 1:
            raise WireError(_too_wide(b), start)
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _too_wide(tenth: int) -> str:
    """The message for a varint whose tenth octet is ``tenth`` (above 1)."""
    if tenth >= 0x80:
        return "varint longer than 10 octets"
    return (f"varint encodes 2^64 or more (tenth octet 0x{tenth:02X}; at most 2^64 - 1, "
            "Clause 12.2.2)")


def check_tag(tag: int, offset: int) -> None:
    """Raise WireError when ``tag`` (a key's ``key >> 3``) is 0 or above :data:`MAX_TAG`."""
    if tag == 0:
        raise WireError("field tag 0 is not allowed (Clause 12.3.1)", offset)
    if tag > MAX_TAG:
        raise WireError(f"field tag {tag} is above 536870911 (2^29 - 1), the largest tag",
                        offset)


def encode_varint(value: int) -> bytes:
    """The varint octets of ``value`` (Clause 12.2.2); a negative value is taken as its 64-bit
    two's complement, so it takes ten octets (Clause 12.2.3).

    Raises OverflowError for a value below -2^63 or of 2^64 or more: no varint holds it, and
    masking it to 64 bits would write another number. (The message encoder checks each value
    against its own field's range first, :func:`out_of_range`.)"""
    if 0 <= value < 0x80:
        return _SMALL[value]
    if not -(1 << 63) <= value <= U64:
        raise OverflowError(f"{value} does not fit a varint (-2^63 to 2^64 - 1)")
    value &= U64
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL = [bytes((i,)) for i in range(0x80)]


def out_of_range(values, lo: int, hi: int):
    """The first of ``values`` (an int, a list of ints or an integer ndarray) outside ``[lo,
    hi]``, or None when every one is inside. An array's dtype decides without a scan when it
    cannot hold anything outside (int32 values for an int64 field). Lists and ints never
    import numpy."""
    if isinstance(values, (list, tuple)):
        for v in values:
            if not lo <= int(v) <= hi:
                return v
        return None
    if isinstance(values, int) or not isinstance(values, np.ndarray):
        return None if lo <= int(values) <= hi else values
    if values.size == 0:
        return None
    if values.dtype.kind not in "iub":
        return out_of_range(values.reshape(-1).tolist(), lo, hi)
    if values.dtype.kind == "b":
        return None
    info = np.iinfo(values.dtype)
    if info.min >= lo and info.max <= hi:
        return None
    flat = values.reshape(-1)
    bad = (flat < lo) if lo > info.min else np.zeros(flat.shape, dtype=bool)
    if hi < info.max:
        bad |= flat > hi
    return int(flat[int(np.argmax(bad))]) if bad.any() else None


def skip_field(buf, pos: int, end: int, wire: int) -> int:
    """The position after the value of a field of wire type ``wire`` at ``pos`` (Clause 12.4).

    Raises WireError for wire types 3, 4, 6, 7 or a value that runs past ``end``.
    """
    if wire == VARINT:
        return read_varint(buf, pos, end)[1]
    if wire == LEN:
        n, p = read_varint(buf, pos, end)
        if n > end - p:
            raise WireError(f"length {n} runs past the end of its message", pos)
        return p + n
    if wire == I64:
        if pos + 8 > end:
            raise WireError("64-bit value runs past the end of its message", pos)
        return pos + 8
    if wire == I32:
        if pos + 4 > end:
            raise WireError("32-bit value runs past the end of its message", pos)
        return pos + 4
    if wire in (SGROUP, EGROUP):
        raise WireError(f"wire type {wire} (group) is not allowed (Clause 12.2.1)", pos)
    raise WireError(f"invalid wire type {wire}", pos)


def decode_packed_varints(buf, pos: int, end: int) -> np.ndarray:
    """All varints of a packed run ``buf[pos:end]`` as a uint64 array (vectorized).

    Raises WireError when a varint is longer than ten octets, encodes 2**64 or more, or the run
    ends inside one.
    """
    if pos == end:
        return np.zeros(0, dtype=np.uint64)
    b = np.frombuffer(buf[pos:end], dtype=np.uint8)
    last = np.flatnonzero(b < 0x80)
    if last.size == 0 or last[-1] != b.size - 1:
        raise WireError("packed run ends inside a varint", pos)
    first = np.empty_like(last)
    first[0] = 0
    first[1:] = last[:-1] + 1
    lengths = last - first + 1
    longest = int(lengths.max())
    if longest >= 10:  # a tenth octet above 1: longer than 10 octets or 2^64 or more
        wide = (lengths > 10) | ((lengths == 10) & (b[last] > 1))
        if wide.any():
            bad = int(np.argmax(wide))
            raise WireError(_too_wide(int(b[first[bad] + 9])), pos + int(first[bad]))
    if longest == 1:
        return b.astype(np.uint64)
    out = (b[first] & 0x7F).astype(np.uint64)
    for k in range(1, longest):
        sel = np.flatnonzero(lengths > k)
        out[sel] |= (b[first[sel] + k] & 0x7F).astype(np.uint64) << np.uint64(7 * k)
    return out


def encode_packed_varints(values: np.ndarray) -> bytes:
    """Varint octets of every value, concatenated (a packed run's payload), vectorized.

    ``values`` are taken as uint64 (negative int64 as two's complement: ten octets each).
    """
    v = np.asarray(values)
    if v.size == 0:
        return b""
    v = v.astype(np.int64, copy=False).view(np.uint64) if v.dtype.kind == "i" else v.astype(
        np.uint64, copy=False)
    if int(v.max()) < 0x80:
        return v.astype(np.uint8).tobytes()
    # number of octets per value: 1 + floor(log128(v))
    nbytes = np.ones(v.size, dtype=np.int64)
    t = v >> np.uint64(7)
    while True:
        more = t > 0
        if not more.any():
            break
        nbytes += more
        t = t >> np.uint64(7)
    offsets = np.zeros(v.size + 1, dtype=np.int64)
    np.cumsum(nbytes, out=offsets[1:])
    out = np.zeros(int(offsets[-1]), dtype=np.uint8)
    rem = v.copy()
    for k in range(int(nbytes.max())):
        sel = np.flatnonzero(nbytes > k)
        cont = (nbytes[sel] > k + 1).astype(np.uint8) << 7
        out[offsets[sel] + k] = (rem[sel] & np.uint64(0x7F)).astype(np.uint8) | cont
        rem[sel] >>= np.uint64(7)
    return out.tobytes()


def key(tag: int, wire: int) -> bytes:
    """The field key octets of ``tag`` and ``wire`` (Clause 12.3.1)."""
    return encode_varint((tag << 3) | wire)
