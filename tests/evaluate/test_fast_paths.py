"""The evaluator's fast paths give the values of the plain computation: Gather of one index as a
view, Softmax shifted by the tensor's maximum, stacked products with one scattered operand
copied, and the glibc allocator setting of onemodel/evaluate/memory.py."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from oracle import node_model, ours

from onemodel.evaluate.kernels import activations, linalg

RNG = np.random.default_rng(4)


def _gather(x, i, axis):
    feeds = {"x": x, "i": np.asarray(i, np.int64)}
    return ours(node_model("Gather", feeds, ["x", "i"], ["y"], opset=13, axis=axis), feeds)[0]


@pytest.mark.parametrize("i,axis", [(1, 0), (-1, 1), (0, 2)])
def test_gather_of_one_index_is_a_view_with_take_s_values(i, axis):
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    y = _gather(x, i, axis)
    np.testing.assert_array_equal(y, np.take(x, i, axis=axis))
    assert y.shape == np.take(x, i, axis=axis).shape


def test_gather_of_one_index_out_of_range_fails():
    from onemodel.errors import EvaluationError
    with pytest.raises(EvaluationError, match="IndexError"):
        _gather(np.zeros((3, 2), np.float32), 3, 0)


def _softmax_rowmax(x):
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("scale", [1.0, 5.0, 30.0, 1000.0])  # spreads below and above 80
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_last_axis_equals_the_row_maximum_computation(scale, dtype):
    x = (RNG.standard_normal((3, 4, 17)) * scale).astype(dtype)
    y = activations._softmax(x, 2)
    assert y.dtype == dtype
    # each probability is within spread * 2^-24 (relative) in float32, whichever shift is used
    rtol = 80 * 2.0 ** -24 if dtype == np.float32 else 700 * 2.0 ** -53
    np.testing.assert_allclose(y, _softmax_rowmax(x), rtol=rtol, atol=1e-37)


def test_softmax_with_masked_and_nan_rows():
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    x[0, :2] = -np.inf
    x[1, :] = -np.inf
    x[2, 3] = np.nan
    with np.errstate(invalid="ignore"):  # the runner evaluates under the same setting
        y = activations._softmax(x, 1)
    np.testing.assert_allclose(y[0], _softmax_rowmax(x[:1])[0], rtol=1e-6)
    assert np.isnan(y[1]).all() and np.isnan(y[2]).all()


@pytest.mark.parametrize("a_perm,b_perm", [((0, 2, 1, 3), None), (None, (0, 2, 1, 3)),
                                           ((0, 2, 1, 3), (0, 2, 3, 1)), (None, None)])
def test_stacked_products_with_scattered_operands(a_perm, b_perm):
    a = RNG.standard_normal((2, 5, 3, 4)).astype(np.float32)
    b = RNG.standard_normal((2, 4, 3, 6)).astype(np.float32)
    a = a.transpose(a_perm) if a_perm else a.reshape(2, 3, 5, 4)
    b = b.transpose(b_perm) if b_perm else b.reshape(2, 3, 4, 6)
    if b_perm == (0, 2, 3, 1):
        b = b.transpose(0, 1, 3, 2)
    want = np.einsum("bhij,bhjk->bhik", a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(linalg._product(a, b), want, rtol=1e-5, atol=1e-6)


def test_scattered_tells_packed_matrices_from_scattered_ones():
    x = np.zeros((4, 6, 8), np.float32)
    assert not linalg._scattered(x)
    assert not linalg._scattered(x.transpose(0, 2, 1))
    assert linalg._scattered(x.transpose(1, 0, 2))
    assert linalg._scattered(x[:, :, ::2])


def _tune_in_child(env: dict) -> str:
    code = ("from onemodel.evaluate.memory import tune_allocator as t; "
            "print(t(), t())")
    env = {k: v for k, v in os.environ.items()
           if k not in ("ONEMODEL_TUNE_MALLOC", "MALLOC_TRIM_THRESHOLD_",
                        "MALLOC_MMAP_THRESHOLD_")} | env
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True).stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_allocator_setting_is_applied_once_and_can_be_turned_off():
    assert _tune_in_child({}) == "True True"
    assert _tune_in_child({"ONEMODEL_TUNE_MALLOC": "0"}) == "False False"
    assert _tune_in_child({"MALLOC_TRIM_THRESHOLD_": "1000"}) == "False False"


@pytest.mark.parametrize("perm", [(0, 1, 2), (1, 0, 2), (2, 0, 1, 3), (1, 2, 0, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_product_by_a_matrix_in_the_rows_memory_order(perm, dtype):
    """A 3-D or 4-D ``a`` by a 2-D ``b`` runs as one product of a's rows in memory order; where
    ``a`` is a transposed view, so is the result (the values of the product either way: each
    element one sum of k products, within k roundings of the float64 product)."""
    base = RNG.standard_normal((4, 6, 5, 8)[: len(perm)] if len(perm) == 4 else (6, 5, 8))
    a = base.astype(dtype).transpose(perm)
    b = RNG.standard_normal((8, 7)).astype(dtype)
    got = linalg._product(a, b)
    exact = np.einsum("...k,kn->...n", a.astype(np.float64), b.astype(np.float64))
    eps = 2.0 ** -24 if dtype == np.float32 else 2.0 ** -53
    assert got.dtype == dtype and got.shape == exact.shape
    assert np.all(np.abs(got - exact) <= 8 * eps * (np.abs(a) @ np.abs(b)))
    # laid out as a: the result of a transposed view is the same transposed view of a packed one
    assert got.flags.c_contiguous == a.flags.c_contiguous


@pytest.mark.parametrize("a", [np.ones((2, 0, 3), np.float32), np.ones((2, 3, 0), np.float32),
                               np.arange(24, dtype=np.float32).reshape(2, 3, 4)[:, :, ::2]])
def test_product_by_a_matrix_of_empty_or_scattered_rows(a):
    b = np.arange(a.shape[-1] * 3, dtype=np.float32).reshape(a.shape[-1], 3)
    np.testing.assert_array_equal(linalg._product(a, b), np.matmul(a, b))  # small integers
