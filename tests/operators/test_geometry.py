"""The shared geometry of the windowed operators (onemodel.operators.geometry): with ints it
gives the window counts of the definitions (checked against enumerating the windows), with the
symbolic arithmetic of onemodel.inference.dims an expression that evaluates to the same int at
every value of the variables; the kernels and the rules both compute with it."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest

from onemodel.inference import dims as D
from onemodel.operators import geometry as G


def _windows(x, k, s, d, b, e):
    """Windows by enumeration: starts o*s (o >= 0) in the padded input [0, x + b + e) whose
    dilated taps all fall inside it."""
    last = (k - 1) * d
    return sum(1 for start in range(0, x + b + e, s) if start + last < x + b + e)


CASES = list(itertools.product(range(0, 9), range(1, 4), range(1, 4), range(1, 3),
                               range(0, 3), range(0, 3)))


@pytest.mark.parametrize("x, k, s, d, b, e", CASES[::7])
def test_window_count_is_the_number_of_windows(x, k, s, d, b, e):
    if x + b + e >= (k - 1) * d + 1:  # a window fits: the count is exact
        assert G.window_count(x, k, s, d, b, e) == _windows(x, k, s, d, b, e) >= 1
    else:  # none fits: the formula gives 0 or less (the callers refuse or empty it)
        assert G.window_count(x, k, s, d, b, e) <= 0 == _windows(x, k, s, d, b, e)


def test_ceil_mode_drops_a_last_window_starting_in_the_end_padding():
    # x=5, k=2, s=2, pads 0/1: ceil((5+1-2)/2)+1 = 3 windows, starting at 0, 2, 4 (< x + b)
    assert G.pooled_count(5, 2, 2, 1, 0, 1) == 3
    # x=4, k=2, s=2, pads 0/1: ceil((4+1-2)/2)+1 = 3, but the third starts at 4 = x + b: 2
    assert G.pooled_count(4, 2, 2, 1, 0, 1) == 2
    assert G.window_count(4, 2, 2, 1, 0, 1) == 2
    # x=6, k=3, s=2, no pads: floor(3/2)+1 = 2, ceil(3/2)+1 = 3 (the third starts at 4 < 6)
    assert G.window_counts("NOTSET", [6], [3], [2], [1], [0], [0], ceil_mode=True) == [3]
    assert G.window_counts("NOTSET", [6], [3], [2], [1], [0], [0]) == [2]
    assert G.window_counts("VALID", [6], [3], [2], [1], [0], [0], ceil_mode=True) == [2]


def test_same_pads_give_ceil_of_the_input_over_the_stride():
    # x=7, k=3, s=2: out 4, total pad (4-1)*2 + 3 - 7 = 2, one each side
    assert G.same_pads("SAME_UPPER", [7], [3], [2], [1]) == ([1], [1], [4])
    # x=6, k=4, s=1: out 6, total 3: the odd pad at the end (UPPER) or the beginning (LOWER)
    assert G.same_pads("SAME_UPPER", [6], [4], [1], [1]) == ([1], [2], [6])
    assert G.same_pads("SAME_LOWER", [6], [4], [1], [1]) == ([2], [1], [6])
    # a kernel smaller than the stride needs no pad (never a negative one)
    assert G.same_pads("SAME_UPPER", [6], [1], [3], [1]) == ([0], [0], [2])


def test_transposed_extent_inverts_the_window_count():
    # ConvTranspose: s*(x-1) + output_padding + d*(k-1) + 1 - pads
    assert G.transposed_extent(3, 3, 2, 1, 1, 1, 1) == 2 * 2 + 1 + 3 - 2
    assert G.transposed_extent(4, 2, 3, 2, 0, 0, 0) == 3 * 3 + 2 + 1
    assert G.transposed_same_extent(5, 3) == 15
    assert G.transposed_same_extent(D.Expr.var("h"), 2, ar=D) == 2 * D.Expr.var("h")
    # MaxUnpool (d 1, no output padding): (x-1)*s + k - pads
    assert G.transposed_extent(2, 2, 2, 1, 0, 0, 0) == 4
    for o, k, s, d in itertools.product(range(1, 6), range(1, 4), range(1, 4), range(1, 3)):
        assert G.window_count(G.span(o, k, s, d), k, s, d, 0, 0) == o


def test_symbolic_extents_give_expressions_that_evaluate_to_the_int_counts():
    h = D.Expr.var("h")
    for k, s, d, b, e in [(3, 1, 1, 1, 1), (3, 2, 1, 1, 1), (2, 2, 2, 0, 1), (5, 3, 1, 2, 0)]:
        sym = G.window_count(h, k, s, d, b, e, ar=D)
        assert isinstance(sym, D.Expr)
        tr = G.transposed_extent(h, k, s, d, 1, b, e, ar=D)
        for v in range(8, 20):
            assert sym.evaluate({"h": v}) == G.window_count(v, k, s, d, b, e)
            assert tr.evaluate({"h": v}) == G.transposed_extent(v, k, s, d, 1, b, e)
    # Conv 3x3, pads 1, stride 1: the extent is h itself
    assert G.window_count(h, 3, 1, 1, 1, 1, ar=D) == h
    assert str(G.window_counts("SAME_UPPER", [h], [3], [2], [1], None, None, ar=D)[0]) == \
        "ceil(h/2)"
    assert G.window_count(None, 3, 1, 1, 1, 1, ar=D) is None
    assert G.dilated(None, 2, ar=D) is None


def test_ceil_mode_with_a_symbolic_extent():
    h = D.Expr.var("h")
    # end pad 3 >= dilated kernel 2: the last window always starts in the pads
    o = G.pooled_count(h, 2, 2, 1, 0, 3, ar=D)
    # end pad 0, stride 2 <= kernel 2: it never does
    p = G.pooled_count(h, 2, 2, 1, 0, 0, ar=D)
    for v in range(2, 12):
        assert o.evaluate({"h": v}) == G.pooled_count(v, 2, 2, 1, 0, 3)
        assert p.evaluate({"h": v}) == G.pooled_count(v, 2, 2, 1, 0, 0)
    # end pad 1, stride 2, kernel 2: depends on h's parity, unknown
    assert G.pooled_count(h, 2, 2, 1, 0, 1, ar=D) is None


def test_the_module_imports_neither_numpy_nor_the_evaluator_nor_inference():
    code = ("import sys, onemodel.operators.geometry; "
            "print(sorted(m for m in sys.modules if m == 'numpy' or "
            "m.startswith(('onemodel.evaluate', 'onemodel.inference'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
