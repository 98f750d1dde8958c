"""The command line's output on a real model (issue 24, item 6): full text into a pipe, repeated
findings grouped, what a convert leaves beside its output said, flags (not Python keywords) in
its advice."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from onemodel import limits
from onemodel.cli import app

MODELS = Path(__file__).resolve().parents[2] / "testdata" / "models"
CNN = MODELS / "cnn_legacy.onnx"
runner = CliRunner()


def cli(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_the_2_gib_refusal_names_the_flags(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "PROTOBUF_MESSAGE_LIMIT", 20000)
    r = cli("convert", CNN, tmp_path / "out.onnx", "--inline")
    assert r.exit_code == 2 and not (tmp_path / "out.onnx").exists()
    assert r.stderr.startswith("Unsupported: the ONNX file would be ")
    assert "past the 2 GiB protobuf limit" in r.stderr
    assert "; write the weights to external data (--layout file), or pass --force to write it " \
           "anyway" in r.stderr
    assert "force=True" not in r.stderr and "layout='file'" not in r.stderr
    with pytest.warns(UserWarning, match="cannot read it"):
        r = cli("convert", CNN, tmp_path / "out.onnx", "--inline", "--force")
    assert r.exit_code == 0, r.output


def test_an_advice_error_spells_its_settings_for_each_interface():
    import pickle

    from onemodel import AdviceError, UnsupportedError

    e = AdviceError("too big; use {0} or {1}", [("layout", "file"), ("force", True)], source="m")
    assert isinstance(e, UnsupportedError)
    assert e.message == "too big; use layout='file' or force=True"
    flags = {"force": "--force"}
    assert e.spelled(lambda x: flags.get(x.name)) == "too big; use layout='file' or --force"
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is AdviceError and str(back) == str(e) and back.settings == e.settings


def test_extracted_weights_say_that_padding_entries_were_written(tmp_path):
    safetensors = pytest.importorskip("safetensors")
    r = cli("convert", CNN, tmp_path / "w.safetensors")
    assert r.exit_code == 0, r.output
    with safetensors.safe_open(str(tmp_path / "w.safetensors"), "np") as f:
        pads = sorted(k for k in f.keys() if k.startswith("__pad"))
    assert pads == ["__pad0__"]  # what a reader listing every key sees, and the line says
    assert r.stdout.splitlines()[1:] == [
        "  1 padding entry (__pad0__) in the file: they keep each tensor at a multiple of "
        "--align (default 64 bytes); a reader that lists every key sees them; --align 1 "
        "writes none"]
    r = cli("convert", CNN, tmp_path / "w1.safetensors", "--align", "1")
    assert r.exit_code == 0, r.output
    assert len(r.stdout.splitlines()) == 1 and "padding" not in r.stdout
    with safetensors.safe_open(str(tmp_path / "w1.safetensors"), "np") as f:
        assert not [k for k in f.keys() if k.startswith("__pad")]


def test_the_padding_keys_of_the_result_are_those_of_the_file(tmp_path):
    import json
    import struct

    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    import onemodel

    ws = [numpy_helper.from_array(np.arange(n, dtype=np.int8), f"w{n}") for n in (3, 5, 7, 64, 1)]
    g = helper.make_graph([], "g", [], [helper.make_tensor_value_info("w3", 3, [3])], ws)
    src = tmp_path / "m.onnx"
    onnx.save_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(src))
    result = onemodel.convert(src, tmp_path / "w.safetensors")
    raw = (tmp_path / "w.safetensors").read_bytes()
    header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
    assert result.padding == json.loads(header["__metadata__"]["onemodel.padding"]) == \
        ["__pad0__", "__pad1__", "__pad2__"]  # before 5, 7 and 64 octets; none before 1
    assert onemodel.convert(src, tmp_path / "w1.safetensors", align=1).padding == []


def _long_types_model(path: Path, output_name: str) -> str:
    import onnx
    from onnx import helper

    dims = ["batch_size_of_a_rather_long_name", "sequence_length_after_the_tokenizer",
            "number_of_attention_heads_in_the_layer", 64]
    x = helper.make_tensor_value_info("input_ids_of_the_first_encoder_layer", 1, dims)
    y = helper.make_tensor_value_info(output_name, 1, dims)
    g = helper.make_graph([helper.make_node("Relu", [x.name], [y.name])], "g", [x], [y])
    onnx.save_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]),
                    str(path))
    return "tensor(float)[" + ",".join(map(str, dims)) + "]"


@pytest.mark.parametrize("output_name", ["output", "naïve_output"])  # drawn here; by rich
def test_info_into_a_pipe_cuts_nothing(tmp_path, output_name):
    """issue 24 item 6: info and info --shapes cut types with '…' when piped (355 lines of one
    model); into a pipe every line is whole, whatever COLUMNS says."""
    import os
    import subprocess
    import sys

    path = tmp_path / "long.onnx"
    full = _long_types_model(path, output_name)
    env = dict(os.environ, COLUMNS="60", LINES="20")
    for k in ("FORCE_COLOR", "TTY_COMPATIBLE", "TERM"):
        env.pop(k, None)
    r = subprocess.run([sys.executable, "-m", "onemodel", "info", str(path), "--shapes"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert "…" not in r.stdout
    rows = [line for line in r.stdout.splitlines() if full in line]
    assert len(rows) == 4  # the input, the output and both values of --shapes
    assert f" input_ids_of_the_first_encoder_layer │ {full} " in rows
    assert any(line.startswith(f" {output_name} ") and line.endswith(f"│ {full} ")
               for line in rows)


def test_info_on_a_narrow_terminal_folds_instead_of_cutting(tmp_path, monkeypatch):
    import io

    import onemodel.cli.info as cli_info
    from onemodel.cli.application import _LazyConsole
    from onemodel.cli.tables import Table

    class Terminal(io.StringIO):
        encoding = "utf-8"

        def isatty(self):
            return True

    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setenv("LINES", "20")
    monkeypatch.setenv("TERM", "dumb")  # (no styles: the text alone)
    monkeypatch.setattr(cli_info, "out", _LazyConsole(highlight=False, soft_wrap=True,
                                                      emoji=False))
    stream = Terminal()
    monkeypatch.setattr("sys.stdout", stream)
    t = Table("inputs", [("name", "left"), ("type", "left")])
    t.add_row("x", "tensor(float)[" + "d" * 70 + "]")
    cli_info._print_rich([t])
    lines = stream.getvalue().splitlines()
    assert "…" not in stream.getvalue() and max(map(len, lines)) <= 40
    cells = "".join(line.split("│")[1].strip() for line in lines[3:])
    assert cells == "tensor(float)[" + "d" * 70 + "]"  # folded over lines, every character


def _two_data_files(tmp_path: Path) -> Path:
    """m.onnx with tensors a (in data file a) and b (in data file b), 1200 bytes each; b
    removed."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    ws = [numpy_helper.from_array(np.full(300, i, np.float32), n) for i, n in enumerate("ab")]
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", 1, [300])], ws)
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save_model(proto, str(tmp_path / "m.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=False, size_threshold=0)
    (tmp_path / "b").unlink()
    return tmp_path / "m.onnx"


def test_info_with_a_missing_data_file_shows_the_structure_and_names_the_file(tmp_path):
    """issue 24 item 6: info failed with one line when a data file was missing; it shows what
    it can without the weights' bytes, names the file, and still exits 2."""
    import json

    path = _two_data_files(tmp_path)
    r = cli("info", path, "--shapes")
    assert r.exit_code == 2
    assert r.stderr.startswith("Io: tensor 'b', external data location 'b': 'b' does not exist "
                               "[ModelProto.graph.initializer[1]] at offset 0x")
    assert r.stderr.endswith(f" in {path}\n") and r.stderr.count("\n") == 1
    lines = r.stdout.splitlines()
    assert lines[0] == f"{path}  format onnx, IR version {lines[0].rsplit(' ', 1)[1]}"
    assert " Add     │     1 " in lines and " float │     2 │        600 │ 2.3 KiB " in lines
    assert "data file a: 1 tensor, 1.2 KiB referenced, 0 B unreferenced (gaps 0 B, " \
           "trailing 0 B), " in r.stdout
    assert "data file b: cannot be read, 1 tensor without its bytes: tensor 'b', external " \
           "data location 'b': 'b' does not exist" in lines
    assert " b    │ tensor(float)[300] " in lines  # --shapes: the values too
    r = cli("info", path, "--json")
    assert r.exit_code == 2
    files = {f["location"]: f for f in json.loads(r.stdout)["external_data"]}
    assert files["a"]["size"] == 1200 and "error" not in files["a"]
    assert files["b"]["size"] is None and files["b"]["error"].startswith(
        "cannot be read, 1 tensor without its bytes: ")


def test_info_of_a_file_that_cannot_be_read_at_all_is_still_one_line(tmp_path):
    r = cli("info", tmp_path / "gone.onnx")
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith("Io: ") and r.stderr.count("\n") == 1


def _external_model(tmp_path: Path) -> Path:
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    ws = [numpy_helper.from_array(np.arange(3000, dtype=np.float32) + i, f"w{i}")
          for i in range(2)]
    g = helper.make_graph([helper.make_node("Add", ["w0", "w1"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", 1, [3000])], ws)
    src = tmp_path / "in" / "m.onnx"
    src.parent.mkdir()
    onnx.save_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(src),
                    save_as_external_data=True, location="m.onnx.data", size_threshold=0)
    return src


def test_a_zst_output_holds_the_whole_model(tmp_path):
    """issue 24 item 6: convert m.onnx (external data) x.onnx.zst wrote a .zst of references
    and an uncompressed data file beside it that it silently needed; a .zst is one
    self-contained stream now."""
    import numpy as np

    import onemodel

    src = _external_model(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    r = cli("convert", src, out / "x.onnx.zst")
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in out.iterdir()) == ["x.onnx.zst"]  # no data file beside it
    (src.parent / "m.onnx.data").unlink()  # nothing of the source is needed either
    with onemodel.load(out / "x.onnx.zst") as m:
        assert [t.external_data for t in m.graph.initializers] == [[], []]
        assert np.array_equal(m.graph.initializers[1].numpy(),
                              np.arange(3000, dtype=np.float32) + 1)


def test_data_files_beside_a_zst_output_are_refused_naming_the_flag(tmp_path):
    import onemodel

    src = _external_model(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    for flags, layout in ((["--external-data", "x.data"], "file"), (["--layout", "keep"], "keep"),
                          (["--external-data-per-tensor"], "per_tensor")):
        r = cli("convert", src, out / "x.onnx.zst", *flags)
        assert r.exit_code == 2 and list(out.iterdir()) == []
        assert r.stderr.startswith(f"Unsupported: a .zst output is one compressed stream, but "
                                   f"layout '{layout}' would leave ")
        assert "uncompressed, that it needs: put every tensor in the stream (--inline, the " \
               "default for .zst), or write an uncompressed .onnx with its data files, or a " \
               ".onemodel.zst" in r.stderr
    with onemodel.load(src) as m:
        with pytest.raises(onemodel.AdviceError, match=r"\(layout='inline', the default"):
            onemodel.save(m, out / "x.onnx.zst", layout="file")
    assert list(out.iterdir()) == []


def test_a_zst_output_past_2_gib_is_advised_a_onemodel_zst(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "PROTOBUF_MESSAGE_LIMIT", 20000)
    r = cli("convert", _external_model(tmp_path), tmp_path / "x.onnx.zst")
    assert r.exit_code == 2 and not (tmp_path / "x.onnx.zst").exists()
    assert r.stderr.endswith("past the 2 GiB protobuf limit: onnx, onnxruntime and other "
                             "protobuf-based tools cannot read it; write a .onemodel.zst "
                             "instead, or pass --force to write it anyway\n")
