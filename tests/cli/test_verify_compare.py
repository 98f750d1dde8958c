"""`onemodel verify --run` with engines and tolerances (docs/cli.md, Comparing runs): exit
status, text and JSON report; every number is checked against the Python API's outputs and
float64 formulas computed here."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from oracle_releases import needs_onnxruntime
from typer.testing import CliRunner

import onemodel
from onemodel.cli import app
from onemodel.evaluate import random_inputs, run

MODELS = Path(__file__).resolve().parents[2] / "testdata" / "models"
CNN = MODELS / "cnn_dynamo.onnx"
runner = CliRunner()


def cli(*args):
    return runner.invoke(app, [str(a) for a in args])


def outputs(path, seed=0):
    """The outputs onemodel's evaluator gives on the inputs `verify --run` generates (from A;
    every model here declares the same inputs as the one it is compared with)."""
    with onemodel.load(path) as model:
        return {k: np.asarray(v) for k, v in run(model, random_inputs(model, seed=seed)).items()}


@pytest.fixture(scope="module")
def changed(tmp_path_factory):
    """cnn_dynamo.onnx with the first element of its first weight moved by 1e-4."""
    d = tmp_path_factory.mktemp("changed")
    proto = onnx.load(CNN)
    t = proto.graph.initializer[0]
    w = numpy_helper.to_array(t).copy()
    w.reshape(-1)[0] += np.float32(1e-4)
    t.CopyFrom(numpy_helper.from_array(w, t.name))
    onnx.save(proto, d / "changed.onnx")
    return d / "changed.onnx"


def test_onemodel_against_onnxruntime_is_within_the_cross_engine_defaults():
    import onnxruntime  # noqa: F401  (the dev extra installs it: the test must not skip)

    r = cli("verify", CNN, "--engines", "onemodel,onnxruntime")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == (f"within tolerance: {CNN} on onemodel and onnxruntime, "
                        "1 output within tolerance")
    # float32 across two engines: compare.CROSS_ENGINE (rtol 1e-4, atol 1e-5, measured)
    assert lines[1].startswith("  outputs['logits']: within tolerance (atol 1e-05, rtol 0.0001), "
                               "10 elements; max abs diff ")
    r = cli("verify", CNN, "--engines", "onemodel,onnxruntime", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert (doc["equal"], doc["engines"], doc["b"], doc["models_equal"]) == \
        (True, ["onemodel", "onnxruntime"], None, None)
    (c,) = doc["outputs"]
    assert c["tolerance"] == {"atol": 1e-5, "rtol": 1e-4, "ulp": None}
    assert (c["n_out"], c["n_total"], c["first_index"], c["within"]) == (0, 10, None, True)
    # onnxruntime is the oracle here: its CPU kernels agree with onemodel's to float32 rounding
    # on this small CNN; within the harness bound, the largest |a - b| is at most
    # atol + rtol * max|b|, and the outputs point the same way
    want = outputs(CNN)["logits"].astype(np.float64)
    assert c["max_abs"] <= 1e-7 + 1e-3 * np.abs(want).max()
    assert c["cosine"] == pytest.approx(1.0, abs=1e-9)
    # two files on two engines: the same comparison
    both = json.loads(cli("verify", CNN, CNN, "--engines", "onemodel,onnxruntime", "--json")
                      .stdout)
    assert both["outputs"] == doc["outputs"] and both["models_equal"] is True


def _numbers(a: np.ndarray, b: np.ndarray, atol: float, rtol: float = 0.0) -> dict:
    """The report's numbers by the float64 formulas of docs/cli.md (B the reference)."""
    a, b = a.astype(np.float64).reshape(-1), b.astype(np.float64).reshape(-1)
    diff = np.abs(a - b)
    bad = diff > atol + rtol * np.abs(b)
    first = int(np.flatnonzero(bad)[0]) if bad.any() else None
    rel = np.where(np.abs(b) > 0, diff / np.where(np.abs(b) > 0, np.abs(b), 1), 0.0)
    return {"max_abs": float(diff.max()), "max_rel": float(rel.max()), "n_out": int(bad.sum()),
            "first": first,
            "cosine": float(a @ b / (np.sqrt(a @ a) * np.sqrt(b @ b)))}


def test_a_tiny_weight_change_passes_a_loose_atol_and_fails_bit_for_bit(changed):
    a, b = outputs(CNN)["logits"], outputs(changed)["logits"]
    exact = cli("verify", CNN, changed, "--run")
    assert exact.exit_code == 1, exact.output
    assert exact.stdout.startswith("different: graph.initializers[0].contents")
    assert "  outputs['logits']: bits differ in " in exact.stdout
    want = _numbers(a, b, atol=1e-2)
    assert want["max_abs"] > 0 and want["n_out"] == 0  # the change reaches the output, a little
    loose = cli("verify", CNN, changed, "--run", "--atol", "1e-2")
    assert loose.exit_code == 0, loose.output
    lines = loose.stdout.splitlines()
    assert lines[0] == f"within tolerance: {CNN} and {changed}, 1 output within tolerance"
    assert lines[1].startswith("  models differ: graph.initializers[0].contents")
    assert lines[2].startswith("  outputs['logits']: within tolerance (atol 0.01), 10 elements; "
                               "max abs diff ")
    doc = json.loads(cli("verify", CNN, changed, "--run", "--atol", "1e-2", "--json").stdout)
    assert (doc["equal"], doc["judged_by"], doc["models_equal"]) == (True, "outputs", False)
    assert doc["differences"][0]["path"] == "graph.initializers[0].contents"
    (c,) = doc["outputs"]
    assert c["tolerance"] == {"atol": 0.01, "rtol": None, "ulp": None}
    assert c["max_abs"] == pytest.approx(want["max_abs"], rel=1e-12)
    assert c["max_rel"] == pytest.approx(want["max_rel"], rel=1e-12)
    assert c["cosine"] == pytest.approx(want["cosine"], rel=1e-12)
    # an atol of half the largest difference: the elements beyond it, the first of them
    half = want["max_abs"] / 2
    tight = _numbers(a, b, atol=half)
    r = cli("verify", CNN, changed, "--run", "--atol", repr(half), "--json")
    assert r.exit_code == 1, r.output
    (c,) = json.loads(r.stdout)["outputs"]
    assert (c["within"], c["n_out"], c["n_total"]) == (False, tight["n_out"], 10)
    assert c["first_index"] == [0, tight["first"]]
    assert (c["first_a"], c["first_b"]) == (float(a.reshape(-1)[tight["first"]]),
                                            float(b.reshape(-1)[tight["first"]]))


@pytest.fixture(scope="module")
def two_outputs(tmp_path_factory):
    """y = x + w, z = x * v (float32 [4]); the second file moves w by 1e-3 and v by 1e-6."""
    d = tmp_path_factory.mktemp("two")

    def save(name, w, v):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
        outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4]) for n in "yz"]
        graph = helper.make_graph(
            [helper.make_node("Add", ["x", "w"], ["y"]),
             helper.make_node("Mul", ["x", "v"], ["z"])],
            "g", [x], outs, [numpy_helper.from_array(np.array(w, np.float32), "w"),
                             numpy_helper.from_array(np.array(v, np.float32), "v")])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]),
                  d / name)
        return d / name

    a = save("a.onnx", [1.0, 2.0, 3.0, 4.0], [0.5, 1.5, 2.5, 3.5])
    b = save("b.onnx", [1.001, 2.0, 3.0, 4.0], [0.500001, 1.5, 2.5, 3.5])
    return a, b


def test_tol_per_output_overrides_the_global_tolerance(two_outputs):
    a, b = two_outputs
    got_a, got_b = outputs(a), outputs(b)
    y, z = _numbers(got_a["y"], got_b["y"], 0.0), _numbers(got_a["z"], got_b["z"], 0.0)
    assert 5e-4 < y["max_abs"] < 2e-3 and 0 < z["max_abs"] < 1e-5  # (x in [0, 1))
    assert cli("verify", a, b, "--run", "--atol", "1e-2").exit_code == 0
    r = cli("verify", a, b, "--run", "--atol", "1e-2", "--tol", "y:atol=1e-4", "--json")
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    byname = {c["name"]: c for c in doc["outputs"]}
    assert byname["y"]["tolerance"] == {"atol": 1e-4, "rtol": None, "ulp": None}
    assert byname["z"]["tolerance"] == {"atol": 1e-2, "rtol": None, "ulp": None}
    assert (byname["y"]["within"], byname["y"]["n_out"], byname["y"]["first_index"]) == \
        (False, 1, [0])
    assert byname["y"]["max_abs"] == y["max_abs"] and byname["z"]["within"]
    assert doc["tolerances"]["per_output"] == {"y": {"atol": 1e-4, "rtol": None, "ulp": None}}
    text = cli("verify", a, b, "--run", "--atol", "1e-2", "--tol", "y:atol=1e-4")
    assert text.stdout.splitlines()[0].startswith(
        "different: outputs['y']: 1 of 4 elements out of tolerance (atol 0.0001); ")
    assert "  outputs['z']: within tolerance (atol 0.01), 4 elements" in text.stdout
    # without a global one, the other output is compared bit for bit (one engine)
    r = cli("verify", a, b, "--run", "--tol", "y:atol=1e-2", "--json")
    byname = {c["name"]: c for c in json.loads(r.stdout)["outputs"]}
    assert r.exit_code == 1 and byname["y"]["within"] and not byname["z"]["within"]
    assert byname["z"]["tolerance"] is None
    # unset fields of --tol come from the global flags
    r = cli("verify", a, b, "--run", "--rtol", "0.5", "--tol", "y:atol=1e-9", "--json")
    byname = {c["name"]: c for c in json.loads(r.stdout)["outputs"]}
    assert byname["y"]["tolerance"] == {"atol": 1e-9, "rtol": 0.5, "ulp": None}


def test_ulp_counts_float32_steps(two_outputs):
    a, b = two_outputs
    za, zb = outputs(a)["z"], outputs(b)["z"]

    def order(x):  # float32 bits in the order of the values (-0.0 and 0.0 both 0)
        i = x.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)

    steps = int(np.abs(order(za) - order(zb)).max())
    assert steps > 0
    r = cli("verify", a, b, "--run", "--tol", f"z:ulp={steps}", "--tol", "y:atol=1", "--json")
    assert r.exit_code == 0, r.output
    z = {c["name"]: c for c in json.loads(r.stdout)["outputs"]}["z"]
    assert (z["max_ulp"], z["within"]) == (steps, True)
    r = cli("verify", a, b, "--run", "--tol", f"z:ulp={steps - 1}", "--tol", "y:atol=1")
    assert r.exit_code == 1 and f"max {steps} ulp" in r.stdout


def test_json_object_has_the_same_keys_every_time(changed):
    keys = {"a", "b", "equal", "judged_by", "models_equal", "engines", "tolerances",
            "differences", "differences_capped", "run_error", "tensors_by_digest",
            "outputs"}
    for args in ((CNN, CNN), (CNN, changed, "--run"), (CNN, "--engines", "onemodel,onemodel")):
        r = cli("verify", *args, "--json")
        doc = json.loads(r.stdout)
        assert set(doc) == keys, args
        assert r.exit_code == (0 if doc["equal"] else 1)
    doc = json.loads(cli("verify", CNN, CNN, "--json").stdout)
    assert (doc["engines"], doc["outputs"], doc["judged_by"]) == (None, [], "models and outputs")
    # one engine twice: bit for bit, and equal
    doc = json.loads(cli("verify", CNN, "--engines", "onemodel,onemodel", "--json").stdout)
    (c,) = doc["outputs"]
    assert (doc["equal"], c["tolerance"], c["max_abs"], c["n_out"]) == (True, None, 0.0, 0)
    assert math.isclose(c["cosine"], 1.0, abs_tol=1e-12)


@pytest.mark.parametrize("args, said", [
    ((CNN,), "B is needed unless --engines E1,E2 is given"),
    ((CNN, "--engines", "onemodel"), "--engines 'onemodel' is not E1,E2"),
    ((CNN, "--engines", "onemodel,onnxruntime", "--engine", "onemodel"),
     "choose one of --engine and --engines"),
    ((CNN, CNN, "--atol", "1e-3"), "--atol compares outputs: give --run (or --engines)"),
    ((CNN, CNN, "--run", "--atol", "-1"), "--atol -1.0: not a finite number >= 0"),
    ((CNN, CNN, "--run", "--rtol", "nan"), "--rtol nan: not a finite number >= 0"),
    ((CNN, CNN, "--run", "--ulp", "-2"), "--ulp -2: not an integer >= 0"),
    ((CNN, CNN, "--run", "--tol", "logits"), "--tol 'logits' is not NAME:atol=X,rtol=Y,ulp=N"),
    ((CNN, CNN, "--run", "--tol", "logits:atol=x"), "atol 'x' is not a finite number >= 0"),
    ((CNN, CNN, "--run", "--tol", "logits:atol=1", "--tol", "logits:rtol=1"),
     "--tol logits: given twice"),
    ((CNN, CNN, "--run", "--tol", "nosuch:atol=1"),
     "--tol nosuch: no output of that name (outputs: logits)"),
])
def test_bad_flags_are_usage_errors(args, said):
    r = cli("verify", *args)
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("Usage error: ") and said in r.stderr, r.stderr


def test_an_unknown_engine_in_engines_is_unsupported():
    r = cli("verify", CNN, "--engines", "onemodel,nosuch")
    assert r.exit_code == 2 and r.stderr.startswith("Unsupported: unknown engine 'nosuch'")


def test_quiet_prints_only_the_differences(changed):
    r = cli("verify", CNN, changed, "--run", "--atol", "1e-2", "--quiet")
    assert r.exit_code == 0 and r.stdout == ""
    r = cli("verify", CNN, changed, "--run", "--quiet")
    assert r.exit_code == 1
    assert r.stdout.splitlines()[0].startswith("different: graph.initializers[0].contents")
    assert all(line.startswith(("different:", "  outputs[")) for line in r.stdout.splitlines())


def test_the_api_returns_the_comparisons(changed):
    from onemodel.compare import Tolerance, Tolerances
    report = onemodel.verify(CNN, changed, run=True,
                             tolerances=Tolerances(Tolerance(atol=1e-2)), by_outputs=True)
    assert report.equal and report.engines == ("onemodel", "onemodel")
    assert [d.path for d in report.structure] == ["graph.initializers[0].contents"]
    (c,) = report.comparisons
    want = _numbers(outputs(CNN)["logits"], outputs(changed)["logits"], 1e-2)
    assert c.within and c.max_abs == pytest.approx(want["max_abs"], rel=1e-12)
    # without by_outputs, the models' own difference decides
    assert not onemodel.verify(CNN, changed, run=True,
                               tolerances=Tolerances(Tolerance(atol=1e-2))).equal


@needs_onnxruntime
def test_json_tolerances_say_how_outputs_were_compared_as_docs_cli_md_says(tmp_path):
    """`tolerances` is an object whenever the models were run, with or without a tolerance
    flag (docs/cli.md quotes the one of `verify A B --run`), null when nothing was run."""
    import re

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    a = tmp_path / "a.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), a)

    def tolerances(*args):
        r = cli("verify", a, *args, "--json")
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)["tolerances"]

    docs = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    quoted = re.search(r"`verify A B --run` gives\s+`\"tolerances\": (\{[^`]*\})`", docs)
    assert quoted, "docs/cli.md no longer quotes the tolerances of verify A B --run"
    assert tolerances(a, "--run") == json.loads(quoted.group(1)) == \
        {"exact": True, "cross_engine": False, "default": None, "per_output": {}}
    assert tolerances(a) is None
    assert tolerances("--engines", "onemodel,onnxruntime") == \
        {"exact": False, "cross_engine": True, "default": None, "per_output": {}}
    assert tolerances(a, "--run", "--atol", "1e-3", "--tol", "y:ulp=2") == \
        {"exact": True, "cross_engine": False,
         "default": {"atol": 1e-3, "rtol": None, "ulp": None},
         "per_output": {"y": {"atol": None, "rtol": None, "ulp": 2}}}
