"""`onemodel check` on what the readers accept and inference and the evaluator cannot follow
(issue 24, item 2): operator set imports at a version that is not a positive integer (OM121,
as onnx.checker refuses them), and model-local functions that call themselves, directly or
through others (OM122; ONNX Part 1, Clauses 5.3.2, 8.4, 15.4)."""

from __future__ import annotations

import onnx
import pytest
from check_models import model, save
from onnx import helper

import onemodel
from tests.infer import hostile


def _findings(path, **kw):
    return [(f.code, f.severity, f.path, f.message) for f in onemodel.check(path, **kw).findings]


@pytest.mark.parametrize("version", [0, -1])
def test_an_opset_version_below_one_is_an_error(tmp_path, version):
    m = model(opsets=(("", version),))
    with pytest.raises(onnx.checker.ValidationError):  # the oracle refuses it too
        onnx.checker.check_model(m)
    want = [("OM121", "error", "opset_import[0].version",
             f"domain 'ai.onnx' is imported at version {version}; a version is a positive "
             "integer")]
    p = save(tmp_path, m)
    assert _findings(p) == want
    assert _findings(p, full=True) == want  # no OM411 "Relu-0" beside it


def test_a_function_importing_version_zero_is_an_error(tmp_path):
    f = helper.make_function("local", "F", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])],
                             [helper.make_opsetid("", 0)])
    m = model([helper.make_node("F", ["x"], ["y"], domain="local")],
              opsets=(("", 17), ("local", 1)), functions=[f])
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(m)
    assert _findings(save(tmp_path, m)) == [
        ("OM121", "error", "functions[0].opset_import[0].version",
         "domain 'ai.onnx' is imported at version 0; a version is a positive integer")]


def test_positive_versions_are_not_reported(tmp_path):
    assert _findings(save(tmp_path, model(opsets=(("", 1),)))) == []


def test_a_function_calling_itself_twice_is_an_error(tmp_path):
    p = save(tmp_path, hostile.self_calling(2))
    rec = ("OM122", "error", "functions[0]", "function local.F calls itself")
    assert _findings(p) == [rec]
    assert _findings(p, full=True) == [
        rec, ("OM413", "info", "graph.node[0]",
              "F: function local.F calls itself; the call is not expanded")]


def test_mutually_recursive_functions_are_each_an_error_naming_the_cycle(tmp_path):
    got = _findings(save(tmp_path, hostile.mutual(3)))
    assert got == [
        ("OM122", "error", "functions[0]",
         "function local.F0 calls itself through local.F1, local.F2"),
        ("OM122", "error", "functions[1]",
         "function local.F1 calls itself through local.F2, local.F0"),
        ("OM122", "error", "functions[2]",
         "function local.F2 calls itself through local.F0, local.F1")]


def test_functions_that_call_each_other_without_a_cycle_are_not_reported(tmp_path):
    p = save(tmp_path, hostile.doubling_chain(31))
    assert _findings(p) == [] and _findings(p, full=True) == []
