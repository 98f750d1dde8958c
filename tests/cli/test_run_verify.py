"""`onemodel run` and `onemodel verify --run` as a user meets them: what is printed, what is
written, the exit status; every value is checked against the Python API."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from oracle_releases import needs_onnxruntime
from typer.testing import CliRunner

import onemodel
from onemodel.cli import app
from onemodel.evaluate import random_inputs, run

MODELS = Path(__file__).resolve().parents[2] / "testdata" / "models"
CNN = MODELS / "cnn_legacy.onnx"
TRANSFORMER = MODELS / "transformer_dynamo.onnx"
LEGACY_TRANSFORMER = MODELS / "transformer_legacy.onnx"
runner = CliRunner()

LINE = re.compile(r"^(\S+): shape \[([\d, ]*)\] dtype (\S+) sha256:([0-9a-f]{64})$")


def cli(*args):
    return runner.invoke(app, [str(a) for a in args])


def api_outputs(path, feeds=None, *, seed=0, dims=None):
    """The outputs the Python API computes, with the inputs `--random --seed` would make."""
    with onemodel.load(path) as model:
        if feeds is None:
            feeds = random_inputs(model, seed=seed, dims=dims or {})
        return {k: np.array(v) for k, v in run(model, feeds).items()}


def parse(stdout: str) -> dict:
    found = {}
    for line in stdout.splitlines():
        m = LINE.match(line.strip())
        if m:
            shape = [int(x) for x in m.group(2).split(",") if x.strip()]
            found[m.group(1)] = (shape, m.group(3), m.group(4))
    return found


def sha256(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def test_run_random_prints_name_shape_dtype_and_digest():
    r = cli("run", CNN, "--random", "--seed", "0")
    assert r.exit_code == 0, r.output
    want = api_outputs(CNN, seed=0)
    assert parse(r.stdout) == {k: (list(v.shape), str(v.dtype), sha256(v))
                               for k, v in want.items()}


def test_run_seed_and_dim_change_the_inputs():
    a = parse(cli("run", CNN, "--random", "--seed", "0").stdout)
    b = parse(cli("run", CNN, "--random", "--seed", "1").stdout)
    assert a["logits"][2] != b["logits"][2]
    r = cli("run", TRANSFORMER, "--random", "--dim", "batch=2", "--dim", "seq=5")
    assert r.exit_code == 0, r.output
    want = api_outputs(TRANSFORMER, dims={"batch": 2, "seq": 5})
    assert parse(r.stdout)["logits"] == ([2, 5, 10], "float32", sha256(want["logits"]))


def test_run_input_from_npy_and_output_dir(tmp_path):
    x = np.random.default_rng(5).standard_normal((4, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    r = cli("run", CNN, "--input", f"input={tmp_path / 'x.npy'}", "--output-dir", out)
    assert r.exit_code == 0, r.output
    want = api_outputs(CNN, {"input": x})
    saved = np.load(out / "logits.npy")
    assert saved.dtype == want["logits"].dtype and saved.shape == (4, 10)
    assert saved.tobytes() == want["logits"].tobytes()
    assert parse(r.stdout)["logits"][2] == sha256(saved)


def test_run_input_overrides_random(tmp_path):
    x = np.zeros((1, 3, 32, 32), np.float32)
    np.save(tmp_path / "x.npy", x)
    r = cli("run", CNN, "--random", "--input", f"input={tmp_path / 'x.npy'}")
    assert r.exit_code == 0, r.output
    assert parse(r.stdout)["logits"][2] == sha256(api_outputs(CNN, {"input": x})["logits"])


def test_run_random_says_which_shapes_it_generated(tmp_path, unnamed):
    """One `inputs:` line on stderr names each generated input, its type, its shape and the
    value of every open axis; running again with those values gives the same outputs."""
    r = cli("run", TRANSFORMER, "--random", "--dim", "seq=5")
    assert r.exit_code == 0, r.output
    assert r.stderr.splitlines() == ["inputs: tokens int64[1,5] (batch=1, seq=5)"]
    again = cli("run", TRANSFORMER, "--random", "--dim", "batch=1", "--dim", "seq=5")
    assert parse(again.stdout) == parse(r.stdout)
    with onemodel.load(TRANSFORMER) as model:
        (feed,) = random_inputs(model, dims={"seq": 5}).values()
    assert (feed.dtype, feed.shape) == (np.int64, (1, 5))
    r = cli("run", CNN, "--random")
    assert r.stderr.splitlines() == ["inputs: input float32[1,3,32,32] (batch=1)"]
    # axes without names are counted from 0; a shape given whole says so
    assert cli("run", unnamed, "--random").stderr.splitlines() == \
        ["inputs: x float32[1,1] (axis 0=1, axis 1=1)"]
    assert cli("run", unnamed, "--random", "--shape", "x=3,0").stderr.splitlines() == \
        ["inputs: x float32[3,0] (--shape)"]
    # an input read from a file was not generated: nothing to say
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 32, 32), np.float32))
    r = cli("run", CNN, "--random", "--input", f"input={tmp_path / 'x.npy'}")
    assert r.exit_code == 0 and r.stderr == "", r.output


def test_run_external_data_model():
    path = MODELS / "external" / "mlp_dynamo.onnx"
    r = cli("run", path, "--random", "--dim", "batch=3")
    assert r.exit_code == 0, r.output
    want = api_outputs(path, dims={"batch": 3})
    assert parse(r.stdout)["output"] == ([3, 10], "float32", sha256(want["output"]))


def test_run_sequence_of_maps_output():
    r = cli("run", MODELS / "sklearn_pipeline_zipmap.onnx", "--random")
    assert r.exit_code == 0, r.output
    assert "output_label: shape [1] dtype int64 sha256:" in r.stdout
    assert "output_probability: sequence of 1" in r.stdout
    assert "output_probability[0]: dict" in r.stdout


def test_run_errors_are_one_line_with_exit_2(tmp_path):
    r = cli("run", CNN)  # no inputs
    assert r.exit_code == 2
    assert r.stderr.startswith("Usage error:") and "--random" in r.stderr and "input" in r.stderr
    r = cli("run", CNN, "--input", "input")
    assert r.exit_code == 2 and "NAME=FILE.npy" in r.stderr
    r = cli("run", CNN, "--input", f"input={tmp_path / 'missing.npy'}")
    assert r.exit_code == 2 and r.stderr.startswith("Io:")
    np.save(tmp_path / "bad.npy", np.zeros((1, 3, 32, 32), np.float64))
    r = cli("run", CNN, "--input", f"input={tmp_path / 'bad.npy'}")
    assert r.exit_code == 2 and r.stderr.startswith("InputError:") and "float64" in r.stderr


def test_run_refuses_a_custom_operator_naming_it(tmp_path):
    proto = onnx.load(CNN)
    proto.graph.node.append(onnx.helper.make_node("Mystery", ["logits"], ["m"],
                                                  domain="com.example"))
    proto.graph.output[0].name = "m"
    proto.opset_import.append(onnx.helper.make_opsetid("com.example", 2))
    onnx.save(proto, tmp_path / "custom.onnx")
    r = cli("run", tmp_path / "custom.onnx", "--random")
    assert r.exit_code == 2
    assert r.stderr.startswith("Unsupported:") and "(com.example, Mystery, 2)" in r.stderr


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    d = tmp_path_factory.mktemp("verify")
    onemodel.convert(CNN, d / "cnn.onemodel")
    proto = onnx.load(CNN)
    t = proto.graph.initializer[0]
    w = onnx.numpy_helper.to_array(t).copy()
    w.reshape(-1)[0] += 0.5
    t.CopyFrom(onnx.numpy_helper.from_array(w, t.name))
    onnx.save(proto, d / "changed.onnx")
    return d


def test_verify_run_equal_for_a_model_and_its_conversion(converted):
    r = cli("verify", CNN, converted / "cnn.onemodel", "--run")
    assert r.exit_code == 0, r.output
    assert "1 output bit-identical" in r.stdout


def test_verify_run_names_the_output_when_a_weight_changed(converted):
    r = cli("verify", CNN, converted / "changed.onnx", "--run")
    assert r.exit_code == 1, r.output
    assert "graph.initializers[0].contents" in r.stdout
    assert "outputs['logits']: bits differ" in r.stdout
    # the API agrees that the outputs really differ
    a = api_outputs(CNN)["logits"]
    b = api_outputs(converted / "changed.onnx")["logits"]
    assert a.tobytes() != b.tobytes()


@needs_onnxruntime
def test_verify_run_engine_onnxruntime(converted):
    r = cli("verify", CNN, converted / "cnn.onemodel", "--run", "--engine", "onnxruntime")
    assert r.exit_code == 0, r.output
    r = cli("verify", CNN, converted / "changed.onnx", "--run", "--engine", "onnxruntime")
    assert r.exit_code == 1 and "outputs['logits']" in r.stdout
    r = cli("verify", CNN, CNN, "--run", "--engine", "nosuch")
    assert r.exit_code == 2 and "unknown engine" in r.stderr


def test_verify_run_dim_reaches_the_generated_inputs():
    # transformer_legacy.onnx runs only at seq 16 (testdata/README.md): --dim must be applied
    r = cli("verify", LEGACY_TRANSFORMER, LEGACY_TRANSFORMER, "--run", "--dim", "seq=16",
            "--dim", "batch=2")
    assert r.exit_code == 0, r.output
    r = cli("verify", LEGACY_TRANSFORMER, LEGACY_TRANSFORMER, "--run", "--dim", "seq=17")
    assert r.exit_code == 2
    assert "Reshape" in r.stderr


def test_verify_engine_onnxruntime_not_installed_is_unsupported(converted, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "onnxruntime", None)  # import fails
    r = cli("verify", CNN, converted / "cnn.onemodel", "--run", "--engine", "onnxruntime")
    assert r.exit_code == 2
    assert r.stderr.startswith("Unsupported:") and "not installed" in r.stderr


def test_run_transformer_legacy_needs_seq_16_and_says_which_axis():
    # transformer_legacy.onnx runs only at seq 16 (testdata/README.md)
    r = cli("run", LEGACY_TRANSFORMER, "--random", "--dim", "seq=16")
    assert r.exit_code == 0, r.output
    want = api_outputs(LEGACY_TRANSFORMER, dims={"seq": 16})
    assert parse(r.stdout)["logits"] == ([1, 16, 10], "float32", sha256(want["logits"]))
    r = cli("run", LEGACY_TRANSFORMER, "--random")
    assert r.exit_code == 2
    line = r.stderr.strip()
    assert "\n" not in line and not line.startswith("InvalidModel")
    # the input, its generated shape, and the one axis to set, as the flag that makes it run
    assert "tokens [1, 1] with batch = 1, seq = 1" in line
    assert "input 'tokens' axis 1 (seq) = 1 does not fit node 75: with --dim seq=16 the model " \
        "runs) [graph.nodes[75]" in line
    assert "--dim batch" not in line
    # the command line names its flags only, not the Python parameters they stand for
    assert "dims=" not in line and "shapes=" not in line and "Python" not in line
    r = cli("verify", LEGACY_TRANSFORMER, LEGACY_TRANSFORMER, "--run")
    assert r.exit_code == 2
    assert "with --dim seq=16 the model runs) [graph.nodes[75]" in r.stderr
    assert "dims=" not in r.stderr and "Python" not in r.stderr


@needs_onnxruntime
def test_verify_run_onnxruntime_failing_on_the_inputs_says_which_axis(tmp_path):
    """With --engine onnxruntime a model that fails on the generated inputs is an
    EvaluationError with the default engine's hint, not Unsupported."""
    onemodel.convert(LEGACY_TRANSFORMER, tmp_path / "x.onemodel")
    r = cli("verify", LEGACY_TRANSFORMER, tmp_path / "x.onemodel", "--run", "--engine",
            "onnxruntime")
    assert r.exit_code == 2
    line = r.stderr.strip()
    assert "\n" not in line
    assert line.startswith("EvaluationError: onnxruntime failed while running the model: ")
    assert "input 'tokens' axis 1 (seq) = 1 does not fit node 75: with --dim seq=16 the model " \
        "runs) [graph.nodes[75] (Reshape '/encoder/layers.0/self_attn/Reshape_4')]" in line
    assert "Python" not in line
    r = cli("verify", LEGACY_TRANSFORMER, tmp_path / "x.onemodel", "--run", "--engine",
            "onnxruntime", "--dim", "seq=16")
    assert r.exit_code == 0 and "1 output bit-identical" in r.stdout, r.output


def test_a_dim_or_shape_making_an_input_too_large_is_a_usage_error_naming_it(unnamed):
    cnn = MODELS / "cnn_dynamo.onnx"  # input 'input' [batch, 3, 32, 32]
    big = 99999999999
    want = (f"Usage error: --dim batch={big} makes input 'input' [{big},3,32,32] of "
            f"{big * 3 * 32 * 32} elements, past the limit of 2^28 for generated inputs\n")
    for cmd in (("run", cnn, "--random"), ("verify", cnn, cnn, "--run")):
        r = cli(*cmd, "--dim", f"batch={big}")
        assert r.exit_code == 2, r.output
        assert r.stderr == want, r.stderr
    r = cli("run", unnamed, "--random", "--shape", "x=65536,4096")
    assert r.exit_code == 2
    assert r.stderr == ("Usage error: --shape x=65536,4096 makes input 'x' [65536,4096] of "
                        "268435456 elements, past the limit of 2^28 for generated inputs\n")


def test_an_input_file_that_cannot_be_read_is_one_io_line_with_the_reason(tmp_path):
    missing = tmp_path / "nonexist.npy"
    r = cli("run", CNN, "--input", f"input={missing}")
    assert r.exit_code == 2
    assert r.stderr == f"Io: cannot read input 'input': No such file or directory in {missing}\n"
    r = cli("run", CNN, "--input", "input=")
    assert r.exit_code == 2 and r.stderr == "Usage error: --input input=: empty path\n"
    r = cli("run", CNN, "--random", "--output-dir", "")
    assert r.exit_code == 2 and r.stderr == "Usage error: --output-dir: empty path\n"
    assert r.stdout == ""


@pytest.fixture(scope="module")
def unnamed(tmp_path_factory):
    """A model whose input has two dimensions without names or values: ``x [?, ?]``."""
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, None])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])
    graph = helper.make_graph([helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)],
                              "g", [x], [y],
                              [helper.make_tensor("axes", TensorProto.INT64, [1], [1])])
    path = tmp_path_factory.mktemp("unnamed") / "unnamed.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return path


def test_shape_sets_an_input_whose_dims_have_no_names(unnamed):
    r = cli("run", unnamed, "--random", "--shape", "x=3,5", "--seed", "2")
    assert r.exit_code == 0, r.output
    with onemodel.load(unnamed) as model:
        feeds = random_inputs(model, seed=2, shapes={"x": (3, 5)})
    assert feeds["x"].shape == (3, 5)
    want = feeds["x"].astype(np.float64).sum(axis=1)  # exact: 5 float32 terms
    got = run_api(unnamed, feeds)["y"]
    # a float32 sum of n terms is within n * 2^-24 * sum|x| of the exact one; |x| < 1, n = 5
    np.testing.assert_allclose(got, want, rtol=0, atol=5 * 5 * 2.0 ** -24)
    assert parse(r.stdout)["y"] == ([3], "float32", sha256(got))
    r = cli("verify", unnamed, unnamed, "--run", "--shape", "x=3,5")
    assert r.exit_code == 0 and "1 output bit-identical" in r.stdout, r.output


def run_api(path, feeds):
    with onemodel.load(path) as model:
        return {k: np.array(v) for k, v in run(model, feeds).items()}


@pytest.mark.parametrize("flags, said", [
    (["--dim", "nosuch=3"], "Usage error: --dim nosuch=3: the model has no symbolic dimension "
     "'nosuch'; it has no symbolic dimensions"),
    (["--shape", "nosuch=1,2"], "Usage error: --shape nosuch=1,2: it is not a graph input"),
    (["--shape", "x=1,2,3"], "Usage error: --shape x=1,2,3 has rank 3; the graph declares rank 2"),
    (["--shape", "x=1,two"], "--shape x=1,two: 'two' is not a non-negative integer"),
])
def test_dim_and_shape_are_checked_alike_by_run_and_verify(unnamed, flags, said):
    for cmd in (("run", unnamed, "--random"), ("verify", unnamed, unnamed, "--run"),
                ("verify", unnamed, unnamed)):
        r = cli(*cmd, *flags)
        assert r.exit_code == 2, (cmd, r.output)
        assert r.stderr.startswith("Usage error:") and said in r.stderr, (cmd, r.stderr)


def test_a_dim_the_model_does_not_have_is_named_by_its_flag(tmp_path):
    """`--dim nosuch=3` for a model whose dims are batch and seq: one usage error line naming the
    flag and value and listing the dims, in run, verify --run and verify; the Python message
    says which parameter the flag stands for."""
    from onnx import TensorProto, helper

    from onemodel.errors import Setting, UsageError
    from onemodel.evaluate.inputs import check_dims_shapes

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                         ["batch", "seq"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                         ["batch", "seq"])])
    path = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    said = ("Usage error: --dim nosuch=3: the model has no symbolic dimension 'nosuch'; its dims "
            "are: batch, seq\n")
    for cmd in (("run", path, "--random"), ("verify", path, path, "--run"),
                ("verify", path, path)):
        r = cli(*cmd, "--dim", "seq=4", "--dim", "nosuch=3")
        assert (r.exit_code, r.stderr, r.stdout) == (2, said, ""), (cmd, r.output)
    with onemodel.load(path) as model, pytest.raises(UsageError) as e:
        check_dims_shapes(model, {"nosuch": 3}, {})
    assert str(e.value) == ("dims={'nosuch': 3}: the model has no symbolic "
                            "dimension 'nosuch'; its dims are: batch, seq")
    assert e.value.settings == (Setting("dims", {"nosuch": 3}),)


def test_a_shape_that_does_not_fit_is_named_like_one_that_cannot_be_parsed(tmp_path):
    """`--shape x=2,4` for an input declared [N, 3] and `--shape x=2,four` are both one usage
    error line (exit 2) that starts with the flag and its value, as `--dim` values are named,
    in run, verify --run and verify; the Python API's message says which parameter it is."""
    from onnx import TensorProto, helper

    from onemodel.errors import UsageError
    from onemodel.evaluate.inputs import check_dims_shapes

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])])
    path = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    for value, said in (("x=2,4", "axis 1 is 4; the graph declares [N, 3]"),
                        ("x=2,four", "'four' is not a non-negative integer")):
        for cmd in (("run", path, "--random"), ("verify", path, path, "--run"),
                    ("verify", path, path)):
            r = cli(*cmd, "--shape", value)
            assert r.exit_code == 2, (cmd, r.output)
            assert r.stderr.startswith(f"Usage error: --shape {value}: {said}"), (cmd, r.stderr)
            assert "shapes=" not in r.stderr
    with onemodel.load(path) as model, pytest.raises(UsageError) as e:
        check_dims_shapes(model, {}, {"x": (2, 4)})
    assert str(e.value).startswith("shapes={'x': (2, 4)}: axis 1 is 4")


def test_a_dim_of_zero_is_an_extent_and_bad_values_are_refused_alike(tmp_path):
    """A dimension variable denotes an extent, and an extent of 0 is permitted (Part 1, Clause
    6.5.1: the tensor has no elements), so `--dim seq=0` generates an empty input, in `run`
    and `verify --run` alike; a negative or non-integer value is a usage error naming the flag,
    for run, verify --run and verify (what `make run DIMS=` passes on)."""
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "seq"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "seq"])])
    path = tmp_path / "neg.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    r = cli("run", path, "--random", "--dim", "seq=0", "--dim", "b=2")
    assert r.exit_code == 0, r.output
    assert parse(r.stdout) == {"y": ([2, 0], "float32", sha256(np.zeros((2, 0), np.float32)))}
    assert r.stderr == "inputs: x float32[2,0] (b=2, seq=0)\n"
    r = cli("verify", path, path, "--run", "--dim", "seq=0")
    assert r.exit_code == 0 and "1 output bit-identical" in r.stdout, r.output
    for value in ("-1", "1.5", "", "two"):
        for cmd in (("run", path, "--random"), ("verify", path, path, "--run"),
                    ("verify", path, path)):
            r = cli(*cmd, "--dim", f"seq={value}")
            assert r.exit_code == 2, (cmd, value, r.output)
            assert r.stderr == (f"Usage error: --dim seq={value}: {value!r} is not a "
                                "non-negative integer\n"), (cmd, r.stderr)


def test_a_declared_extent_of_minus_one_warns_once(tmp_path):
    """`run --random` on an input declared [-1, 3] (PaddlePaddle exports) runs, reading -1 as
    unknown, and says so in exactly one `warning:` line (generating and checking the value both
    see it); the console script installs the one-line warning format."""
    import subprocess
    import sys

    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = tmp_path / "neg.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    r = subprocess.run([sys.executable, "-c", "from onemodel.cli import main; main()", "run",
                        "--random", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "y: shape [1, 3] dtype float32" in r.stdout
    warnings = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == ["warning: input 'x' declares the extent -1 in [-1, 3] (graph.inputs[0]); "
                        "a negative extent is read as unknown"], r.stderr


@pytest.mark.parametrize("make", [
    lambda: np.arange(24, dtype=np.float32).reshape(2, 3, 4),          # C order
    lambda: np.arange(24, dtype=np.int64).reshape(4, 6).T,             # transposed view
    lambda: np.broadcast_to(np.arange(5, dtype=np.int16), (7, 5)),     # 0-stride view
    lambda: np.arange(10, dtype=np.float64)[::3],                      # strided
    lambda: np.array(3.5, dtype=np.float32),                           # scalar
    lambda: np.zeros((0, 3), dtype=np.float32),                        # empty
    lambda: np.array([[True, False], [False, True]]).T,
    lambda: np.arange(6, dtype=np.float32).astype(__import__("ml_dtypes").bfloat16).reshape(2, 3).T,
], ids=["c", "transposed", "broadcast", "strided", "scalar", "empty", "bool", "bfloat16"])
def test_output_digest_is_of_the_c_order_bytes(make):
    from onemodel.cli.run import _digest

    a = make()
    assert _digest(a) == hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def test_output_digest_does_not_copy_the_output():
    """`run` printed an output's digest from ``tobytes()``, a second copy of the whole output:
    an output the memory budget let through (Add [N,1] + [1,N], 3.4 GiB at N=30000) then
    failed at the digest, ``internal error: MemoryError`` (exit 70), under a memory limit. A
    C-order output is hashed in place; another is copied a block of rows at a time."""
    import tracemalloc

    from onemodel.cli.run import _digest

    a = np.ones((64, 1 << 18), dtype=np.float32)   # 64 MiB, C order
    t = np.ones((1 << 18, 64), dtype=np.float32).T  # 64 MiB, not C order
    want = [hashlib.sha256(x.tobytes()).hexdigest() for x in (a, t)]
    tracemalloc.start()
    try:
        got = []
        for x in (a, t):
            tracemalloc.reset_peak()
            got.append(_digest(x))
            assert tracemalloc.get_traced_memory()[1] < 24 << 20, x.flags
    finally:
        tracemalloc.stop()
    assert got == want
