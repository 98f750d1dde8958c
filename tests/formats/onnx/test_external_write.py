"""Writing external data layouts (Clause 13): keep, inline, one file, one file per tensor,
threshold, alignment; exact data files (no appending, no orphans); writing onto mapped files;
the 2 GiB limit; the data file report."""

from __future__ import annotations

import hashlib
import os
import pathlib

import numpy as np
import onnx
import pytest
from external_models import (
    external_tensor,
    files_of,
    mlp_model,
    model_with,
    oracle_tensors,
    rich_model,
    save_external,
    write_model,
)
from oracle_releases import NO_ONNXRUNTIME

import onemodel
from onemodel import limits
from onemodel.errors import InvalidModelError, UnsupportedError
from onemodel.formats.onnx import decode_model, external_data_report, read, write
from onemodel.ir import Tensor, iter_tensors
from onemodel.storage import BytesSink, LocalSink, open_source

ROOT = pathlib.Path(__file__).resolve().parents[3]
DYNAMO = ROOT / "testdata" / "models" / "external" / "mlp_dynamo.onnx"


def _load(path, **kw):
    return read(open_source(str(path)), **kw)


def _save(model, path, **kw) -> pathlib.Path:
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sink = LocalSink(str(path))
    try:
        write(model, sink, **kw)
    except BaseException:
        sink.abort()
        raise
    sink.commit()
    return path


def _refs(path) -> dict[str, dict[str, str]]:
    """``{tensor name: {key: value}}`` of the external tensors of the .onnx file at ``path``."""
    return _refs_of_bytes(pathlib.Path(path).read_bytes())


def _refs_of_bytes(data: bytes) -> dict[str, dict[str, str]]:
    model = decode_model(data)
    return {t.name: {e.key: e.value for e in t.external_data}
            for _, t in iter_tensors(model) if t.is_external}


# -- keep -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [
    dict(all_tensors_to_one_file=True, location="weights.bin", size_threshold=1024),
    dict(all_tensors_to_one_file=True, location="all.data", size_threshold=0,
         convert_attribute=True),
    dict(all_tensors_to_one_file=False, size_threshold=1024),
], ids=["one-file", "one-file-all", "per-tensor"])
def test_keep_gives_back_the_onnx_file_and_every_data_file_byte_for_byte(tmp_path, kw):
    src = save_external(rich_model(), tmp_path / "in" / "m.onnx", **kw)
    with _load(src) as model:
        _save(model, tmp_path / "out" / "m.onnx")
    assert files_of(tmp_path / "out") == files_of(tmp_path / "in")


def test_keep_round_trips_the_torch_dynamo_export(tmp_path):
    with _load(DYNAMO) as model:
        _save(model, tmp_path / "mlp_dynamo.onnx")
    assert files_of(tmp_path) == files_of(DYNAMO.parent)


def test_keep_drops_orphaned_bytes_and_updates_a_checksum(tmp_path):
    """A data file with bytes no reference selects (what re-saving with onnx leaves) is
    rewritten to exactly the referenced bytes; its checksum reference follows."""
    a = np.arange(300, dtype=np.float32)
    b = np.arange(300, 500, dtype=np.float32)
    data = a.tobytes() + b"\xaa" * 100 + b.tobytes() + b"ORPHAN" * 50
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "d.bin").write_bytes(data)
    sha = hashlib.sha1(data).hexdigest()
    ta = external_tensor("a", [300], [("location", "d.bin"), ("offset", "0"), ("length", "1200"),
                                      ("checksum", sha)])
    tb = external_tensor("b", [200], [("location", "d.bin"), ("offset", "1300"),
                                      ("length", "800"), ("checksum", sha)])
    proto = model_with(ta)
    proto.graph.initializer.append(tb)
    src = write_model(proto, tmp_path / "in" / "m.onnx")
    with _load(src) as model:
        before = external_data_report(model)
        assert before == [{"location": "d.bin", "size": len(data), "tensors": 2,
                           "referenced": 2000, "unreferenced": 400, "gaps": 100,
                           "trailing": 300, "alignment": 4, "aligned": False,
                           "aligned_64": False}]
        out = _save(model, tmp_path / "out" / "m.onnx")
    new = (tmp_path / "out" / "d.bin").read_bytes()
    assert new == a.tobytes() + bytes(100) + b.tobytes()
    refs = _refs(out)
    assert refs["a"]["checksum"] == refs["b"]["checksum"] == hashlib.sha1(new).hexdigest()
    assert list(refs["a"]) == ["location", "offset", "length", "checksum"]
    with _load(out) as again:  # the checksum verifies
        assert np.array_equal(again.graph.initializers[1].numpy(), b)
        assert external_data_report(again)[0]["unreferenced"] == 100


def test_a_checksum_is_computed_from_the_bytes_as_they_are_written(tmp_path):
    """The new SHA-1 of a rewritten data file comes from the bytes on their way to it: each
    referenced byte of the source data file is read once (a second read would be a second
    fetch for a remote file)."""
    a = np.arange(300, dtype=np.float32)
    data = a.tobytes() + b"ORPHAN" * 10
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "d.bin").write_bytes(data)
    ta = external_tensor("a", [300], [("location", "d.bin"), ("offset", "0"), ("length", "1200"),
                                      ("checksum", hashlib.sha1(data).hexdigest())])
    src = write_model(model_with(ta), tmp_path / "in" / "m.onnx")
    with _load(src) as model:
        data_source = model.resources[1]
        read, reads = data_source.read, []

        def counted(offset, length):
            reads.append((offset, length))
            return read(offset, length)

        data_source.read = counted
        out = _save(model, tmp_path / "out" / "m.onnx")
    assert sum(n for _, n in reads) == 1200
    new = (tmp_path / "out" / "d.bin").read_bytes()
    assert new == a.tobytes() and _refs(out)["a"]["checksum"] == hashlib.sha1(new).hexdigest()


def test_keep_in_place_leaves_an_exact_data_file_untouched(tmp_path):
    src = save_external(rich_model(), tmp_path / "m.onnx", location="w.bin")
    ino = os.stat(tmp_path / "w.bin").st_ino
    with _load(src) as model:
        _save(model, src)
    assert os.stat(tmp_path / "w.bin").st_ino == ino


def test_keep_without_loading_writes_the_onnx_only_beside_its_data(tmp_path):
    src = save_external(rich_model(), tmp_path / "m.onnx", location="w.bin")
    before = files_of(tmp_path)
    with _load(src, load_external=False) as model:
        model.doc_string = "edited"
        _save(model, tmp_path / "m2.onnx")
        with pytest.raises(InvalidModelError, match="was not loaded"):
            _save(model, tmp_path / "elsewhere" / "m.onnx")
    assert not (tmp_path / "elsewhere" / "m.onnx").exists()
    after = files_of(tmp_path)
    assert after["w.bin"] == before["w.bin"]
    assert decode_model(after["m2.onnx"]).doc_string == "edited"


# -- inline, one file, per tensor ------------------------------------------------------------------
def _check_data_file(directory, refs, align):
    """Every offset aligned, zeros in gaps, nothing after the last tensor."""
    by_file: dict[str, list] = {}
    for r in refs.values():
        by_file.setdefault(r["location"], []).append((int(r["offset"]), int(r["length"])))
    for loc, ranges in by_file.items():
        data = (pathlib.Path(directory) / loc).read_bytes()
        ranges.sort()
        assert all(o % align == 0 for o, _ in ranges)
        assert len(data) == ranges[-1][0] + ranges[-1][1]
        pos = 0
        for o, n in ranges:
            assert o >= pos and not any(data[pos:o])
            pos = o + n


@pytest.mark.parametrize("align", [4096, 65536, 64, 1])
def test_one_data_file_with_alignment(tmp_path, align):
    src = save_external(rich_model(), tmp_path / "in" / "m.onnx", location="w.bin")
    want = oracle_tensors(src)
    with _load(src) as model:
        out = _save(model, tmp_path / "out" / "m.onnx", layout="file",
                    external_data="weights/all.bin", align=align, threshold=1024)
    refs = _refs(out)
    assert {r["location"] for r in refs.values()} == {"weights/all.bin"}
    # initializers of every graph of 1024 bytes or more; attribute tensors stay inline
    assert sorted(refs) == sorted(["w_f32", "w_f16", "w_i8", "w_i64", "w_bool", "w_i4",
                                   "then_w", "else_w"])
    _check_data_file(tmp_path / "out", refs, align)
    assert sorted(files_of(tmp_path / "out")) == ["m.onnx", "weights/all.bin"]
    assert oracle_tensors(out) == want


def test_default_data_file_name_and_threshold(tmp_path):
    src = save_external(rich_model(), tmp_path / "in" / "m.onnx", location="w.bin")
    with _load(src) as model:
        out = _save(model, tmp_path / "out" / "net.onnx", layout="file", threshold=3000)
        small = _save(model, tmp_path / "all" / "net.onnx", layout="file", threshold=0,
                      convert_attributes=True)
    refs = _refs(out)
    assert {r["location"] for r in refs.values()} == {"net.onnx.data"}
    with _load(out) as m:
        sizes = {t.name: t.nbytes for _, t in iter_tensors(m)}
    assert sorted(refs) == sorted(n for n, s in sizes.items() if s >= 3000)
    # threshold 0 with attributes: every tensor with contents, Constant values included
    assert sorted(_refs(small)) == sorted(sizes)
    assert oracle_tensors(small) == oracle_tensors(src)


def test_one_file_per_tensor(tmp_path):
    src = save_external(rich_model(), tmp_path / "in" / "m.onnx", location="w.bin")
    with _load(src) as model:
        out = _save(model, tmp_path / "out" / "m.onnx", layout="per_tensor", threshold=1024)
    refs = _refs(out)
    assert all(r["location"] == name and r["offset"] == "0" for name, r in refs.items())
    assert sorted(files_of(tmp_path / "out")) == sorted(["m.onnx"] + list(refs))
    assert oracle_tensors(out) == oracle_tensors(src)


def test_per_tensor_file_names_are_safe_and_unique(tmp_path):
    names = ["onnx::MatMul_0", "a/b", "..", "CON", "m.onnx", "A/B", ""]
    graph = onnx.helper.make_graph([], "g", [], [], initializer=[
        onnx.numpy_helper.from_array(np.full(300, i, np.float32), n) for i, n in enumerate(names)])
    model = decode_model(onnx.helper.make_model(graph).SerializeToString())
    out = _save(model, tmp_path / "m.onnx", layout="per_tensor")
    locs = [r["location"] for r in _refs(out).values()]
    assert locs == ["onnx__MatMul_0", "a_b", "tensor", "_CON", "m.onnx.2", "A_B.2", "tensor.2"]
    with _load(out) as m:
        assert [int(t.numpy()[0]) for t in m.graph.initializers] == list(range(len(names)))


def test_inline_then_external_again(tmp_path):
    src = save_external(rich_model(), tmp_path / "in" / "m.onnx", location="w.bin")
    with _load(src) as model:
        inline = _save(model, tmp_path / "inline" / "m.onnx", layout="inline")
        # the model read is unchanged by the write (its tensors are still external)
        assert model.graph.initializers[0].is_external
    assert sorted(files_of(tmp_path / "inline")) == ["m.onnx"]
    assert _refs(inline) == {}
    assert oracle_tensors(inline) == oracle_tensors(src)
    with _load(inline) as model:
        back = _save(model, tmp_path / "back" / "m.onnx", layout="file", external_data="w.bin",
                     align=1)
    # with align=1 the tensors sit back to back, in the order of the model
    refs = _refs(back)
    assert len(files_of(tmp_path / "back")["w.bin"]) == sum(int(r["length"])
                                                            for r in refs.values())
    assert [int(r["offset"]) for r in refs.values()] == sorted(int(r["offset"])
                                                               for r in refs.values())
    assert oracle_tensors(back) == oracle_tensors(src)


def test_layouts_run_in_onnxruntime(tmp_path):
    ort = pytest.importorskip("onnxruntime", reason=NO_ONNXRUNTIME)
    proto = mlp_model((64, 128, 32))
    x = np.random.default_rng(3).standard_normal((1, 64)).astype(np.float32)
    src = write_model(proto, tmp_path / "in" / "m.onnx")
    expected = ort.InferenceSession(str(src)).run(None, {"x": x})[0]
    with _load(src) as model:
        outs = [_save(model, tmp_path / "file" / "m.onnx", layout="file", threshold=0),
                _save(model, tmp_path / "pt" / "m.onnx", layout="per_tensor", threshold=0),
                _save(model, tmp_path / "w" / "m.onnx", layout="file", align=65536)]
    for out in outs:
        assert _refs(out)
        got = ort.InferenceSession(str(out)).run(None, {"x": x})[0]
        # exact by construction: the same graph, the same weight bytes (only where they are
        # stored differs), the same input, run by the same onnxruntime kernels on the same CPU
        # in one process, so bit-equality is what the layouts must give
        assert np.array_equal(got, expected)


# -- safety ---------------------------------------------------------------------------------------
def test_never_appends_to_an_existing_data_file(tmp_path):
    src = save_external(rich_model(), tmp_path / "in" / "m.onnx", location="w.bin")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "w.bin").write_bytes(b"OLD BYTES" * 1000)
    with _load(src) as model:
        _save(model, tmp_path / "out" / "m.onnx", force=True)  # w.bin is no file of this model
    assert files_of(tmp_path / "out") == files_of(tmp_path / "in")


def test_writing_onto_the_files_the_model_is_mapped_from(tmp_path):
    """Rewriting the data file a model is mapped from (another layout, the same names) is safe:
    the new file replaces the old name, the open model keeps reading the old bytes."""
    proto = mlp_model((256, 512, 256))  # ~1 MiB of weights: the data file is mapped
    src = save_external(proto, tmp_path / "m.onnx", location="m.onnx.data")
    want = oracle_tensors(src)
    with _load(src) as model:
        assert model.resources[1].mapped
        _save(model, src, layout="file", align=65536)  # same .onnx, same data file name
        assert [t.tobytes() for _, t in iter_tensors(model)] == want  # old map still valid
        _save(model, src, layout="per_tensor")
        assert [t.tobytes() for _, t in iter_tensors(model)] == want
    assert oracle_tensors(src) == want
    _check_data_file(tmp_path, _refs(src), 1)


def test_data_file_locations_are_checked_on_write(tmp_path):
    src = save_external(rich_model(), tmp_path / "in" / "m.onnx", location="w.bin")
    with _load(src) as model:
        for bad in ("../w.bin", "/tmp/w.bin", "C:/w.bin", "a\\b"):
            with pytest.raises(UnsupportedError, match="external_data"):
                _save(model, tmp_path / "out" / "m.onnx", layout="file", external_data=bad)
        with pytest.raises(InvalidModelError, match="would replace the model file"):
            _save(model, tmp_path / "out" / "m.onnx", layout="file", external_data="m.onnx")
        with pytest.raises(UnsupportedError, match="layout must be one of"):
            _save(model, tmp_path / "out" / "m.onnx", layout="shuffled")
        for bad in (dict(threshold=-1), dict(align=0), dict(align=True), dict(align=4095),
                    dict(align=3), dict(align=1 << 40),
                    dict(layout="inline", external_data="w.bin")):
            with pytest.raises(UnsupportedError, match=next(iter(bad))):
                _save(model, tmp_path / "out" / "m.onnx", **bad)
        with pytest.raises(UnsupportedError, match="not a file"):
            write(model, BytesSink(), layout="file")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_data_file_beside_a_chained_url_is_named_after_the_model_file(tmp_path):
    """layout 'file' names the data file after the .onnx file, also under a chained URL
    (``simplecache::memory://...``): the segment with the scheme names the file."""
    import uuid

    import fsspec

    src = save_external(rich_model(), tmp_path / "in" / "m.onnx", location="w.bin")
    fs = fsspec.filesystem("memory")
    root = f"/chain-{uuid.uuid4().hex}"
    try:
        with _load(src) as model:
            onemodel.save(model, f"simplecache::memory://{root}/out.onnx", layout="file")
        assert sorted(fs.ls(root, detail=False)) == [f"{root}/out.onnx", f"{root}/out.onnx.data"]
        refs = _refs_of_bytes(fs.cat(f"{root}/out.onnx"))
        assert {r["location"] for r in refs.values()} == {"out.onnx.data"}
        with onemodel.load(f"simplecache::memory://{root}/out.onnx") as back:
            assert [t.tobytes() for _, t in iter_tensors(back)] == oracle_tensors(src)
    finally:
        fs.rm(root, recursive=True)


def test_data_files_are_not_written_through_a_symbolic_link(tmp_path):
    src = save_external(rich_model(), tmp_path / "in" / "m.onnx", location="w.bin")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "out" / "weights")
    with _load(src) as model:
        with pytest.raises(InvalidModelError, match="symbolic link"):
            _save(model, tmp_path / "out" / "m.onnx", layout="file",
                  external_data="weights/w.bin")
    assert not any((tmp_path / "elsewhere").iterdir())


def test_keep_refuses_to_write_references_outside_unless_allowed(tmp_path):
    (tmp_path / "shared.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    t = external_tensor("w", [4], [("location", "../shared.bin")])
    src = write_model(model_with(t), tmp_path / "in" / "m.onnx")
    with _load(src, allow_outside=True) as model:
        with pytest.raises(InvalidModelError, match="parent-directory"):
            _save(model, tmp_path / "out" / "m.onnx")
        _save(model, tmp_path / "out" / "m.onnx", allow_outside=True)
    assert (tmp_path / "shared.bin").read_bytes() == np.arange(4, dtype=np.float32).tobytes()


def test_inline_past_the_protobuf_limit_needs_force(tmp_path, monkeypatch):
    src = save_external(rich_model(), tmp_path / "in" / "m.onnx", location="w.bin")
    monkeypatch.setattr(limits, "PROTOBUF_MESSAGE_LIMIT", 20000)
    with _load(src) as model:
        with pytest.raises(UnsupportedError, match="2 GiB protobuf limit") as e:
            onemodel.save(model, str(tmp_path / "out.onnx"), layout="inline")
        assert e.value.message.endswith("; write the weights to external data "
                                        "(layout='file'), or pass force=True to write it anyway")
        assert not (tmp_path / "out.onnx").exists()
        _save(model, tmp_path / "ext" / "m.onnx")  # external data: small .onnx, no error
        with pytest.warns(UserWarning, match="cannot read it"):
            onemodel.save(model, str(tmp_path / "out.onnx"), layout="inline", force=True)
    assert oracle_tensors(tmp_path / "out.onnx") == oracle_tensors(src)


def test_typed_storage_tensors_move_to_data_files(tmp_path):
    t = onnx.helper.make_tensor("typed", onnx.TensorProto.FLOAT, [500], list(range(500)))
    graph = onnx.helper.make_graph([], "g", [], [], initializer=[t])
    model = decode_model(onnx.helper.make_model(graph).SerializeToString())
    assert model.graph.initializers[0].storage == "typed"
    out = _save(model, tmp_path / "m.onnx", layout="file")
    assert _refs(out)["typed"]["length"] == "2000"
    assert model.graph.initializers[0].storage == "typed"  # restored after the write
    with _load(out) as m:
        assert np.array_equal(m.graph.initializers[0].numpy(), np.arange(500, dtype=np.float32))


def test_write_is_deterministic(tmp_path):
    src = save_external(rich_model(), tmp_path / "in" / "m.onnx", location="w.bin")
    with _load(src) as model:
        a = _save(model, tmp_path / "a" / "m.onnx", layout="per_tensor", threshold=100)
        b = _save(model, tmp_path / "b" / "m.onnx", layout="per_tensor", threshold=100)
    assert files_of(a.parent) == files_of(b.parent)


def test_public_convert_with_layout_options(tmp_path):
    src = save_external(rich_model(), tmp_path / "in" / "m.onnx", location="w.bin")
    (tmp_path / "out").mkdir()
    onemodel.convert(str(src), str(tmp_path / "out" / "m.onnx"), external_data="x.bin",
                     align=64, threshold=2000)
    refs = _refs(tmp_path / "out" / "m.onnx")
    assert {r["location"] for r in refs.values()} == {"x.bin"}
    assert all(int(r["offset"]) % 64 == 0 for r in refs.values())
    assert oracle_tensors(tmp_path / "out" / "m.onnx") == oracle_tensors(src)


# -- report ---------------------------------------------------------------------------------------
def test_report_of_the_dynamo_export():
    with _load(DYNAMO) as model:
        (rep,) = external_data_report(model)
    lengths = [65536, 1024, 262144, 1024, 10240]
    assert rep == {"location": "mlp_dynamo.onnx.data", "size": sum(lengths), "tensors": 5,
                   "referenced": sum(lengths), "unreferenced": 0, "gaps": 0, "trailing": 0,
                   "alignment": 1024, "aligned": False, "aligned_64": True}


def test_report_after_writing_aligned(tmp_path):
    with _load(DYNAMO) as model:
        out = _save(model, tmp_path / "m.onnx", layout="file", external_data="d.bin")
    with _load(out) as model:
        (rep,) = external_data_report(model)
    # 65536 | 1024 -> 4096 | 262144 -> 69632 | 1024 -> 331776 | 10240 -> 335872
    assert rep["aligned"] and rep["aligned_64"] and rep["alignment"] == 4096
    assert rep["size"] == 335872 + 10240
    assert rep["referenced"] == 65536 + 1024 + 262144 + 1024 + 10240
    assert rep["gaps"] == rep["size"] - rep["referenced"] and rep["trailing"] == 0


@pytest.mark.parametrize("align,words", [
    (64, "offsets aligned to 64 bytes (64-byte aligned in a whole-file map: yes; mapping a "
         "tensor by itself needs 4096)"),
    (16, "offsets aligned to 16 bytes (64-byte aligned in a whole-file map: no, 16 bytes < 64; "
         "mapping a tensor by itself needs 4096)"),
    (4096, "offsets aligned to 4 KiB (each tensor can be mapped by itself; Windows maps at "
           "64 KiB)"),
    (65536, "offsets aligned to 64 KiB (each tensor can be mapped by itself, also at Windows' "
            "64 KiB)")])
def test_report_gives_the_alignment_the_file_has(tmp_path, align, words):
    from onnx import helper, numpy_helper

    from onemodel.formats.onnx.external_report import describe_alignment

    # three 132-byte tensors: offsets 0, k * align, 2k * align with k odd (1 for >= 132)
    arrays = [np.full(33, i, np.float32) for i in range(3)]
    graph = helper.make_graph([], "g", [], [], [numpy_helper.from_array(a, f"w{i}")
                                               for i, a in enumerate(arrays)])
    src = write_model(helper.make_model(graph), tmp_path / "in.onnx")
    with _load(src) as model:
        out = _save(model, tmp_path / "m.onnx", layout="file", external_data="d.bin",
                    align=align, threshold=0)
    offsets = sorted(int(r["offset"]) for r in _refs(out).values())
    assert offsets == [0, -(-132 // align) * align, 2 * -(-132 // align) * align]
    with _load(out) as model:
        (rep,) = external_data_report(model)
    assert rep["alignment"] == align
    assert rep["aligned"] == (align >= 4096) and rep["aligned_64"] == (align >= 64)
    assert describe_alignment(rep["alignment"]) == words


def test_describe_alignment_words():
    from onemodel.formats.onnx.external_report import describe_alignment

    assert describe_alignment(64) == ("offsets aligned to 64 bytes (64-byte aligned in a "
                                      "whole-file map: yes; mapping a tensor by itself needs "
                                      "4096)")
    assert describe_alignment(1).startswith("offsets aligned to 1 byte (")
    assert "no, 4 bytes < 64" in describe_alignment(4)
    assert describe_alignment(1 << 20).startswith("offsets aligned to 1 MiB (each tensor")
    assert describe_alignment(None) == "no tensor bytes"


def test_report_without_loading_and_of_bad_references():
    with _load(DYNAMO, load_external=False) as model:
        (rep,) = external_data_report(model)
        assert rep["size"] is None and rep["unreferenced"] is None
        assert rep["referenced"] == 339968
        model.graph.initializers[0].external_data[0].value = "../x"
        bad = external_data_report(model)
    assert bad[0]["location"] == "../x" and "parent-directory" in bad[0]["error"]


def test_new_tensor_added_to_a_loaded_model_is_written(tmp_path):
    with _load(DYNAMO) as model:
        model.graph.initializers.append(Tensor.from_numpy(np.ones((64, 64), np.float32), "extra"))
        out = _save(model, tmp_path / "m.onnx", layout="file", external_data="d.bin")
        kept = _save(model, tmp_path / "k" / "mlp_dynamo.onnx")
    assert "extra" in _refs(out)
    assert "extra" not in _refs(kept)  # keep: a new tensor stays inline
    with _load(out) as m:
        assert np.array_equal(m.graph.initializers[-1].numpy(), np.ones((64, 64), np.float32))
