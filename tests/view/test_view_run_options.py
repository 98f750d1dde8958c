"""`onemodel view A B --run` takes verify --run's options (declared once, in
onemodel.cli.compare_report) and each reaches the run the page is coloured by."""

from __future__ import annotations

import onnx
from onnx import helper
from test_view_diff import CONV, DETECTOR, _view, changed_detector
from typer.testing import CliRunner
from view_models import save, tensor, vi

import onemodel.cli as cli


def _shape_models(tmp_path):
    """A: y = float(Shape(x)); B: y = 2 * float(Shape(x)), x float[N, 2]: B's y differs from
    A's by max(N, 2) (the extents of x), so the largest difference on B's Mul is x's first
    extent when that is >= 2."""
    x = vi("x", shape=("N", 2))
    y = vi("y", shape=(2,))
    a = save(tmp_path / "a.onnx", [helper.make_node("Shape", ["x"], ["s"], name="shape"),
                                   helper.make_node("Cast", ["s"], ["y"], name="cast", to=1)],
             [x], [y])
    b = save(tmp_path / "b.onnx", [helper.make_node("Shape", ["x"], ["s"], name="shape"),
                                   helper.make_node("Cast", ["s"], ["c"], name="cast", to=1),
                                   helper.make_node("Mul", ["c", "two"], ["y"], name="mul")],
             [x], [y], [tensor("two", onnx.numpy_helper.to_array(
                 helper.make_tensor("two", onnx.TensorProto.FLOAT, [], [2.0])))])
    return a, b


def _rd(d, name):
    return [n for n in d["nodes"] if n["n"] == name][0]["rd"]


def test_dim_and_shape_reach_the_generated_inputs(tmp_path):
    a, b = _shape_models(tmp_path)
    assert _rd(_view(a, b, "--run"), "mul") == 2.0  # N unset: 1, so |[1,2] - [2,4]| max 2
    assert _rd(_view(a, b, "--run", "--dim", "N=5"), "mul") == 5.0
    assert _rd(_view(a, b, "--run", "--shape", "x=7,2"), "mul") == 7.0
    r = CliRunner().invoke(cli.app, ["view", str(a), str(b), "--run", "--dim", "M=5", "-o", "-"])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1 and "M" in r.stderr


def test_a_tolerance_makes_the_changed_conv_equal(tmp_path):
    b, _ = changed_detector(tmp_path / "b.onnx")
    strict = _view(DETECTOR, b, "--run")
    assert strict["run"]["differing"] > 0 and strict["run"]["first"] >= 0
    loose = _view(DETECTOR, b, "--run", "--atol", "1e6")
    conv = [n for n in loose["nodes"] if n["n"] == CONV][0]
    assert conv["rw"] is True and conv["rd"] > 0  # the same difference, now within tolerance
    assert loose["run"]["differing"] == 0 and loose["run"]["first"] == -1
    assert not any(n.get("rw") is False for n in loose["nodes"])
    # one value's own tolerance (--tol NAME:...) covers that value only
    out = conv["u"][0]
    name = loose["values"][out][0]
    one = _view(DETECTOR, b, "--run", "--tol", f"{name}:atol=1e6")
    conv = [n for n in one["nodes"] if n["n"] == CONV][0]
    assert conv["rw"] is True and one["run"]["differing"] > 0  # what follows still differs
    assert one["nodes"][one["run"]["first"]]["n"] != CONV


def test_engines_reach_the_run(tmp_path):
    b, _ = changed_detector(tmp_path / "b.onnx")
    d = _view(DETECTOR, b, "--engine", "onemodel", "--run")
    assert d["run"]["engines"] == ["onemodel", "onemodel"]
    r = CliRunner().invoke(cli.app, ["view", str(DETECTOR), str(b), "--engine", "nosuch",
                                     "--run", "-o", "-"])
    assert r.exit_code == 2 and "nosuch" in r.stderr and "onemodel" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_run_options_are_refused_without_run(tmp_path):
    for args, said in ((["--atol", "1"], "--atol compares outputs"),
                       (["--dim", "N=2"], "--dim is for the run"),
                       (["--engine", "onemodel"], "--engine is for the run"),
                       (["--atol", "-1", "--run"], "--atol -1.0: not a finite number"),
                       (["--tol", "nosuch:atol=1", "--run"], "--tol nosuch: no value")):
        r = CliRunner().invoke(cli.app, ["view", str(DETECTOR), str(DETECTOR), *args, "-o",
                                         "-"])
        assert r.exit_code == 2 and said in r.stderr, (args, r.stderr)


def test_a_run_colours_only_main_graph_nodes(tmp_path):
    """A function's body naming its value as a main-graph value is named ("t") is not coloured
    by that value's comparison: a run compares the main graph's values."""
    from onnx import helper as h

    fn = h.make_function("local", "F", ["a"], ["t"], [h.make_node("Neg", ["a"], ["t"],
                                                                  name="fneg")],
                         [h.make_opsetid("", 17)])
    paths = []
    for k, op in enumerate(("Relu", "Abs")):
        paths.append(save(tmp_path / f"{k}.onnx",
                          [h.make_node(op, ["x"], ["t"], name="first"),
                           h.make_node("F", ["t"], ["z"], name="call", domain="local")],
                          [vi("x")], [vi("z")], functions=[fn]))
    d = _view(*paths, "--run")
    by = {n["n"]: n for n in d["nodes"]}
    assert by["first"]["rw"] is False and by["first"]["df"] == "changed"
    assert "rd" not in by["fneg"] and "rw" not in by["fneg"]


def test_two_engines_reach_the_run(tmp_path):
    import pytest
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    a, b = _shape_models(tmp_path)
    d = _view(a, b, "--engines", "onemodel,onnxruntime", "--dim", "N=3")  # (implies --run)
    assert d["run"]["engines"] == ["onemodel", "onnxruntime"]
    assert _rd(d, "mul") == 3.0
