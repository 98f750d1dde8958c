"""`run --output-dir`: one file per output, whatever the names (a/b and a_b, .., case), the
name -> file mapping printed, no file of the run overwritten by another output."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onemodel.cli import app
from onemodel.cli.output_files import MAX_STEM, OutputFiles, file_stem

runner = CliRunner()

NAMES = ["a/b", "a_b", "a%2Fb", "..", ".", "A_b", "x:0", "é", ""]


def test_file_stems_are_distinct_and_plain():
    stems = [file_stem(n) for n in NAMES]
    assert stems == ["a%2Fb", "a_b", "a%252Fb", "%2E.", "%2E", "A_b", "x%3A0", "%C3%A9", "%"]
    assert len(set(stems)) == len(stems)
    assert all("/" not in s and not s.startswith(".") for s in stems)
    long_a, long_b = "n" * 300 + "a", "n" * 300 + "b"
    sa, sb = file_stem(long_a), file_stem(long_b)
    assert len(sa) == MAX_STEM and sa != sb and sa.startswith("n" * 150) and "~" in sa


def test_case_folding_never_reuses_a_file(tmp_path):
    files = OutputFiles(str(tmp_path))
    paths = [files.path_for(n) for n in ("Out", "out", "OUT", "out~2")]
    assert [p.rsplit("/", 1)[1] for p in paths] == ["Out.npy", "out~2.npy", "OUT~3.npy",
                                                    "out%7E2.npy"]
    assert len({p.casefold() for p in paths}) == 4
    assert files.written == list(zip(("Out", "out", "OUT", "out~2"), paths))


def test_run_saves_outputs_whose_names_would_clash(tmp_path):
    outs = ["a/b", "a_b", "..", "A_b"]
    nodes = [helper.make_node("Mul", ["x", "k"], ["y0"])] + [
        helper.make_node("Add", ["y0" if i == 0 else outs[i - 1], "k"], [name])
        for i, name in enumerate(outs)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in outs],
        [helper.make_tensor("k", TensorProto.FLOAT, [1], [2.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.array([1.0, 3.0], np.float32))
    out = tmp_path / "out"
    r = runner.invoke(app, ["run", str(tmp_path / "m.onnx"), "--input", f"x={tmp_path / 'x.npy'}",
                            "--output-dir", str(out)])
    assert r.exit_code == 0, r.output
    # x * 2 + 2, then + 2 for each next output: every output has its own value
    want = {"a/b": [4.0, 8.0], "a_b": [6.0, 10.0], "..": [8.0, 12.0], "A_b": [10.0, 14.0]}
    # A_b and a_b are one file where the file system folds case: the later one gets ~2
    files = {"a/b": "a%2Fb.npy", "a_b": "a_b.npy", "..": "%2E..npy", "A_b": "A_b~2.npy"}
    for name, values in want.items():
        path = out / files[name]
        assert np.load(path).tolist() == values, name
        assert f"saved {name} -> {path}" in r.stdout.splitlines()
    assert sorted(p.name for p in out.iterdir()) == sorted(files.values())


def test_saved_lines_name_each_file_written_in_order_with_names_escaped(tmp_path):
    """What `run` and `run --test-data` print after saving: one line per file, the output's
    name made printable (a newline in it is ``\\n``), the path as it was made."""
    files = OutputFiles(str(tmp_path))
    assert files.saved_lines() == []
    first, second = files.path_for("a\nb"), files.path_for("y", ".pb")
    assert first == str(tmp_path / "a%0Ab.npy") and second == str(tmp_path / "y.pb")
    assert files.saved_lines() == [f"saved a\\nb -> {first}", f"saved y -> {second}"]
