"""The ONNX node conformance cases (ONNX 1-3), generated from the installed onnx package, run
through onemodel's evaluator; the rules (tolerances per element type, the Clause 11.6 criterion
of the random operators) are in node_conformance.py. docs/conformance.md is the report of the same
run, written by docs/make_conformance.py (never by the tests).
"""

from __future__ import annotations

import pathlib
import re

import ml_dtypes
import node_conformance as nc
import numpy as np
import onnx
import pytest

from onemodel.evaluate import registry

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "conformance.md"

#: Share of all node cases that must pass (the issue's target).
TARGET = 0.85


@pytest.fixture(scope="module")
def node_results(conformance_cases):
    cases = [c for c in conformance_cases if c.kind == "node"]
    assert len(cases) > 1000, "the node cases were not generated"
    stats = nc.Stats()
    return nc.run_all(cases, stats), stats


def test_every_claimed_node_case_passes(node_results):
    results, _ = node_results
    failed = [f"{r.case.name} {r.operator}: {r.detail}" for r in results if r.status == "failed"]
    assert not failed, f"{len(failed)} claimed cases fail:\n" + "\n".join(failed[:40])


def test_node_pass_rate_meets_the_target(node_results):
    results, _ = node_results
    passed = sum(r.status == "passed" for r in results)
    assert passed / len(results) >= TARGET, f"{passed} of {len(results)} node cases pass"


def test_unsupported_cases_are_refused_naming_an_operator_without_kernel(node_results):
    """Refusal happens before any computation and names (domain, op_type, opset); every
    operator it names really has no kernel at that opset (Clause 4.4)."""
    results, _ = node_results
    for r in results:
        if r.status != "unsupported":
            continue
        named = re.findall(r"\(([\w.]+), (\w+), (\d+)\)", r.detail)
        assert named, r.detail
        for domain, op_type, version in named:
            dom = "" if domain == "ai.onnx" else domain
            assert registry.lookup(dom, op_type, int(version)) is None, (r.case.name, op_type)


def test_random_operators_are_checked_by_their_criterion(node_results):
    """Bernoulli and training-mode Dropout cases are run and judged by Clause 11.6, not skipped."""
    results, _ = node_results
    judged = {r.random for r in results if r.random and r.status == "passed"}
    assert {"Bernoulli", "Dropout"} <= judged


def test_narrow_casts_are_judged_by_the_format_definitions(node_results):
    """The Cast/CastLike cases into INT4/UINT4/INT2/UINT2/FLOAT4E2M1/float8 are compared with
    narrow_reference (onnx generated their outputs with the installed ml_dtypes), and pass."""
    results, _ = node_results
    narrow = [r for r in results if nc.narrow_cast_target(r.case.name)]
    assert len(narrow) >= 60, len(narrow)
    assert all(r.status == "passed" and r.expected == "definition" for r in narrow), \
        [(r.case.name, r.detail) for r in narrow if r.status != "passed"][:5]
    assert nc.narrow_cast_target("test_cast_FLOAT_to_INT4") == ("INT4", True)
    assert nc.narrow_cast_target("test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2_expanded") \
        == ("FLOAT8E5M2", False)
    assert nc.narrow_cast_target("test_cast_INT4_to_FLOAT") is None  # widening: exact


def test_other_conformance_models_pass(conformance_cases):
    """The model cases (simple, pytorch-converted, pytorch-operator) pass too, where claimed."""
    cases = [c for c in conformance_cases
             if c.kind in ("simple", "pytorch-converted", "pytorch-operator")]
    assert len(cases) > 100
    results = [nc.run_case(c, ("", "", 0)) for c in cases]
    failed = [f"{r.case.id}: {r.detail}" for r in results if r.status == "failed"]
    assert not failed, "\n".join(failed[:20])
    refused = {r.case.name for r in results if r.status == "unsupported"}
    # only the Gradient cases (automatic differentiation, not evaluable) are refused
    assert all("Gradient" in r.detail for r in results if r.status == "unsupported"), refused


def test_docs_conformance_matches_this_run(node_results):
    """docs/conformance.md (generated) states the totals of this run for this onnx version;
    regenerate it with `.venv/bin/python docs/make_conformance.py` after changing kernels."""
    results, _ = node_results
    text = DOC.read_text()
    version = re.search(r"onnx (\S+) ", text)
    assert version, "docs/conformance.md does not name the onnx version"
    if version.group(1) != onnx.__version__:
        pytest.skip(f"docs/conformance.md is for onnx {version.group(1)}, not {onnx.__version__}")
    counts = {s: sum(r.status == s for r in results) for s in ("passed", "failed", "unsupported")}
    line = (f"| all | {len(results)} | {counts['passed']} | {counts['failed']} | "
            f"{counts['unsupported']} |")
    assert line in text, f"docs/conformance.md lacks the totals line {line!r}"


# -- the comparison rules themselves ---------------------------------------------------------
def test_compare_applies_the_harness_tolerance_for_float32():
    want = np.array([1.0, 1000.0, np.nan, np.inf], np.float32)
    ok = np.array([1.0009, 1000.9, np.nan, np.inf], np.float32)
    assert nc.compare(ok, want, 1e-3, 1e-7) is None
    off = np.array([1.0011, 1000.0, np.nan, np.inf], np.float32)
    assert "element 0" in nc.compare(off, want, 1e-3, 1e-7)
    assert nc.compare(np.array([np.nan], np.float32), np.array([1.0], np.float32), 1e-3, 1e-7)
    assert nc.compare(np.array([-np.inf], np.float32), np.array([np.inf], np.float32), 1e-3,
                      1e-7)


def test_compare_checks_dtype_shape_and_structure():
    a = np.zeros((2, 3), np.float32)
    assert "dtype" in nc.compare(a.astype(np.float64), a, 1e-3, 1e-7)
    assert "shape" in nc.compare(a.reshape(3, 2), a, 1e-3, 1e-7)
    assert "sequence" in nc.compare(a, [a], 1e-3, 1e-7)
    assert nc.compare([a, a], [a, a], 1e-3, 1e-7) is None
    assert "1 elements" in nc.compare([a], [a, a], 1e-3, 1e-7)
    assert nc.compare(None, None, 1e-3, 1e-7) is None
    assert nc.compare(a, None, 1e-3, 1e-7)
    assert nc.compare({1: a}, {1: a}, 1e-3, 1e-7) is None
    assert "keys" in nc.compare({2: a}, {1: a}, 1e-3, 1e-7)


def test_compare_is_exact_for_integers_and_strings_and_bfloat16_has_two_ulps():
    assert "exact" in nc.compare(np.array([3], np.int64), np.array([4], np.int64), 1e-3, 1e-7)
    i4 = ml_dtypes.int4
    assert nc.compare(np.array([-3], i4), np.array([-3], i4), 1e-3, 1e-7) is None
    assert nc.compare(np.array([-3], i4), np.array([-2], i4), 1e-3, 1e-7)
    s = np.array(["a", "b"], dtype=object)
    assert nc.compare(s, s.copy(), 1e-3, 1e-7) is None
    assert nc.compare(np.array(["a", "c"], dtype=object), s, 1e-3, 1e-7)
    bf = ml_dtypes.bfloat16
    one = np.array([1.0], bf)
    next_up = np.array([1.0 + 2 ** -7], bf)  # one bfloat16 ulp above 1
    assert nc.compare(next_up, one, 1e-3, 1e-7) is None
    assert nc.compare(np.array([1.0 + 2 ** -5], bf), one, 1e-3, 1e-7)


def test_random_criterion_rejects_wrong_outputs():
    from onnx import helper

    from onemodel.formats.onnx import decode_model

    node = helper.make_node("Bernoulli", ["p"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("p", 1, [4])],
                              [helper.make_tensor_value_info("y", 1, [4])])
    model = decode_model(helper.make_model(graph).SerializeToString())
    p = np.full(4, 0.5, np.float32)
    want = np.array([0, 1, 1, 0], np.float32)
    assert nc.check_random("Bernoulli", model, [p], [np.array([1, 1, 0, 0], np.float32)],
                           [want]) is None
    assert nc.check_random("Bernoulli", model, [p], [np.array([1, 2, 0, 0], np.float32)],
                           [want])
    assert nc.check_random("Bernoulli", model, [p], [np.ones(3, np.float32)], [want])
    assert nc.check_random("Bernoulli", model, [p], [np.ones(4, np.float64)], [want])
    certain = np.array([0.0, 1.0, 0.5, 0.5], np.float32)
    assert nc.check_random("Bernoulli", model, [certain], [np.array([0, 1, 1, 0], np.float32)],
                           [want]) is None
    assert nc.check_random("Bernoulli", model, [certain], [np.array([1, 1, 1, 0], np.float32)],
                           [want])
