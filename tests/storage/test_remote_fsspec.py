"""RemoteSource and RemoteSink through fsspec's memory:// backend; URL helpers; backend errors."""

from __future__ import annotations

import uuid

import fsspec
import pytest

from onemodel.errors import (
    InvalidModelError,
    IoError,
    MalformedError,
    UnsupportedError,
    display_url,
)
from onemodel.storage import RemoteSink, RemoteSource, join_location, open_sink, open_source
from onemodel.storage.remote import COALESCE_GAP, coalesce


@pytest.fixture
def mem():
    """``(fs, prefix)``: fsspec's memory filesystem and a fresh directory in it."""
    fs = fsspec.filesystem("memory")
    prefix = "/t" + uuid.uuid4().hex[:10]
    fs.mkdir(prefix)
    yield fs, prefix
    fs.rm(prefix, recursive=True)


def test_memory_source_reads_exact_ranges(mem):
    fs, d = mem
    data = bytes(range(256)) * 20_000  # 5 MB: read by ranges (past WHOLE_OBJECT_BYTES)
    fs.pipe_file(f"{d}/a.bin", data)
    src = open_source(f"memory://{d}/a.bin")
    assert isinstance(src, RemoteSource) and src.size == len(data) and src.whole() is None
    assert bytes(src.read(70_000, 300)) == data[70_000:70_300]
    assert bytes(src.read(5, 10)) == data[5:15]
    assert bytes(src.read(7, 1)) == data[7:8]
    assert src.requests == 2  # one range past the head, one head read serving both small reads
    with pytest.raises(MalformedError):
        src.read(len(data) - 1, 2)


def test_a_small_object_is_fetched_whole_by_its_first_read(mem):
    # WHOLE_OBJECT_BYTES: one request for all of it, every later read served from it
    from onemodel.storage.remote import WHOLE_OBJECT_BYTES

    fs, d = mem
    data = bytes(range(256)) * 1000
    assert len(data) <= WHOLE_OBJECT_BYTES
    fs.pipe_file(f"{d}/s.bin", data)
    src = open_source(f"memory://{d}/s.bin")
    assert bytes(src.read(70_000, 300)) == data[70_000:70_300]
    assert bytes(src.read(200_000, 56_000)) == data[200_000:]
    assert [bytes(v) for v in src.fetch_many([(5, 10), (100_000, 7)])] == [
        data[5:15], data[100_000:100_007]]
    assert (src.requests, src.bytes_fetched) == (1, len(data))


def test_memory_fetch_many_groups_and_orders(mem):
    fs, d = mem
    data = bytes(range(256)) * 20_000
    fs.pipe_file(f"{d}/a.bin", data)
    src = open_source(f"memory://{d}/a.bin")
    ranges = [(4_000_000, 10), (100_000, 5), (100_010, 0), (100_020, 7), (2_000_000, 3)]
    views = src.fetch_many(ranges)
    assert [bytes(v) for v in views] == [data[o:o + n] for o, n in ranges]
    assert src.requests == 3  # 100_000..100_027 together; 2_000_000; 4_000_000


def test_missing_object_is_io_not_found(mem):
    fs, d = mem
    with pytest.raises(IoError) as e:
        open_source(f"memory://{d}/nope.bin")
    assert "not found" in e.value.message and "nope.bin" in str(e.value)


def test_sink_stages_under_a_temporary_name_until_commit(mem):
    fs, d = mem
    sink = open_sink(f"memory://{d}/out.bin")
    assert isinstance(sink, RemoteSink)
    sink.write(b"abc")
    sink.write(memoryview(b"defg"))
    sink.write_zeros(3)
    assert sink.tell() == 10
    assert not fs.exists(f"{d}/out.bin")
    sink.commit()
    assert fs.cat_file(f"{d}/out.bin") == b"abcdefg\0\0\0"
    assert fs.ls(d, detail=False) == [f"{d}/out.bin"]  # no leftover temporary


def test_sink_abort_leaves_nothing_and_keeps_an_old_object(mem):
    fs, d = mem
    fs.pipe_file(f"{d}/out.bin", b"old")
    with pytest.raises(RuntimeError):
        with open_sink(f"memory://{d}/out.bin") as sink:
            sink.write(b"new bytes")
            raise RuntimeError("writer failed")
    assert fs.cat_file(f"{d}/out.bin") == b"old"
    assert fs.ls(d, detail=False) == [f"{d}/out.bin"]


def test_sink_copy_from_remote_source(mem):
    fs, d = mem
    data = bytes(range(256)) * 4000
    fs.pipe_file(f"{d}/in.bin", data)
    src = open_source(f"memory://{d}/in.bin")
    with open_sink(f"memory://{d}/out.bin") as sink:
        sink.copy_from(src, 1000, 500_000)
    assert fs.cat_file(f"{d}/out.bin") == data[1000:501_000]


def test_http_is_read_only():
    with pytest.raises(UnsupportedError):
        open_sink("http://127.0.0.1:9/x.bin")


def test_unknown_scheme_is_unsupported():
    with pytest.raises(UnsupportedError) as e:
        open_source("nosuchscheme://b/k")
    assert "nosuchscheme" in e.value.message


def test_missing_backend_names_what_to_install():
    pytest.importorskip("fsspec")
    try:
        import gcsfs  # noqa: F401
        pytest.skip("gcsfs is installed")
    except ImportError:
        pass
    with pytest.raises(UnsupportedError) as e:
        open_source("gs://bucket/model.onnx")
    assert str(e.value).count("\n") == 0
    assert "pip install gcsfs" in e.value.message


def test_missing_s3_backend_names_the_extra(monkeypatch):
    import fsspec.core

    def no_backend(*a, **k):
        raise ImportError("Install s3fs to access S3")
    monkeypatch.setattr(fsspec.core, "url_to_fs", no_backend)
    with pytest.raises(UnsupportedError) as e:
        open_source("s3://bucket/model.onnx")
    assert 'pip install "onemodel-onnx[s3]"' in e.value.message


def test_a_backend_error_keeps_its_useful_lines_bounded():
    """Every useful line of a backend's error text is kept, on one line (blank, repeated and
    traceback lines dropped); at most ERROR_LINES lines of at most ERROR_LINE_CHARS each."""
    from onemodel.storage.remote import ERROR_LINE_CHARS, ERROR_LINES, as_io_error

    e = as_io_error(OSError("Forbidden\n\n  reason: the signature does not match\nForbidden\n"
                            'Traceback (most recent call last):\n  File "x.py", line 1\n'
                            "  request id: 4F2A"), "s3://b/m.onnx", "read")
    assert str(e) == ("Io: cannot read: OSError: Forbidden | reason: the signature does not "
                      "match | request id: 4F2A in s3://b/m.onnx")
    long = "x" * 5000
    lines = [f"line {i}" for i in range(ERROR_LINES + 3)] + ["y" * 5000]
    e = as_io_error(RuntimeError("\n".join([long] + lines)), "s3://b/m.onnx")
    parts = e.message.split(" | ")
    assert len(parts) == ERROR_LINES + 1
    assert parts[-1] == f"({len(lines) + 1 - ERROR_LINES} more lines)"
    assert parts[0] == f"cannot read: RuntimeError: {'x' * 150}…{'x' * 150} (5000 characters)"
    assert parts[1:ERROR_LINES] == [f"line {i}" for i in range(ERROR_LINES - 1)]
    assert len(str(e)) < ERROR_LINES * (ERROR_LINE_CHARS + 30)
    assert str(as_io_error(ValueError(""), "s3://b/k")) == "Io: cannot read: ValueError in s3://b/k"


# -- helpers ---------------------------------------------------------------------------------

def test_coalesce():
    g = COALESCE_GAP
    ranges = [(0, 10), (10 + g, 5), (20 + 2 * g + 1, 5), (5, 3), (100, 0)]
    assert coalesce(ranges) == [(0, 15 + g, [0, 3, 1]), (20 + 2 * g + 1, 26 + 2 * g, [2])]
    # the size cap splits a run of touching ranges
    assert coalesce([(0, 60), (60, 60), (120, 60)], gap=0, limit=130) == \
        [(0, 120, [0, 1]), (120, 180, [2])]


def test_display_url_hides_credentials():
    assert display_url("https://user:pw@h/m.onnx?X-Amz-Signature=abc&x=1") == \
        "https://***@h/m.onnx?X-Amz-Signature=***&x=***"
    assert display_url("s3://b/k.onnx") == "s3://b/k.onnx"


@pytest.mark.parametrize("base,location,expected", [
    ("s3://b/dir/m.onnx", "m.data", "s3://b/dir/m.data"),
    ("s3://b/dir/m.onnx", "./w/part 1.bin", "s3://b/dir/w/part 1.bin"),
    ("s3://b/m.onnx", "w.bin", "s3://b/w.bin"),
    ("https://h:8080/a/b/m.onnx?sig=1", "w #1.bin", "https://h:8080/a/b/w%20%231.bin"),
    ("simplecache::s3://b/d/m.onnx", "w.bin", "simplecache::s3://b/d/w.bin"),
    ("memory://d/m.onnx", "x/y.bin", "memory://d/x/y.bin"),
])
def test_join_location(base, location, expected):
    """Only the joining: which locations are legal is the ONNX package's rule
    (tests/formats/onnx/test_external_url_locations.py)."""
    assert join_location(base, location) == expected


def test_join_location_needs_a_directory():
    with pytest.raises(InvalidModelError, match="has no directory") as e:
        join_location("memory://m.onnx", "w.bin")
    assert repr("w.bin") in e.value.message


def test_options_in_sections_by_protocol():
    from onemodel.storage.remote import options_for
    opts = {"s3": {"key": "k", "secret": "s"}, "http": {"headers": {"A": "1"}}, "anon": False}
    assert options_for("s3://b/m.onnx", opts) == {"anon": False, "key": "k", "secret": "s"}
    assert options_for("s3a://b/m.onnx", opts) == {"anon": False, "key": "k", "secret": "s"}
    assert options_for("https://h/m.onnx", opts) == {"anon": False, "headers": {"A": "1"}}
    assert options_for("memory://m.onnx", {"s3": {"key": "k"}}) == {}
    # a chain keeps each link's section for fsspec to hand out
    assert options_for("simplecache::s3://b/m.onnx", opts) == {"anon": False,
                                                              "s3": {"key": "k", "secret": "s"}}
    # dict-valued backend options that are not protocol names stay as they are
    assert options_for("s3://b/k", {"client_kwargs": {"region_name": "x"}}) == \
        {"client_kwargs": {"region_name": "x"}}



def test_chained_url(mem, tmp_path):
    fs, d = mem
    data = bytes(range(256)) * 500
    fs.pipe_file(f"{d}/a.bin", data)
    url = f"simplecache::memory://{d}/a.bin"
    src = open_source(url, storage_options={"simplecache": {"cache_storage": str(tmp_path)}})
    assert src.size == len(data)
    assert bytes(src.read(100_000, 50)) == data[100_000:100_050]
    assert join_location(url, "w.bin") == f"simplecache::memory://{d}/w.bin"


def test_a_chained_url_names_the_link_whose_backend_is_missing(monkeypatch):
    """simplecache is part of fsspec: for simplecache::http://... without aiohttp the hint is
    the http extra, not 'install the fsspec backend for simplecache'."""
    import fsspec.core

    from onemodel.errors import UnsupportedError
    from onemodel.storage.remote import filesystem

    def missing(url, **options):
        raise ImportError("no module named aiohttp")
    monkeypatch.setattr(fsspec.core, "url_to_fs", missing)
    with pytest.raises(UnsupportedError) as e:
        filesystem("simplecache::http://u:p@127.0.0.1:1/m.onnx")
    assert "no backend for http:// URLs" in str(e.value)
    assert 'pip install "onemodel-onnx[http]"' in str(e.value)
    assert "u:p@" not in str(e.value)
