"""``onemodel convert --opset N --verify-run`` and :func:`onemodel.verify_conversion`: the
original and the converted model run on generated inputs and compared within the Clause 11.5
tolerances; a deliberately wrong adapter is caught, its node named, nothing written."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from opset_models import F, model, value
from typer.testing import CliRunner

import onemodel
from onemodel.bisect import NODE
from onemodel.cli import app
from onemodel.errors import UsageError
from onemodel.evaluate import Session
from onemodel.formats.onnx import encode_model
from onemodel.ir import Node
from onemodel.operators.table import exact
from onemodel.opset_convert import convert
from onemodel.opset_convert.verify_run import verify_conversion

runner = CliRunner()


def cli(*args):
    return runner.invoke(app, [str(a) for a in args])


def relu_sum_double(axis=0, dims=("N", 3)):
    """``z = 2 * ReduceSum(Relu(x), axes=[axis], keepdims=1)`` at opset 13 (``axes`` an input),
    ``x`` float of shape ``dims``."""
    return model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                  helper.make_node("ReduceSum", ["r", "axes"], ["s"], name="sum", keepdims=1),
                  helper.make_node("Mul", ["s", "two"], ["z"], name="double")],
                 [value("x", F, list(dims))], [value("z", F, None)], 13,
                 initializers={"axes": np.array([axis], np.int64),
                               "two": np.array(2.0, np.float32)})


def want(x, axis=0):
    """The model's output computed in float64."""
    return 2 * np.maximum(x.astype(np.float64), 0).sum(axis=axis, keepdims=True)


@pytest.fixture
def wrong_reduce_sum(monkeypatch):
    """The ReduceSum 13 -> 12 adapter of the operator table made wrong: it does its rewrite, then
    turns the node into a ReduceMax (same shapes, other values: equal only when the reduced
    axis has one element, since Relu's outputs are >= 0)."""
    adapter = exact("adapter", "", "ReduceSum", 13)
    right = adapter.down

    def down(step, node):
        got = right(step, node)
        for n in got if got is not None else [node]:
            if n.op_type == "ReduceSum":
                n.op_type = "ReduceMax"
        return got

    monkeypatch.setattr(adapter, "down", down)


def test_a_conversion_that_computes_the_same_passes():
    m = relu_sum_double()
    c = convert(m, {"": 11}).model
    report = verify_conversion(m, c, dims={"N": 4}, seed=5)
    assert report.equal and bool(report) and report.message() == ""
    assert report.differences == [] and report.bisect is None and report.first_node is None
    assert report.outputs_compared == ["z"] and report.engine == "onemodel"
    (cmp,) = report.comparisons
    assert cmp.within and cmp.max_abs == 0.0
    # the Clause 11.5 tolerance of float32 (rtol 1e-3, atol 1e-7), not bit for bit
    assert (cmp.tolerance.rtol, cmp.tolerance.atol) == (1e-3, 1e-7)
    x = report.inputs["x"]
    assert x.shape == (4, 3) and x.dtype == np.float32
    got = Session(c).run({"x": x}, ["z"])["z"]
    np.testing.assert_allclose(got, want(x), rtol=1e-6, atol=0)


def test_a_wrong_adapter_is_caught_and_its_node_named(wrong_reduce_sum):
    m = relu_sum_double()
    c = convert(m, {"": 11}).model
    assert [n.op_type for n in c.graph.nodes] == ["Relu", "ReduceMax", "Mul"]
    report = verify_conversion(m, c, dims={"N": 4})
    assert not report.equal
    assert [d.path for d in report.differences] == ["outputs['z']"]
    first = report.first_node
    assert (first.path, first.op_type, first.name) == ("graph.nodes[1]", "ReduceSum", "sum")
    assert first.position == 1 and first.verdict == NODE  # the node itself, not its inputs
    assert report.bisect.nodes == 3 and report.bisect.differing == 2  # ReduceSum and Mul
    assert [n.name for n in report.bisect.later] == ["double"]
    assert dict((n, c.within) for n, c in first.inputs if c is not None) == {"r": True}
    text = report.message()
    assert text.startswith("the converted model differs from the original: outputs['z']: ")
    assert ("first differing node graph.nodes[1] (ReduceSum 'sum'), 2 of 3 in topological "
            "order: the node itself differs") in text
    # the values themselves: the original's sum against the converted model's max
    x = report.inputs["x"]
    got = Session(c).run({"x": x}, ["z"])["z"]
    np.testing.assert_allclose(got, 2 * np.maximum(x, 0).max(0, keepdims=True), rtol=1e-6)
    assert not np.allclose(got, want(x), rtol=1e-3)


def test_values_are_matched_by_name_when_an_adapter_renames_and_inserts(monkeypatch):
    """The converted model's node of the original's ``s`` is an inserted Add whose input has a
    name the original does not have: the first differing node is still the original's
    ReduceSum (found by the values both have); it cannot be re-run alone, and says why."""
    adapter = exact("adapter", "", "ReduceSum", 13)
    right = adapter.down

    def down(step, node):
        got = right(step, node)
        reduce = got[-1] if got is not None else node
        out = reduce.outputs[0]
        reduce.outputs[0] = "sum_inner"
        return [*(got or [node])[:-1], reduce,
                Node(op_type="Add", inputs=["sum_inner", "sum_inner"], outputs=[out],
                     name="doubled")]

    monkeypatch.setattr(adapter, "down", down)
    m = relu_sum_double()
    c = convert(m, {"": 11}).model
    assert [n.op_type for n in c.graph.nodes] == ["Relu", "ReduceSum", "Add", "Mul"]
    report = verify_conversion(m, c, dims={"N": 2})
    first = report.first_node
    assert (first.path, first.op_type, first.name) == ("graph.nodes[1]", "ReduceSum", "sum")
    assert first.verdict is None and "'sum_inner'" in first.rerun_error
    x = report.inputs["x"]
    np.testing.assert_allclose(Session(c).run({"x": x}, ["z"])["z"], 2 * want(x), rtol=1e-6)


def test_a_converted_model_that_cannot_run_is_a_difference(monkeypatch):
    adapter = exact("adapter", "", "ReduceSum", 13)
    right = adapter.down

    def down(step, node):
        got = right(step, node)
        node.inputs.append("nowhere")  # an input no one defines: the run fails
        return got

    monkeypatch.setattr(adapter, "down", down)
    m = relu_sum_double()
    c = convert(m, {"": 11}).model
    report = verify_conversion(m, c)
    assert [d.path for d in report.differences] == ["run"] and report.bisect is None
    assert report.message().startswith("the converted model cannot run on the original's "
                                       "inputs: ")


def test_dims_and_shapes_reach_the_generated_inputs():
    m = relu_sum_double()
    c = convert(m, {"": 11}).model
    assert verify_conversion(m, c, dims={"N": 6}).inputs["x"].shape == (6, 3)
    assert verify_conversion(m, c).inputs["x"].shape == (1, 3)  # unset: 1
    unnamed = relu_sum_double(dims=(None, 3))
    c = convert(unnamed, {"": 11}).model
    assert verify_conversion(unnamed, c, shapes={"x": (5, 3)}).inputs["x"].shape == (5, 3)
    with pytest.raises(UsageError, match="'M'"):
        verify_conversion(m, c, dims={"M": 2})


def test_public_names():
    assert onemodel.verify_conversion is verify_conversion
    assert onemodel.opset_convert.verify_conversion is verify_conversion


# -- the command line ---------------------------------------------------------------------------

def _write(tmp_path, m, name="m.onnx"):
    p = tmp_path / name
    p.write_bytes(encode_model(m))
    return p


def test_cli_verify_run_passes_and_describes_its_inputs(tmp_path):
    src = _write(tmp_path, relu_sum_double())
    dst = tmp_path / "out.onnx"
    r = cli("convert", src, dst, "--opset", "11", "--verify-run", "--dim", "N=4")
    assert r.exit_code == 0, r.output
    assert ("  verify-run: 1 output within tolerance (Clause 11.5) on onemodel; inputs: x "
            "float32[4,3] (N=4)") in r.stdout.splitlines()
    out = onemodel.load(dst)
    assert {o.domain: o.version for o in out.opset_imports} == {"": 11}
    src2 = _write(tmp_path, relu_sum_double(dims=(None, 3)), "unnamed.onnx")
    r = cli("convert", src2, tmp_path / "o2.onnx", "--opset", "11", "--verify-run",
            "--shape", "x=5,3", "--seed", "7")
    assert r.exit_code == 0, r.output
    assert "inputs: x float32[5,3] (--shape)" in r.stdout


def test_cli_a_difference_exits_1_names_the_node_and_writes_nothing(tmp_path,
                                                                    wrong_reduce_sum):
    src = _write(tmp_path, relu_sum_double())
    dst = tmp_path / "out.onnx"
    r = cli("convert", src, dst, "--opset", "11", "--verify-run", "--dim", "N=4")
    assert r.exit_code == 1, r.output
    first = r.stdout.splitlines()[0]
    assert first.startswith("different: the converted model differs from the original: "
                            "outputs['z']: ")
    assert "first differing node graph.nodes[1] (ReduceSum 'sum'), 2 of 3" in first
    assert first.endswith(f"(--verify-run; {dst} not written)")
    assert "  inputs: x float32[4,3] (N=4)" in r.stdout.splitlines()
    assert "  alone in onemodel: the node itself differs" in r.stdout.splitlines()
    assert not dst.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]
    # an existing destination is left as it was; --quiet prints the one line only
    dst.write_bytes(b"before")
    r = cli("convert", src, dst, "--opset", "11", "--verify-run", "--dim", "N=4", "-q")
    assert r.exit_code == 1 and len(r.stdout.splitlines()) == 1
    assert dst.read_bytes() == b"before"


def test_cli_dims_decide_what_is_compared(tmp_path, wrong_reduce_sum):
    """Summed over an axis of one element, the wrong ReduceMax computes the same: ``--dim``
    sizes the inputs of the runs, not only the description."""
    src = _write(tmp_path, relu_sum_double())
    r = cli("convert", src, tmp_path / "n1.onnx", "--opset", "11", "--verify-run",
            "--dim", "N=1")
    assert r.exit_code == 0, r.output
    r = cli("convert", src, tmp_path / "n3.onnx", "--opset", "11", "--verify-run",
            "--dim", "N=3")
    assert r.exit_code == 1 and "(ReduceSum 'sum')" in r.stdout
    assert not (tmp_path / "n3.onnx").exists()


@pytest.mark.parametrize("args, message", [
    (["--verify-run"], "--ir-version, --no-check and --verify-run go with --opset"),
    (["--opset", "11", "--dim", "N=2"], "--seed, --dim, --shape and --engine go with "
                                        "--verify-run"),
    (["--opset", "11", "--verify-run", "--dim", "M=2"], "--dim M=2: the model has no "
                                                        "symbolic dimension 'M'"),
    (["--opset", "11", "--verify-run", "--engine", "nope"], "unknown engine 'nope'"),
])
def test_cli_usage(tmp_path, args, message):
    src = _write(tmp_path, relu_sum_double())
    r = cli("convert", src, tmp_path / "out.onnx", *args)
    assert r.exit_code == 2 and message in r.output, r.output
    assert not (tmp_path / "out.onnx").exists()


def test_cli_engine_onnxruntime_runs_both_and_bisects(tmp_path, wrong_reduce_sum):
    pytest.importorskip("onnxruntime")
    src = _write(tmp_path, relu_sum_double())
    dst = tmp_path / "out.onnx"
    r = cli("convert", src, dst, "--opset", "11", "--verify-run", "--dim", "N=4",
            "--engine", "onnxruntime")
    assert r.exit_code == 1, r.output
    assert "first differing node graph.nodes[1] (ReduceSum 'sum'), 2 of 3" in r.stdout
    assert "  alone in onnxruntime: the node itself differs" in r.stdout.splitlines()
    assert not dst.exists()
