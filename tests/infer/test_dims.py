"""The symbolic extents of onemodel.inference.dims: canonical forms, arithmetic, and the
Clause 9.3 rules (distinct variables are never equal; a variable is never a given integer)."""

import itertools
import random

import pytest

from onemodel.inference import dims as D
from onemodel.inference.dims import Expr

N, S, H = Expr.var("N"), Expr.var("seq"), Expr.var("h")


def test_equal_expressions_are_equal_and_print_alike():
    assert N + 5 == 5 + N
    assert hash(N + 5) == hash(5 + N)
    assert D.mul(S, 2) == S + S
    assert D.mul(N, S) == D.mul(S, N)
    assert str(D.add(D.mul(S, 2), 1)) == "2*seq + 1"
    assert str(D.sub(N, 1)) == "N - 1"
    assert str(D.mul(N, S)) == "N*seq"
    assert str(D.ceildiv(H, 2)) == "ceil(h/2)"
    assert str(D.floordiv(D.add(H, 1), 2)) == "floor((h + 1)/2)"
    assert str(D.mod(N, 3)) == "(N mod 3)"


def test_constant_results_are_ints():
    assert D.sub(N + 5, N) == 5 and type(D.sub(N + 5, N)) is int
    assert D.sub(S, S) == 0
    assert D.floordiv(D.mul(S, 4), 2) == D.mul(S, 2)
    assert D.ceildiv(D.mul(S, 2), 2) == S
    assert D.floordiv(S, S) == 1
    # a common factor of numerator and divisor is cancelled: equal quotients compare equal
    assert D.floordiv(D.mul(H, 2), 4) == D.floordiv(H, 2)
    assert D.ceildiv(D.add(D.mul(H, 6), 3), 9) == D.ceildiv(D.add(D.mul(H, 2), 1), 3)
    assert D.mod(D.mul(N, 4), 2) == 0
    assert D.floordiv(7, 2) == 3 and D.ceildiv(7, 2) == 4 and D.mod(7, 3) == 1


def test_unknown_propagates():
    for f in (D.add, D.sub, D.mul, D.floordiv, D.ceildiv, D.mod, D.dmax, D.dmin):
        assert f(None, N) is None and f(3, None) is None
    assert D.floordiv(N, 0) is None


def test_distinct_variables_are_not_concluded_equal_or_different():
    assert not D.same(N, S) and not D.differ(N, S)
    assert not D.differ(N, 3)  # N may be 3 (Clause 9.3: nor is it concluded to be 3)
    assert D.differ(N, N + 1) and D.differ(3, 4) and not D.differ(None, 3)
    assert D.dmax(N, S) is None and D.dmax(N, N + 2) == N + 2 and D.dmin(N, N + 2) == N


def test_expressions_evaluate_like_integer_arithmetic():
    rng = random.Random(5)
    exprs = {
        "2*seq + 1": (D.add(D.mul(S, 2), 1), lambda n, s, h: 2 * s + 1),
        "N*seq - h": (D.sub(D.mul(N, S), H), lambda n, s, h: n * s - h),
        "ceil(h/3)": (D.ceildiv(H, 3), lambda n, s, h: -(-h // 3)),
        "floor((h+N)/2)": (D.floordiv(D.add(H, N), 2), lambda n, s, h: (h + n) // 2),
        "(seq mod 4) + 1": (D.add(D.mod(S, 4), 1), lambda n, s, h: s % 4 + 1),
        "floor(seq/N)": (D.floordiv(S, N), lambda n, s, h: s // n),
    }
    for _, (e, f) in exprs.items():
        for _ in range(20):
            n, s, h = rng.randint(1, 50), rng.randint(0, 50), rng.randint(0, 50)
            assert e.evaluate({"N": n, "seq": s, "h": h}) == f(n, s, h)
    assert D.add(N, S).evaluate({"N": 2}) is None


@pytest.mark.parametrize("a,b", list(itertools.combinations([N, S, N + 1, D.mul(N, S), 3], 2)))
def test_sum_is_commutative_and_sub_inverts(a, b):
    assert D.add(a, b) == D.add(b, a)
    assert D.sub(D.add(a, b), b) == a
    assert D.mul(a, b) == D.mul(b, a)


def test_variables_of_an_expression():
    assert D.add(D.ceildiv(H, N), S).variables() == {"h", "N", "seq"}
    assert N.variable == "N" and (N + 1).variable is None
