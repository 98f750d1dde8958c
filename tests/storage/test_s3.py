"""RemoteSource and RemoteSink through s3fs against moto's S3 server on 127.0.0.1."""

from __future__ import annotations

import numpy as np
import pytest

from onemodel.errors import IoError
from onemodel.storage import RemoteSink, RemoteSource, open_sink, open_source
from onemodel.storage.remote import HEAD_BYTES

MiB = 1 << 20


def _data(n: int, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def test_upload_then_range_reads(s3):
    server, bucket = s3
    opts = server.storage_options
    data = _data(5 * MiB)  # read by ranges: past WHOLE_OBJECT_BYTES
    url = f"s3://{bucket}/models/m.bin"
    with open_sink(url, storage_options=opts) as sink:
        sink.write(data[:MiB])
        sink.copy_from(open_source(data), MiB, 4 * MiB)
    assert server.filesystem().cat_file(f"{bucket}/models/m.bin") == data
    src = open_source(url, storage_options=opts)
    assert isinstance(src, RemoteSource) and src.size == len(data)
    assert bytes(src.read(10, 100)) == data[10:110]
    assert bytes(src.read(2 * MiB, 1000)) == data[2 * MiB:2 * MiB + 1000]
    views = src.fetch_many([(MiB, 10), (MiB + 5000, 10), (5 * MiB - 10, 10)])
    assert [bytes(v) for v in views] == [data[MiB:MiB + 10], data[MiB + 5000:MiB + 5010],
                                         data[-10:]]
    # the head, one range, the first two ranges together (gap < 1 MiB), the last alone
    assert src.requests == 4
    assert src.bytes_fetched == HEAD_BYTES + 1000 + 5010 + 10


def test_multipart_upload_is_invisible_until_commit(s3):
    server, bucket = s3
    client = server.client()
    url = f"s3://{bucket}/big.bin"
    data = _data(11 * MiB, seed=2)
    sink = open_sink(url, storage_options=server.storage_options, block_size=5 * MiB)
    assert isinstance(sink, RemoteSink)
    sink.write(data[:6 * MiB])
    sink.write(data[6 * MiB:])
    # parts are on the server, in a multipart upload, and no object exists yet
    uploads = client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert [u["Key"] for u in uploads] == ["big.bin"]
    assert "Contents" not in client.list_objects_v2(Bucket=bucket)
    sink.commit()
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    head = client.head_object(Bucket=bucket, Key="big.bin")
    assert head["ContentLength"] == len(data)
    assert "-" in head["ETag"]  # the ETag of a multipart object: md5-of-parts "-" count
    got = client.get_object(Bucket=bucket, Key="big.bin")["Body"].read()
    assert got == data


def test_aborted_multipart_upload_leaves_no_object(s3):
    server, bucket = s3
    client = server.client()
    url = f"s3://{bucket}/aborted.bin"
    with pytest.raises(RuntimeError):
        with open_sink(url, storage_options=server.storage_options, block_size=5 * MiB) as sink:
            sink.write(_data(7 * MiB))
            assert client.list_multipart_uploads(Bucket=bucket).get("Uploads")
            raise RuntimeError("converter failed")
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    assert "Contents" not in client.list_objects_v2(Bucket=bucket)


def test_aborted_small_upload_leaves_no_object_and_keeps_the_old_one(s3):
    server, bucket = s3
    client = server.client()
    client.put_object(Bucket=bucket, Key="m.bin", Body=b"old")
    sink = open_sink(f"s3://{bucket}/m.bin", storage_options=server.storage_options)
    sink.write(b"new, incomplete")
    sink.abort()
    assert client.get_object(Bucket=bucket, Key="m.bin")["Body"].read() == b"old"


def test_zstd_round_trip_on_s3(s3):
    server, bucket = s3
    data = _data(2 * MiB, seed=5)[:MiB] * 2  # compressible
    url = f"s3://{bucket}/m.onemodel.zst"
    with open_sink(url, storage_options=server.storage_options) as sink:
        sink.write(data)
    stored = server.client().head_object(Bucket=bucket, Key="m.onemodel.zst")["ContentLength"]
    assert stored < len(data)
    src = open_source(url, storage_options=server.storage_options, sniff=None)  # not a model
    assert src.size == len(data) and bytes(src.whole()) == data


def test_not_found_and_missing_bucket(s3):
    server, bucket = s3
    for url in (f"s3://{bucket}/nope.onnx", "s3://no-such-bucket-xyz/m.onnx"):
        with pytest.raises(IoError) as e:
            open_source(url, storage_options=server.storage_options)
        assert "not found" in e.value.message and url in str(e.value)


def test_credentials_and_endpoint_from_the_environment(s3, monkeypatch):
    server, bucket = s3
    server.client().put_object(Bucket=bucket, Key="env.bin", Body=b"from env")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", server.endpoint)
    src = open_source(f"s3://{bucket}/env.bin", storage_options={"skip_instance_cache": True})
    assert bytes(src.read(0, 8)) == b"from env"


def test_refused_connection_to_s3_is_io():
    from servers.s3 import free_port
    opts = {"key": "k", "secret": "s", "endpoint_url": f"http://127.0.0.1:{free_port()}",
            "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 2}}
    with pytest.raises(IoError) as e:
        open_source("s3://bucket/m.onnx", storage_options=opts)
    assert "s3://bucket/m.onnx" in str(e.value)


# -- storage options: sections from the command line, and wrong keys ----------------------------
def test_command_line_sections_with_json_values_reach_s3fs(s3):
    """``--storage-option s3.client_kwargs={...}`` (parsed by the CLI into nested sections)
    works end to end: options_for merges the ``s3`` section over the flat options."""
    from onemodel.cli.values import parse_storage_options

    server, bucket = s3
    server.filesystem().pipe_file(f"{bucket}/o.bin", b"x" * 100)
    options = parse_storage_options([
        "key=testing", "secret=testing",
        f's3.endpoint_url="{server.endpoint}"',
        's3.client_kwargs={"region_name": "us-east-1"}',
        'http.headers={"Authorization": "Bearer never-sent-to-s3"}',  # other protocol: left out
    ])
    assert options["s3"]["client_kwargs"] == {"region_name": "us-east-1"}
    src = open_source(f"s3://{bucket}/o.bin", storage_options=options, compression=None)
    assert src.size == 100 and bytes(src.read(10, 5)) == b"xxxxx"


@pytest.mark.parametrize("options,key", [({"bogus_option": 1}, "bogus_option"),
                                         ({"client_kwargs": {"region_nam": "x"}}, "region_nam")])
def test_a_wrong_storage_option_key_is_one_usage_error_naming_it(s3, options, key):
    from onemodel.errors import UsageError

    server, bucket = s3
    server.filesystem().pipe_file(f"{bucket}/o.bin", b"x")
    opts = {**server.storage_options, **options}
    with pytest.raises(UsageError) as e:
        open_source(f"s3://{bucket}/o.bin", storage_options=opts)
    assert f"storage option {key!r} is not taken by the s3:// backend" in str(e.value)
    assert "TypeError" not in str(e.value) and "testing" not in str(e.value)


# -- keep layout to S3: gaps between tensors -----------------------------------------------------
def _model_at_offset(offset: int):
    """A model decoded from bytes whose 16-byte tensor's reference says ``offset`` of ``w.bin``,
    its bytes set in memory."""
    import onnx
    from onnx import TensorProto, helper

    from onemodel.formats.onnx import decode_model
    from onemodel.ir import iter_tensors

    t = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4])
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "w.bin"), ("offset", str(offset)), ("length", "16")):
        e = t.external_data.add()
        e.key, e.value = k, v
    graph = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [t])
    model = decode_model(helper.make_model(graph).SerializeToString())
    for _, tensor in iter_tensors(model):
        if tensor.is_external:
            tensor.external = memoryview(np.arange(4, dtype=np.float32).tobytes())
    return model


def test_keep_to_s3_refuses_a_gibibyte_gap_before_uploading(s3):
    import onemodel
    from onemodel.errors import UnsupportedError

    server, bucket = s3
    with pytest.raises(UnsupportedError, match="cannot leave holes"):
        onemodel.save(_model_at_offset(1 << 30), f"s3://{bucket}/d/m.onnx",
                      storage_options=server.storage_options)
    client = server.client()
    assert client.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_keep_to_s3_writes_a_small_gap_as_zeros(s3):
    import onemodel

    server, bucket = s3
    onemodel.save(_model_at_offset(1000), f"s3://{bucket}/d/m.onnx",
                  storage_options=server.storage_options)
    data = server.filesystem().cat_file(f"{bucket}/d/w.bin")
    assert data == bytes(1000) + np.arange(4, dtype=np.float32).tobytes()

