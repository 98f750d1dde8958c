"""Shared pytest fixtures for the onemodel tests.

Fixtures here are for every test package; keep each one small and documented, and put helpers that
do real work in their own module next to this file (as conformance_data.py).
"""

from __future__ import annotations

import conformance_data
import pytest


@pytest.fixture(scope="session")
def conformance_cases() -> list[conformance_data.Case]:
    """Every ONNX conformance case of the installed onnx package (node, simple, light,
    pytorch-converted, pytorch-operator), materialized once in a temp-dir cache; see
    tests/conformance_data.py for the layout and the meaning of each Case field."""
    return conformance_data.iter_cases()
