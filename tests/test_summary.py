"""summary._sizes (info's bytes and parameters by element type) gives what Tensor.nbytes and
Tensor.size give, tensor by tensor summed, on the fast path and on the checked one."""

from __future__ import annotations

import random

import pytest

from onemodel.errors import InvalidModelError, UnsupportedError
from onemodel.ir import INFO, Tensor
from onemodel.summary import _sizes


def _expected(tensors) -> dict:
    out: dict = {}
    for t in tensors:
        e = out.setdefault(t.data_type or 0, [0, 0, 0])
        e[0] += 1
        e[1] += t.nbytes
        e[2] += t.size
    return out


CODES = sorted(INFO) + [0, None, 99]  # every Table 5 tag (sub-byte, STRING ...), unset, unknown


@pytest.mark.parametrize("seed", range(5))
def test_sizes_are_the_sum_of_nbytes(seed):
    rng = random.Random(seed)
    kinds = rng.sample(CODES, rng.randint(1, 6))
    tensors = [Tensor(data_type=rng.choice(kinds),
                      dims=[rng.randint(0, 9) for _ in range(rng.randint(0, 4))])
               for _ in range(rng.randint(1, 300))]
    assert _sizes(tensors) == _expected(tensors)


def test_sub_byte_types_round_up_per_tensor():
    int4 = next(c for c, i in INFO.items() if i.bits == 4)
    tensors = [Tensor(data_type=int4, dims=[3]) for _ in range(4)]  # 2 bytes each, not 6 in all
    assert _sizes(tensors) == {int4: [4, 8, 12]}


def test_no_tensors():
    assert _sizes([]) == {}


@pytest.mark.parametrize("dims", [[2] * 17, [2**40, 2**21]])
def test_many_dims_or_many_elements_take_the_checked_path(dims):
    tensors = [Tensor(data_type=1, dims=[4]), Tensor(data_type=1, dims=dims)]
    if len(dims) > 16:
        assert _sizes(tensors) == {1: [2, 16 + 4 * 2**17, 4 + 2**17]}
    else:
        with pytest.raises(UnsupportedError, match="the limit"):
            _sizes(tensors)


def test_a_negative_dim_raises_as_nbytes_does():
    tensors = [Tensor(data_type=1, dims=[4]), Tensor(name="w", data_type=1, dims=[3, -1])]
    with pytest.raises(InvalidModelError, match="negative") as got:
        _sizes(tensors)
    with pytest.raises(InvalidModelError) as want:
        tensors[1].nbytes
    assert str(got.value) == str(want.value)
    # a tag outside Table 5 has no size: nbytes is 0 without looking at dims, as before, and
    # its elements are not counted where its dims give no count
    assert _sizes([Tensor(data_type=99, dims=[-1])]) == {99: [1, 0, 0]}
