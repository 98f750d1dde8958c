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
@pytest.mark.parametrize("command", [["info"], ["check"], ["hash"], ["verify", "SAME"],
                                     ["convert", "OUT"]])
def test_a_weights_file_is_named_as_one_with_the_into_hint(tmp_path, name, command):
    w = _weights(tmp_path / name)
    rest = [w if a == "SAME" else tmp_path / "x.onnx" if a == "OUT" else a for a in command[1:]]
    r = _cli(command[0], w, *rest)
    assert r.exit_code == 2, r.output
    assert r.output.startswith("Unsupported: a safetensors weights file: it holds tensors only, "
                               "not a model"), r.output
    assert "onemodel convert WEIGHTS.safetensors --into MODEL OUT" in r.output
    assert "cannot tell the format" not in r.output
    assert not (tmp_path / "x.onnx").exists()


def test_other_unknown_files_keep_the_plain_message(tmp_path):
    (tmp_path / "n.bin").write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00[1, 2]" + b"\0" * 16)
    r = _cli("info", tmp_path / "n.bin")
    assert r.exit_code == 2
    assert "cannot tell the format of the file" in r.output and "safetensors" not in r.output
