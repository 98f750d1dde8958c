"""Every conformance model of the installed onnx (node, simple, pytorch and light cases,
materialized by tests/conformance_data.py) checks with no finding at all: no error, no warning,
no info (the conformance statement, docs/conformance-statement.md, says so)."""

from __future__ import annotations

import time

import onemodel


def test_every_conformance_model_checks_clean():
    from conformance_data import iter_cases

    cases = iter_cases()
    assert len(cases) > 1500
    start = time.perf_counter()
    found = {c.id: r.findings for c in cases if (r := onemodel.check(str(c.model_path))).findings}
    assert found == {}
    assert time.perf_counter() - start < 30
