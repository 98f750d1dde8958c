"""column_blocks_product: Conv's small im2col products split into column blocks that BLAS runs on
one thread. Checked against the exact product (float64 of float32 inputs, whose products and
sums of 144 terms are exact to far below the tolerance) within the float32 rounding bound
gamma_k * (|a| @ |b|), gamma_k = k * 2^-24 / (1 - k * 2^-24)."""

from __future__ import annotations

import numpy as np
import pytest

from onemodel.evaluate.kernels import linalg
from onemodel.evaluate.kernels.linalg import column_blocks_product


def _within_rounding(got, a, b):
    k = a.shape[-1]
    u = k * 2.0 ** -24
    exact = np.matmul(a.astype(np.float64), b.astype(np.float64))
    bound = u / (1 - u) * np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    assert got.shape == exact.shape and got.dtype == np.float32
    assert np.all(np.abs(got.astype(np.float64) - exact) <= bound + 1e-30)


@pytest.mark.parametrize("g, m, k, n, N", [
    (1, 16, 27, 1024, 1),     # Conv 3x3 on 3 channels, 32x32: two blocks
    (1, 16, 144, 1024, 1),    # ten blocks, the last one narrower
    (2, 8, 72, 700, 3),       # groups and a batch
    (1, 4, 3, 10, 2),         # below the threshold: one numpy.matmul
    (1, 64, 1024, 256, 1),    # m * k above _ONE_THREAD: one numpy.matmul
])
def test_equals_the_exact_product_within_float32_rounding(g, m, k, n, N):
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (g, m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (N, g, k, n)).astype(np.float32)
    _within_rounding(column_blocks_product(a, b), a, b)


def test_blocks_are_used_and_fill_a_strided_out(monkeypatch):
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (1, 16, 144)).astype(np.float32)
    b = rng.uniform(-1, 1, (4, 1, 144, 1024)).astype(np.float32)
    calls = []
    real = np.matmul

    def counting(x, y, **kw):
        calls.append(y.shape[-1])
        return real(x, y, **kw)

    monkeypatch.setattr(linalg.np, "matmul", counting)
    y = np.full((6, 1, 16, 1024), np.nan, np.float32)
    out = column_blocks_product(a, b[1:3], out=y[2:4])
    width = linalg._ONE_THREAD // (16 * 144)
    assert calls == [width] * (1024 // width) + [1024 % width]
    assert np.shares_memory(out, y)
    _within_rounding(y[2:4], a, b[1:3])
    assert np.isnan(y[:2]).all() and np.isnan(y[4:]).all()  # nothing written outside out
