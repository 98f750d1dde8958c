"""The evaluator's bounds on model-local functions (issue 24, item 2; ONNX Part 1, Clauses
8.4, 15.4): a function that calls itself is refused as Unsupported before anything is planned,
and so are calls that would plan more than MAX_EXPANDED_NODES nodes of function bodies, each
function's count computed once (31 functions that each call the previous one twice are refused
at once, not planned 2^31 times)."""

from __future__ import annotations

import time

import numpy as np
import pytest

import onemodel
from onemodel import limits
from onemodel.errors import UnsupportedError
from onemodel.evaluate import Session
from tests.infer import hostile


def _load(m):
    return onemodel.load(m.SerializeToString())


def _planned(n: int) -> int:
    """Nodes planned from function bodies for hostile.doubling_chain(n): F0 has one; F(i) two
    calls and twice F(i-1)'s."""
    k = 1
    for _ in range(1, n):
        k = 2 + 2 * k
    return k


@pytest.mark.parametrize("n", [3, 4])
def test_calls_are_planned_up_to_the_limit_and_refused_past_it(monkeypatch, n):
    assert _planned(3) == 10 and _planned(4) == 22
    monkeypatch.setattr(limits, "MAX_EXPANDED_NODES", _planned(n))
    x = np.arange(3, dtype=np.float32)
    y = Session(_load(hostile.doubling_chain(n))).run({"x": x})["y"]
    np.testing.assert_array_equal(y, x * 2 ** (2 ** (n - 1)))  # F(i) doubles 2^i times: exact
    monkeypatch.setattr(limits, "MAX_EXPANDED_NODES", _planned(n) - 1)
    with pytest.raises(UnsupportedError, match=f"more than {_planned(n) - 1} nodes of function "
                                               r"bodies \(MAX_EXPANDED_NODES\)"):
        Session(_load(hostile.doubling_chain(n)))


def test_thirty_one_doubling_functions_are_refused_at_once():
    m = _load(hostile.doubling_chain(31))
    t0 = time.perf_counter()
    with pytest.raises(UnsupportedError, match="MAX_EXPANDED_NODES") as e:
        Session(m)
    assert time.perf_counter() - t0 < 5  # 2^31 plans before; milliseconds now (generous)
    assert e.value.path == "graph"


@pytest.mark.parametrize("build", [lambda: hostile.self_calling(2), lambda: hostile.mutual(30)])
def test_recursive_functions_are_unsupported(build):
    t0 = time.perf_counter()
    with pytest.raises(UnsupportedError, match="calls itself: a recursive function cannot be "
                                               "evaluated"):
        Session(_load(build()))
    assert time.perf_counter() - t0 < 5
