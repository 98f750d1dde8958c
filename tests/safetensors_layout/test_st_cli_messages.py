"""What the command line says about a safetensors weights file given where a model is expected
(info, check, hash, verify, convert without --into), by its name or by its first octets."""

from __future__ import annotations

import numpy as np
import pytest
import safetensors.numpy as sn
from typer.testing import CliRunner

from onemodel.cli import app

runner = CliRunner()


def _cli(*args):
    return runner.invoke(app, [str(a) for a in args])


def _weights(path):
    sn.save_file({"w": np.zeros((2, 3), np.float32), "b": np.ones(4, np.int64)}, str(path))
    return path


@pytest.mark.parametrize("name", ["weights.safetensors", "weights.bin"])
@pytest.mark.parametrize("command", [["check"], ["hash"], ["verify", "SAME"],
                                     ["convert", "OUT"]])
def test_a_weights_file_is_named_as_one_with_the_into_hint(tmp_path, name, command):
    w = _weights(tmp_path / name)
    rest = [w if a == "SAME" else tmp_path / "x.onnx" if a == "OUT" else a for a in command[1:]]
    r = _cli(command[0], w, *rest)
    assert r.exit_code == 2, r.output
    assert r.output.startswith("Unsupported: a safetensors weights file: it holds tensors only, "
                               "not a model"), r.output
    assert "to put its tensors into a model, convert it with --into MODEL" in r.output
    assert "cannot tell the format" not in r.output
    assert not (tmp_path / "x.onnx").exists()


@pytest.mark.parametrize("name", ["weights.safetensors", "weights.bin"])
def test_info_of_a_weights_file_says_what_it_is_and_lists_its_tensors(tmp_path, name):
    import json

    from safetensors import safe_open
    w = _weights(tmp_path / name)
    r = _cli("info", w)
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].startswith(f"{w}: a safetensors weights file: it holds tensors only, not a "
                               "model"), lines[0]
    assert "to put its tensors into a model, convert it with --into MODEL" in lines[0]
    with safe_open(str(w), "np") as f:
        want = {k: f.get_tensor(k) for k in f.keys()}
    assert lines[1] == f"tensors: 2, {sum(a.nbytes for a in want.values())} B"
    assert sorted(lines[2:]) == sorted(
        f"  {k}  {'F32' if a.dtype == np.float32 else 'I64'}{list(a.shape)}  {a.nbytes} B"
        for k, a in want.items())
    got = json.loads(_cli("info", w, "--json").output)
    assert got["format"] == "safetensors" and got["model"] is False
    assert {t["name"]: (t["shape"], t["bytes"]) for t in got["tensors"]} == {
        k: (list(a.shape), a.nbytes) for k, a in want.items()}


def test_info_of_a_broken_weights_file_says_why(tmp_path):
    (tmp_path / "w.safetensors").write_bytes(b"\x40" + b"\0" * 7 + b"{")
    r = _cli("info", tmp_path / "w.safetensors")
    assert r.exit_code == 2 and r.output.startswith("Malformed:"), r.output


def test_other_unknown_files_keep_the_plain_message(tmp_path):
    (tmp_path / "n.bin").write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00[1, 2]" + b"\0" * 16)
    r = _cli("info", tmp_path / "n.bin")
    assert r.exit_code == 2
    assert "cannot tell the format of the file" in r.output and "safetensors" not in r.output


@pytest.mark.parametrize("text, expected", [
    ("5000000000", 5_000_000_000), ("5GB", 5 * 10 ** 9), ("500MB", 500 * 10 ** 6),
    ("10GiB", 10 * 2 ** 30), ("10gib", 10 * 2 ** 30), ("64kb", 64_000), ("64KiB", 65_536),
    ("1.5GB", 1_500_000_000), ("2 MiB", 2 * 2 ** 20), ("7B", 7)])
def test_byte_size_takes_integers_and_hugging_face_units(text, expected):
    from onemodel.cli.convert import byte_size
    assert byte_size(text, "--max-shard-size") == expected


@pytest.mark.parametrize("text", ["5G", "abc", "-1", "5 GB GB", "", "1e9", "GB"])
def test_byte_size_refuses_other_spellings_naming_the_flag(text):
    from onemodel.cli.convert import byte_size
    from onemodel.errors import UsageError
    with pytest.raises(UsageError, match="^--max-shard-size takes a size in bytes"):
        byte_size(text, "--max-shard-size")


def test_max_shard_size_with_a_unit_shards_the_data_file(tmp_path):
    import json

    import onnx
    from st_models import mlp_model
    onnx.save(mlp_model(), tmp_path / "m.onnx")
    sizes = sorted(onnx.numpy_helper.to_array(t).nbytes for t in mlp_model().graph.initializer)
    limit = f"{sizes[-1] + sizes[-2] - 1}B"  # the two largest tensors do not fit one shard
    r = _cli("convert", tmp_path / "m.onnx", tmp_path / "o.onnx", "--external-data",
             "w.safetensors", "--threshold", "0", "--max-shard-size", limit, "-q")
    assert r.exit_code == 0, r.output
    index = json.loads((tmp_path / "w.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) >= 2
    r = _cli("convert", tmp_path / "m.onnx", tmp_path / "p.onnx", "--external-data",
             "v.safetensors", "--max-shard-size", "1GB", "-q")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "v.safetensors").exists()
    assert not (tmp_path / "v.safetensors.index.json").exists()
    r = _cli("convert", tmp_path / "m.onnx", tmp_path / "q.onnx", "--external-data",
             "u.safetensors", "--max-shard-size", "5G")
    assert r.exit_code == 2
    assert "Usage error: --max-shard-size takes a size in bytes" in r.output
    assert "'5G'" in r.output and not (tmp_path / "q.onnx").exists()


def test_info_counts_padding_entries_apart_as_safe_open_lists_them(tmp_path):
    import json

    import onnx
    from safetensors import safe_open
    from st_models import mlp_model
    onnx.save(mlp_model(), tmp_path / "m.onnx")
    r = _cli("convert", tmp_path / "m.onnx", tmp_path / "o.onnx", "--external-data",
             "w.safetensors", "--threshold", "0", "--align", "4096", "-q")
    assert r.exit_code == 0, r.output
    m = onnx.load(str(tmp_path / "o.onnx"), load_external_data=False)
    tensors = sum(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer)
    with safe_open(str(tmp_path / "w.safetensors"), "np") as f:
        keys = len(list(f.keys()))
    padding = keys - tensors
    assert padding >= 1
    r = _cli("info", tmp_path / "o.onnx")
    assert r.exit_code == 0, r.output
    line = next(x for x in r.output.splitlines() if x.startswith("data file w.safetensors"))
    word = "entry" if padding == 1 else "entries"
    assert f"safetensors file, {tensors} tensor entries (+{padding} padding {word}) in its " \
           "header, every referenced tensor consistent" in line, line
    (f,) = json.loads(_cli("info", tmp_path / "o.onnx", "--json").output)["external_data"]
    assert f["safetensors"] == {"entries": tensors, "padding": padding, "checked": tensors}
