"""Reading external data (ONNX Part 1, Clauses 13.2, 13.3, 15.4): every tensor equals what
``onnx.load(load_external_data=True)`` gives, bit for bit; the reference keys and values are
checked; files are mapped once and tensors are views of them."""

from __future__ import annotations

import hashlib
import pathlib

import numpy as np
import onnx
import pytest
from external_models import (
    external_tensor,
    model_with,
    oracle_tensors,
    rich_model,
    save_external,
    write_model,
)
from onnx import TensorProto

import onemodel
from onemodel.errors import InvalidModelError, IoError
from onemodel.formats.onnx import decode_model, read, resolve_external_data
from onemodel.formats.onnx.external_refs import ExternalReference, location_parts, parse_reference
from onemodel.ir import StringStringEntry, iter_tensors
from onemodel.storage import LocalSource, MemorySource, open_source
from onemodel.storage.blob import Blob

ROOT = pathlib.Path(__file__).resolve().parents[3]
DYNAMO = ROOT / "testdata" / "models" / "external" / "mlp_dynamo.onnx"


def _load(path, **kw):
    return read(open_source(str(path)), **kw)


def _assert_same_as_onnx(path) -> onemodel.Model:
    model = _load(path)
    ours = [t.tobytes() for _, t in iter_tensors(model)]
    assert ours == oracle_tensors(path)
    return model


@pytest.mark.parametrize("kw", [
    dict(all_tensors_to_one_file=True, location="weights.bin", size_threshold=1024),
    dict(all_tensors_to_one_file=True, location="all.data", size_threshold=0,
         convert_attribute=True),
    dict(all_tensors_to_one_file=False, size_threshold=1024),
    dict(all_tensors_to_one_file=False, size_threshold=0, convert_attribute=True),
    dict(all_tensors_to_one_file=True, location="big_only.bin", size_threshold=5000),
], ids=["one-file", "one-file-all", "per-tensor", "per-tensor-all", "threshold-5000"])
def test_onnx_saved_models_read_bit_for_bit(tmp_path, kw):
    path = save_external(rich_model(), tmp_path / "m.onnx", **kw)
    with _assert_same_as_onnx(path) as model:
        external = [t for _, t in iter_tensors(model) if t.is_external]
        # what onnx made external is external here too, and the threshold decides which
        written = decode_model(path.read_bytes())
        assert [t.name for _, t in iter_tensors(written) if t.is_external] == \
            [t.name for t in external]
        threshold = kw["size_threshold"]
        assert external and all(t.nbytes >= threshold - 64 for t in external)
        if threshold:
            assert any(not t.is_external for _, t in iter_tensors(model))
        for t in external:
            assert bytes(t.external) == t.tobytes()
            assert isinstance(t.external, Blob) and t.external.nbytes == t.nbytes


def test_torch_dynamo_export_reads_bit_for_bit():
    with _assert_same_as_onnx(DYNAMO) as model:
        ext = [t for _, t in iter_tensors(model) if t.is_external]
        assert len(ext) == 5
        assert {id(t.external.source) for t in ext} == {id(ext[0].external.source)}  # one map


def test_each_data_file_is_mapped_once_and_tensors_are_views(tmp_path):
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((256, 512)).astype(np.float32) for _ in range(4)]  # 2 MiB
    proto = onnx.helper.make_model(onnx.helper.make_graph(
        [], "g", [], [], initializer=[onnx.numpy_helper.from_array(a, f"w{i}")
                                      for i, a in enumerate(arrays)]))
    path = save_external(proto, tmp_path / "m.onnx", location="w.bin")
    # a second spelling of the same location resolves to the same map
    raw = onnx.load(str(path), load_external_data=False)
    raw.graph.initializer[3].external_data[0].value = "./w.bin"
    write_model(raw, path)
    with _load(path) as model:
        tensors = model.graph.initializers
        data_sources = model.resources[1:]
        assert len(data_sources) == 1
        src = data_sources[0]
        assert isinstance(src, LocalSource) and src.mapped
        for t, a in zip(tensors, arrays):
            assert t.external.source is src
            v = t.numpy()
            assert np.array_equal(v, a)
            assert not v.flags.writeable
            assert np.shares_memory(v, np.frombuffer(src.whole(), np.uint8))
        assert model.base_dir == str(tmp_path)


def test_offsets_are_taken_as_written(tmp_path):
    """Offsets out of file order and junk between tensors: read as written."""
    a = np.arange(10, dtype=np.float32)
    b = np.arange(100, 110, dtype=np.float32)
    data = b"J" * 8 + b.tobytes() + b"junk" + a.tobytes()
    (tmp_path / "d.bin").write_bytes(data)
    ta = external_tensor("a", [10], [("location", "d.bin"), ("offset", str(8 + 40 + 4)),
                                     ("length", "40")])
    tb = external_tensor("b", [10], [("location", "d.bin"), ("offset", "8"), ("length", "40")])
    proto = model_with(ta)
    proto.graph.initializer.append(tb)
    path = write_model(proto, tmp_path / "m.onnx")
    with _load(path) as model:
        got = {t.name: t.numpy() for t in model.graph.initializers}
        assert np.array_equal(got["a"], a) and np.array_equal(got["b"], b)


def test_missing_offset_is_zero_and_missing_length_runs_to_the_end(tmp_path):
    a = np.arange(12, dtype=np.int32)
    (tmp_path / "d.bin").write_bytes(a.tobytes())
    t = external_tensor("a", [12], [("location", "d.bin")], TensorProto.INT32)
    with _load(write_model(model_with(t), tmp_path / "m.onnx")) as model:
        assert np.array_equal(model.graph.initializers[0].numpy(), a)
    # to the end of the file, which is one element longer than dims need: refused
    (tmp_path / "d.bin").write_bytes(a.tobytes() + b"\0\0\0\0")
    with pytest.raises(InvalidModelError) as e:
        _load(tmp_path / "m.onnx")
    assert "does not match dims [12]" in str(e.value) and "'a'" in str(e.value)


def test_checksum_is_verified_before_use(tmp_path):
    a = np.arange(8, dtype=np.float32)
    (tmp_path / "d.bin").write_bytes(a.tobytes())
    good = hashlib.sha1(a.tobytes()).hexdigest()
    t = external_tensor("a", [8], [("location", "d.bin"), ("checksum", good.upper())])
    with _load(write_model(model_with(t), tmp_path / "m.onnx")) as model:
        assert np.array_equal(model.graph.initializers[0].numpy(), a)
    bad = external_tensor("a", [8], [("location", "d.bin"), ("checksum", "0" * 40)])
    with pytest.raises(InvalidModelError) as e:
        _load(write_model(model_with(bad), tmp_path / "m.onnx"))
    msg = str(e.value)
    assert e.value.kind == "InvalidModel" and "checksum mismatch" in msg
    assert good in msg and "'a'" in msg and "'d.bin'" in msg
    assert e.value.path == "ModelProto.graph.initializer[0]"


GOOD = [("location", "d.bin"), ("offset", "0"), ("length", "16")]


@pytest.mark.parametrize("entries, words", [
    ([("location", "d.bin"), ("basepath", "/etc")], "unknown key 'basepath'"),
    ([("location", "d.bin"), ("Offset", "0")], "unknown key 'Offset'"),
    ([("location", "d.bin"), ("location", "e.bin")], "'location' appears more than once"),
    ([("location", "d.bin"), ("offset", "0"), ("offset", "0")], "'offset' appears more than once"),
    ([("offset", "0"), ("length", "16")], "no location"),
    ([("location", "")], "no location"),
    ([("location", "d.bin"), ("offset", "-1")], "offset '-1' is not a non-negative decimal"),
    ([("location", "d.bin"), ("length", "-16")], "length '-16' is not a non-negative decimal"),
    ([("location", "d.bin"), ("offset", "0x10")], "offset '0x10' is not"),
    ([("location", "d.bin"), ("offset", "1e3")], "offset '1e3' is not"),
    ([("location", "d.bin"), ("offset", "+0")], "offset '+0' is not"),
    ([("location", "d.bin"), ("offset", " 0")], "offset ' 0' is not"),
    ([("location", "d.bin"), ("length", "1_6")], "length '1_6' is not"),
    ([("location", "d.bin"), ("length", "\u0661\u0666")], "is not a non-negative decimal"),
    ([("location", "d.bin"), ("length", "")], "length '' is not"),
    ([("location", "d.bin"), ("offset", "9" * 30)], "larger than 2^63 - 1"),
    ([("location", "d.bin"), ("offset", "9223372036854775808")], "larger than 2^63 - 1"),
    ([("location", "d.bin"), ("offset", "9223372036854775807")], "past the end of the 16-byte"),
    ([("location", "d.bin"), ("offset", "8"), ("length", "16")], "shorter than offset 8 + length"),
    ([("location", "d.bin"), ("length", "18446744073709551616")], "larger than 2^63 - 1"),
    ([("location", "d.bin"), ("length", "12")], "length 12 does not match dims [4]"),
    ([("location", "d.bin"), ("checksum", "abc")], "not a SHA-1 digest"),
], ids=lambda x: x if isinstance(x, str) else None)
def test_bad_references_are_refused_with_tensor_and_location(tmp_path, entries, words):
    (tmp_path / "d.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    t = external_tensor("the_tensor", [4], entries)
    path = write_model(model_with(t), tmp_path / "m.onnx")
    with pytest.raises(InvalidModelError) as e:
        _load(path)
    msg = str(e.value)
    assert e.value.kind == "InvalidModel"
    assert words in msg, msg
    assert "'the_tensor'" in msg
    loc = next((v for k, v in entries if k == "location"), None)
    if loc:
        assert f"location {loc!r}" in msg
    assert e.value.path == "ModelProto.graph.initializer[0]"
    assert e.value.source == str(path)
    assert isinstance(e.value.offset, int)


def test_missing_file_is_an_io_error_naming_tensor_and_location(tmp_path):
    t = external_tensor("w", [4], [("location", "nowhere.bin")])
    with pytest.raises(IoError) as e:
        _load(write_model(model_with(t), tmp_path / "m.onnx"))
    assert "'w'" in str(e.value) and "'nowhere.bin'" in str(e.value)
    assert "does not exist" in str(e.value)


def test_string_tensor_cannot_be_external(tmp_path):
    (tmp_path / "d.bin").write_bytes(b"abcd")
    t = external_tensor("s", [1], [("location", "d.bin")], TensorProto.STRING)
    with pytest.raises(InvalidModelError, match="STRING tensor cannot have external data"):
        _load(write_model(model_with(t), tmp_path / "m.onnx"))


@pytest.mark.parametrize("where, path", [
    ("constant", "ModelProto.graph.node[0].attribute[0].t"),
    ("subgraph", "ModelProto.graph.node[0].attribute[0].g.initializer[0]"),
    ("sparse", "ModelProto.graph.sparse_initializer[0].values"),
    ("function", "ModelProto.functions[0].node[0].attribute[0].t"),
])
def test_tensors_anywhere_are_resolved(tmp_path, where, path):
    a = np.arange(6, dtype=np.float32) * 3
    (tmp_path / "d.bin").write_bytes(b"\0" * 64 + a.tobytes())
    t = external_tensor("x", [6], [("location", "d.bin"), ("offset", "64"), ("length", "24")])
    model_path = write_model(model_with(t, where), tmp_path / "m.onnx")
    with _load(model_path) as model:
        found = [t for _, t in iter_tensors(model) if t.is_external]
        assert len(found) == (2 if where == "subgraph" else 1)  # both If branches
        assert all(np.array_equal(f.numpy(), a) for f in found)
    # the same reference with a short length: the error names the tensor's proto path
    t.external_data[2].value = "20"
    write_model(model_with(t, where), model_path)
    with pytest.raises(InvalidModelError) as e:
        _load(model_path)
    assert e.value.path == path


def test_bytes_without_base_directory_give_a_clear_error(tmp_path):
    path = save_external(rich_model(), tmp_path / "m.onnx", location="w.bin")
    data = path.read_bytes()
    with pytest.raises(InvalidModelError) as e:
        read(MemorySource(data))
    assert "no base directory" in str(e.value) and "base_dir=" in str(e.value)
    # opting out keeps the references; values then say they were not resolved
    with read(MemorySource(data), load_external=False) as model:
        t = model.graph.initializers[0]
        assert t.is_external and t.external is None
        with pytest.raises(InvalidModelError, match="not resolved"):
            t.numpy()
        # resolution later, against an explicit base directory
        model.resources += resolve_external_data(model, str(tmp_path))
        assert [x.tobytes() for _, x in iter_tensors(model)] == oracle_tensors(path)
    with read(MemorySource(data), base_dir=str(tmp_path)) as model:
        assert [x.tobytes() for _, x in iter_tensors(model)] == oracle_tensors(path)


def test_load_of_bytes_never_resolves_against_the_working_directory(tmp_path, monkeypatch):
    """onemodel.load of in-memory bytes (a MemorySource, bytes) has no base directory: the
    working directory, which holds the data file here, is not used (Clause 15.3)."""
    path = save_external(rich_model(), tmp_path / "m.onnx", location="w.bin")
    data = path.read_bytes()
    monkeypatch.chdir(tmp_path)
    for target in (MemorySource(data), data):
        with pytest.raises(InvalidModelError) as e:
            onemodel.load(target)
        assert "no base directory" in str(e.value) and "base_dir=" in str(e.value)
    with onemodel.load(MemorySource(data), base_dir=str(tmp_path)) as model:
        assert [x.tobytes() for _, x in iter_tensors(model)] == oracle_tensors(path)


def test_a_compressed_remote_model_resolves_data_files_beside_it():
    """A ``.zst`` model under a URL is decompressed to a temporary file, but its external data
    still resolves against the URL's directory (not the temporary file's)."""
    import uuid

    import fsspec
    import zstandard

    fs = fsspec.filesystem("memory")
    root = f"/extzst-{uuid.uuid4().hex}"
    try:
        a = np.arange(20, dtype=np.float32)
        fs.pipe(f"{root}/dir/w.bin", a.tobytes())
        t = external_tensor("w", [20], [("location", "w.bin")])
        packed = zstandard.ZstdCompressor().compress(model_with(t).SerializeToString())
        fs.pipe(f"{root}/dir/m.onnx.zst", packed)
        with onemodel.load(f"memory://{root}/dir/m.onnx.zst") as model:
            assert model.base_dir == f"memory://{root}/dir/"
            assert np.array_equal(model.graph.initializers[0].numpy(), a)
    finally:
        fs.rm(root, recursive=True)


def test_resolution_uses_the_model_directory_not_the_working_directory(tmp_path, monkeypatch):
    path = save_external(rich_model(), tmp_path / "sub" / "m.onnx", location="w.bin")
    decoy = tmp_path / "w.bin"
    decoy.write_bytes(b"\xff" * (1 << 16))
    monkeypatch.chdir(tmp_path)
    with _load("sub/m.onnx") as model:
        assert [t.tobytes() for _, t in iter_tensors(model)] == oracle_tensors(path)


def test_load_external_false_opens_no_data_file(tmp_path):
    path = save_external(rich_model(), tmp_path / "m.onnx", location="w.bin")
    (tmp_path / "w.bin").unlink()
    with _load(path, load_external=False) as model:
        assert len(model.resources) == 1
        assert all(t.external is None for _, t in iter_tensors(model) if t.is_external)


def test_public_load_resolves_external_data(tmp_path):
    path = save_external(rich_model(), tmp_path / "m.onnx", location="w.bin")
    with onemodel.load(str(path)) as model:
        assert [t.tobytes() for _, t in iter_tensors(model)] == oracle_tensors(path)


def test_parse_reference_and_location_parts():
    ref = parse_reference([StringStringEntry(key="location", value="a/./b//c.bin"),
                           StringStringEntry(key="length", value="007")])
    assert ref == ExternalReference("a/./b//c.bin", 0, 7, None)
    assert location_parts(ref.location) == ("a", "b", "c.bin")
    for bad in ("", "/abs", "C:/x", "c:x", "a\\b", "a/../b", "..", "a/", "a/.", "x\0y"):
        with pytest.raises(InvalidModelError):
            location_parts(bad)


def test_remote_model_resolves_data_files_beside_it():
    """A model under a URL: locations resolve against the model's URL directory, tensors are
    lazy ranges of the data file, and a location leaving that directory is refused."""
    import uuid

    import fsspec

    fs = fsspec.filesystem("memory")
    root = f"/ext-{uuid.uuid4().hex}"
    try:
        a = np.arange(20, dtype=np.float32)
        fs.pipe(f"{root}/dir/w.bin", b"\0" * 16 + a.tobytes())
        fs.pipe(f"{root}/secret.bin", a.tobytes())
        t = external_tensor("w", [20], [("location", "w.bin"), ("offset", "16")])
        fs.pipe(f"{root}/dir/m.onnx", model_with(t).SerializeToString())
        with onemodel.load(f"memory://{root}/dir/m.onnx") as model:
            (w,) = model.graph.initializers
            assert type(w.external).__name__ == "Blob"
            assert np.array_equal(w.numpy(), a)
        bad = external_tensor("w", [20], [("location", "../secret.bin")])
        fs.pipe(f"{root}/dir/bad.onnx", model_with(bad).SerializeToString())
        with pytest.raises(InvalidModelError, match="parent-directory") as e:
            onemodel.load(f"memory://{root}/dir/bad.onnx")
        assert "'w'" in str(e.value)
    finally:
        fs.rm(root, recursive=True)
