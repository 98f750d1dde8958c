"""Every model that ``onnx.checker.check_model(full_check=True)`` refuses among the conformance
models (the installed onnx's, materialized by tests/conformance_data.py, plus the wheel's
``onnx/backend/test/data/**``) and the models of testdata/ gets at least one error from
``onemodel.check`` too: the pairs (model, onnx's message, onemodel's codes) are listed below.

A refusal onemodel does not share is listed in ``NOT_A_DEFECT`` with the reason, never skipped
silently; the test fails when onnx refuses a model that neither list names (a new onnx version),
or when a listed model is no longer refused (the list is stale).
"""

from __future__ import annotations

import glob
import os
import time
from pathlib import Path

import onnx
import pytest
from check_models import model, save
from onnx import TensorProto, helper

import onemodel

ROOT = Path(__file__).resolve().parents[2]

#: model (relative to its set) -> (the start of onnx's message, onemodel's error codes). Among
#: the conformance and test models of onnx 1.23 no refusal is a defect onemodel misses.
PAIRS: dict[str, tuple[str, list[str]]] = {}

#: Refusals that are not defects of the model, with the reason.
NOT_A_DEFECT = {
    "node/test_mvn": (
        "[ShapeInferenceError] Inference error(s): (op_type:MeanVarianceNormalization)",
        "the model is valid (a conformance case every backend runs): the node omits 'axes', "
        "whose default is [0, 2, 3]; onnx's strict inference expands the operator's function "
        "body, whose Constant takes value_ints by ref_attr_name='axes', without substituting "
        "the default, and then finds a Constant with no value. A --full (shape inference) "
        "expanding the body with the defaults would not refuse it either."),
}


def _models():
    from conformance_data import iter_cases

    out = {}
    for c in iter_cases():
        out[f"{c.model_path.parent.parent.name}/{c.model_path.parent.name}"] = str(c.model_path)
    wheel = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    for p in sorted(glob.glob(os.path.join(wheel, "**", "*.onnx"), recursive=True)):
        out["wheel/" + os.path.relpath(p, wheel)] = p
    for p in sorted((ROOT / "testdata" / "models").rglob("*.onnx")):
        out["testdata/" + str(p.relative_to(ROOT / "testdata" / "models"))] = str(p)
    return out


def _refusal(path) -> str | None:
    try:
        onnx.checker.check_model(path, full_check=True)
    except Exception as e:  # noqa: BLE001 (ValidationError, InferenceError, ...)
        return str(e).replace("\n", " ")
    return None


def test_every_onnx_refusal_is_an_onemodel_error():
    start = time.perf_counter()
    models = _models()
    assert len(models) > 2000
    refused = {k: msg for k, p in models.items() if (msg := _refusal(p)) is not None}
    assert set(refused) == set(PAIRS) | set(NOT_A_DEFECT), refused
    for key, (start_of_message, codes) in PAIRS.items():
        assert refused[key].startswith(start_of_message), (key, refused[key])
        r = onemodel.check(models[key])
        assert sorted({f.code for f in r.errors}) == codes, (key, r.findings)
    for key, (start_of_message, _reason) in NOT_A_DEFECT.items():
        assert refused[key].startswith(start_of_message), (key, refused[key])
        r = onemodel.check(models[key])
        assert r.ok and r.findings == [], (key, r.findings)
    assert time.perf_counter() - start < 20


def _defect(name):
    """Hand-built models onnx refuses, one defect each."""
    add = helper.make_node("Add", ["x", "x"], ["y"])
    if name == "undefined input":
        return model([helper.make_node("Relu", ["nope"], ["y"])])
    if name == "not sorted":
        return model([helper.make_node("Relu", ["a"], ["y"]),
                      helper.make_node("Relu", ["x"], ["a"])])
    if name == "defined twice":
        return model([helper.make_node("Relu", ["x"], ["y"]),
                      helper.make_node("Relu", ["x"], ["y"])])
    if name == "unknown operator":
        return model([helper.make_node("Frobnicate", ["x"], ["y"])])
    if name == "too new":
        return model([helper.make_node("Gelu", ["x"], ["y"])], opsets=(("", 19),))
    if name == "missing required attribute":
        return model([helper.make_node("Concat", ["x", "x"], ["y"])])
    if name == "attribute of the wrong type":
        return model([helper.make_node("Concat", ["x", "x"], ["y"], axis=0.5)])
    if name == "unknown attribute":
        return model([helper.make_node("Relu", ["x"], ["y"], alpha=0.1)])
    if name == "too many inputs":
        return model([helper.make_node("Add", ["x", "x", "x"], ["y"])])
    if name == "input type not allowed":
        m = model([helper.make_node("Sqrt", ["x"], ["y"])])
        m.graph.input[0].type.tensor_type.elem_type = TensorProto.INT64
        return m
    if name == "no ir_version":
        m = model([add])
        m.ClearField("ir_version")
        return m
    if name == "domain imported twice":
        return model([add], opsets=(("", 17), ("", 18)))
    if name == "no graph name":
        return model([add], name="")
    if name == "duplicate metadata key":
        m = model([add])
        for _ in range(2):
            p = m.metadata_props.add()
            p.key, p.value = "author", "a"
        return m
    raise AssertionError(name)


#: defect -> (the start of onnx's message, ``None`` where onnx accepts the model (a defect it
#: misses), onemodel's error codes).
DEFECTS = {
    "undefined input": ("Nodes in a graph must be topologically sorted", ["OM112"]),
    "not sorted": ("Nodes in a graph must be topologically sorted", ["OM113"]),
    "defined twice": ("Graph must be in single static assignment (SSA) form", ["OM109"]),
    "unknown operator": ("No Op registered for Frobnicate", ["OM301"]),
    "too new": ("No Op registered for Gelu", ["OM302"]),
    "missing required attribute": ("Required attribute 'axis' is missing", ["OM310"]),
    "attribute of the wrong type": ("Mismatched attribute type in ' : axis'", ["OM309"]),
    "unknown attribute": ("Unrecognized attribute: alpha", ["OM308"]),
    "too many inputs": ("Node with schema(::Add:14) has input size 3 not in range", ["OM305"]),
    "input type not allowed": ("[ShapeInferenceError] (op_type:Sqrt): X typestr: T, has "
                               "unsupported type", ["OM401"]),
    "no ir_version": ("The model does not have an ir_version set properly", ["OM101"]),
    "domain imported twice": (None, ["OM104"]),
    "no graph name": ("Field 'name' of 'graph' is required to be non-empty", ["OM107"]),
    "duplicate metadata key": ("Your model has duplicate keys in metadata_props", ["OM115"]),
}


@pytest.mark.parametrize("name", sorted(DEFECTS))
def test_a_defect_onnx_refuses_is_an_onemodel_error(tmp_path, name):
    """Hand-built defects: onnx's message beside onemodel's code (and one onnx accepts)."""
    start_of_message, codes = DEFECTS[name]
    p = save(tmp_path, _defect(name))
    msg = _refusal(p)
    r = onemodel.check(p)
    assert sorted({f.code for f in r.errors}) == codes, r.findings
    if start_of_message is None:
        assert msg is None, msg
    else:
        assert msg is not None and msg.startswith(start_of_message), msg
