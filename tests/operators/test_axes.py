"""Axis normalization written once (onemodel.operators.axes): the kernels and the rules give the
same index and the same message for an axis out of range or repeated."""

from __future__ import annotations

import pytest

from onemodel.operators import axes as A


@pytest.mark.parametrize("axis, rank, index", [(0, 1, 0), (-1, 3, 2), (-3, 3, 0), (2, 3, 2)])
def test_axis_index_counts_negative_axes_from_the_end(axis, rank, index):
    assert A.axis_index(axis, rank) == index


@pytest.mark.parametrize("axis, rank", [(3, 3), (-4, 3), (0, 0), (-1, 0)])
def test_axis_index_refuses_an_axis_out_of_range(axis, rank):
    with pytest.raises(A.AxisError) as e:
        A.axis_index(axis, rank, "Gather axis")
    assert str(e.value) == f"Gather axis {axis} is out of range for rank {rank}"


def test_flatten_axis_accepts_minus_rank_to_rank():
    assert [A.flatten_axis(a, 3) for a in (-3, -1, 0, 3)] == [0, 2, 0, 3]
    assert A.flatten_axis(4, 3) is None and A.flatten_axis(-4, 3) is None


def test_unsqueeze_axes_index_the_output():
    assert A.unsqueeze_axes([-1, 0], 2) == [0, 3]
    with pytest.raises(A.AxisError, match=r"^Unsqueeze axes \[0, -4\] repeat an axis$"):
        A.unsqueeze_axes([0, -4], 2)
    with pytest.raises(A.AxisError, match=r"^Unsqueeze axis 4 is out of range for rank 4$"):
        A.unsqueeze_axes([4, 0], 2, "Unsqueeze axis")


def test_the_kernels_raise_it_as_an_evaluation_error():
    from onemodel.errors import EvaluationError
    from onemodel.evaluate.kernels._util import axis_index

    with pytest.raises(EvaluationError, match=r"axis 5 is out of range for rank 2"):
        axis_index(5, 2)
    assert axis_index(-2, 2) == 0


def test_distinct_axes_keep_their_order_and_refuse_a_repeat():
    assert A.distinct_axes([-1, 0], 3) == [2, 0]
    with pytest.raises(A.AxisError, match=r"^axes \[2, -1\] repeat an axis$"):
        A.distinct_axes([2, -1], 3)
    with pytest.raises(A.AxisError, match=r"^axis 3 is out of range for rank 3$"):
        A.distinct_axes([0, 3, 0], 3)
