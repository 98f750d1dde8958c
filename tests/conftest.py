"""Shared pytest fixtures for the onemodel tests.

Fixtures here are for every test package; keep each one small and documented, and put helpers that
do real work in their own module next to this file (as conformance_data.py).
"""

from __future__ import annotations

import conformance_data
import oracle_releases
import pytest


@pytest.fixture(scope="session")
def conformance_cases() -> list[conformance_data.Case]:
    """Every ONNX conformance case of the installed onnx package (node, simple, light,
    pytorch-converted, pytorch-operator), materialized once in a temp-dir cache; see
    tests/conformance_data.py for the layout and the meaning of each Case field."""
    return conformance_data.iter_cases()


def _skip_where_onnxruntime_is_not_installed():
    """A test (or its fixture) that imports onnxruntime skips, with the reason naming the
    release, where the dev extra installs none (Python 3.10: tests/oracle_releases.py); where it
    is installed, a missing module is the error it is."""
    try:
        return (yield)
    except ModuleNotFoundError as e:
        if oracle_releases.ONNXRUNTIME_INSTALLED or (e.name or "").split(".")[0] != "onnxruntime":
            raise
        pytest.skip(oracle_releases.NO_ONNXRUNTIME)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _skip_where_onnxruntime_is_not_installed())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _skip_where_onnxruntime_is_not_installed())
