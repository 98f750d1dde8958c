"""onemodel.ir.record helpers shared by verify, the container's strict_v1 report and the codecs."""

from __future__ import annotations

import numpy as np
import pytest

from onemodel.ir.record import ARRAY, BUFFER, BYTES, F32, INT, LIST_INT, LIST_MSG, STR, is_empty


@pytest.mark.parametrize("kind, value, empty", [
    (STR, None, True), (STR, "", True), (STR, "x", False), (INT, 0, True), (INT, -1, False),
    (BYTES, b"", True), (BYTES, b"\0", False), (F32, np.float32(0.0), True),
    (F32, np.float32(-0.0), False), (F32, np.float32(1.0), False), (LIST_INT, [], True),
    (LIST_INT, [0], False), (LIST_MSG, [], True), (ARRAY, np.zeros(0, "<f4"), True),
    (ARRAY, np.zeros(1, "<f4"), False), (BUFFER, memoryview(b""), True),
    (BUFFER, np.zeros(0, "<f4"), True), (BUFFER, np.zeros(2, "<f4"), False)])
def test_is_empty_is_absent_or_the_zero_value(kind, value, empty):
    assert is_empty(kind, value) is empty


@pytest.mark.parametrize("n", [0, 5, 2047, 2048, 3 * (1 << 20) + 17])
def test_same_bytes_finds_a_single_differing_byte_anywhere(n):
    from onemodel.ir.record import same_bytes
    a = np.arange(n, dtype=np.uint64).astype(np.uint8)
    assert same_bytes(a.tobytes(), memoryview(a.copy()))
    for at in sorted({0, n // 2, n - 1}) if n else []:
        b = bytearray(a.tobytes())
        b[at] ^= 0x40
        assert not same_bytes(a, b)
    assert not same_bytes(a.tobytes(), a.tobytes() + b"\0")
    f = np.arange(n // 4 + 2, dtype="<f4")  # a non-byte array compares by its bytes
    assert same_bytes(f, f.tobytes()) and not same_bytes(f, f[::-1].copy())


def test_records_compare_large_arrays_and_buffers_bit_exactly():
    from onemodel.ir import Tensor
    nan = np.array([0x7FC00001], "<u4").view("<f4")
    big = np.ones(1 << 19, "<f4")
    a = Tensor(dims=[len(big) + 1], data_type=1, float_data=np.concatenate([big, nan]))
    b = a.copy()
    assert a == b
    b.float_data = np.concatenate([big, np.array([0x7FC00002], "<u4").view("<f4")])
    assert a != b  # another NaN payload
    c = Tensor(dims=[1 << 19], data_type=1, raw_data=big.view(np.uint8))
    d = Tensor(dims=[1 << 19], data_type=1, raw_data=bytes(big.view(np.uint8)))
    assert c == d
    d.raw_data = bytes(big.view(np.uint8))[:-1] + b"\x3e"
    assert c != d
