"""`run --test-data`: the difference report and exit status, `--input NAME=FILE.pb`, and
`--output-format pb`; values written by onnx's numpy_helper, read back by it."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onemodel.cli import app

runner = CliRunner()


def _model(tmp_path, elem=TensorProto.FLOAT):
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "k"], ["y"])], "g",
        [helper.make_tensor_value_info("x", elem, [2, 3])],
        [helper.make_tensor_value_info("y", elem, [2, 3])],
        [numpy_helper.from_array(np.full([1], 0.5, np.float32), "k")]
        if elem == TensorProto.FLOAT else [helper.make_tensor("k", elem, [1], [0.5])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _write(path, array, name):
    path.write_bytes(numpy_helper.from_array(array, name).SerializeToString())


def test_differences_are_reported_per_output_with_exit_1(tmp_path):
    model = _model(tmp_path)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    want = x + 0.5
    want[1, 1] = 4.6  # 4.5 computed: off by 0.1, > 1e-7 + 1e-3 * 4.6
    want[1, 2] = 5.5001  # 5.5 computed: within rtol 1e-3
    d = tmp_path / "case" / "test_data_set_0"
    d.mkdir(parents=True)
    _write(d / "input_0.pb", x, "x")
    _write(d / "output_0.pb", want, "y")
    r = runner.invoke(app, ["run", str(model), "--test-data", str(tmp_path / "case")])
    assert r.exit_code == 1, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == "test_data_set_0: 1 difference(s) in 1 output(s)"
    diff = abs(4.5 - float(np.float32(4.6)))
    assert lines[1] == (f"  y: 1 of 6 elements out of tolerance (rtol 0.001, atol 1e-07); max "
                        f"abs diff {diff:.6g}, max rel diff {diff / float(np.float32(4.6)):.6g}; "
                        f"first: element 4 at [1, 1]: got 4.5, expected {np.float32(4.6)}")
    assert lines[2] == "0 of 1 data set(s) pass"
    # the same data set within a looser tolerance passes, exit 0
    r = runner.invoke(app, ["run", str(model), "--test-data", str(d), "--rtol", "0.05"])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines() == ["test_data_set_0: pass (1 output(s) within tolerance)",
                                     "1 of 1 data set(s) pass"]


def test_test_data_errors_exit_2(tmp_path):
    model = _model(tmp_path)
    r = runner.invoke(app, ["run", str(model), "--test-data", str(tmp_path / "none")])
    assert r.exit_code == 2 and r.stderr.startswith("Io: the test data directory does not exist")
    (tmp_path / "empty").mkdir()
    r = runner.invoke(app, ["run", str(model), "--test-data", str(tmp_path / "empty")])
    assert r.exit_code == 2 and "no input_*.pb" in r.stderr
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "input_0.pb").write_bytes(b"\x0a\xff")  # a truncated field
    _write(bad / "output_0.pb", np.zeros((2, 3), np.float32), "y")
    r = runner.invoke(app, ["run", str(model), "--test-data", str(bad)])
    assert r.exit_code == 2 and r.stderr.startswith("Malformed:"), r.stderr
    r = runner.invoke(app, ["run", str(model), "--test-data", str(bad), "--random"])
    assert r.exit_code == 2 and "not with --input or --random" in r.stderr


def test_input_pb_and_output_format_pb_round_trip_bfloat16(tmp_path):
    model = _model(tmp_path, TensorProto.BFLOAT16)
    x = np.array([[1, 2, 3], [-1, 0.25, 256]], ml_dtypes.bfloat16)
    _write(tmp_path / "x.pb", x, "x")
    out = tmp_path / "out"
    r = runner.invoke(app, ["run", str(model), "--input", f"x={tmp_path / 'x.pb'}",
                            "--output-dir", str(out)])
    assert r.exit_code == 0, r.output
    assert f"saved y -> {out / 'y.pb'}" in r.stdout.splitlines()
    got = numpy_helper.to_array(onnx.load_tensor(str(out / "y.pb")))
    # x + 0.5 in float64, rounded once to bfloat16 (every sum here is exact in bfloat16)
    want = (x.astype(np.float64) + 0.5).astype(ml_dtypes.bfloat16)
    assert got.dtype == ml_dtypes.bfloat16 and got.tobytes() == want.tobytes()
    # float32 with --output-format pb: a TensorProto too; npy (default): a .npy numpy loads
    model = _model(tmp_path)
    np.save(tmp_path / "x.npy", x.astype(np.float32))
    for fmt, name in (("pb", "y.pb"), ("npy", "y.npy")):
        o = tmp_path / fmt
        r = runner.invoke(app, ["run", str(model), "--input", f"x={tmp_path / 'x.npy'}",
                                "--output-dir", str(o), "--output-format", fmt])
        assert r.exit_code == 0, r.output
        got = (numpy_helper.to_array(onnx.load_tensor(str(o / name))) if fmt == "pb"
               else np.load(o / name))
        assert got.dtype == np.float32
        assert got.tolist() == (x.astype(np.float64) + 0.5).tolist()
    r = runner.invoke(app, ["run", str(model), "--random", "--output-dir", str(tmp_path / "z"),
                            "--output-format", "zip"])
    assert r.exit_code == 2 and "--output-format 'zip': npy or pb" in r.stderr


def test_sequences_maps_and_optionals_are_written_as_onnx_reads_them(tmp_path):
    from onemodel.value_files import read_pb, write_pb

    seq = [np.array([1.5, 2.0], np.float32), np.array([[3]], np.int64)]
    assert write_pb(tmp_path / "s.pb", seq, "s") == "SequenceProto"
    msg = onnx.SequenceProto()
    msg.ParseFromString((tmp_path / "s.pb").read_bytes())
    back = numpy_helper.to_list(msg)
    assert msg.name == "s" and [a.tolist() for a in back] == [[1.5, 2.0], [[3]]]
    for value in ({3: np.float32(0.25), -1: np.float32(2.0)}, {"a": np.int64(7)}):
        assert write_pb(tmp_path / "m.pb", value) == "MapProto"
        msg = onnx.MapProto()
        msg.ParseFromString((tmp_path / "m.pb").read_bytes())
        # (onnx gives string keys as bytes)
        assert {k: float(v) for k, v in numpy_helper.to_dict(msg).items()} == \
            {(k.encode() if isinstance(k, str) else k): float(v) for k, v in value.items()}
        assert {k: float(v) for k, v in read_pb(tmp_path / "m.pb", "map").items()} == \
            {k: float(v) for k, v in value.items()}
    assert write_pb(tmp_path / "o.pb", None) == "OptionalProto"
    msg = onnx.OptionalProto()
    msg.ParseFromString((tmp_path / "o.pb").read_bytes())
    assert numpy_helper.to_optional(msg) is None
    write_pb(tmp_path / "o.pb", seq, kind="optional")
    msg.ParseFromString((tmp_path / "o.pb").read_bytes())
    assert [a.tolist() for a in numpy_helper.to_optional(msg)] == [[1.5, 2.0], [[3]]]


def _passing_set(tmp_path):
    """A model and one data set that passes within the default tolerances."""
    model = _model(tmp_path)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    d = tmp_path / "set"
    d.mkdir()
    _write(d / "input_0.pb", x, "x")
    _write(d / "output_0.pb", x + 0.5, "y")
    return model, d


def test_negative_nan_and_infinite_tolerances_are_usage_errors_naming_the_flag(tmp_path):
    model, d = _passing_set(tmp_path)
    for flag in ("--atol", "--rtol"):
        for value, shown in (("-1", "-1.0"), ("nan", "nan"), ("inf", "inf"), ("-inf", "-inf")):
            r = runner.invoke(app, ["run", str(model), "--test-data", str(d), flag, value])
            assert r.exit_code == 2, (flag, value, r.output)
            assert r.stderr == f"Usage error: {flag} {shown}: not a finite number >= 0\n"
            assert r.stdout == ""  # refused before anything runs
    # 0 is a tolerance (exact), and passes this data set
    r = runner.invoke(app, ["run", str(model), "--test-data", str(d), "--atol", "0",
                            "--rtol", "0"])
    assert r.exit_code == 0, r.output


def test_tolerances_without_test_data_are_usage_errors_and_the_defaults_stay(tmp_path):
    model, d = _passing_set(tmp_path)
    for args in (["--random", "--atol", "1e-3"], ["--random", "--rtol", "0.5"],
                 ["--input", "x=none.npy", "--rtol", "0.5", "--atol", "1"]):
        r = runner.invoke(app, ["run", str(model), *args])
        assert r.exit_code == 2, (args, r.output)
        flag = "--atol" if "--atol" in args else "--rtol"  # (--atol named first when both)
        assert r.stderr == f"Usage error: {flag} compares outputs: give --test-data\n"
        assert r.stdout == ""
    # without the flags, --test-data compares within rtol 1e-3 and atol 1e-7 (as before)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    want = x + 0.5
    want[0, 1] = np.float32(1.5) * np.float32(1 + 0.9e-3)  # within rtol 1e-3
    want[1, 2] = np.float32(5.5) * np.float32(1 + 1.2e-3)  # beyond it
    _write(d / "output_0.pb", want, "y")
    r = runner.invoke(app, ["run", str(model), "--test-data", str(d)])
    assert r.exit_code == 1, r.output
    assert r.stdout.splitlines()[1].startswith(
        "  y: 1 of 6 elements out of tolerance (rtol 0.001, atol 1e-07); ")
    # and --help says so
    from typer.main import get_command

    helps = {p.name: p.help for p in get_command(app).commands["run"].params}
    assert "(default 1e-3;" in helps["rtol"] and "(default 1e-7)" in helps["atol"]


def test_a_data_set_without_outputs_is_no_pass_exit_2(tmp_path):
    """input_*.pb but no output_*.pb: nothing to compare, a usage error before any run (not
    `pass (0 output(s) within tolerance)`, exit 0)."""
    model = _model(tmp_path)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    one = tmp_path / "one"
    one.mkdir()
    _write(one / "input_0.pb", x, "x")
    r = runner.invoke(app, ["run", str(model), "--test-data", str(one)])
    assert r.exit_code == 2, r.output
    assert r.stdout == ""
    assert r.stderr == f"Usage error: --test-data {one}: no output_*.pb to compare in {one}\n"
    # a test case whose second data set lacks them: refused too, the set named
    case = tmp_path / "case"
    for k, expected in ((0, True), (1, False)):
        d = case / f"test_data_set_{k}"
        d.mkdir(parents=True)
        _write(d / "input_0.pb", x, "x")
        if expected:
            _write(d / "output_0.pb", x + 0.5, "y")
    r = runner.invoke(app, ["run", str(model), "--test-data", str(case)])
    assert r.exit_code == 2, r.output
    assert r.stdout == ""
    assert r.stderr == (f"Usage error: --test-data {case}: no output_*.pb to compare in "
                        f"{case / 'test_data_set_1'} (data set 2 of 2)\n")
    # with its output file the case passes
    _write(case / "test_data_set_1" / "output_0.pb", x + 0.5, "y")
    r = runner.invoke(app, ["run", str(model), "--test-data", str(case)])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[-1] == "2 of 2 data set(s) pass"


def test_a_data_set_without_inputs_names_the_data_set_not_the_model(tmp_path):
    """output_*.pb but no input_*.pb for an input to feed: the data set lacks it, a usage error
    naming it and the input, before any run (not the model's 'no value given for input(s)')."""
    model = _model(tmp_path)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    only = tmp_path / "only_outputs"
    only.mkdir()
    _write(only / "output_0.pb", x, "y")
    r = runner.invoke(app, ["run", str(model), "--test-data", str(only)])
    assert r.exit_code == 2, r.output
    assert r.stdout == ""
    assert r.stderr == ("Usage error: --test-data only_outputs: 0 input_*.pb for a graph of 1 "
                        "inputs to feed; none for x\n")
