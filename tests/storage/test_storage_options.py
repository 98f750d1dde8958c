"""Storage options are for URLs: check_storage_options refuses them when every file of an
operation is local (they would be ignored silently), and options_for picks the sections a URL
uses (the format the CLI's ``--storage-option s3.client_kwargs={...}`` produces)."""

from __future__ import annotations

import pytest

from onemodel.errors import UsageError
from onemodel.storage import BytesSink, MemorySource, check_storage_options
from onemodel.storage.remote import options_for


def test_options_for_local_files_only_are_refused(tmp_path):
    with pytest.raises(UsageError) as e:
        check_storage_options({"key": "k"}, str(tmp_path / "m.onnx"), tmp_path / "o.onemodel")
    assert "every file of this operation is local" in str(e.value)
    assert str(tmp_path / "m.onnx") in str(e.value)
    with pytest.raises(UsageError):
        check_storage_options({"s3": {"anon": True}}, "file:///tmp/m.onnx")
    with pytest.raises(UsageError):
        check_storage_options({"x": 1}, MemorySource(b"abc"), BytesSink())


def test_the_refusal_names_every_local_file(tmp_path):
    """A conversion between two local files names both (the destination was left out), each
    once; bytes in memory name nothing."""
    src, dst = str(tmp_path / "m.onnx"), str(tmp_path / "o.onemodel")
    with pytest.raises(UsageError) as e:
        check_storage_options({"key": "k"}, src, dst)
    assert f"every file of this operation is local ({src} and {dst}): they would be " \
        "ignored" in str(e.value)
    with pytest.raises(UsageError) as e:
        check_storage_options({"key": "k"}, src, src, MemorySource(b"abc"))
    assert f"is local ({src}): they" in str(e.value)
    with pytest.raises(UsageError) as e:
        check_storage_options({"key": "k"}, MemorySource(b"abc"), BytesSink())
    assert "is local: they would be ignored" in str(e.value)


def test_options_with_a_url_among_the_targets_pass(tmp_path):
    check_storage_options({"key": "k"}, "s3://b/m.onnx", str(tmp_path / "out.onnx"))
    check_storage_options({"key": "k"}, str(tmp_path / "m.onnx"), None, "memory://d")
    check_storage_options(None, str(tmp_path / "m.onnx"))
    check_storage_options({}, str(tmp_path / "m.onnx"))


def test_options_for_merges_the_url_section_over_flat_options():
    opts = {"key": "flat", "client_kwargs": {"region_name": "us-east-1"},
            "s3": {"client_kwargs": {"region_name": "eu-west-1"}, "anon": False},
            "http": {"headers": {"Authorization": "Bearer t"}}}
    assert options_for("s3://b/k", opts) == {"key": "flat", "anon": False,
                                             "client_kwargs": {"region_name": "eu-west-1"}}
    assert options_for("https://h/m.onnx", opts) == {
        "key": "flat", "client_kwargs": {"region_name": "us-east-1"},
        "headers": {"Authorization": "Bearer t"}}
    # a chained URL: each link keeps its own section, as fsspec expects
    chained = options_for("simplecache::s3://b/k", {"s3": {"anon": True},
                                                      "simplecache": {"cache_storage": "/c"}})
    assert chained == {"s3": {"anon": True}, "simplecache": {"cache_storage": "/c"}}
