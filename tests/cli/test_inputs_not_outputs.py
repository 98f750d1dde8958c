"""No command writes over a file it reads: the model, its external data files, shards and shard
index, an ``--input`` file, the test data (compared by resolved path and by ``(st_dev,
st_ino)``: another spelling, a symbolic or a hard link). Such an output is refused with one
usage error (exit 2) before anything is written, and every file stays as it was (issue 23, item
4: ``hash m.onnx --manifest m.onnx`` replaced the model with JSON, ``--manifest`` at its data
file wiped the weights). Converting a model onto itself in place keeps working."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from typer.testing import CliRunner

import onemodel
from onemodel.cli import app

runner = CliRunner()


def cli(*args):
    return runner.invoke(app, [str(a) for a in args])


def _graph(out="y"):
    w = numpy_helper.from_array(np.arange(2048, dtype=np.float32).reshape(512, 4), "w")
    return helper.make_graph([helper.make_node("MatMul", ["x", "w"], [out])], "g",
                             [helper.make_tensor_value_info("x", T.FLOAT, [2, 512])],
                             [helper.make_tensor_value_info(out, T.FLOAT, [2, 4])], [w])


def _external(tmp_path, location="w.bin", out="y"):
    """m.onnx with its weights in ``location`` (8 KiB)."""
    p = tmp_path / "m.onnx"
    onnx.save(helper.make_model(_graph(out), opset_imports=[helper.make_opsetid("", 21)]),
              str(p), save_as_external_data=True, location=location, size_threshold=0)
    return p


def _snapshot(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


def _refused(r, before, d, what):
    assert r.exit_code == 2, r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("Usage error: ") and what in lines[0], \
        r.output
    assert "which this command reads: writing it would destroy it" in lines[0]
    assert _snapshot(d) == before  # nothing replaced, nothing added


def test_hash_manifest_over_the_model_or_its_data_file(tmp_path):
    m = _external(tmp_path)
    before = _snapshot(tmp_path)
    _refused(cli("hash", m, "--manifest", m), before, tmp_path,
             f"--manifest '{m}' is the model file")
    _refused(cli("hash", m, "--manifest", tmp_path / "w.bin"), before, tmp_path,
             "is a data file of the model")
    # another spelling, a symbolic link, a hard link: the same file
    _refused(cli("hash", m, "--manifest", tmp_path / "." / ".." / tmp_path.name / "w.bin"),
             before, tmp_path, "is a data file of the model")
    os.symlink("w.bin", tmp_path / "link.bin")
    os.link(m, tmp_path / "hard.onnx")
    before = _snapshot(tmp_path)
    _refused(cli("hash", m, "--manifest", tmp_path / "link.bin"), before, tmp_path,
             "is a data file of the model")
    _refused(cli("hash", m, "--manifest", tmp_path / "hard.onnx"), before, tmp_path,
             "is the model file")
    r = cli("hash", m, "--manifest", tmp_path / "manifest.json")
    assert r.exit_code == 0 and (tmp_path / "manifest.json").exists(), r.output


def test_hash_manifest_over_a_shard_or_the_shard_index(tmp_path):
    src = tmp_path / "src.onnx"
    onnx.save(helper.make_model(_graph(), opset_imports=[helper.make_opsetid("", 21)]),
              str(src))
    d = tmp_path / "o"
    d.mkdir()
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", T.FLOAT, [256])],
                          [numpy_helper.from_array(np.ones(256, np.float32), "a"),
                           numpy_helper.from_array(np.ones(256, np.float32), "b")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), str(src))
    onemodel.convert(str(src), str(d / "m.onnx"), external_data="w.safetensors", threshold=0,
                     max_shard_size=1024)
    before = _snapshot(d)
    assert "w.safetensors.index.json" in before
    _refused(cli("hash", d / "m.onnx", "--manifest", d / "w.safetensors.index.json"), before, d,
             "is the shard index of the model")
    _refused(cli("hash", d / "m.onnx", "--manifest", d / "w-00002-of-00002.safetensors"),
             before, d, "is a data file of the model")


def test_convert_onto_a_data_file_of_its_source(tmp_path):
    m = _external(tmp_path)
    before = _snapshot(tmp_path)
    _refused(cli("convert", m, tmp_path / "w.bin", "--to", "onnx"), before, tmp_path,
             "the destination")
    _refused(cli("convert", m, tmp_path / "w.bin", "--to", "onemodel"), before, tmp_path,
             "the destination")
    # a data file written over the source model file (--force is about other models' files)
    _refused(cli("convert", m, tmp_path / "n.onnx", "--external-data", "m.onnx", "--force"),
             before, tmp_path, "data file 'm.onnx'")


def test_convert_to_safetensors_over_its_own_data_file(tmp_path):
    src = tmp_path / "src.onnx"
    onnx.save(helper.make_model(_graph(), opset_imports=[helper.make_opsetid("", 21)]),
              str(src))
    d = tmp_path / "o"
    d.mkdir()
    onemodel.convert(str(src), str(d / "m.onnx"), external_data="w.safetensors", threshold=0)
    before = _snapshot(d)
    _refused(cli("convert", d / "m.onnx", d / "w.safetensors"), before, d, "the destination")
    _refused(cli("convert", d / "w.safetensors", d / "w.safetensors", "--into", d / "m.onnx",
                 "--to", "onnx"), before, d, "the destination")


def test_convert_in_place_keeps_working(tmp_path):
    """``convert o/model.onnx o/model.onnx --external-data w.bin``: from inline weights, then
    again from its own data file, then in the keep layout: the same model each time."""
    d = tmp_path / "o"
    d.mkdir()
    p = d / "model.onnx"
    onnx.save(helper.make_model(_graph(), opset_imports=[helper.make_opsetid("", 21)]), str(p))
    want = numpy_helper.to_array(onnx.load(str(p)).graph.initializer[0])
    for extra in (["--external-data", "w.bin"], ["--external-data", "w.bin"], []):
        r = cli("convert", p, p, *extra)
        assert r.exit_code == 0, r.output
        assert sorted(x.name for x in d.iterdir()) == ["model.onnx", "w.bin"]
        refs = onnx.load(str(p), load_external_data=False).graph.initializer[0].external_data
        assert {e.key: e.value for e in refs}["location"] == "w.bin"
        got = onnx.load(str(p))  # onnx, the oracle, reads w.bin through the new references
        np.testing.assert_array_equal(numpy_helper.to_array(got.graph.initializer[0]), want)
    # rewriting the source's own data files beside it, each tensor back at its offset, is fine
    r = cli("convert", p, d / "copy.onnx", "--external-data", "w.bin")
    assert r.exit_code == 0, r.output
    with onemodel.load(str(p)) as a, onemodel.load(str(d / "copy.onnx")) as b:
        np.testing.assert_array_equal(a.graph.initializers[0].numpy(),
                                      b.graph.initializers[0].numpy())


def test_infer_onto_a_data_file_and_in_place(tmp_path):
    m = _external(tmp_path, location="d.onnx")  # a data file named like a model
    before = _snapshot(tmp_path)
    _refused(cli("infer", m, tmp_path / "d.onnx"), before, tmp_path,
             "OUT '" + str(tmp_path / "d.onnx") + "' is a data file of the model")
    r = cli("infer", m, m)  # annotated in place
    assert r.exit_code == 0, r.output
    assert (tmp_path / "d.onnx").read_bytes() == before["d.onnx"]
    with onemodel.load(str(m)) as a:
        assert a.graph.initializers[0].numpy()[1, 0] == 4


def test_run_output_dir_over_an_input_file(tmp_path):
    m = _external(tmp_path)  # output y; the input x read from y.npy
    np.save(tmp_path / "y.npy", np.ones((2, 512), np.float32))
    before = _snapshot(tmp_path)
    r = cli("run", m, "--input", f"x={tmp_path / 'y.npy'}", "--output-dir", tmp_path)
    _refused(r, before, tmp_path, "the file of output 'y'")
    r = cli("run", m, "--input", f"x={tmp_path / 'y.npy'}", "--output-dir", tmp_path / "out")
    assert r.exit_code == 0 and (tmp_path / "out" / "y.npy").exists(), r.output


def test_run_test_data_output_dir_over_the_test_data(tmp_path):
    m = _external(tmp_path, out="output_0")
    case = tmp_path / "case"
    case.mkdir()
    x = np.ones((2, 512), np.float32)
    (case / "input_0.pb").write_bytes(numpy_helper.from_array(x, "x").SerializeToString())
    want = x @ np.arange(2048, dtype=np.float32).reshape(512, 4)
    (case / "output_0.pb").write_bytes(
        numpy_helper.from_array(want, "output_0").SerializeToString())
    before = _snapshot(case)
    r = cli("run", m, "--test-data", case, "--output-dir", case, "--output-format", "pb")
    _refused(r, before, case, "is a file of the test data")
    r = cli("run", m, "--test-data", case, "--output-dir", tmp_path / "out", "--output-format",
            "pb")
    assert r.exit_code == 0 and "pass" in r.output, r.output


def test_the_python_api_refuses_too(tmp_path):
    m = _external(tmp_path)
    os.symlink(tmp_path / "w.bin", tmp_path / "alias.onnx")
    before = _snapshot(tmp_path)
    with pytest.raises(ValueError, match="the destination .* is a data file of the model"):
        onemodel.convert(str(m), str(tmp_path / "alias.onnx"))
    assert _snapshot(tmp_path) == before
    # a hard link of the model file is the model file: converted in place, the link replaced
    os.link(m, tmp_path / "hard.onnx")
    onemodel.convert(str(m), str(tmp_path / "hard.onnx"))
    assert (tmp_path / "m.onnx").read_bytes() == before["m.onnx"]


def test_rewriting_a_data_file_of_the_source_with_tensors_moved(tmp_path):
    """A conversion to another name that rewrites the source's data file is refused when a
    tensor of the source would move in it (the source would read other bytes), allowed when
    every tensor stays at its offset."""
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", T.FLOAT, [1000])],
                          [numpy_helper.from_array(np.arange(1000, dtype=np.float32), "a"),
                           numpy_helper.from_array(-np.arange(1000, dtype=np.float32), "b")])
    src = tmp_path / "src.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), str(src))
    m = tmp_path / "m.onnx"
    assert cli("convert", src, m, "--external-data", "w.bin").exit_code == 0  # b at 4096
    before = _snapshot(tmp_path)
    _refused(cli("convert", m, tmp_path / "n.onnx", "--external-data", "w.bin", "--align", "64"),
             before, tmp_path, "data file 'w.bin'")  # b would move to 4032
    r = cli("convert", m, tmp_path / "n.onnx", "--external-data", "w.bin")
    assert r.exit_code == 0, r.output
    for p in (m, tmp_path / "n.onnx"):
        got = onnx.load(str(p))
        np.testing.assert_array_equal(numpy_helper.to_array(got.graph.initializer[1]),
                                      -np.arange(1000, dtype=np.float32))
