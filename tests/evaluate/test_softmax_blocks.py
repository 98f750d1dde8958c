"""Softmax along the last axis computed a block of rows at a time
(onemodel/evaluate/kernels/activations.py, ``_softmax_last``): blocks of small and of large
spread (each takes its own shift), masked rows, a non-contiguous input, against float64."""

from __future__ import annotations

import numpy as np
import pytest

from onemodel.evaluate.kernels import activations

RNG = np.random.default_rng(31)


def _exact(x):
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blocks_with_their_own_shifts_match_float64(dtype, monkeypatch):
    monkeypatch.setattr(activations, "_SOFTMAX_BLOCK", 3 * 9)  # blocks of 3 rows of 9
    x = RNG.standard_normal((4, 5, 9))
    x[1] *= 1000.0  # spread above 80: the blocks over these rows shift by each row's maximum
    x[3, 2, :4] = -np.inf  # masked positions
    x = x.astype(dtype)
    y = activations._softmax(x, 2)
    assert y.dtype == dtype and y.shape == x.shape
    # each probability is within spread * 2^-24 (relative, float32) of the exact value,
    # spread 80 at most within a block that shifts by its maximum (700 * 2^-53 in float64)
    rtol = 80 * 2.0 ** -24 if dtype == np.float32 else 700 * 2.0 ** -53
    np.testing.assert_allclose(y, _exact(x), rtol=rtol, atol=1e-37)


def test_blocks_of_a_transposed_input(monkeypatch):
    monkeypatch.setattr(activations, "_SOFTMAX_BLOCK", 16)
    x = RNG.standard_normal((6, 7, 5)).astype(np.float32).transpose(1, 0, 2)
    y = activations._softmax(x, 2)
    assert y.flags.c_contiguous
    np.testing.assert_allclose(y, _exact(x), rtol=80 * 2.0 ** -24, atol=1e-37)
