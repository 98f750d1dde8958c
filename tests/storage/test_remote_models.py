"""Models where they lie: OneModel and ONNX files read over HTTP with counted range requests,
converted to and from S3 (moto_server through s3fs), compressed with zstd.

The ~50 MB models are built once per session with ``onnx`` (a test oracle) and converted to
OneModel by onemodel itself.
"""

from __future__ import annotations

import pathlib
import struct

import numpy as np
import pytest

import onemodel
from onemodel.errors import InvalidModelError, IoError, UnsupportedError
from onemodel.storage import RemoteSource, prefetch
from onemodel.summary import summarize

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

KiB = 1024
MODELS = pathlib.Path(__file__).resolve().parents[2] / "testdata" / "models"
N_WEIGHTS = 64
SHAPE = (200, 1000)  # 800,000 bytes of float32 each: 64 of them make ~51 MB


def _chain_model(n: int, shape, seed: int = 0):
    """``y = x + w0 + w1 + ...``: ``n`` float32 initializers of ``shape``; (ModelProto, arrays)."""
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(shape, dtype=np.float32) for _ in range(n)]
    nodes, prev = [], "x"
    for i in range(n):
        nodes.append(helper.make_node("Add", [prev, f"w{i}"], [f"y{i}"]))
        prev = f"y{i}"
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, list(shape))],
        [numpy_helper.from_array(a, f"w{i}") for i, a in enumerate(arrays)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="onemodel-tests")
    model.ir_version = 8
    return model, arrays


@pytest.fixture(scope="session")
def big_models(tmp_path_factory):
    """``(onnx_bytes, onemodel_bytes, arrays)`` of the ~50 MB chain model."""
    d = tmp_path_factory.mktemp("big")
    model, arrays = _chain_model(N_WEIGHTS, SHAPE)
    onnx_bytes = model.SerializeToString()
    (d / "m.onnx").write_bytes(onnx_bytes)
    onemodel.convert(str(d / "m.onnx"), str(d / "m.onemodel"))
    return onnx_bytes, (d / "m.onemodel").read_bytes(), arrays


@pytest.fixture
def served(http_server, big_models):
    """The server with ``m.onnx`` and ``m.onemodel`` on it; ``(server, onnx, onemodel, arrays)``."""
    onnx_bytes, om_bytes, arrays = big_models
    http_server.files["m.onnx"] = onnx_bytes
    http_server.files["m.onemodel"] = om_bytes
    return http_server, onnx_bytes, om_bytes, arrays


def _manifest_length(om: bytes) -> int:
    return struct.unpack_from("<Q", om, 24)[0]  # OneModel format 1.1


# -- OneModel over HTTP ----------------------------------------------------------------------

def test_opening_a_50_MB_onemodel_costs_at_most_two_requests(served):
    server, _, om, _ = served
    assert len(om) > 50_000_000
    with onemodel.load(server.url("m.onemodel")) as model:
        assert len(model.graph.initializers) == N_WEIGHTS
        assert server.requests <= 2
        assert server.bytes_sent <= _manifest_length(om) + 64 * KiB


def test_opening_with_a_manifest_larger_than_the_first_read(http_server):
    # 3000 tiny initializers: a manifest of a few hundred KiB, read by a second request
    model, _ = _chain_model(3000, (2,), seed=1)
    data = model.SerializeToString()
    m = onemodel.load(data)
    from onemodel.storage import BytesSink
    sink = BytesSink()
    onemodel.save(m, sink, format="onemodel")
    om = sink.getvalue()
    assert _manifest_length(om) > 64 * KiB
    http_server.files["many.onemodel"] = om
    with onemodel.load(http_server.url("many.onemodel")) as remote:
        assert len(remote.graph.nodes) == 3000
        assert http_server.requests == 2
        assert http_server.bytes_sent <= _manifest_length(om) + 64 * KiB


def test_reading_one_tensor_fetches_its_bytes_only(served):
    server, _, om, arrays = served
    with onemodel.load(server.url("m.onemodel")) as model:
        server.reset()
        t = model.graph.initializers[17]
        values = t.numpy()
        assert np.array_equal(values, arrays[17])
        assert server.requests == 1
        assert server.bytes_sent <= t.nbytes + 64 * KiB
        t.numpy()
        assert server.requests == 1  # nothing is fetched twice


@pytest.mark.parametrize("how", ["in_order", "prefetch"])
def test_loading_all_tensors_makes_few_requests(served, how):
    server, _, om, arrays = served
    with onemodel.load(server.url("m.onemodel")) as model:
        server.reset()
        tensors = model.graph.initializers
        if how == "prefetch":
            prefetch([t.raw_data for t in tensors])
            assert server.requests == 1  # all within the coalescing gap and size cap
        got = [t.numpy() for t in tensors]
        assert all(np.array_equal(g, a) for g, a in zip(got, arrays))
        assert server.requests <= 10  # read-ahead windows grow to 16 MiB: 64 tensors, 9 requests
        assert server.bytes_sent <= len(om) + 16 * 1024 * KiB


@pytest.mark.parametrize("source,target", [("m.onemodel", "out.onnx"),
                                           ("m.onnx", "out.onemodel")])
def test_converting_a_remote_model_streams(served, tmp_path, source, target):
    import tracemalloc

    server, onnx_bytes, om, _ = served
    tracemalloc.start()
    try:
        onemodel.convert(server.url(source), str(tmp_path / target))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # one read-ahead window (16 MiB) and the model's structure, never the 51 MB of weights
    assert peak < len(om) / 2
    assert server.requests < N_WEIGHTS + 16
    original = tmp_path / "orig.onnx"
    original.write_bytes(onnx_bytes)
    with onemodel.load(str(tmp_path / target)) as a, onemodel.load(str(original)) as b:
        assert onemodel.verify(a, b).equal


# -- ONNX over HTTP --------------------------------------------------------------------------

def test_info_on_a_50_MB_onnx_transfers_a_small_fraction(served):
    from typer.testing import CliRunner

    from onemodel.cli import app

    server, onnx_bytes, _, _ = served
    result = CliRunner().invoke(app, ["info", "--json", server.url("m.onnx")])
    assert result.exit_code == 0, result.output
    assert '"ir_version": 8' in result.output
    assert server.bytes_sent < len(onnx_bytes) / 10


def test_remote_onnx_tensors_are_fetched_on_use(served):
    server, onnx_bytes, _, arrays = served
    with onemodel.load(server.url("m.onnx")) as model:
        s = summarize(model)
        assert s["initializers"]["count"] == N_WEIGHTS
        server.reset()
        t = model.graph.initializers[40]
        assert np.array_equal(t.numpy(), arrays[40])
        assert server.requests == 1 and server.bytes_sent <= t.nbytes + 64 * KiB


def test_remote_onnx_with_external_data(http_server, tmp_path):
    model, arrays = _chain_model(4, (64, 64), seed=2)
    (tmp_path / "weights").mkdir()
    onnx.save_model(model, str(tmp_path / "m.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="weights/w.bin", size_threshold=0)
    http_server.files["d/m.onnx"] = (tmp_path / "m.onnx").read_bytes()
    http_server.files["d/weights/w.bin"] = (tmp_path / "weights" / "w.bin").read_bytes()
    with onemodel.load(http_server.url("d/m.onnx")) as m:
        assert all(t.is_external for t in m.graph.initializers)
        assert all(np.array_equal(t.numpy(), a) for t, a in zip(m.graph.initializers, arrays))
    paths = {r.path for r in http_server.log}
    assert paths == {"d/m.onnx", "d/weights/w.bin"}


@pytest.mark.parametrize("location", ["../w.bin", "/etc/passwd", "http://127.0.0.1:1/w.bin"])
def test_remote_onnx_external_data_may_not_escape(http_server, tmp_path, location):
    model, _ = _chain_model(1, (64, 64), seed=3)
    onnx.save_model(model, str(tmp_path / "m.onnx"), save_as_external_data=True,
                    location="w.bin", size_threshold=0)
    proto = onnx.load(str(tmp_path / "m.onnx"), load_external_data=False)
    for entry in proto.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = location
    http_server.files["d/m.onnx"] = proto.SerializeToString()
    http_server.files["w.bin"] = (tmp_path / "w.bin").read_bytes()
    with pytest.raises(InvalidModelError) as e:
        with onemodel.load(http_server.url("d/m.onnx")) as m:
            m.graph.initializers[0].numpy()
    assert location in str(e.value)
    assert "w.bin" not in {r.path for r in http_server.log}


# -- faults through load -------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["403", "404", "ignore_range", "wrong_content_range",
                                  "truncated", "short"])
def test_faults_when_opening(served, mode):
    server, *_ = served
    server.mode = mode
    url = server.url("m.onemodel")
    with pytest.raises(IoError) as e:
        onemodel.load(url)
    assert url in str(e.value)


@pytest.mark.parametrize("mode", ["403", "404", "ignore_range", "wrong_content_range",
                                  "truncated", "short"])
def test_faults_when_reading_a_tensor(served, mode):
    server, *_ = served
    url = server.url("m.onemodel")
    with onemodel.load(url) as model:
        server.mode = mode
        with pytest.raises(IoError) as e:
            model.graph.initializers[30].numpy()
    assert url in str(e.value)


# -- S3 --------------------------------------------------------------------------------------

def _real_model() -> pathlib.Path:
    path = MODELS / "transformer_dynamo.onnx"
    if not path.exists():
        pytest.skip("testdata/models not generated")
    return path


def test_s3_upload_info_load_and_convert_bit_identical(s3, tmp_path):
    server, bucket = s3
    opts = server.storage_options
    local = _real_model()
    original = local.read_bytes()
    fs = server.filesystem()
    fs.put_file(str(local), f"{bucket}/in/model.onnx")
    url = f"s3://{bucket}/in/model.onnx"

    with onemodel.load(url, storage_options=opts) as remote, onemodel.load(str(local)) as here:
        a, b = summarize(remote), summarize(here)
        a.pop("source"), b.pop("source")
        assert a == b
        assert onemodel.verify(remote, here).equal

    # S3 -> S3 (OneModel), S3 -> local (back to ONNX): bit-identical to the original
    onemodel.convert(url, f"s3://{bucket}/out/model.onemodel", storage_options=opts)
    onemodel.convert(str(local), str(tmp_path / "local.onemodel"))
    assert fs.cat_file(f"{bucket}/out/model.onemodel") == \
        (tmp_path / "local.onemodel").read_bytes()
    onemodel.convert(f"s3://{bucket}/out/model.onemodel", str(tmp_path / "back.onnx"),
                     storage_options=opts)
    assert (tmp_path / "back.onnx").read_bytes() == original
    # S3 -> S3 (ONNX), via zstd
    onemodel.convert(url, f"s3://{bucket}/out/model.onnx.zst", storage_options=opts)
    onemodel.convert(f"s3://{bucket}/out/model.onnx.zst", str(tmp_path / "unzst.onnx"),
                     storage_options=opts)
    assert (tmp_path / "unzst.onnx").read_bytes() == original


def test_s3_external_data_files_use_the_storage_options(s3, tmp_path):
    """Saving ONNX with external data to S3: the data file is written, and read back, with the
    storage_options given to save/load (here the moto endpoint and its credentials)."""
    server, bucket = s3
    opts = server.storage_options
    w = numpy_helper.from_array(np.arange(4096, dtype=np.float32), "w")
    g = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4096])], [w])
    onnx.save_model(helper.make_model(g), str(tmp_path / "m.onnx"))
    url = f"s3://{bucket}/ext/m.onnx"
    with onemodel.load(str(tmp_path / "m.onnx")) as model:
        onemodel.save(model, url, storage_options=opts, external_data="m.data")
    fs = server.filesystem()
    assert sorted(fs.ls(f"{bucket}/ext", detail=False)) == [f"{bucket}/ext/m.data",
                                                            f"{bucket}/ext/m.onnx"]
    assert fs.cat_file(f"{bucket}/ext/m.data") == np.arange(4096, dtype=np.float32).tobytes()
    with onemodel.load(url, storage_options=opts) as back:
        (t,) = back.graph.initializers
        assert t.is_external and np.array_equal(t.numpy(), np.arange(4096, dtype=np.float32))


def test_s3_cli_info_and_convert(s3, tmp_path):
    from typer.testing import CliRunner

    from onemodel.cli import app

    server, bucket = s3
    local = _real_model()
    server.filesystem().put_file(str(local), f"{bucket}/model.onnx")
    opts = ["--storage-option", "key=testing", "--storage-option", "secret=testing",
            "--storage-option", f"endpoint_url={server.endpoint}"]
    runner = CliRunner()
    info = runner.invoke(app, ["info", f"s3://{bucket}/model.onnx", *opts])
    assert info.exit_code == 0, info.output
    out = tmp_path / "model.onemodel"
    conv = runner.invoke(app, ["convert", "--quiet", f"s3://{bucket}/model.onnx", str(out),
                               *opts])
    assert conv.exit_code == 0, conv.output
    with onemodel.load(str(out)) as m, onemodel.load(str(local)) as n:
        assert onemodel.verify(m, n).equal


def test_failed_conversion_leaves_no_s3_object(s3, served):
    server, bucket = s3
    http, *_ = served
    http.mode, http.mode_after = "404", 8  # the source vanishes in the middle of the tensors
    dst = f"s3://{bucket}/out/m.onemodel"
    # options in sections by protocol: the S3 ones must not reach the HTTP source
    opts = {"s3": {**server.storage_options, "default_block_size": 5 << 20}}
    with pytest.raises(IoError) as e:
        onemodel.convert(http.url("m.onemodel"), dst, storage_options=opts)
    assert "not found" in e.value.message and http.url("m.onemodel") in str(e.value)
    # more than one 5 MiB part had gone to S3 before the failure: a multipart upload was open
    assert sum(r.sent for r in http.log if r.status == 206) > 6 << 20
    client = server.client()
    assert "Contents" not in client.list_objects_v2(Bucket=bucket)
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


# -- zstd ----------------------------------------------------------------------------------

def test_zst_round_trip_of_a_real_model(tmp_path):
    local = _real_model()
    onemodel.convert(str(local), str(tmp_path / "m.onemodel.zst"))
    onemodel.convert(str(tmp_path / "m.onemodel.zst"), str(tmp_path / "m.onnx.zst"))
    onemodel.convert(str(tmp_path / "m.onnx.zst"), str(tmp_path / "back.onnx"))
    assert (tmp_path / "back.onnx").read_bytes() == local.read_bytes()
    assert (tmp_path / "m.onnx.zst").stat().st_size < local.stat().st_size


def test_zstd_bomb_is_refused_by_load(tmp_path):
    # a frame header declaring 100 GiB of content (RFC 8878 3.1.1.1): refused before any output
    fhd = bytes([0b11100000])  # Frame_Content_Size_flag 3 (8 bytes), Single_Segment_flag
    frame = b"\x28\xb5\x2f\xfd" + fhd + (100 << 30).to_bytes(8, "little") \
        + bytes([0b1011, 0, 0]) + b"\x00"  # one last RLE block
    (tmp_path / "bomb.onnx.zst").write_bytes(frame)
    with pytest.raises(UnsupportedError) as e:
        onemodel.load(str(tmp_path / "bomb.onnx.zst"))
    assert "exceeds" in str(e.value)


def test_remote_source_has_no_whole_view(served):
    server, *_ = served
    assert RemoteSource(server.url("m.onemodel")).whole() is None
