"""The engine registry (onemodel.engines, issue 25 item 5): engines behind one interface, a
third-party engine added by ``register`` or by an entry point of the group
``onemodel.engines`` is used by ``verify(..., engines=...)``, by ``bisect`` and by the command
line, and no caller tests for an engine's name.

The third-party engine here, ``Tiny``, is a real one: a numpy interpreter of Relu, Neg, Mul and
Add over the main graph (float32 in, float32 out, one IEEE operation per element per node, so
its values are onemodel's evaluator's bit for bit). ``Tiny(buggy=True)`` computes Neg as the
identity: bisect must name that node and blame it (``node``), and the nodes after it blame
their inputs.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from typer.testing import CliRunner

import onemodel
from onemodel import engines
from onemodel.bisect import INPUTS, NODE, bisect
from onemodel.cli import app
from onemodel.errors import UnsupportedError
from onemodel.evaluate import random_inputs
from onemodel.formats.onnx import decode_model

W = np.array([[0.5, -2.0, 3.0], [1.25, 4.0, -0.75]], dtype=np.float32)


class Tiny(engines.Engine):
    """Relu, Neg, Mul and Add over the main graph in file order; records its calls."""

    def __init__(self, name: str = "tiny", buggy: bool = False):
        self.name = name
        self.buggy = buggy
        self.calls: list[list[str]] = []  # the node op_types of each model run

    def run(self, model, feeds):
        self.calls.append([n.op_type for n in model.graph.nodes])
        env = dict(feeds)
        env.update({t.name: t.numpy() for t in model.graph.initializers})
        ops = {"Relu": lambda x: np.maximum(x, np.float32(0)),
               "Neg": (lambda x: x.copy()) if self.buggy else np.negative,
               "Mul": np.multiply, "Add": np.add}
        for node in model.graph.nodes:
            if node.op_type not in ops:
                raise UnsupportedError(f"tiny has no {node.op_type}")
            env[node.outputs[0]] = ops[node.op_type](*(env[i] for i in node.inputs))
        return {vi.name: env[vi.name] for vi in model.graph.outputs}


def _proto():
    """x [2, 3] -> Relu -> r -> Neg -> n -> Mul(n, w) -> m -> Add(m, x) -> y."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Neg", ["r"], ["n"], name="neg"),
             helper.make_node("Mul", ["n", "w"], ["m"], name="mul"),
             helper.make_node("Add", ["m", "x"], ["y"], name="add")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [2, 3])],
                          [helper.make_tensor_value_info("y", 1, [2, 3])],
                          initializer=[numpy_helper.from_array(W, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def model():
    return decode_model(_proto().SerializeToString())


@pytest.fixture(autouse=True)
def registry(monkeypatch):
    """The registry as the package has it, restored after each test; the environment's real
    entry points are not read (a test that wants entry points patches them)."""
    monkeypatch.setattr(engines, "_ENGINES", dict(engines._ENGINES))
    monkeypatch.setattr(engines, "_entry_points_loaded", True)


def _exact(x):
    """(y in float64: -relu(x) * w + x, the bound of its float32 computation's error): Relu
    and Neg are exact, Mul and Add round once each (at most half an ulp, 2^-24 relative, of
    the product and of the sum)."""
    x = x.astype(np.float64)
    m = -np.maximum(x, 0) * W.astype(np.float64)
    return m + x, 2.0 ** -24 * (2 * np.abs(m) + np.abs(x))


def test_a_registered_engine_is_used_by_verify(model):
    mine = Tiny("mine")
    engines.register(mine)
    x = random_inputs(model, seed=0)["x"]
    assert (x > 0).any() and (x < 0).any()  # (Relu matters, and Neg of a positive)
    got = mine.run(model, {"x": x})["y"]
    want, bound = _exact(x)
    assert got.dtype == np.float32 and np.all(np.abs(got - want) <= bound)

    report = onemodel.verify(model, engines=("onemodel", "mine"))
    assert report.equal and report.engines == ("onemodel", "mine")
    assert report.outputs_compared == ["y"] and report.run_error is None
    # (the cross-engine tolerance is not needed: one IEEE operation per element, both sides)
    assert report.comparisons[0].max_abs == 0
    assert mine.calls == [["Relu", "Neg", "Mul", "Add"]] * 2  # through the interface, once
    # the same model, one engine: bit for bit
    report = onemodel.verify(model, model, run=True, engine="mine")
    assert report.equal and report.tolerances.exact and len(mine.calls) == 4


def test_a_faulty_registered_engine_is_a_difference_and_bisect_blames_its_node(model):
    engines.register(Tiny("buggy", buggy=True))
    report = onemodel.verify(model, engines=("onemodel", "buggy"))
    assert not report.equal
    assert [d.path for d in report.differences] == ["outputs['y']"]

    inputs = random_inputs(model, seed=0)
    b = bisect(model, model, inputs, engines=("onemodel", "buggy"))
    assert (b.first.index, b.first.op_type, b.first.name, b.first.verdict) == \
        (1, "Neg", "neg", NODE)
    assert [(n.op_type, n.verdict) for n in b.later] == [("Mul", INPUTS), ("Add", INPUTS)]
    assert (b.nodes_compared, b.differing, b.skipped) == (4, 3, {})
    # the faulty engine against itself agrees (its default observe: the exposed copy)
    b = bisect(model, model, inputs, engines=("buggy", "buggy"))
    assert b.first is None and b.differing == 0 and b.nodes_compared == 4


def test_taken_names_are_refused_unless_replaced():
    first, second = Tiny("mine"), Tiny("mine")
    engines.register(first)
    with pytest.raises(ValueError, match="already registered; pass replace=True"):
        engines.register(second)
    assert engines.get("mine") is first
    engines.register(second, replace=True)
    assert engines.get("mine") is second
    for builtin in ("onemodel", "onnxruntime"):  # loaded or not
        with pytest.raises(ValueError, match="already registered"):
            engines.register(Tiny(builtin))
    stand_in = Tiny("onnxruntime")  # a built-in name, replaced on purpose
    engines.register(stand_in, replace=True)
    assert engines.get("onnxruntime") is stand_in
    for bad in ("", "a,b", "a b", 3, None):
        with pytest.raises(ValueError, match="non-empty string"):
            engines.register(Tiny(bad))
    runless = type("NoRun", (), {"name": "norun", "check": lambda self: None})()
    with pytest.raises(ValueError, match="'norun' has no run, observe method"):
        engines.register(runless)
    assert engines.names() == ["onemodel", "onnxruntime", "mine"]


def test_an_unknown_or_unusable_engine_is_unsupported_before_any_model_is_read(tmp_path):
    missing = tmp_path / "missing.onnx"
    with pytest.raises(UnsupportedError, match=r"unknown engine 'nosuch'; known: onemodel, "
                       r"onnxruntime$"):
        onemodel.verify(missing, missing, run=True, engine="nosuch")

    class Absent(Tiny):
        def check(self):
            raise UnsupportedError("engine absent is not installed: pip install absent")

    engines.register(Absent("absent"))
    with pytest.raises(UnsupportedError, match="pip install absent"):
        onemodel.verify(missing, engines=("onemodel", "absent"))
    assert isinstance(engines.get("absent", check=False), Absent)


class FromEP(Tiny):
    """An engine class an entry point names (made with no arguments)."""

    def __init__(self):
        super().__init__("fromep")


class _Broken:
    """What an entry point's ``load`` of a package whose dependency is missing does."""


class _EntryPoint:
    def __init__(self, name, value):
        self.name, self.value = name, value

    def load(self):
        if isinstance(self.value, _Broken):
            raise ImportError("no module named 'absent_dependency'")
        return self.value


def test_an_engine_of_the_entry_point_group_is_found_by_name(monkeypatch, model):
    asked = []

    def entry_points(group=None):
        asked.append(group)
        return [_EntryPoint("fromep", FromEP),  # a class: made once
                _EntryPoint("clash", Tiny("onemodel")),  # a taken name: left out, warned
                _EntryPoint("broken", _Broken())]  # its package fails: left out, warned

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    monkeypatch.setattr(engines, "_entry_points_loaded", False)
    assert engines.get("onemodel").name == "onemodel" and asked == []  # built-ins: no lookup
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = onemodel.verify(model, engines=("fromep", "onemodel"))
    assert asked == ["onemodel.engines"]
    assert [str(w.message) for w in caught] == [
        "entry point 'clash' of onemodel.engines: an engine named 'onemodel' is already "
        "registered; pass replace=True to replace it",
        "entry point 'broken' of onemodel.engines could not be loaded: ImportError: no "
        "module named 'absent_dependency'"]
    assert report.equal and engines.get("fromep").calls == [["Relu", "Neg", "Mul", "Add"]]
    assert type(engines.get("onemodel")).__name__ == "OnemodelEngine"
    assert engines.names() == ["onemodel", "onnxruntime", "fromep"] and asked == [
        "onemodel.engines"]


def test_the_command_line_takes_a_registered_engine(tmp_path):
    path = tmp_path / "tiny.onnx"
    onnx.save(_proto(), path)
    engines.register(Tiny("mine"))
    engines.register(Tiny("buggy", buggy=True))
    runner = CliRunner()
    r = runner.invoke(app, ["verify", str(path), "--engines", "onemodel,mine", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["engines"] == ["onemodel", "mine"]
    r = runner.invoke(app, ["verify", str(path), "--engines", "onemodel,buggy", "--bisect",
                            "--json"])
    assert r.exit_code == 1, r.output
    first = json.loads(r.stdout)["bisect"]["first"]
    assert (first["op_type"], first["name"], first["verdict"]) == ("Neg", "neg", NODE)
    r = runner.invoke(app, ["verify", str(path), "--engines", "onemodel"])
    assert r.exit_code == 2
    assert "(two of onemodel, onnxruntime, mine, buggy)" in r.stderr


def test_no_module_but_the_onnxruntime_engine_compares_with_its_name():
    """The string switch of issue 25 item 4 is gone: ``== "onnxruntime"`` (or ``in``) appears
    in no comparison of the package outside onemodel/engines/."""
    root = Path(onemodel.__file__).parent
    found = []
    for path in root.rglob("*.py"):
        if path.parent.name == "engines":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare) and any(
                    isinstance(c, ast.Constant) and c.value == "onnxruntime"
                    for c in [node.left, *node.comparators]):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found == []
