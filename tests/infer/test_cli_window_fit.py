"""The command line on a Conv whose window does not fit its input (a 1x1 image, a 3x3 kernel, no
padding): `onemodel info --shapes` prints the output's spatial extents unknown, never negative,
and lists the contradiction; `onemodel check --full` reports it as an OM410 error at the node
and exits 1 (docs/cli.md); without --full the structure alone is valid."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from typer.testing import CliRunner

from onemodel.cli import app

runner = CliRunner()

MESSAGE = ("Conv: the window does not fit: output extents [-1, -1] (input [1, 1], kernel [3, 3], "
           "pads [0, 0, 0, 0], strides [1, 1], dilations [1, 1])")


def _model(tmp_path, x_shape=(1, 3, 1, 1)) -> str:
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", T.FLOAT, list(x_shape))],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    p = str(tmp_path / "m.onnx")
    onnx.save(m, p)
    return p


def test_info_shapes_prints_no_negative_extent(tmp_path):
    r = runner.invoke(app, ["info", _model(tmp_path), "--shapes"])
    assert r.exit_code == 0, r.output
    table = r.output.split("values of graph: 3")[1]  # (the outputs section has y untyped)
    rows = [ln.split()[-1] for ln in table.splitlines() if ln.strip().startswith("y ")]
    assert rows == ["tensor(float)[1,4,?,?]"], table
    assert f"contradiction: {MESSAGE} [graph.node[0]]" in r.output


def test_info_shapes_json(tmp_path):
    r = runner.invoke(app, ["info", _model(tmp_path), "--shapes", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    ys = [v["type"] for v in doc["values"]["graph"] if v["name"] == "y"]
    assert ys == ["tensor(float)[1,4,?,?]"]
    assert doc["contradictions"] == [{"path": "graph.node[0]", "message": MESSAGE}]


def test_check_full_is_an_error(tmp_path):
    p = _model(tmp_path)
    r = runner.invoke(app, ["check", p, "--full"])
    assert r.exit_code == 1, r.output
    assert f"graph.node[0]: {MESSAGE}" in r.output
    assert "not valid: 1 error(s)" in r.output
    r = runner.invoke(app, ["check", p, "--full", "--json"])
    assert r.exit_code == 1
    found = [(f["code"], f["severity"], f["path"], f["message"])
             for f in json.loads(r.output)["findings"]]
    assert found == [("OM410", "error", "graph.node[0]", MESSAGE)]


def test_check_without_full_and_a_window_that_fits(tmp_path):
    r = runner.invoke(app, ["check", _model(tmp_path), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["counts"]["error"] == 0
    fits = tmp_path / "fits"
    fits.mkdir()
    r = runner.invoke(app, ["check", _model(fits, (1, 3, 3, 4)), "--full"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["info", _model(fits, (1, 3, 3, 4)), "--shapes"])
    assert "tensor(float)[1,4,1,2]" in r.output and "contradiction" not in r.output
