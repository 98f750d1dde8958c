"""LocalSink.copy_from from a mapped LocalSource gives exact bytes whatever the alignment of the
source offset and of the write position (page-congruent or not, before and after other writes)."""

from __future__ import annotations

import numpy as np
import pytest

from onemodel.storage import LocalSink, LocalSource


@pytest.fixture
def big(tmp_path):
    data = np.random.default_rng(5).integers(0, 256, (5 << 20) + 123, dtype=np.uint8).tobytes()
    path = tmp_path / "src.bin"
    path.write_bytes(data)
    src = LocalSource(str(path))
    assert src.mapped
    yield src, data
    src.close()


@pytest.mark.parametrize("head, offset", [
    (0, 0), (100, 100), (0, 4096 * 3), (1000, 0), (0, 777), (4095, 1), (5, 64),
], ids=lambda v: str(v))
def test_copy_from_a_mapped_file_is_exact(tmp_path, big, head, offset):
    src, data = big
    length = len(data) - offset - 50
    out = tmp_path / "out.bin"
    sink = LocalSink(str(out))
    sink.write(b"h" * head)
    sink.copy_from(src, offset, length)
    sink.write(b"tail")
    sink.copy_from(src, 3, 1 << 20)
    assert sink.tell() == head + length + 4 + (1 << 20)
    sink.commit()
    assert out.read_bytes() == (b"h" * head + data[offset:offset + length] + b"tail"
                                + data[3:3 + (1 << 20)])
