"""Broadcasting written once (onemodel.operators.broadcast): the columns the evaluator's
allocation checks and the inference context walk, the int broadcast shape, and the placement
of the second input before opset 7."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from onemodel.evaluate.memory import broadcast_count
from onemodel.operators import broadcast as B


def test_columns_align_the_shapes_at_their_last_axis():
    assert B.columns([(2, 3, 4), (4,), (3, 1)]) == [[2], [3, 3], [4, 4, 1]]
    assert B.columns([(), (5,)]) == [[5]]
    assert B.columns([]) == []


SHAPES = [(), (1,), (3,), (0,), (2, 1), (1, 3), (2, 3), (4, 1, 3), (0, 3), (2, 0)]


@pytest.mark.parametrize("a, b", list(itertools.product(SHAPES, SHAPES)))
def test_int_shape_is_numpys_broadcast(a, b):
    try:
        want = list(np.broadcast_shapes(a, b))
    except ValueError:
        want = None
    assert B.int_shape([a, b]) == want
    assert broadcast_count(a, b) == (0 if want is None else int(np.prod(want, dtype=np.int64)))


def test_int_shape_of_several_shapes():
    assert B.int_shape([(2, 1, 1), (3, 1), (4,)]) == [2, 3, 4]
    assert B.int_shape([(2, 1), (1, 3), (3, 3)]) is None


def test_legacy_start_places_the_second_input():
    assert B.legacy_start(None, 4, 2) == 2       # aligned at the end
    assert B.legacy_start(1, 4, 2) == 1
    assert B.legacy_start(-3, 4, 2) == 1          # negative from the end
