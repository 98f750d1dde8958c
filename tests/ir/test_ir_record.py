"""onemodel.ir.record helpers shared by verify, the container's strict_v1 report and the codecs."""

from __future__ import annotations

import numpy as np
import pytest

from onemodel.ir.record import (ARRAY, BUFFER, BYTES, F32, INT, LIST_INT, LIST_MSG, STR,
                                is_empty)


@pytest.mark.parametrize("kind, value, empty", [
    (STR, None, True), (STR, "", True), (STR, "x", False), (INT, 0, True), (INT, -1, False),
    (BYTES, b"", True), (BYTES, b"\0", False), (F32, np.float32(0.0), True),
    (F32, np.float32(-0.0), False), (F32, np.float32(1.0), False), (LIST_INT, [], True),
    (LIST_INT, [0], False), (LIST_MSG, [], True), (ARRAY, np.zeros(0, "<f4"), True),
    (ARRAY, np.zeros(1, "<f4"), False), (BUFFER, memoryview(b""), True),
    (BUFFER, np.zeros(0, "<f4"), True), (BUFFER, np.zeros(2, "<f4"), False)])
def test_is_empty_is_absent_or_the_zero_value(kind, value, empty):
    assert is_empty(kind, value) is empty
