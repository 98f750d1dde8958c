"""A node without an attribute or input its operator requires is an InvalidModelError with the
node's path, raised when the Session plans it (from the operator's definition in
onemodel.schemas, for every kernel), never a KeyError inside a kernel reported as an internal
error (issue 24, item 5)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from guards import bounded
from onnx import TensorProto as TP
from onnx import helper
from typer.testing import CliRunner

import onemodel
from onemodel.cli import app
from onemodel.errors import InvalidModelError
from onemodel.evaluate import Session, run

MiB = 1 << 20


def _branch(value: float):
    return helper.make_graph([helper.make_node("Constant", [], ["z"], value_float=value)], "b",
                             [], [helper.make_tensor_value_info("z", TP.FLOAT, [])])


def _if_model(inputs, **attrs):
    node = helper.make_node("If", inputs, ["y"], name="choose", **attrs)
    g = helper.make_graph([node], "g",
                          [helper.make_tensor_value_info("c", TP.BOOL, [])] if inputs else [],
                          [helper.make_tensor_value_info("y", TP.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_a_malformed_if_is_an_invalid_model_not_an_internal_error(tmp_path):
    """The issue's model: a graph attribute `g`, no then_branch, no else_branch, no cond."""
    path = tmp_path / "if.onnx"
    onnx.save(_if_model([], g=_branch(1.0)), path)
    with bounded(seconds=20, peak=16 * MiB):
        r = CliRunner().invoke(app, ["run", str(path)])
        with onemodel.load(path) as m, pytest.raises(InvalidModelError) as e:
            Session(m)
    assert r.exit_code == 2, r.output
    assert r.stderr == ("InvalidModel: If 'choose' lacks required attribute 'else_branch' "
                        f"[graph.nodes[0]] in {path}\n")
    assert e.value.message == "If 'choose' lacks required attribute 'else_branch'"
    assert e.value.path == "graph.nodes[0]"


def test_each_missing_part_is_named(tmp_path):
    then, other = _branch(1.0), _branch(2.0)
    cases = [(_if_model(["c"], else_branch=other),
              "If 'choose' lacks required attribute 'then_branch'", "graph.nodes[0]"),
             (_if_model([], then_branch=then, else_branch=other),
              "If 'choose' lacks required input 0 ('cond')", "graph.nodes[0].inputs[0]"),
             (_if_model([""], then_branch=then, else_branch=other),
              "If 'choose' lacks required input 0 ('cond')", "graph.nodes[0].inputs[0]")]
    for proto, message, where in cases:
        path = tmp_path / "m.onnx"
        onnx.save(proto, path)
        with onemodel.load(path) as m, pytest.raises(InvalidModelError) as e:
            Session(m)
        assert (e.value.message, e.value.path) == (message, where)
    path = tmp_path / "int.onnx"
    onnx.save(_if_model(["c"], then_branch=then, else_branch=3), path)
    with onemodel.load(path) as m, pytest.raises(InvalidModelError) as e:
        Session(m)
    assert (e.value.message, e.value.path) == (
        "If 'choose': attribute 'else_branch' holds no graph; the definition's type is GRAPH",
        "graph.nodes[0].attributes[0]")  # (make_node sorts the attributes by name)
    path = tmp_path / "ok.onnx"
    onnx.save(_if_model(["c"], then_branch=then, else_branch=other), path)
    with onemodel.load(path) as m:
        assert run(m, {"c": np.array(False)})["y"] == np.float32(2.0)
        assert run(m, {"c": np.array(True)})["y"] == np.float32(1.0)


def test_a_missing_attribute_inside_a_subgraph_names_the_subgraph_node(tmp_path):
    """Every kernel benefits: a Concat without axis in a Loop body, checked at planning."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Concat", ["v", "v"], ["w"])], "body",
        [helper.make_tensor_value_info("i", TP.INT64, []),
         helper.make_tensor_value_info("cond_in", TP.BOOL, []),
         helper.make_tensor_value_info("v", TP.FLOAT, [1])],
        [helper.make_tensor_value_info("cond_out", TP.BOOL, []),
         helper.make_tensor_value_info("w", TP.FLOAT, None)])
    g = helper.make_graph([helper.make_node("Loop", ["n", "", "v0"], ["vN"], body=body)], "g",
                          [helper.make_tensor_value_info("n", TP.INT64, []),
                           helper.make_tensor_value_info("v0", TP.FLOAT, [1])],
                          [helper.make_tensor_value_info("vN", TP.FLOAT, None)])
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    path = tmp_path / "loop.onnx"
    onnx.save(proto, path)
    with onemodel.load(path) as m, pytest.raises(InvalidModelError) as e:
        Session(m)
    assert e.value.message == "Concat lacks required attribute 'axis'"
    assert e.value.path == "graph.nodes[0].attributes[0].g.nodes[1]"
