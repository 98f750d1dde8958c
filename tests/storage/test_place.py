"""Where a target, source or sink lives (onemodel.storage.place): the one place that splits
paths and URLs into a directory and a file name (Clause 13.2; Clause 15.3: bytes in memory have
no directory, the working directory is never used)."""

from __future__ import annotations

import os
import pathlib

import pytest
import zstandard

from onemodel.storage import (
    BytesSink,
    LocalSink,
    LocalSource,
    MemorySource,
    ProgressSink,
    ZstdSink,
    decompress_source,
)
from onemodel.storage.place import is_remote, local_path, name_of_url, place_of, target_of, url_join


def test_local_paths_and_file_urls(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert local_path("a/m.onnx") == "a/m.onnx"
    assert local_path("file:///x/m.onnx") == "/x/m.onnx"
    assert local_path(pathlib.Path("a") / "m.onnx") == os.path.join("a", "m.onnx")
    assert local_path("s3://b/m.onnx") is None and local_path(b"m.onnx") is None
    assert place_of("a/m.onnx") == (str(tmp_path / "a"), "m.onnx")
    assert place_of(pathlib.Path("m.onnx")) == (str(tmp_path), "m.onnx")
    assert place_of("file:///x/y/m.onnx") == ("/x/y", "m.onnx")
    assert not is_remote("file:///x/m.onnx") and not is_remote("m.onnx")
    assert is_remote("memory://d/m.onnx") and is_remote("simplecache::s3://b/m.onnx")


@pytest.mark.parametrize("url, directory, name", [
    ("s3://bucket/dir/m.onnx", "s3://bucket/dir/", "m.onnx"),
    ("s3://bucket/m.onnx", "s3://bucket/", "m.onnx"),
    ("memory://d/m.onnx", "memory://d/", "m.onnx"),
    ("https://h.example/a/m%20x.onnx?sig=abc", "https://h.example/a/", "m x.onnx"),
    ("simplecache::memory://d/m.onnx", "simplecache::memory://d/", "m.onnx"),
    ("simplecache::s3://b/k/m.onnx.zst", "simplecache::s3://b/k/", "m.onnx.zst"),
    ("zip://in/m.onnx::s3://b/a.zip", "zip://in/::s3://b/a.zip", "m.onnx"),
])
def test_urls_split_at_the_segment_that_names_the_file(url, directory, name):
    assert place_of(url) == (directory, name)
    # and a location joined to the directory lands beside the file, in the same segment
    joined = url_join(directory, "w.bin")
    assert place_of(joined) == (directory, "w.bin")


def test_url_join_takes_directories_with_or_without_a_slash():
    assert url_join("s3://b/dir", "sub/w.bin") == "s3://b/dir/sub/w.bin"
    assert url_join("simplecache::memory://d", "w.bin") == "simplecache::memory://d/w.bin"


def test_sources_and_sinks(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(b"abc")
    with LocalSource(str(path)) as src:
        assert target_of(src) == str(path) and place_of(src) == (str(tmp_path), "m.onnx")
    sink = ProgressSink(ZstdSink(LocalSink(str(tmp_path / "o.onnx.zst"))), lambda n: None)
    try:
        assert place_of(sink) == (str(tmp_path), "o.onnx.zst")
    finally:
        sink.abort()
    assert place_of(MemorySource(b"abc")) is None and place_of(BytesSink()) is None
    assert place_of(b"abc") is None and target_of(object()) is None


def test_a_decompressed_source_keeps_the_place_of_its_compressed_file(tmp_path):
    packed = zstandard.ZstdCompressor().compress(b"model bytes")
    (tmp_path / "m.onnx.zst").write_bytes(packed)
    with decompress_source(LocalSource(str(tmp_path / "m.onnx.zst")), sniff=None) as src:
        assert bytes(src.whole()) == b"model bytes"
        assert place_of(src) == (str(tmp_path), "m.onnx.zst")
    # bytes in memory have no place, even though the decompressed copy is a local file
    with decompress_source(MemorySource(packed), sniff=None) as src:
        assert isinstance(src, LocalSource) and place_of(src) is None


@pytest.mark.parametrize("target, name", [
    ("https://h/b/m.onnx?X-Amz-Signature=abc&X-Amz-Credential=k", "https://h/b/m.onnx"),
    ("s3://b/m.onemodel?versionId=3", "s3://b/m.onemodel"),
    ("HTTP://h/m.onnx.zst#frag", "http://h/m.onnx.zst"),
    ("memory://b/m.onnx?x", "memory://b/m.onnx?x"),  # memory paths may hold '?'
    ("/tmp/a?b.onnx", "/tmp/a?b.onnx"),
])
def test_name_of_url_drops_queries_that_are_not_names(target, name):
    assert name_of_url(target) == name


def test_output_format_of_a_presigned_url_comes_from_its_path():
    from onemodel.api import _plugin_for_target

    assert _plugin_for_target("https://h/m.onemodel?X-Amz-Signature=s", None).name == "onemodel"
    assert _plugin_for_target("s3://b/m.onnx?versionId=1", None).name == "onnx"


def test_same_file_by_identity_when_both_exist_by_resolved_path_when_neither(tmp_path):
    """same_file: two existing paths are one file when stat says so (another spelling, a
    symbolic link, a hard link); where neither exists yet, when they resolve alike; where one
    exists and the other not, never (were they one path, both would exist)."""
    from onemodel.storage.place import same_file

    (tmp_path / "d").mkdir()
    m = tmp_path / "d" / "m.onnx"
    m.write_bytes(b"x")
    os.link(m, tmp_path / "hard.onnx")
    os.symlink(m, tmp_path / "soft.onnx")
    (tmp_path / "other.onnx").write_bytes(b"x")
    assert same_file(m, str(tmp_path / "d" / ".." / "d" / "m.onnx"))
    assert same_file(str(m), tmp_path / "hard.onnx")
    assert same_file(f"file://{tmp_path / 'soft.onnx'}", m)
    assert not same_file(m, tmp_path / "other.onnx")
    assert same_file(tmp_path / "new.jsonl", str(tmp_path / "d" / ".." / "new.jsonl"))
    assert not same_file(tmp_path / "new.jsonl", tmp_path / "newer.jsonl")
    assert not same_file(m, tmp_path / "d" / "missing.onnx")
    os.symlink(tmp_path / "nowhere.onnx", tmp_path / "dangling.onnx")
    assert same_file(tmp_path / "dangling.onnx", tmp_path / "nowhere.onnx")
    assert same_file("s3://b/m.onnx", "s3://b/m.onnx") and not same_file("s3://b/m.onnx", m)
    assert not same_file(b"bytes", m)
