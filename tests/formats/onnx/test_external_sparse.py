"""Gaps of a data file written by layout ``keep`` are holes: never allocated, never written.

A tensor at a large offset (a sparse data file, or a reference in a model built in memory)
costs the disk of its bytes, not of its offset (docs/external-data.md, "Gaps"). Allocated disk
is measured with ``st_blocks`` (512-byte units, POSIX); the tests skip where the file system of
the temporary directory does not make sparse files.
"""

from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest
from external_models import external_tensor, model_with, write_model

import onemodel
from onemodel.errors import UnsupportedError
from onemodel.formats.onnx import decode_model
from onemodel.ir import iter_tensors
from onemodel.storage import BytesSink, LocalSink

GiB = 1 << 30
PAYLOAD = np.arange(4, dtype=np.float32)  # 16 bytes
SMALL = 1 << 20  # "little disk": generous for metadata and a few blocks of a 16-byte tensor


def _allocated(path) -> int:
    return os.stat(path).st_blocks * 512


def _sparse_model(directory: pathlib.Path, offset: int) -> pathlib.Path:
    """A model whose one tensor is 16 bytes at ``offset`` of a sparse data file ``w.bin``."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "w.bin", "wb") as f:
        f.truncate(offset)
        f.seek(offset)
        f.write(PAYLOAD.tobytes())
    if _allocated(directory / "w.bin") > SMALL:
        pytest.skip("the temporary directory's file system does not make sparse files")
    t = external_tensor("w", [4], [("location", "w.bin"), ("offset", str(offset)),
                                   ("length", "16")])
    return write_model(model_with(t), directory / "m.onnx")


@pytest.mark.skipif(not hasattr(os.stat_result, "st_blocks"), reason="needs st_blocks")
def test_keep_of_a_tensor_at_4_gib_allocates_its_bytes_not_its_offset(tmp_path):
    src = _sparse_model(tmp_path / "in", 4 * GiB)
    out = tmp_path / "out" / "m.onnx"
    out.parent.mkdir()
    with onemodel.load(str(src)) as model:
        onemodel.save(model, str(out))  # layout keep
    data = out.parent / "w.bin"
    assert os.path.getsize(data) == 4 * GiB + 16  # the same file, byte for byte ...
    assert _allocated(data) <= SMALL  # ... with the gap as a hole (was 4 GiB allocated)
    with open(data, "rb") as f:
        f.seek(4 * GiB - 8)
        assert f.read() == bytes(8) + PAYLOAD.tobytes()
    with onemodel.load(str(out)) as again:
        assert np.array_equal(again.graph.initializers[0].numpy(), PAYLOAD)


def _in_memory(offset: int):
    """A model decoded from bytes whose tensor's reference says ``offset``, its 16 bytes set
    in memory (as a program that builds a model and then saves it)."""
    t = external_tensor("w", [4], [("location", "w.bin"), ("offset", str(offset)),
                                   ("length", "16")])
    model = decode_model(model_with(t).SerializeToString())
    for _, tensor in iter_tensors(model):
        if tensor.is_external:
            tensor.external = memoryview(PAYLOAD.tobytes())
    return model


@pytest.mark.skipif(not hasattr(os.stat_result, "st_blocks"), reason="needs st_blocks")
def test_save_of_an_in_memory_reference_at_2_30_writes_a_hole_not_a_gibibyte(tmp_path):
    out = tmp_path / "m.onnx"
    onemodel.save(_in_memory(GiB), str(out))
    data = tmp_path / "w.bin"
    probe = tmp_path / "probe"
    with open(probe, "wb") as f:  # is the file system able to make holes at all?
        f.truncate(GiB)
    if _allocated(probe) > SMALL:
        pytest.skip("the temporary directory's file system does not make sparse files")
    assert os.path.getsize(data) == GiB + 16
    assert _allocated(data) <= SMALL  # was a 1 GiB file of zeros
    with onemodel.load(str(out)) as again:
        assert np.array_equal(again.graph.initializers[0].numpy(), PAYLOAD)


def test_reserve_allocates_only_the_ranges_written(tmp_path):
    path = tmp_path / "d.bin"
    sink = LocalSink(str(path))
    sink.reserve(GiB + 16, [(0, 16), (GiB, GiB + 16)])
    sink.write(b"a" * 16)
    sink.skip(GiB - 16)
    sink.write(b"b" * 16)
    sink.commit()
    assert os.path.getsize(path) == GiB + 16
    if hasattr(os.stat_result, "st_blocks"):
        assert _allocated(path) <= SMALL
    with open(path, "rb") as f:
        assert f.read(16) == b"a" * 16
        f.seek(GiB - 4)
        assert f.read() == bytes(4) + b"b" * 16


def test_a_final_hole_still_gives_the_file_its_length(tmp_path):
    path = tmp_path / "d.bin"
    with LocalSink(str(path)) as sink:
        sink.write(b"x")
        sink.skip(1 << 20)
    assert os.path.getsize(path) == 1 + (1 << 20)
    assert path.read_bytes() == b"x" + bytes(1 << 20)


def test_small_gaps_are_written_as_zeros(tmp_path):
    path = tmp_path / "d.bin"
    with LocalSink(str(path)) as sink:
        sink.write(b"x")
        sink.skip(100)
        sink.write(b"y")
    assert path.read_bytes() == b"x" + bytes(100) + b"y"


def test_a_sink_that_cannot_leave_holes_refuses_a_large_gap_before_writing():
    sink = BytesSink()
    with pytest.raises(UnsupportedError, match="cannot leave holes") as e:
        sink.reserve(GiB + 16, [(0, 16), (GiB, GiB + 16)])
    assert "more than the limit of 67108864" in str(e.value)
    assert sink.tell() == 0
    with pytest.raises(UnsupportedError, match="gap of 1073741808 bytes at offset 16"):
        sink.write(b"a" * 16)
        sink.skip(GiB - 16)
    small = BytesSink()
    small.write(b"a")
    small.skip(1000)  # under the limit: written
    small.write(b"b")
    assert small.getvalue() == b"a" + bytes(1000) + b"b"


def test_keep_to_memory_url_with_a_gibibyte_gap_is_refused_and_leaves_nothing():
    import fsspec

    fs = fsspec.filesystem("memory")
    with pytest.raises(UnsupportedError, match="cannot leave holes"):
        onemodel.save(_in_memory(GiB), "memory://sparse/m.onnx")
    assert not fs.exists("/sparse/w.bin") and not fs.exists("/sparse/m.onnx")
    leftovers = fs.ls("/sparse", detail=False) if fs.exists("/sparse") else []
    assert leftovers == []
