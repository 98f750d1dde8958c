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
    src = open_source(url, sniff=None)  # bytes that are no model
    assert src.size == len(data)
    assert bytes(src.read(1_234_560, 1000)) == data[1_234_560:1_235_560]
    assert bytes(src.whole()) == data
    fs.rm(url[len("memory://"):])


def test_compression_can_be_forced_or_disabled(tmp_path):
    plain = tmp_path / "x.bin"
    with open_sink(str(plain), compression="zstd") as sink:
        sink.write(b"a" * 1000)
    assert is_zstd(plain.read_bytes())
    assert bytes(open_source(str(plain), compression="zstd", sniff=None).whole()) == b"a" * 1000
    raw = open_source(str(plain), compression=None)
    assert bytes(raw.whole()) == plain.read_bytes()


def test_large_output_is_memory_mapped(tmp_path):
    data = _weights(4 << 20)
    path = tmp_path / "big.bin.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(data))
    src = open_source(str(path), sniff=None)
    assert src.mapped and bytes(src.read(3 << 20, 64)) == data[3 << 20:(3 << 20) + 64]


def test_concatenated_and_skippable_frames():
    c = zstandard.ZstdCompressor()
    skippable = b"\x50\x2a\x4d\x18" + (3).to_bytes(4, "little") + b"xyz"
    stream = skippable + c.compress(b"first ") + c.compress(b"second")
    src = decompress_source(MemorySource(stream, name="m.zst"), sniff=None)
    assert bytes(src.whole()) == b"first second"


def test_frames_spanning_read_chunks(monkeypatch):
    from onemodel.storage import compressed
    monkeypatch.setattr(compressed, "READ_CHUNK", 1000)
    parts = [_weights(40_000), b"\x07" * 30_000, _weights(12_000)]
    stream = b"".join(zstandard.ZstdCompressor(level=1).compress(p) for p in parts)
    src = decompress_source(MemorySource(stream, name="m.zst"), sniff=None)
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
        decompress_source(MemorySource(bomb, name="bomb.zst"), limit=20 << 20, sniff=None,
                          max_ratio=1e9)
    assert "exceeds the limit" in e.value.message and e.value.source == "bomb.zst"


def test_bomb_under_the_default_limit_through_open_source(tmp_path):
    path = tmp_path / "bomb.onnx.zst"
    path.write_bytes(zstandard.ZstdCompressor(level=19).compress(bytes(30_000_000)))
    with pytest.raises(UnsupportedError):
        open_source(str(path), max_decompressed=1 << 20)


# -- sniffing the first bytes and the compression ratio ------------------------------------

def _counting_writes(monkeypatch) -> list:
    """Record the size of every write to the temporary file of a decompression."""
    from onemodel.storage import compressed
    sizes: list = []
    real = compressed._write

    def counting(out, data, name):
        sizes.append(len(data))
        return real(out, data, name)
    monkeypatch.setattr(compressed, "_write", counting)
    return sizes


def _streamed(parts) -> bytes:
    """One zstd frame of ``parts`` written in pieces, so it declares no content size."""
    cobj = zstandard.ZstdCompressor(level=1).compressobj()
    out = b"".join(cobj.compress(p) for p in parts) + cobj.flush()
    assert zstandard.frame_content_size(out) == -1
    return out


def test_zeros_without_declared_size_are_refused_before_any_spill(tmp_path, monkeypatch):
    # 3 GiB of zeros in about 100 KiB: refused by its first bytes (field 0 is no key)
    bomb = _streamed([bytes(1 << 20)] * 3072)
    assert len(bomb) < 200_000
    path = tmp_path / "bomb.onnx.zst"
    path.write_bytes(bomb)
    spilled = _counting_writes(monkeypatch)
    with pytest.raises(UnsupportedError) as e:
        open_source(str(path))
    assert "do not start like a model" in e.value.message
    assert "00 00 00 00" in e.value.message and e.value.offset == 0
    assert spilled == []  # nothing reached the temporary file


def test_a_bomb_that_starts_like_a_model_is_refused_by_the_ratio(tmp_path, monkeypatch):
    # a plausible ModelProto key (ir_version = 7), then 3 GiB of zeros
    bomb = _streamed([b"\x08\x07"] + [bytes(1 << 20)] * 3072)
    path = tmp_path / "bomb.onnx.zst"
    path.write_bytes(bomb)
    spilled = _counting_writes(monkeypatch)
    with pytest.raises(UnsupportedError) as e:
        open_source(str(path))
    assert "compression ratio limit of 1000:1" in e.value.message
    assert "zstd -d FILE" in e.value.message  # a way out for the command line too
    assert "max_ratio=" in e.value.message
    assert f"the {len(bomb)}-byte file decompresses to more than {1000 * len(bomb)}" \
        in e.value.message
    # at most 1000 times the file's size (about 100 MB) reached the disk, not 3 GiB
    assert sum(spilled) <= 1000 * len(bomb)


def test_a_highly_compressible_model_loads_when_the_ratio_is_raised(tmp_path):
    from onnx import TensorProto, helper, numpy_helper

    import onemodel

    zeros = numpy_helper.from_array(np.zeros((64, 1 << 16), np.float32), "w")  # 16 MiB
    graph = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[zeros])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    cobj = zstandard.ZstdCompressor(level=19).compressobj()
    raw = model.SerializeToString()
    packed = b"".join(cobj.compress(raw[i:i + (1 << 20)])
                      for i in range(0, len(raw), 1 << 20)) + cobj.flush()
    assert len(raw) > (16 << 20) and len(raw) > 1000 * len(packed)  # past the default ratio
    path = tmp_path / "zeros.onnx.zst"
    path.write_bytes(packed)
    with pytest.raises(UnsupportedError, match="compression ratio"):
        onemodel.load(str(path))
    with onemodel.load(open_source(str(path), max_ratio=1e6)) as m:
        w = m.graph.initializers[0].numpy()
        assert w.shape == (64, 1 << 16) and not w.any()


def test_a_declared_size_past_the_ratio_is_refused_before_decompressing(monkeypatch):
    bomb = zstandard.ZstdCompressor(level=19).compress(b"\x08\x07" + bytes(50_000_000))
    assert zstandard.frame_content_size(bomb) == 50_000_002 and len(bomb) < 10_000
    spilled = _counting_writes(monkeypatch)
    with pytest.raises(UnsupportedError) as e:
        decompress_source(MemorySource(bomb, name="bomb.onnx.zst"))
    assert "the frame declares 50000002 bytes, past the compression ratio limit" \
        in e.value.message
    assert spilled == []
    src = decompress_source(MemorySource(bomb, name="bomb.onnx.zst"), max_ratio=1e5)
    assert src.size == 50_000_002


def test_the_ratio_is_of_the_whole_file_not_of_the_bytes_read_so_far(tmp_path):
    # 24 MiB of zeros (a zero-initialized tensor) then 256 KiB of random bytes: the first
    # 24 MiB come from a few KiB, but the whole file is over 256 KiB, a sane ratio of about 97
    rng = np.random.default_rng(3)
    data = b"\x08\x07" + bytes(24 << 20) + rng.bytes(256 << 10)
    path = tmp_path / "m.onnx.zst"
    path.write_bytes(_streamed([data[i:i + (1 << 20)] for i in range(0, len(data), 1 << 20)]))
    with open_source(str(path)) as src:
        assert src.size == len(data) and bytes(src.read(len(data) - 10, 10)) == data[-10:]


def test_a_onemodel_file_passes_the_sniff(tmp_path):
    from onemodel.storage.compressed import looks_like_model
    assert looks_like_model(b"ONEMODEL" + bytes(8))
    assert looks_like_model(b"\x08\x07\x12\x04")      # ir_version, then producer_name
    assert looks_like_model(b"\x3a\x80\x01")           # graph first (field 7, length)
    assert looks_like_model(b"\xa2\x01\x00")           # training_info (field 20): a 2-byte key
    assert not looks_like_model(bytes(16))              # field 0
    assert not looks_like_model(b"\x0a\x00")            # field 1 with wire type 2: not ir_version
    assert not looks_like_model(b"qqqq")                # field 14 with wire type 1


def test_corrupt_data_is_malformed():
    good = zstandard.ZstdCompressor(write_checksum=True).compress(_weights(200_000))
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0xFF
    with pytest.raises(MalformedError):
        decompress_source(MemorySource(bytes(bad), name="bad.zst"), sniff=None)


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
                            progress=seen.append, sniff=None)
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
