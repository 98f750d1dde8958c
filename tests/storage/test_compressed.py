"""Transparent .zst sources and sinks: round trips local and remote, and hostile streams."""

from __future__ import annotations

import io
import pathlib
import uuid

import fsspec
import numpy as np
import pytest
import zstandard

from onemodel.errors import MalformedError, UnsupportedError
from onemodel.storage import MemorySource, open_sink, open_source
from onemodel.storage.compressed import ZstdSink, decompress_source, is_zstd

MODELS = pathlib.Path(__file__).resolve().parents[2] / "testdata" / "models"


def _weights(n: int) -> bytes:
    rng = np.random.default_rng(1)
    return rng.standard_normal(n // 4).astype(np.float32).tobytes()


def test_local_round_trip_of_a_real_model(tmp_path):
    model = MODELS / "transformer_dynamo.onnx"
    if not model.exists():
        pytest.skip("testdata/models not generated")
    original = model.read_bytes()
    target = tmp_path / "model.onnx.zst"
    with open_sink(str(target)) as sink:
        sink.write(original[:1000])
        sink.write(original[1000:])
        assert sink.tell() == len(original)
    packed = target.read_bytes()
    assert is_zstd(packed) and len(packed) < len(original)
    assert zstandard.ZstdDecompressor().decompress(packed, max_output_size=len(original)) \
        == original
    src = open_source(str(target))
    assert src.size == len(original)
    assert bytes(src.whole()) == original
    assert src.name == str(target)


def test_remote_round_trip_over_memory():
    fs = fsspec.filesystem("memory")
    url = f"memory://z{uuid.uuid4().hex[:8]}/weights.onemodel.zst"
    data = _weights(3_000_000)
    with open_sink(url) as sink:
        for i in range(0, len(data), 1 << 20):
            sink.write(data[i:i + (1 << 20)])
    src = open_source(url)
    assert src.size == len(data)
    assert bytes(src.read(1_234_560, 1000)) == data[1_234_560:1_235_560]
    assert bytes(src.whole()) == data
    fs.rm(url[len("memory://"):])


def test_compression_can_be_forced_or_disabled(tmp_path):
    plain = tmp_path / "x.bin"
    with open_sink(str(plain), compression="zstd") as sink:
        sink.write(b"a" * 1000)
    assert is_zstd(plain.read_bytes())
    assert bytes(open_source(str(plain), compression="zstd").whole()) == b"a" * 1000
    raw = open_source(str(plain), compression=None)
    assert bytes(raw.whole()) == plain.read_bytes()


def test_large_output_is_memory_mapped(tmp_path):
    data = _weights(4 << 20)
    path = tmp_path / "big.bin.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(data))
    src = open_source(str(path))
    assert src.mapped and bytes(src.read(3 << 20, 64)) == data[3 << 20:(3 << 20) + 64]


def test_concatenated_and_skippable_frames():
    c = zstandard.ZstdCompressor()
    skippable = b"\x50\x2a\x4d\x18" + (3).to_bytes(4, "little") + b"xyz"
    stream = skippable + c.compress(b"first ") + c.compress(b"second")
    src = decompress_source(MemorySource(stream, name="m.zst"))
    assert bytes(src.whole()) == b"first second"


def test_frames_spanning_read_chunks(monkeypatch):
    from onemodel.storage import compressed
    monkeypatch.setattr(compressed, "READ_CHUNK", 1000)
    parts = [_weights(40_000), b"\x07" * 30_000, _weights(12_000)]
    stream = b"".join(zstandard.ZstdCompressor(level=1).compress(p) for p in parts)
    src = decompress_source(MemorySource(stream, name="m.zst"))
    assert bytes(src.whole()) == b"".join(parts)


def test_sink_abort_leaves_no_file(tmp_path):
    target = tmp_path / "m.onnx.zst"
    with pytest.raises(RuntimeError):
        with open_sink(str(target)) as sink:
            sink.write(b"partial")
            raise RuntimeError("stop")
    assert list(tmp_path.iterdir()) == []


def test_sink_wraps_any_sink():
    from onemodel.storage import BytesSink
    inner = BytesSink()
    with ZstdSink(inner, level=1) as sink:
        sink.write(b"hello " * 100)
    assert zstandard.ZstdDecompressor().decompress(inner.getvalue(), max_output_size=600) \
        == b"hello " * 100


# -- hostile streams -----------------------------------------------------------------------

def test_bomb_with_declared_size_is_refused_before_decompressing():
    bomb = zstandard.ZstdCompressor(level=19).compress(bytes(50_000_000))
    assert len(bomb) < 10_000
    with pytest.raises(UnsupportedError) as e:
        decompress_source(MemorySource(bomb, name="bomb.zst"), limit=10_000_000)
    assert "exceeds" in e.value.message and "declares 50000000" in e.value.message


def test_bomb_without_declared_size_is_refused_while_streaming():
    cobj = zstandard.ZstdCompressor(level=19).compressobj()
    bomb = b"".join(cobj.compress(bytes(1 << 20)) for _ in range(200)) + cobj.flush()
    assert zstandard.frame_content_size(bomb) == -1
    with pytest.raises(UnsupportedError) as e:
        decompress_source(MemorySource(bomb, name="bomb.zst"), limit=20 << 20)
    assert "exceeds the limit" in e.value.message and e.value.source == "bomb.zst"


def test_bomb_under_the_default_limit_through_open_source(tmp_path):
    path = tmp_path / "bomb.onnx.zst"
    path.write_bytes(zstandard.ZstdCompressor(level=19).compress(bytes(30_000_000)))
    with pytest.raises(UnsupportedError):
        open_source(str(path), max_decompressed=1 << 20)


def test_corrupt_data_is_malformed():
    good = zstandard.ZstdCompressor(write_checksum=True).compress(_weights(200_000))
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0xFF
    with pytest.raises(MalformedError):
        decompress_source(MemorySource(bytes(bad), name="bad.zst"))


def test_checksum_mismatch_is_malformed():
    good = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(b"abc" * 1000))
    good[-1] ^= 0xFF  # the content checksum is the last four bytes
    with pytest.raises(MalformedError):
        decompress_source(MemorySource(bytes(good), name="bad.zst"))


@pytest.mark.parametrize("cut", [5, 100, 1])
def test_truncated_stream_is_malformed(cut):
    good = zstandard.ZstdCompressor().compress(_weights(100_000))
    with pytest.raises(MalformedError) as e:
        decompress_source(MemorySource(good[:-cut], name="t.zst"))
    assert e.value.kind == "Malformed"


def test_bad_magic_and_trailing_garbage_are_malformed():
    with pytest.raises(MalformedError):
        decompress_source(MemorySource(b"PK\x03\x04 not zstd", name="x.zst"))
    with pytest.raises(MalformedError):
        decompress_source(MemorySource(b"", name="x.zst"))
    good = zstandard.ZstdCompressor().compress(b"data")
    with pytest.raises(MalformedError):
        decompress_source(MemorySource(good + b"\x00\x00\x00\x00junk", name="x.zst"))


def test_decompressed_source_name_and_progress():
    stream = zstandard.ZstdCompressor().compress(b"q" * 10_000)
    seen = []
    src = decompress_source(MemorySource(stream, name="s3://b/m.onnx.zst"),
                            progress=seen.append)
    assert src.name == "s3://b/m.onnx.zst" and sum(seen) == len(stream)
    assert bytes(src.whole()) == b"q" * 10_000
    with pytest.raises(MalformedError) as e:
        src.read(9_999, 2)
    assert "s3://b/m.onnx.zst" in str(e.value)


def test_stream_reader_compatibility():
    # bytes written by our sink decompress with the reference streaming reader too
    from onemodel.storage import BytesSink
    inner = BytesSink()
    with ZstdSink(inner) as sink:
        sink.write(_weights(1 << 20))
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(inner.getvalue()))
    assert reader.read() == _weights(1 << 20)
