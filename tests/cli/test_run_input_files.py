"""`onemodel run M --input NAME=FILE`: the .npy files it takes (any byte order, converted to the
machine's) and the files it refuses."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

import onemodel
from onemodel.cli import app
from onemodel.cli.test_data import read_input
from onemodel.evaluate import run

MODELS = Path(__file__).resolve().parents[2] / "testdata" / "models"
CNN = MODELS / "cnn_dynamo.onnx"  # input float32 [batch, 3, 32, 32], output logits
runner = CliRunner()


def cli(*args):
    return runner.invoke(app, [str(a) for a in args])


def _x():
    return np.random.default_rng(7).uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)


def test_big_endian_npy_is_taken_as_its_values(tmp_path):
    x = _x()
    foreign = ">f4" if np.little_endian else "<f4"  # the byte order this machine does not use
    np.save(tmp_path / "be.npy", x.astype(foreign))
    saved = (tmp_path / "be.npy").read_bytes()
    with onemodel.load(CNN) as m:
        want = np.asarray(run(m, {"input": x})["logits"])
        got = read_input(m, "input", str(tmp_path / "be.npy"))
    assert got.dtype == np.float32 and got.dtype.isnative
    assert np.array_equal(got, x)
    r = cli("run", CNN, "--input", f"input={tmp_path / 'be.npy'}")
    assert r.exit_code == 0, r.output
    assert r.stdout == (f"logits: shape [1, 10] dtype float32 "
                        f"sha256:{hashlib.sha256(want.tobytes()).hexdigest()}\n")
    assert (tmp_path / "be.npy").read_bytes() == saved  # the user's file is left as it is


def test_big_endian_int64_npy(tmp_path):
    """A non-float type too: int64 in the other byte order reads as the same integers."""
    v = np.array([[1, -2, 300000000000]], dtype=np.int64)
    np.save(tmp_path / "i.npy", v.astype(v.dtype.newbyteorder("S")))
    with onemodel.load(CNN) as m:
        got = read_input(m, "whatever", str(tmp_path / "i.npy"))
    assert got.dtype == np.int64 and got.dtype.isnative and got.tolist() == v.tolist()
