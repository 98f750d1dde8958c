"""RemoteSource over HTTP against a local Range server that counts requests and bytes, and
in each of its fault modes."""

from __future__ import annotations

import numpy as np
import pytest
from servers.http_range import refused_url

from onemodel.errors import IoError, MalformedError
from onemodel.storage import Blob, BytesSink, open_source, prefetch
from onemodel.storage.remote import COALESCE_GAP, HEAD_BYTES, READAHEAD_MAX, RemoteSource


def _data(n: int, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


@pytest.fixture
def big(http_server):
    """A 3 MiB object on the server; ``(server, url, data)``."""
    data = _data(3 << 20)
    http_server.files["big.bin"] = data
    return http_server, http_server.url("big.bin"), data


def test_open_costs_one_request_and_learns_the_size(big):
    server, url, data = big
    src = open_source(url)
    assert isinstance(src, RemoteSource)
    assert src.size == len(data)
    assert src.whole() is None
    assert server.requests == 1
    assert server.log[0].method == "GET" and server.log[0].range == f"bytes=0-{HEAD_BYTES - 1}"
    assert server.bytes_sent == HEAD_BYTES


def test_reads_inside_the_head_cost_nothing_more(big):
    server, url, data = big
    src = open_source(url)
    assert bytes(src.read(0, 64)) == data[:64]
    assert bytes(src.read(64, 5000)) == data[64:5064]
    assert bytes(src.read(HEAD_BYTES - 10, 10)) == data[HEAD_BYTES - 10:HEAD_BYTES]
    assert server.requests == 1


def test_a_read_past_the_head_is_one_exact_range_request(big):
    server, url, data = big
    src = open_source(url)
    server.reset()
    got = src.read(2_000_000, 12345)
    assert bytes(got) == data[2_000_000:2_012_345]
    assert server.requests == 1
    assert server.log[0].range == "bytes=2000000-2012344"
    assert server.bytes_sent == 12345


def test_read_past_the_end_is_malformed_and_fetches_nothing(big):
    server, url, data = big
    src = open_source(url)
    server.reset()
    with pytest.raises(MalformedError):
        src.read(len(data) - 10, 11)
    assert server.requests == 0


def test_fetch_many_coalesces_neighbours_and_keeps_far_ranges_apart(big):
    server, url, data = big
    src = open_source(url)
    server.reset()
    # 20 ranges of 1000 bytes every 4096 bytes from 100 KiB, and one far away
    ranges = [(100_000 + i * 4096, 1000) for i in range(20)] + [(3_000_000, 500)]
    views = src.fetch_many(ranges)
    assert [bytes(v) for v in views] == [data[o:o + n] for o, n in ranges]
    assert server.requests == 2
    first_span = ranges[19][0] + 1000 - ranges[0][0]
    assert server.bytes_sent == first_span + 500


def test_fetch_many_does_not_bridge_gaps_larger_than_the_limit(http_server):
    data = _data(4 << 20, seed=3)
    http_server.files["gap.bin"] = data
    src = open_source(http_server.url("gap.bin"))
    http_server.reset()
    o2 = HEAD_BYTES + 100 + COALESCE_GAP + 1
    views = src.fetch_many([(HEAD_BYTES, 100), (o2, 100)])
    assert [bytes(v) for v in views] == [data[HEAD_BYTES:HEAD_BYTES + 100], data[o2:o2 + 100]]
    assert http_server.requests == 2
    assert http_server.bytes_sent == 200


def test_range_buffers_are_fetched_once(big):
    server, url, data = big
    src = open_source(url)
    server.reset()
    bufs = [Blob(src, HEAD_BYTES + i * 70_000, 60_000) for i in range(30)]
    prefetch(bufs)
    assert server.requests == 1  # all within COALESCE_GAP of each other
    sent = server.bytes_sent
    assert sent == 29 * 70_000 + 60_000
    for i, b in enumerate(bufs):
        o = HEAD_BYTES + i * 70_000
        assert bytes(b.view()) == data[o:o + 60_000]
    prefetch(bufs)
    assert server.requests == 1 and server.bytes_sent == sent


def _fetched_spans(server) -> list[tuple[int, int]]:
    spans = []
    for r in server.log:
        a, b = r.range[len("bytes="):].split("-")
        spans.append((int(a), int(b) + 1))
    return sorted(spans)


def _disjoint(spans) -> bool:
    return all(e1 <= s2 for (_, e1), (s2, _) in zip(spans, spans[1:]))


@pytest.mark.parametrize("length,pad,reads,requests", [
    (10_000, 64, 306, 5),      # one exact read, then windows of 256 KiB, 512 KiB, 1 MiB, 2 MiB
    (300_000, 0, 10, 5),       # reads straddle windows: only the rest is fetched
    (1_000_000, 4000, 3, 3),   # reads larger than the read-ahead are fetched exactly
])
def test_sequential_reads_are_read_ahead_and_nothing_is_fetched_twice(big, length, pad, reads,
                                                                       requests):
    server, url, data = big
    src = open_source(url)
    server.reset()
    offsets = list(range(HEAD_BYTES, len(data) - length, length + pad))
    for o in offsets:
        assert bytes(src.read(o, length)) == data[o:o + length]
    spans = _fetched_spans(server)
    assert _disjoint(spans)
    assert len(offsets) == reads and server.requests == requests
    last = offsets[-1] + length
    assert spans[0][0] == HEAD_BYTES and spans[-1][1] >= last
    assert server.bytes_sent <= last - HEAD_BYTES + READAHEAD_MAX


def test_fetch_many_uses_the_read_ahead_window(big):
    server, url, data = big
    src = open_source(url)
    src.read(HEAD_BYTES, 1000)
    src.read(HEAD_BYTES + 1000, 1000)  # sequential: fetches a 256 KiB window
    server.reset()
    ranges = [(HEAD_BYTES + 5000, 100), (HEAD_BYTES + 200_000, 100)]
    assert [bytes(v) for v in src.fetch_many(ranges)] == [data[o:o + n] for o, n in ranges]
    assert server.requests == 0


def test_random_reads_fetch_exactly_their_bytes(big):
    server, url, data = big
    src = open_source(url)
    server.reset()
    offsets = [2_900_000, 2_000_000, 1_500_000, 100_000, 2_500_000]
    for o in offsets:
        assert bytes(src.read(o, 5000)) == data[o:o + 5000]
    assert server.requests == len(offsets) and server.bytes_sent == 5000 * len(offsets)


def test_small_object_is_read_by_the_first_request(http_server):
    http_server.files["small.bin"] = b"0123456789"
    src = open_source(http_server.url("small.bin"))
    assert src.size == 10
    assert bytes(src.read(3, 4)) == b"3456"
    assert http_server.requests == 1


def test_empty_object(http_server):
    http_server.files["empty.bin"] = b""
    src = open_source(http_server.url("empty.bin"))
    assert src.size == 0
    assert bytes(src.read(0, 0)) == b""


def test_small_object_from_a_server_ignoring_range_is_accepted(http_server):
    # the whole object is no more than the first read asked for: nothing is wasted or wrong
    http_server.files["small.bin"] = b"abcdef"
    http_server.mode = "ignore_range"
    src = open_source(http_server.url("small.bin"))
    assert src.size == 6 and bytes(src.read(1, 3)) == b"bcd"


def test_progress_callback_counts_transferred_bytes(big):
    server, url, data = big
    seen = []
    src = RemoteSource(url, progress=seen.append)
    src.read(1_000_000, 1000)
    assert seen == [HEAD_BYTES, 1000]


def test_query_string_is_kept_in_requests_and_hidden_in_names(big):
    server, url, data = big
    src = open_source(url + "?sig=secret")
    assert src.size == len(data)
    assert "secret" not in src.name and src.name.endswith("big.bin?sig=***")


def test_storage_options_by_protocol_reach_the_http_backend(big):
    server, url, data = big
    opts = {"s3": {"key": "k", "secret": "s"}, "http": {"headers": {"X-Test": "yes"}}}
    src = open_source(url, storage_options=opts)  # the s3 section would break aiohttp
    assert bytes(src.read(2_000_000, 10)) == data[2_000_000:2_000_010]
    assert [r.headers.get("X-Test") for r in server.log] == ["yes", "yes"]


# -- faults ----------------------------------------------------------------------------------

def _fault(server, mode, *, open_first: bool):
    """Open (in normal mode when ``open_first``) then switch to ``mode`` and read past the head."""
    url = server.url("big.bin")
    if open_first:
        src = open_source(url)
        server.mode = mode
        with pytest.raises(IoError) as e:
            src.read(1_000_000, 100_000)
    else:
        server.mode = mode
        with pytest.raises(IoError) as e:
            open_source(url)
    assert url in str(e.value)
    return e.value


def test_connection_refused():
    url = refused_url()
    with pytest.raises(IoError) as e:
        open_source(url)
    assert "cannot connect" in str(e.value) and url in str(e.value)


@pytest.mark.parametrize("open_first", [False, True])
def test_403_is_access_denied(big, open_first):
    err = _fault(big[0], "403", open_first=open_first)
    assert "access denied" in err.message


@pytest.mark.parametrize("open_first", [False, True])
def test_404_is_not_found(big, open_first):
    err = _fault(big[0], "404", open_first=open_first)
    assert "not found" in err.message


@pytest.mark.parametrize("open_first", [False, True])
def test_server_ignoring_range_is_refused_without_downloading(big, open_first):
    server, url, data = big
    src_seen = []
    if open_first:
        src = RemoteSource(url, progress=src_seen.append)
        server.mode = "ignore_range"
        with pytest.raises(IoError) as e:
            src.read(1_000_000, 100_000)
        assert src.bytes_fetched == HEAD_BYTES  # the refused body was not read
    else:
        server.mode = "ignore_range"
        with pytest.raises(IoError) as e:
            RemoteSource(url, progress=src_seen.append)
        assert src_seen == []
    assert "ignored the range request" in e.value.message and url in str(e.value)
    assert f"open 'simplecache::{url}' to download it whole" in e.value.message


def test_simplecache_reads_a_model_from_a_server_ignoring_range(http_server, tmp_path):
    # the way out the refusal names: simplecache:: downloads the object whole, then reads it
    import onemodel

    arrays = np.arange(100_000, dtype=np.float32)  # 400 KB: past the first read
    with onemodel.load(str(_onnx_with(tmp_path, arrays))) as m:
        sink = BytesSink()
        onemodel.save(m, sink, format="onemodel")
    http_server.files["m.onemodel"] = sink.getvalue()
    http_server.mode = "ignore_range"
    url = http_server.url("m.onemodel")
    with pytest.raises(IoError, match="simplecache::"):
        onemodel.load(url)
    cache = {"simplecache": {"cache_storage": str(tmp_path / "cache")}}
    with onemodel.load("simplecache::" + url, storage_options=cache) as model:
        assert np.array_equal(model.graph.initializers[0].numpy(), arrays)


def test_python_http_server_names_simplecache_for_a_file_past_64_kib(tmp_path):
    """`python -m http.server` (the standard library's handler: no Range support) and a model
    of 339 KiB, past the first read: the refusal is one line naming `simplecache::URL`, on the
    API and on the command line, and that URL reads the same model; a file of at most 64 KiB is
    read directly (its whole body is the first read)."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from servers.static_http import StaticServer

    import onemodel

    models = Path(__file__).resolve().parents[2] / "testdata" / "models"
    big_model, small_model = models / "transformer_legacy.onnx", models / "cnn_legacy.onnx"
    assert big_model.stat().st_size > HEAD_BYTES >= small_model.stat().st_size
    for m in (big_model, small_model):
        shutil.copy(m, tmp_path / m.name)
    with StaticServer(tmp_path) as server:
        url = server.url(big_model.name)
        hint = f"open 'simplecache::{url}' to download it whole into a local cache first"
        with pytest.raises(IoError) as e:
            onemodel.load(url)
        assert "ignored the range request for bytes 0-65535" in e.value.message
        assert hint in e.value.message and e.value.source == url
        cli = [sys.executable, "-m", "onemodel", "info"]
        r = subprocess.run(cli + [url], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("Io: the server ignored")
        assert hint in r.stderr
        cache = tmp_path / "cache"
        r = subprocess.run(cli + ["--json", "-S", f"simplecache.cache_storage={cache}",
                                  "simplecache::" + url], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        with onemodel.load(big_model) as want, \
                onemodel.load("simplecache::" + url,
                              storage_options={"simplecache": {"cache_storage": str(cache)}}) \
                as got:
            assert onemodel.compare_models(got, want) == []
        with onemodel.load(server.url(small_model.name)) as got, onemodel.load(small_model) \
                as want:
            assert onemodel.compare_models(got, want) == []


@pytest.mark.parametrize("open_first", [False, True])
def test_wrong_content_range_is_refused(big, open_first):
    err = _fault(big[0], "wrong_content_range", open_first=open_first)
    assert "the server sent bytes" in err.message


@pytest.mark.parametrize("open_first", [False, True])
def test_truncated_response(big, open_first):
    err = _fault(big[0], "truncated", open_first=open_first)
    assert "closed before the response was complete" in err.message \
        or "ended after" in err.message


@pytest.mark.parametrize("open_first", [False, True])
def test_short_response(big, open_first):
    err = _fault(big[0], "short", open_first=open_first)
    assert "the server sent bytes" in err.message


@pytest.mark.parametrize("open_first", [False, True])
def test_body_length_not_matching_content_range(big, open_first):
    err = _fault(big[0], "lying", open_first=open_first)
    assert err.kind == "Io"


def test_faults_in_coalesced_fetches(big):
    server, url, data = big
    src = open_source(url)
    for mode in ("403", "404", "wrong_content_range", "short", "truncated", "ignore_range"):
        server.mode = mode
        with pytest.raises(IoError) as e:
            src.fetch_many([(1_000_000, 10), (2_500_000, 10)])
        assert url in str(e.value), mode
    server.mode = "normal"
    assert [bytes(v) for v in src.fetch_many([(1_000_000, 10), (2_500_000, 10)])] == \
        [data[1_000_000:1_000_010], data[2_500_000:2_500_010]]


def test_object_changing_while_read_is_refused(big):
    server, url, data = big
    src = open_source(url)
    server.files["big.bin"] = data[:-1] + b"\x00" if data[-1] else data[:-1] + b"\x01"
    with pytest.raises(IoError) as e:
        src.read(1_000_000, 10)
    assert "the object changed since it was opened (its ETag changed)" in e.value.message


def test_object_changing_under_a_server_without_etags_is_refused_by_last_modified(big):
    server, url, data = big
    server.etags = False
    server.last_modified["big.bin"] = "Tue, 01 Dec 2026 10:00:00 GMT"
    src = open_source(url)
    assert bytes(src.read(1_000_000, 10)) == data[1_000_000:1_000_010]
    server.files["big.bin"] = bytes(len(data))  # replaced: same size, a new time
    server.last_modified["big.bin"] = "Tue, 01 Dec 2026 10:00:05 GMT"
    with pytest.raises(IoError) as e:
        src.read(2_000_000, 10)
    assert "changed since it was opened (its modification time (Last-Modified) changed)" \
        in e.value.message


def test_object_changing_size_while_read_is_refused(big):
    server, url, data = big
    src = open_source(url)
    # same content prefix, but a different length: Content-Range total changes
    server.files["big.bin"] = data + b"more"
    with pytest.raises(IoError) as e:
        src.read(1_000_000, 10)
    assert "changed" in e.value.message


def _onnx_with(tmp_path, array):
    """An ONNX file whose one initializer ``w`` is ``array``; its path."""
    from onnx import TensorProto, helper, numpy_helper, save_model

    graph = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(array, "w")])
    path = tmp_path / "m.onnx"
    save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_a_wrong_storage_option_key_over_http_is_one_usage_error_naming_it(http_server):
    from onemodel.errors import UsageError

    http_server.files["m.bin"] = b"abc"
    with pytest.raises(UsageError) as e:
        open_source(http_server.url("m.bin"), storage_options={"bogus_option": 1})
    assert "storage option 'bogus_option' is not taken by the http:// backend" in str(e.value)
    assert http_server.requests == 0  # refused before anything was sent
