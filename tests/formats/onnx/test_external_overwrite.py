"""Writing external data never silently replaces a data file of another model (writer.py,
"No data file of another model is replaced silently"): two models whose data files have the same
name, written into one directory, used to leave the first .onnx pointing at the second model's
weights."""

from __future__ import annotations

import os
import pathlib

import fsspec
import pytest
from external_models import files_of, mlp_model, oracle_tensors, save_external
from typer.testing import CliRunner

import onemodel
from onemodel.cli import app
from onemodel.errors import IoError


def _pair(tmp_path):
    """Two different models A/model.onnx and B/model.onnx, each with data file model.onnx.data."""
    a = save_external(mlp_model(seed=1), tmp_path / "A" / "model.onnx",
                      location="model.onnx.data")
    b = save_external(mlp_model(seed=2), tmp_path / "B" / "model.onnx",
                      location="model.onnx.data")
    assert oracle_tensors(a) != oracle_tensors(b)
    (tmp_path / "out").mkdir()
    return a, b, tmp_path / "out"


def _same(x, y) -> bool:
    return onemodel.verify(str(x), str(y)).equal


def test_a_second_model_does_not_replace_the_first_ones_data_file(tmp_path):
    a, b, out = _pair(tmp_path)
    onemodel.convert(a, out / "a.onnx")
    before = files_of(out)
    with pytest.raises(IoError) as e:
        onemodel.convert(b, out / "b.onnx")
    msg = str(e.value)
    assert str(out / "model.onnx.data") in msg and msg.endswith(
        "use force=True to overwrite it, or external_data=NAME to write a new data file")
    assert [(x.name, x.value) for x in e.value.settings] == [("force", True),
                                                             ("external_data", "NAME")]
    assert files_of(out) == before  # nothing written: no b.onnx, no temporary file
    assert _same(a, out / "a.onnx")
    assert oracle_tensors(out / "a.onnx") == oracle_tensors(a)


def test_the_command_line_says_io_and_how_to_proceed(tmp_path):
    a, b, out = _pair(tmp_path)
    runner = CliRunner()
    r = runner.invoke(app, ["convert", str(a), str(out / "a.onnx")])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["convert", str(b), str(out / "b.onnx")])
    assert r.exit_code == 2 and r.stderr.startswith("Io: data file ")
    assert "model.onnx.data" in r.stderr and "--force" in r.stderr
    r = runner.invoke(app, ["convert", str(b), str(out / "b.onnx"), "--external-data", "b.data"])
    assert r.exit_code == 0, r.output
    assert _same(a, out / "a.onnx") and _same(b, out / "b.onnx")
    assert sorted(os.listdir(out)) == ["a.onnx", "b.data", "b.onnx", "model.onnx.data"]


def test_rerunning_the_same_conversion_replaces_its_own_output(tmp_path):
    a, _, out = _pair(tmp_path)
    onemodel.convert(a, out / "a.onnx")
    first = files_of(out)
    onemodel.convert(a, out / "a.onnx")  # a.onnx references model.onnx.data: its own output
    assert files_of(out) == first
    # the destination's own data file is replaced even when the new model is another one
    _, b, _ = _pair(tmp_path / "again")
    onemodel.convert(b, out / "a.onnx")
    assert _same(b, out / "a.onnx")


def test_force_overwrites(tmp_path):
    a, b, out = _pair(tmp_path)
    onemodel.convert(a, out / "a.onnx")
    onemodel.convert(b, out / "b.onnx", force=True)
    assert _same(b, out / "b.onnx")
    assert not _same(a, out / "a.onnx")  # what force means: a.onnx now reads B's weights


def test_a_data_file_the_user_names_is_checked_as_the_others(tmp_path):
    """external_data='w.bin' naming the data file of another model beside the output is refused
    as a name onemodel chose is: it would leave a.onnx reading B's weights. The same conversion
    again replaces its own data file; force replaces another's."""
    a, b, out = _pair(tmp_path)
    onemodel.convert(a, out / "a.onnx", external_data="w.bin")
    before = files_of(out)
    with pytest.raises(IoError) as e:
        onemodel.convert(b, out / "b.onnx", external_data="w.bin")
    assert str(out / "w.bin") in str(e.value) and "force=True" in str(e.value)
    assert files_of(out) == before and _same(a, out / "a.onnx")
    onemodel.convert(a, out / "a.onnx", external_data="w.bin")  # its own: replaced
    assert files_of(out) == before
    onemodel.convert(b, out / "b.onnx", external_data="w.bin", force=True)
    assert _same(b, out / "b.onnx")
    assert not _same(a, out / "a.onnx")  # what force means: a.onnx now reads B's weights


def test_convert_into_a_model_does_not_replace_another_models_data_file(tmp_path):
    """convert W.safetensors --into MODEL.onnx OUT.onnx --external-data NAME, NAME the data file
    of another .onnx beside OUT: Io, exit 2, nothing written; again with --force it is written;
    running it once more replaces OUT's own data file."""
    import numpy as np
    import safetensors.numpy as sn

    a, b, out = _pair(tmp_path)
    runner = CliRunner()
    r = runner.invoke(app, ["convert", str(a), str(out / "other.onnx"), "--external-data",
                            "w.bin", "-q"])
    assert r.exit_code == 0, r.output
    weights = tmp_path / "w.safetensors"
    sn.save_file({"b0": np.full(64, 0.25, np.float32)}, str(weights))
    before = files_of(out)
    into = ["convert", str(weights), "--into", str(b), str(out / "new.onnx"), "--external-data",
            "w.bin", "-q"]
    r = runner.invoke(app, into)
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith(f"Io: data file '{out / 'w.bin'}' already exists and may hold "
                               "another model's weights"), r.stderr
    assert "--force" in r.stderr
    assert files_of(out) == before and _same(a, out / "other.onnx")
    r = runner.invoke(app, into + ["--force"])
    assert r.exit_code == 0, r.output
    with onemodel.load(out / "new.onnx") as m:
        got = {t.name: t.numpy() for t in m.graph.initializers}
    assert got["b0"].tolist() == [0.25] * 64
    r = runner.invoke(app, into)  # new.onnx references w.bin: its own output, replaced
    assert r.exit_code == 0, r.output


def test_rewriting_the_data_files_a_model_was_read_from(tmp_path):
    """Keep rewrites a data file with trailing orphan bytes; written beside the source under a new
    .onnx name, the data file it replaces is the one the model was read from."""
    src = save_external(mlp_model(seed=3), tmp_path / "m.onnx", location="m.onnx.data")
    want = oracle_tensors(src)
    with open(tmp_path / "m.onnx.data", "ab") as f:
        f.write(b"orphan" * 100)
    with onemodel.load(src) as model:
        onemodel.save(model, tmp_path / "copy.onnx")
        assert oracle_tensors(tmp_path / "copy.onnx") == want
    assert not (tmp_path / "m.onnx.data").read_bytes().endswith(b"orphan")
    # one file per tensor, rewritten under the same names beside the source
    with onemodel.load(src) as model:
        onemodel.save(model, tmp_path / "per.onnx", layout="per_tensor", threshold=0)
    with onemodel.load(tmp_path / "per.onnx") as model:
        onemodel.save(model, tmp_path / "per2.onnx", layout="per_tensor", threshold=0)
    assert oracle_tensors(tmp_path / "per2.onnx") == want


def test_per_tensor_files_of_another_model_are_not_replaced(tmp_path):
    a, b, out = _pair(tmp_path)
    onemodel.convert(a, out / "a.onnx", layout="per_tensor", threshold=0)
    before = files_of(out)
    with pytest.raises(IoError, match="w0"):
        onemodel.convert(b, out / "b.onnx", layout="per_tensor", threshold=0)
    assert files_of(out) == before
    assert _same(a, out / "a.onnx")


def test_onemodel_to_onnx_keep_twice_to_the_same_destination(tmp_path):
    a, b, out = _pair(tmp_path)
    onemodel.convert(a, tmp_path / "a.onemodel")
    onemodel.convert(tmp_path / "a.onemodel", out / "a.onnx")
    onemodel.convert(tmp_path / "a.onemodel", out / "a.onnx")
    assert sorted(os.listdir(out)) == ["a.onnx", "model.onnx.data"]
    assert _same(a, out / "a.onnx")
    onemodel.convert(b, tmp_path / "b.onemodel")
    with pytest.raises(IoError, match="model.onnx.data"):
        onemodel.convert(tmp_path / "b.onemodel", out / "b.onnx")
    assert _same(a, out / "a.onnx")


def test_a_destination_that_is_no_onnx_file_references_nothing(tmp_path):
    a, b, out = _pair(tmp_path)
    onemodel.convert(a, out / "a.onnx")
    (out / "b.onnx").write_bytes(b"not an onnx file")
    with pytest.raises(IoError, match="model.onnx.data"):
        onemodel.convert(b, out / "b.onnx")
    assert (out / "b.onnx").read_bytes() == b"not an onnx file"


def test_remote_destinations_are_checked_too(tmp_path):
    a, b, _ = _pair(tmp_path)
    fs = fsspec.filesystem("memory")
    root = "/overwrite-check"
    try:
        onemodel.convert(a, f"memory://{root}/a.onnx")
        before = fs.cat(f"{root}/model.onnx.data")
        with pytest.raises(IoError, match="overwrite-check/model.onnx.data"):
            onemodel.convert(b, f"memory://{root}/b.onnx")
        assert not fs.exists(f"{root}/b.onnx")
        onemodel.convert(a, f"memory://{root}/a.onnx")  # its own output
        assert fs.cat(f"{root}/model.onnx.data") == before
        with onemodel.load(f"memory://{root}/a.onnx") as m, onemodel.load(a) as want:
            assert onemodel.compare_models(m, want) == []
    finally:
        if fs.exists(root):
            fs.rm(root, recursive=True)


def test_the_check_reads_no_file_when_nothing_is_in_the_way(tmp_path, monkeypatch):
    """With no existing data file at the destination, the destination .onnx is not opened."""
    from onemodel.formats.onnx import writer

    a, _, out = _pair(tmp_path)
    monkeypatch.setattr(writer, "_referenced_by", lambda *args: pytest.fail("opened"))
    onemodel.convert(a, out / "a.onnx")
    assert _same(a, out / "a.onnx")
    assert pathlib.Path(out / "model.onnx.data").is_file()


def test_the_default_name_of_one_data_file_is_checked_too(tmp_path):
    """layout='file' without external_data names the data file after the .onnx file: running it
    again is fine, a file of that name that the destination does not reference is not replaced."""
    a, b, out = _pair(tmp_path)
    with onemodel.load(a) as model:
        onemodel.save(model, out / "a.onnx", layout="file")
        onemodel.save(model, out / "a.onnx", layout="file")
    assert sorted(os.listdir(out)) == ["a.onnx", "a.onnx.data"]
    (out / "b.onnx.data").write_bytes(b"someone else's weights")
    with onemodel.load(b) as model, pytest.raises(IoError, match="b.onnx.data"):
        onemodel.save(model, out / "b.onnx", layout="file")
    assert (out / "b.onnx.data").read_bytes() == b"someone else's weights"
    assert not (out / "b.onnx").exists()
    assert _same(a, out / "a.onnx")
