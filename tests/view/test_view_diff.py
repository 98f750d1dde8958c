"""`onemodel view A B`: B's page with what changed from A marked."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
from onnx import helper, numpy_helper
from typer.testing import CliRunner
from view_models import MODELS, save, tensor, vi

import onemodel.cli as cli

DETECTOR = MODELS / "detector_legacy.onnx"
CONV = "/fuse/fuse.0/Conv"


def changed_detector(path):
    """The detector with one value of CONV's weight changed; returns (path, weight name)."""
    m = onnx.load(str(DETECTOR))
    conv = [n for n in m.graph.node if n.name == CONV][0]
    init = [t for t in m.graph.initializer if t.name == conv.input[1]][0]
    w = numpy_helper.to_array(init).copy()
    w.flat[7] += 1.0
    init.CopyFrom(numpy_helper.from_array(w, init.name))
    onnx.save(m, str(path))
    return path, init.name


def _data(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="model-data">(.*?)</script>', page, re.S)
    return json.loads(m.group(1))


def _view(*args) -> dict:
    r = CliRunner().invoke(cli.app, ["view", *map(str, args), "-o", "-"])
    assert r.exit_code == 0, r.stderr
    return _data(r.stdout)


def test_a_changed_conv_weight_is_marked_on_its_node(tmp_path):
    b, weight = changed_detector(tmp_path / "b.onnx")
    d = _view(DETECTOR, b)
    marked = [(n["n"], n["df"], n["dr"]) for n in d["nodes"] if "df" in n]
    assert marked == [(CONV, "changed", [f"weight {weight}: values changed"])]
    assert d["diff"] == {"against": "main_graph (detector_legacy.onnx)", "added": 0,
                         "changed": 1, "removed": [], "weights": 1}
    assert d["title"] == "main_graph (b.onnx) vs main_graph (detector_legacy.onnx)"
    assert "df" not in str(_view(DETECTOR, DETECTOR)["nodes"])  # a model against itself


def test_added_removed_and_changed_nodes(tmp_path):
    a = save(tmp_path / "a.onnx",
             [helper.make_node("Relu", ["x"], ["r"], name="r"),
              helper.make_node("LeakyRelu", ["r"], ["l"], name="l", alpha=0.1),
              helper.make_node("Neg", ["l"], ["y"], name="gone")],
             [vi("x")], [vi("y")], [tensor("unused", np.zeros(2, np.float32))])
    b = save(tmp_path / "b.onnx",
             [helper.make_node("Relu", ["x"], ["r"], name="r"),
              helper.make_node("LeakyRelu", ["r"], ["l"], name="l", alpha=0.2),
              helper.make_node("Abs", ["l"], ["y"], name="new")],
             [vi("x")], [vi("y")], [tensor("unused", np.zeros(3, np.float32))])
    d = _view(a, b)
    by = {n["n"]: n for n in d["nodes"]}
    assert "df" not in by["r"]
    assert (by["l"]["df"], by["l"]["dr"]) == ("changed", ["attribute alpha: 0.1 -> 0.2"])
    assert by["new"]["df"] == "added"
    assert d["diff"]["removed"] == [["gone", "Neg"]] and d["diff"]["weights"] == 1


def test_view_a_b_refuses_svg(tmp_path):
    r = CliRunner().invoke(cli.app, ["view", str(DETECTOR), str(DETECTOR), "--format", "svg",
                                     "-o", str(tmp_path / "x.svg")])
    assert r.exit_code == 2 and "svg draws one model" in r.stderr


def test_run_colours_nodes_and_marks_the_first_differing_one(tmp_path):
    b, _ = changed_detector(tmp_path / "b.onnx")
    d = _view(DETECTOR, b, "--run", "--seed", "3")
    run = d["run"]
    conv = [k for k, n in enumerate(d["nodes"]) if n["n"] == CONV][0]
    assert run["first"] == conv and run["verdict"] == "the node itself differs"
    assert run["engines"] == ["onemodel", "onemodel"] and run["compared"] == run["nodes"]
    n = d["nodes"][conv]
    assert n["rw"] is False and n["rd"] > 0
    upstream = [m for m in d["nodes"] if m["n"].startswith(("/stem/", "/stage"))]
    assert upstream and all(m["rd"] == 0.0 and m["rw"] for m in upstream)  # bit for bit
    differing = sum(1 for m in d["nodes"] if m.get("rw") is False)
    assert differing == run["differing"]


def test_run_needs_two_models(tmp_path):
    r = CliRunner().invoke(cli.app, ["view", str(DETECTOR), "--run", "-o", "-"])
    assert r.exit_code == 2 and "--run compares two models" in r.stderr


def _nested(path, *, alpha=0.1, bias=1.0, fn_op="Add", extra=False, inner_name="then_relu"):
    """x -> If(c) {then: LeakyRelu(x, alpha) + bias (an initializer of the branch); else:
    Neg(x), and with ``extra`` an Abs after it} -> y -> local.Double (a function: fn_op(a, a))
    -> z. Every name in the branches is unique, as Clause 7.3 asks."""
    then_nodes = [helper.make_node("LeakyRelu", ["x"], ["t0"], name=inner_name, alpha=alpha),
                  helper.make_node("Add", ["t0", "bias"], ["t"], name="then_add")]
    then_g = helper.make_graph(then_nodes, "then", [], [vi("t")],
                               [tensor("bias", np.full(2, bias, np.float32))])
    else_nodes = [helper.make_node("Neg", ["x"], ["e0" if extra else "e"], name="else_neg")]
    if extra:
        else_nodes.append(helper.make_node("Abs", ["e0"], ["e"], name="else_abs"))
    else_g = helper.make_graph(else_nodes, "else", [], [vi("e")])
    fn = helper.make_function("local", "Double", ["a"], ["b"],
                              [helper.make_node(fn_op, ["a", "a"], ["b"], name="fbody")],
                              [helper.make_opsetid("", 17)])
    return save(path, [helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g,
                                        else_branch=else_g),
                       helper.make_node("Double", ["y"], ["z"], name="call", domain="local")],
                [vi("c", onnx.TensorProto.BOOL, ()), vi("x")], [vi("z")], functions=[fn])


def _marked(d) -> dict:
    return {n["n"]: (n["df"], n["dr"]) for n in d["nodes"] if "df" in n}


def test_an_attribute_changed_inside_an_if_branch_is_marked(tmp_path):
    a = _nested(tmp_path / "a.onnx")
    d = _view(a, _nested(tmp_path / "b.onnx", alpha=0.2))
    assert _marked(d) == {"then_relu": ("changed", ["attribute alpha: 0.1 -> 0.2"])}
    assert d["diff"]["changed"] == 1 and d["diff"]["removed"] == []
    # the groups holding it (the branch, the If) carry the mark up (has-diff on the page)
    relu = [n for n in d["nodes"] if n["n"] == "then_relu"][0]
    assert d["groups"][relu["p"]]["k"] == "subgraph"
    assert _marked(_view(a, a)) == {}


def test_a_weight_of_a_branch_a_function_body_and_nodes_in_a_branch(tmp_path):
    a = _nested(tmp_path / "a.onnx")
    d = _view(a, _nested(tmp_path / "b.onnx", bias=2.0))
    assert _marked(d) == {"then_add": ("changed", ["weight bias: values changed"])}
    assert d["diff"]["weights"] == 1
    d = _view(a, _nested(tmp_path / "b.onnx", fn_op="Mul"))
    assert _marked(d) == {"fbody": ("changed", ["op Add -> Mul"])}
    d = _view(a, _nested(tmp_path / "b.onnx", extra=True, inner_name="renamed"))
    marked = _marked(d)
    assert marked["renamed"][0] == "added" and marked["else_abs"][0] == "added"
    assert marked["else_neg"] == ("changed", ["outputs e -> e0"])
    assert d["diff"]["removed"] == [["branch / then_branch / then_relu", "LeakyRelu"]]
    assert d["diff"]["added"] == 2


def test_a_graph_input_whose_type_changed_is_marked(tmp_path):
    relu = [helper.make_node("Relu", ["x"], ["y"], name="r")]
    a = save(tmp_path / "a.onnx", relu, [vi("x")], [vi("y")])
    b = save(tmp_path / "b.onnx", relu, [vi("x", shape=(3,))], [vi("y", shape=(3,))])
    marked = _marked(_view(a, b))
    assert marked["x"] == ("changed", ["type of x: tensor(float)[2] -> tensor(float)[3]"])
    assert marked["r"] == ("changed", ["type of y: tensor(float)[2] -> tensor(float)[3]"])
    assert marked["y"] == ("changed", ["type of y: tensor(float)[2] -> tensor(float)[3]"])
    assert set(marked) == {"x", "r", "y"}
