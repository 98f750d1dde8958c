"""onemodel.ir.tensor: the element count of dims, shared by every reader, writer and kernel."""

from __future__ import annotations

import pytest

from onemodel.errors import InvalidModelError, UnsupportedError
from onemodel.ir import Tensor
from onemodel.ir.tensor import dims_text, element_count
from onemodel.limits import MAX_ELEMENT_COUNT


@pytest.mark.parametrize("dims, count", [
    ([], 1), ([7], 7), ([2, 3, 4], 24), ([0, 5], 0), ([1 << 40, 1 << 40, 0], 0),
    ([(1 << 60) - 1], (1 << 60) - 1), ([1 << 30, (1 << 30) - 1], (1 << 60) - (1 << 30))])
def test_element_count_is_the_product_of_dims(dims, count):
    assert element_count(dims) == count


def test_a_negative_dimension_is_refused_with_its_index_even_after_a_zero():
    with pytest.raises(InvalidModelError) as info:
        element_count([3, 0, -2], "manifest.graph.initializers[0].dims")
    assert info.value.path == "manifest.graph.initializers[0].dims[2]"
    assert "-2" in info.value.message


@pytest.mark.parametrize("dims", [[1 << 60], [1 << 30, 1 << 30], [2, 1 << 59]])
def test_a_count_of_2_60_or_more_is_unsupported(dims):
    assert MAX_ELEMENT_COUNT == 1 << 60
    with pytest.raises(UnsupportedError) as info:
        element_count(dims, "p")
    assert info.value.path == "p" and "2^60" in info.value.message


@pytest.mark.parametrize("dims", [[1 << 40, 1 << 40], [1 << 63], [2, 3, (1 << 62) + 1]])
def test_a_count_past_int64_is_invalid(dims):
    with pytest.raises(InvalidModelError, match="overflows 64 bits"):
        element_count(dims)


def test_a_lower_limit_can_be_asked_for():
    assert element_count([255], limit=256) == 255
    with pytest.raises(UnsupportedError, match=r"256 elements, 2\^8 or more"):
        element_count([16, 16], limit=256)


def test_many_huge_dims_stay_cheap_and_the_message_short():
    dims = [(1 << 62) + 1] * 60_000
    with pytest.raises(InvalidModelError) as info:
        element_count(dims)
    assert len(str(info.value)) < 200
    assert dims_text(dims) == "[" + ", ".join([str((1 << 62) + 1)] * 6) + ", ...]"
    assert dims_text([1, 2]) == "[1, 2]"


def test_tensor_size_checks_its_dims():
    assert Tensor(dims=[2, 5]).size == 10
    with pytest.raises(InvalidModelError) as info:
        _ = Tensor(name="w", dims=[4, -1]).size
    assert info.value.path == "w.dims[1]"
