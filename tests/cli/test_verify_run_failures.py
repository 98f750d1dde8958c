"""`onemodel verify A B --run` when a run cannot happen: B not taking A's inputs is said on a
`run: not run: ...` line of the text report (even past 100 structural differences) and as
`run_error` in --json; A failing on its own generated inputs is an error (exit 2) with the hint
naming the flag, whatever B is, and without the Python-API note."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from typer.testing import CliRunner

import onemodel
from onemodel.cli import app

MODELS = Path(__file__).resolve().parents[2] / "testdata" / "models"
CNN_DYNAMO = MODELS / "cnn_dynamo.onnx"
CNN_LEGACY = MODELS / "cnn_legacy.onnx"
LEGACY_TRANSFORMER = MODELS / "transformer_legacy.onnx"
DYNAMO_TRANSFORMER = MODELS / "transformer_dynamo.onnx"
runner = CliRunner()

WHY = ("the second model cannot run on the first one's inputs: InputError: 'input' is not an "
       "input of the graph; inputs are ['renamed_in']")


def cli(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def renamed(tmp_path_factory):
    """cnn_dynamo.onnx with its graph input 'input' renamed 'renamed_in' (and its readers)."""
    proto = onnx.load(CNN_DYNAMO)
    assert proto.graph.input[0].name == "input"
    proto.graph.input[0].name = "renamed_in"
    for node in proto.graph.node:
        node.input[:] = ["renamed_in" if x == "input" else x for x in node.input]
    path = tmp_path_factory.mktemp("renamed") / "renamed.onnx"
    onnx.save(proto, path)
    return path


def test_text_report_says_the_run_did_not_happen(renamed):
    r = cli("verify", CNN_DYNAMO, renamed, "--run")
    assert r.exit_code == 1, r.output
    assert r.stdout.splitlines() == [
        "different: graph.nodes[0].inputs: node_Conv_28: ['input', 'stem.0.weight', "
        "'stem.0.bias'] vs ['renamed_in', 'stem.0.weight', 'stem.0.bias']",
        f"  run: not run: {WHY}",
        "  (1 more difference)"]


def test_run_line_is_shown_past_the_difference_limit(renamed):
    """cnn_legacy against the renamed cnn_dynamo: 100 structural differences (the limit), the
    run's difference the 101st, still printed second."""
    r = cli("verify", CNN_LEGACY, renamed, "--run")
    assert r.exit_code == 1, r.output
    lines = r.stdout.splitlines()
    assert lines[0].startswith("different: ")
    assert lines[1] == f"  run: not run: {WHY}"
    assert lines[2] == "  (at least 99 more differences)"
    assert len(lines) == 3
    doc = json.loads(cli("verify", CNN_LEGACY, renamed, "--run", "--json").stdout)
    assert doc["differences_capped"] is True
    assert doc["run_error"] == WHY
    assert doc["differences"][-1] == {"path": "run", "message": WHY}
    assert doc["outputs"] == []


def test_json_run_error(renamed):
    r = cli("verify", CNN_DYNAMO, renamed, "--run", "--json")
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    assert doc["run_error"] == WHY
    assert [d["path"] for d in doc["differences"]] == ["graph.nodes[0].inputs",
                                                      "graph.inputs[0].name", "run"]
    # a run that happened has no run_error
    ok = json.loads(cli("verify", CNN_DYNAMO, CNN_DYNAMO, "--run", "--json").stdout)
    assert ok["run_error"] is None and ok["equal"] is True


def test_python_report_run_error(renamed):
    report = onemodel.verify(CNN_DYNAMO, renamed, run=True)
    assert not report.equal and report.run_error == WHY
    assert report.outputs_compared == []


HINT = ("input 'tokens' axis 1 (seq) = 1 does not fit node 75: with --dim seq=16 the model runs)"
        " [graph.nodes[75] (Reshape '/encoder/layers.0/self_attn/Reshape_4')] in "
        f"{LEGACY_TRANSFORMER}")


@pytest.mark.parametrize("b", [LEGACY_TRANSFORMER, DYNAMO_TRANSFORMER])
def test_a_failing_on_its_own_inputs_is_exit_2_with_the_flag_hint(b):
    r = cli("verify", LEGACY_TRANSFORMER, b, "--run")
    assert r.exit_code == 2, r.output
    assert r.stdout == ""
    (line,) = r.stderr.splitlines()
    assert line.startswith("EvaluationError: node 75 (Reshape "
                           "'/encoder/layers.0/self_attn/Reshape_4') failed: ")
    assert line.endswith(HINT)
    assert "in Python" not in line


def test_a_failing_raises_in_python_whatever_b_is():
    from onemodel.errors import EvaluationError
    with pytest.raises(EvaluationError) as e:
        onemodel.verify(LEGACY_TRANSFORMER, DYNAMO_TRANSFORMER, run=True)
    # the API names the Python parameters; the CLI writes the same setting as its flag (above)
    assert "with dims={'seq': 16} the model runs)" in e.value.message
