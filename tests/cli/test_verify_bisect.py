"""`onemodel verify --bisect` as a user meets it: the first differing node of the detector
(testdata/models/detector_legacy.onnx) with one inner Conv weight changed, printed and in
--json, checked against onemodel.bisect; one model on two engines (onnxruntime within the
Clause 11.5 defaults, see tests/test_bisect.py); the exit status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from oracle_releases import needs_onnxruntime
from typer.testing import CliRunner

import onemodel
from onemodel.bisect import bisect, topological_order
from onemodel.cli import app
from onemodel.evaluate import random_inputs
from onemodel.ir import Tensor

DETECTOR = Path(__file__).resolve().parents[2] / "testdata" / "models" / "detector_legacy.onnx"
runner = CliRunner()


def cli(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def changed(tmp_path_factory):
    """(path of the detector with one weight of its fourth Conv moved by -0.5, that Conv)."""
    with onemodel.load(DETECTOR) as m:
        convs = [i for i in topological_order(m) if m.graph.nodes[i].op_type == "Conv"]
        conv = m.graph.nodes[convs[3]]
        copy = m.copy()
        inits = copy.graph.initializers
        k = [t.name for t in inits].index(conv.inputs[1])
        w = inits[k].numpy().copy()
        w.flat[11] -= 0.5
        inits[k] = Tensor.from_numpy(w, name=conv.inputs[1])
        path = tmp_path_factory.mktemp("bisect") / "detector_changed.onnx"
        onemodel.save(copy, path)
        return path, convs[3], conv.name


def test_bisect_names_the_changed_conv_and_blames_inputs_after_it(changed):
    path, index, name = changed
    r = cli("verify", DETECTOR, path, "--bisect")
    assert r.exit_code == 1, r.output
    lines = r.output.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("bisect:"))
    assert lines[head].startswith(f"bisect: first differing node graph.nodes[{index}] "
                                  f"(Conv {name!r})")
    assert "  alone in onemodel: the node itself differs" in lines
    then = [line for line in lines if line.startswith("  then ")]
    assert len(then) == 8
    assert all(line.endswith("the node agrees on the same inputs: its inputs differ")
               for line in then)
    # the same as the Python API on the inputs --run generates (seed 0)
    with onemodel.load(DETECTOR) as a, onemodel.load(path) as b:
        report = bisect(a, b, random_inputs(a, seed=0))
    assert lines[head:head + len(report.lines())] == report.lines()


def test_bisect_in_json(changed):
    path, index, name = changed
    r = cli("verify", DETECTOR, path, "--bisect", "--json")
    assert r.exit_code == 1, r.output
    doc = json.loads(r.output)
    first = doc["bisect"]["first"]
    assert (first["index"], first["op_type"], first["name"], first["verdict"]) == \
        (index, "Conv", name, "node")
    weight = next(i for i in first["inputs"] if i["comparison"] and
                  not i["comparison"]["within"])
    assert weight["comparison"]["n_out"] == 1
    assert {n["verdict"] for n in doc["bisect"]["later"]} == {"inputs"}
    assert doc["bisect"]["engines"] == ["onemodel", "onemodel"]


@needs_onnxruntime
def test_bisect_one_model_on_two_engines_finds_no_node():
    r = cli("verify", DETECTOR, "--engines", "onemodel,onnxruntime", "--bisect")
    assert r.exit_code == 0, r.output
    assert "bisect: no node differs (78 nodes compared, onemodel vs onnxruntime)" in r.output


def test_bisect_implies_run_and_takes_the_seed(changed):
    path, index, _ = changed
    r = cli("verify", DETECTOR, path, "--bisect", "--seed", "3", "--json")
    doc = json.loads(r.output)
    assert doc["outputs"] and doc["bisect"]["first"]["index"] == index


def _relu(path, input_name, shape):
    """y = Relu(input), the input named and shaped as given (the second model of a pair whose
    first one's inputs it cannot take)."""
    from onnx import helper, save

    g = helper.make_graph([helper.make_node("Relu", [input_name], ["y"], name="r")], "g",
                          [helper.make_tensor_value_info(input_name, 1, shape)],
                          [helper.make_tensor_value_info("y", 1, shape)])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("b_input, b_shape, reason", [
    ("z", [4], "'x' is not an input of the graph; inputs are ['z']"),
    ("x", [3], "input 'x' has extent 4 on axis 0; the graph declares [3] [graph.inputs[0]]")])
def test_bisect_when_b_cannot_run_on_a_inputs_reports_and_exits_1(tmp_path, b_input, b_shape,
                                                                  reason):
    a = _relu(tmp_path / "a.onnx", "x", [4])
    b = _relu(tmp_path / "b.onnx", b_input, b_shape)
    plain = cli("verify", a, b, "--run")
    assert plain.exit_code == 1, plain.output
    r = cli("verify", a, b, "--run", "--bisect")
    assert r.exit_code == 1, r.output
    why = f"the second model cannot run on the first one's inputs: {reason}"
    # the report of --run as it is, then the one line of why bisect could not run
    assert r.stdout.splitlines() == plain.stdout.splitlines() + [f"bisect: not run: {why}"]
    assert r.stderr == ""
    r = cli("verify", a, b, "--run", "--bisect", "--json")
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    assert doc["equal"] is False and doc["bisect"] is None and doc["bisect_error"] == why
    # (verify's own difference of the run, as without --bisect)
    assert {"path": "run", "message": "the second model cannot run on the first one's inputs: "
            f"InputError: {reason}"} in doc["differences"]


def test_bisect_position_is_1_based_in_text_and_json(tmp_path):
    """x -> Neg (A) or Abs (B) -> b -> Relu -> y, the Relu written first: the differing node is
    the first in topological order, 'node 1 of 2' in the text and position 1 in JSON."""
    from onnx import helper, save

    def chain(path, op):
        nodes = [helper.make_node("Relu", ["b"], ["y"], name="relu"),
                 helper.make_node(op, ["x"], ["b"], name="first")]
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [4])],
                              [helper.make_tensor_value_info("y", 1, [4])])
        save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
        return path

    a, b = chain(tmp_path / "a.onnx", "Neg"), chain(tmp_path / "b.onnx", "Abs")
    r = cli("verify", a, b, "--bisect")
    assert r.exit_code == 1, r.output
    assert ("bisect: first differing node graph.nodes[1] (Neg 'first'), 1 of 2 in topological "
            "order (2 differ, 2 nodes compared)") in r.stdout.splitlines()
    doc = json.loads(cli("verify", a, b, "--bisect", "--json").stdout)["bisect"]
    assert (doc["first"]["index"], doc["first"]["position"]) == (1, 1)
    ((later,),) = [doc["later"]]
    assert (later["index"], later["position"], later["op_type"]) == (0, 2, "Relu")


def test_position_is_among_a_nodes_and_the_compared_count_is_apart():
    """cnn_dynamo against cnn_legacy: only the Gemm's output has the same name on both sides, so
    one node is compared; the Gemm is the 14th of cnn_dynamo's 14 nodes, not '14 of 1'."""
    models = DETECTOR.parent
    a, b = models / "cnn_dynamo.onnx", models / "cnn_legacy.onnx"
    with onemodel.load(a) as m:
        count = len(m.graph.nodes)
        gemm = next(i for i, n in enumerate(m.graph.nodes) if n.op_type == "Gemm")
        position = topological_order(m).index(gemm) + 1
    assert (count, gemm, position) == (14, 13, 14)
    r = cli("verify", a, b, "--bisect")
    assert r.exit_code == 1, r.output
    assert ("bisect: first differing node graph.nodes[13] (Gemm 'node_linear'), 14 of 14 in "
            "topological order (1 differs, 1 node compared)") in r.stdout.splitlines()
    doc = json.loads(cli("verify", a, b, "--bisect", "--json").stdout)["bisect"]
    assert (doc["nodes"], doc["nodes_compared"], doc["differing"]) == (14, 1, 1)
    assert (doc["first"]["index"], doc["first"]["position"]) == (13, 14)


def test_no_node_differs_counts_one_node_in_the_singular(tmp_path):
    _relu(tmp_path / "a.onnx", "x", [4])
    r = cli("verify", tmp_path / "a.onnx", tmp_path / "a.onnx", "--bisect")
    assert r.exit_code == 0, r.output
    assert "bisect: no node differs (1 node compared, onemodel vs onemodel)" in \
        r.stdout.splitlines()
