"""LocalSink.copy_from from a mapped LocalSource: exact bytes whether the source offset and the
write position are page-congruent (copy_file_range) or not (write from the map, pages released)."""

from __future__ import annotations

import numpy as np
import pytest

from onemodel.storage import LocalSink, LocalSource
from onemodel.storage import local


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
def test_copy_from_a_mapped_file_is_exact(tmp_path, big, head, offset, monkeypatch):
    src, data = big
    calls = []
    real = local._write_from_map
    monkeypatch.setattr(local, "_write_from_map", lambda *a: calls.append(a) or real(*a))
    length = len(data) - offset - 50
    out = tmp_path / "out.bin"
    sink = LocalSink(str(out))
    sink.write(b"h" * head)
    sink.copy_from(src, offset, length)
    sink.write(b"tail")
    assert sink.tell() == head + length + 4
    sink.commit()
    assert out.read_bytes() == b"h" * head + data[offset:offset + length] + b"tail"
    assert bool(calls) == ((offset - head) % 4096 != 0)  # misaligned pages: from the map


def test_released_pages_still_read_back(tmp_path, big, monkeypatch):
    """Views of the map taken before a copy read the same bytes after the pages were released."""
    src, data = big
    monkeypatch.setattr(local, "COPY_WINDOW", 1 << 20)
    view = np.frombuffer(src.whole(), np.uint8)
    before = view[: 3 << 20].copy()
    sink = LocalSink(str(tmp_path / "out.bin"))
    sink.write(b"x" * 3)  # incongruent: the write-from-map path
    sink.copy_from(src, 0, 4 << 20)
    sink.commit()
    assert np.array_equal(view[: 3 << 20], before)
    assert (tmp_path / "out.bin").read_bytes()[3:] == data[: 4 << 20]
