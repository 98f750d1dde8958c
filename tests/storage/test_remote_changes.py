"""A remote object overwritten between ``load`` and a tensor read is an IoError, never a mix of
old and new bytes (docs/storage.md, "Objects that change while being read").

On S3 (the moto server the tests start) every ranged GET carries ``If-Match`` with the ETag
seen at open, and in a versioned bucket the version id, so the opened version is what is read.
Other fsspec backends are checked against what ``fs.info`` reported at open; ``memory://``
reports a ``created`` time that changes when an object is replaced.
"""

from __future__ import annotations

import uuid

import fsspec
import numpy as np
import pytest

import onemodel
from onemodel.errors import IoError
from onemodel.storage import BytesSink, RemoteSource

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

# float32 elements per tensor: 2.5 MiB, so that an object of two is past the kept head of the
# first read and larger than WHOLE_OBJECT_BYTES (a smaller object is fetched whole at open)
N = 640 * 1024


def _arrays(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(N).astype(np.float32) for _ in range(2)]


def _proto(arrays):
    graph = helper.make_graph(
        [helper.make_node("Add", ["w0", "w1"], ["y"])], "g", [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N])],
        [numpy_helper.from_array(a, f"w{i}") for i, a in enumerate(arrays)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _onemodel_bytes(arrays) -> bytes:
    """A OneModel file of the two tensors; the same layout (and size) for any values."""
    with onemodel.load(_proto(arrays).SerializeToString()) as m:
        sink = BytesSink()
        onemodel.save(m, sink, format="onemodel")
    return sink.getvalue()


def _assert_changed(error: IoError, url_part: str) -> None:
    assert "the object changed since it was opened" in error.message
    assert url_part in error.source


# -- S3 ---------------------------------------------------------------------------------------
def test_s3_onemodel_overwritten_between_load_and_a_tensor_read(s3):
    server, bucket = s3
    fs = server.filesystem()
    old, new = _arrays(1), _arrays(2)
    old_bytes, new_bytes = _onemodel_bytes(old), _onemodel_bytes(new)
    assert len(old_bytes) == len(new_bytes) and old_bytes != new_bytes
    fs.pipe_file(f"{bucket}/m.onemodel", old_bytes)
    url = f"s3://{bucket}/m.onemodel"
    with onemodel.load(url, storage_options=server.storage_options) as model:
        w0, w1 = model.graph.initializers
        assert np.array_equal(w0.numpy(), old[0])
        fs.pipe_file(f"{bucket}/m.onemodel", new_bytes)  # same size, other bytes
        with pytest.raises(IoError) as e:
            w1.numpy()
    _assert_changed(e.value, f"s3://{bucket}/m.onemodel")
    assert "ETag" in e.value.message


def test_a_small_object_overwritten_after_load_still_reads_as_opened(s3):
    # an object of at most WHOLE_OBJECT_BYTES is fetched whole by its first read: its tensors
    # are those of the object opened, whatever happens to it afterwards (never a mix)
    from onemodel.storage.remote import WHOLE_OBJECT_BYTES

    server, bucket = s3
    fs = server.filesystem()
    rng = np.random.default_rng(7)
    old, new = ([rng.standard_normal(64 * 1024).astype(np.float32) for _ in range(2)]
                for _ in range(2))
    graph = lambda arrays: _proto(arrays)  # noqa: E731
    old_bytes = onemodel.to_bytes(onemodel.load(graph(old).SerializeToString()),
                                  format="onemodel")
    assert len(old_bytes) <= WHOLE_OBJECT_BYTES
    fs.pipe_file(f"{bucket}/s.onemodel", old_bytes)
    with onemodel.load(f"s3://{bucket}/s.onemodel", storage_options=server.storage_options) as m:
        fs.pipe_file(f"{bucket}/s.onemodel", onemodel.to_bytes(
            onemodel.load(graph(new).SerializeToString()), format="onemodel"))
        got = [t.numpy() for t in m.graph.initializers]
    assert all(np.array_equal(a, b) for a, b in zip(got, old))


def test_s3_external_data_file_overwritten_between_load_and_a_tensor_read(s3, tmp_path):
    server, bucket = s3
    opts = server.storage_options
    fs = server.filesystem()
    old, new = _arrays(3), _arrays(4)
    onnx.save_model(_proto(old), str(tmp_path / "m.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="m.data", size_threshold=0)
    fs.put_file(str(tmp_path / "m.onnx"), f"{bucket}/x/m.onnx")
    fs.put_file(str(tmp_path / "m.data"), f"{bucket}/x/m.data")
    with onemodel.load(f"s3://{bucket}/x/m.onnx", storage_options=opts) as model:
        w0, w1 = model.graph.initializers
        assert w0.is_external
        fs.pipe_file(f"{bucket}/x/m.data", new[0].tobytes() + new[1].tobytes())
        for t in (w0, w1):  # neither tensor was read before the overwrite
            with pytest.raises(IoError) as e:
                t.numpy()
            _assert_changed(e.value, f"s3://{bucket}/x/m.data")


def test_s3_versioned_bucket_reads_the_version_that_was_opened(s3):
    server, bucket = s3
    server.client().put_bucket_versioning(Bucket=bucket,
                                          VersioningConfiguration={"Status": "Enabled"})
    fs = server.filesystem()
    old, new = _arrays(5), _arrays(6)
    fs.pipe_file(f"{bucket}/v.onemodel", _onemodel_bytes(old))
    url = f"s3://{bucket}/v.onemodel"
    with onemodel.load(url, storage_options=server.storage_options) as model:
        fs.pipe_file(f"{bucket}/v.onemodel", _onemodel_bytes(new))
        # the opened version is pinned: all of its bytes, none of the new object's
        got = [t.numpy() for t in model.graph.initializers]
    assert all(np.array_equal(a, b) for a, b in zip(got, old))
    with onemodel.load(url, storage_options=server.storage_options) as again:
        assert np.array_equal(again.graph.initializers[1].numpy(), new[1])


def test_s3_unchanged_object_reads_normally_with_if_match(s3):
    server, bucket = s3
    fs = server.filesystem()
    data = np.random.default_rng(0).bytes(300_000)
    fs.pipe_file(f"{bucket}/blob", data)
    src = RemoteSource(f"s3://{bucket}/blob", server.storage_options)
    assert bytes(src.read(200_000, 1000)) == data[200_000:201_000]
    got = src.fetch_many([(70_000, 10), (290_000, 10_000)])
    assert [bytes(g) for g in got] == [data[70_000:70_010], data[290_000:]]


# -- another fsspec backend: memory:// reports a modification ("created") time ------------------
def test_memory_object_replaced_between_two_reads_is_io_error():
    fs = fsspec.filesystem("memory")
    path = f"/chg-{uuid.uuid4().hex[:8]}/blob"
    data = bytes(range(256)) * 20_000  # 5 MB: read by ranges (past WHOLE_OBJECT_BYTES)
    fs.pipe_file(path, data)
    src = RemoteSource("memory://" + path)
    assert bytes(src.read(100_000, 16)) == data[100_000:100_016]
    fs.pipe_file(path, data[::-1])  # same size
    with pytest.raises(IoError) as e:
        src.read(2_000_000, 16)
    _assert_changed(e.value, path)
    assert "modification time changed" in e.value.message
    fs.rm(path)


def test_memory_onemodel_overwritten_between_load_and_a_tensor_read():
    fs = fsspec.filesystem("memory")
    path = f"/chg-{uuid.uuid4().hex[:8]}/m.onemodel"
    old, new = _arrays(7), _arrays(8)
    fs.pipe_file(path, _onemodel_bytes(old))
    with onemodel.load("memory://" + path) as model:
        w0, w1 = model.graph.initializers
        assert np.array_equal(w0.numpy(), old[0])
        fs.pipe_file(path, _onemodel_bytes(new))
        with pytest.raises(IoError) as e:
            w1.numpy()
    _assert_changed(e.value, path)
    fs.rm(path)
