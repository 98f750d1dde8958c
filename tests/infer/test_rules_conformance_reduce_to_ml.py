"""The ONNX node conformance cases whose nodes are all of the reduce, attention, rnn, random,
signal, text, ml_linear, ml_trees, ml_features, norm and conv families (rules/reduce.py,
attention.py, rnn.py, random.py, signal.py, text.py, ml_linear.py, ml_trees.py, ml_features.py,
norm.py, conv.py): inference finds no contradiction with the declared types, every tensor output
is inferred completely (element type and every extent), and its element type and extents equal
those of the reference output the case ships (Clause 9.4: nothing that is not so)."""

from __future__ import annotations

import pytest

from tests.infer.test_rules_families_conformance import cases_of, reference_mismatches

FAMILIES = {"reduce", "attention", "rnn", "random", "signal", "text", "ml_linear", "ml_trees",
            "ml_features", "norm", "conv"}


@pytest.fixture(scope="module")
def family_cases(conformance_cases):
    return cases_of(conformance_cases, FAMILIES)


def test_family_cases_infer_what_the_reference_outputs_are(family_cases):
    assert len(family_cases) >= 455   # 461 with onnx 1.23
    wrong, compared = reference_mismatches(family_cases)
    assert not wrong, "\n".join(wrong[:30])
    assert compared >= 610   # 615 with onnx 1.23
