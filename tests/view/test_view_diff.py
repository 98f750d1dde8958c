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
