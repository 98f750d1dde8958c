"""`onemodel run M --input NAME=FILE`: the .npy files it takes (any byte order, converted to the
machine's) and the files it refuses."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

import onemodel
from onemodel.cli import app
from onemodel.cli.run_inputs import read_input
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


NOT_NPY = ("Malformed: input 'input': the file is neither a .npy array nor a .pb file holding a "
           "TensorProto (or the message of the input's type); --input takes NAME=FILE.npy or "
           "NAME=FILE.pb in {}\n")


def test_a_file_that_is_no_npy_is_malformed_naming_it(tmp_path):
    np.savez(tmp_path / "a.npz", x=_x())
    (tmp_path / "text.npy").write_text("1 2 3\n")
    for path in (MODELS / "cnn_legacy.onnx", tmp_path / "a.npz", tmp_path / "text.npy"):
        r = cli("run", CNN, "--input", f"input={path}")
        assert r.exit_code == 2, r.output
        assert r.stderr == NOT_NPY.format(path)
        assert "pickle" not in r.stderr


class _Mkdir:
    """Unpickled, it would make a directory: proof that a pickle was loaded."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        import os
        return (os.mkdir, (self.path,))


def test_pickled_npy_is_refused_and_never_loaded(tmp_path):
    sentinel = tmp_path / "made_by_unpickling"
    np.save(tmp_path / "obj.npy", np.array([_Mkdir(sentinel)], dtype=object), allow_pickle=True)
    assert not sentinel.exists()
    r = cli("run", CNN, "--input", f"input={tmp_path / 'obj.npy'}")
    assert r.exit_code == 2, r.output
    assert r.stderr == ("Malformed: input 'input': the .npy file holds Python objects (pickled "
                        "data), which onemodel never loads; save a numeric or string array in "
                        f"{tmp_path / 'obj.npy'}\n")
    assert not sentinel.exists()


def test_a_damaged_npy_is_malformed(tmp_path):
    np.save(tmp_path / "x.npy", _x())
    (tmp_path / "cut.npy").write_bytes((tmp_path / "x.npy").read_bytes()[:200])
    r = cli("run", CNN, "--input", f"input={tmp_path / 'cut.npy'}")
    assert r.exit_code == 2, r.output
    # a 128-byte header, then 72 of the 12 288 bytes of [1, 3, 32, 32] float32
    assert r.stderr == ("Malformed: input 'input': the .npy header declares shape [1, 3, 32, "
                        "32] of float32 (12.0 KiB), but the file holds 72 bytes after its "
                        f"header in {tmp_path / 'cut.npy'}\n")


def test_a_missing_file_is_still_io(tmp_path):
    r = cli("run", CNN, "--input", f"input={tmp_path / 'missing.npy'}")
    assert r.exit_code == 2, r.output
    assert r.stderr == ("Io: cannot read input 'input': No such file or directory in "
                        f"{tmp_path / 'missing.npy'}\n")


def test_no_inputs_is_a_usage_error_that_says_what_dim_is_for():
    r = cli("run", CNN)
    assert r.exit_code == 2, r.output
    assert r.stderr.endswith("the model needs input(s) input: give --input NAME=FILE.npy, or "
                             "--random [--seed N]\n"), r.stderr
    r = cli("run", CNN, "--dim", "batch=2")  # --dim without --random: says it sizes --random's
    assert r.exit_code == 2, r.output
    assert r.stderr.endswith("the model needs input(s) input: give --input NAME=FILE.npy, or "
                             "--random [--seed N] (--dim and --shape size the inputs --random "
                             "generates)\n"), r.stderr


def test_an_input_that_does_not_fit_is_an_input_error_not_the_model_s(tmp_path):
    """A --input of the wrong shape or dtype, or for a name the graph does not have, is one
    InputError line, exit 2: the model is not at fault (issue 23)."""
    np.save(tmp_path / "wide.npy", np.zeros((1, 3, 32, 33), np.float32))
    np.save(tmp_path / "ints.npy", np.zeros((1, 3, 32, 32), np.int32))
    cases = [(f"input={tmp_path / 'wide.npy'}", "InputError: input 'input' has extent 33 on "
              "axis 3; the graph declares [batch,3,32,32] [graph.inputs[0]] in "),
             (f"input={tmp_path / 'ints.npy'}", "InputError: input 'input' has dtype int32; "
              "the graph declares float [graph.inputs[0]] in "),
             (f"other={tmp_path / 'wide.npy'}", "InputError: 'other' is not an input of the "
              "graph; inputs are ['input']")]
    for given, line in cases:
        r = cli("run", CNN, "--input", given)
        assert r.exit_code == 2, r.output
        assert r.stderr.startswith(line), r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "InvalidModel" not in r.output
