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
    assert e.spelled(lambda n, v: flags.get(n)) == "too big; use layout='file' or --force"
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
