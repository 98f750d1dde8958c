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
