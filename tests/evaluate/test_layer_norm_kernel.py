"""LayerNormalization of float32 rows by the compiled kernel (onemodel/evaluate/_ckernels.c,
``layer_norm``) and by numpy's path (``ONEMODEL_PURE_PYTHON=1``), against the definition in
float64 (ONNX Part 1, Clause 11: LayerNormalization-17, stash type float32): within a bound
stated from the float32 roundings of the two passes."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import node_model, ours

from onemodel.evaluate import ckernels

RNG = np.random.default_rng(41)
U = 2.0 ** -24  # float32 unit roundoff


def _exact(x, s, b, axis, eps):
    w = x.astype(np.float64)
    axes = tuple(range(axis, x.ndim))
    mean = w.mean(axis=axes, keepdims=True)
    var = ((w - mean) ** 2).mean(axis=axes, keepdims=True)
    inv = 1 / np.sqrt(var + np.float64(np.float32(eps)))
    y = (w - mean) * inv * s.astype(np.float64)
    if b is not None:
        y = y + b.astype(np.float64)
    return y, mean, inv


def _bound(x, s, b, axis, n, inv, lanes=4):
    """A sum of n terms taken in ``lanes`` float32 partial sums is within n/lanes + 8 roundings
    of the sum of |terms| (numpy's path: BLAS's float32 sums, at least 4 lanes on any x86-64 or
    arm64 build); the compiled kernel sums in double, each statistic rounded once, well within
    the same bound for any lanes >= 4. Then the mean is within (n/lanes + 8) u mean|x| and the
    variance within (n/lanes + 12) u of its value plus the mean's error squared; inv takes half
    the variance's relative error and 2 roundings; y = (x - mean) inv s + b adds 4 roundings."""
    w = np.abs(x.astype(np.float64))
    axes = tuple(range(axis, x.ndim))
    k = n / lanes + 16
    bound = k * U * (w.mean(axis=axes, keepdims=True) + w) * inv * np.abs(s)
    if b is not None:
        bound = bound + 2 * U * np.abs(b)
    return bound


CASES = [  # (shape, axis)
    ((4096, 64), -1), ((3, 7), 1), ((5, 33), -1), ((2, 3, 32), 2), ((2, 4, 5), 1),
    ((3, 4096), 1), ((6, 100), -1),
]


@pytest.mark.parametrize("pure", [False, True])
@pytest.mark.parametrize("shape, axis", CASES)
@pytest.mark.parametrize("with_bias", [True, False])
def test_layer_norm_within_the_bound_of_float64(pure, shape, axis, with_bias, monkeypatch):
    if pure:
        monkeypatch.setenv("ONEMODEL_PURE_PYTHON", "1")
    elif ckernels._C is None:
        pytest.skip(f"compiled kernels not built ({ckernels.C_ERROR})")
    ax = axis % len(shape)
    norm = shape[ax:]
    x = (RNG.standard_normal(shape) * 3 + 1).astype(np.float32)
    s = RNG.standard_normal(norm).astype(np.float32)
    b = RNG.standard_normal(norm).astype(np.float32) if with_bias else None
    feeds = {"x": x, "s": s} | ({"b": b} if with_bias else {})
    ins = ["x", "s", "b"] if with_bias else ["x", "s"]
    model = node_model("LayerNormalization", feeds, ins, ["y", "mean", "inv"], axis=axis,
                       epsilon=1e-5)
    calls = []
    if not pure:
        real = ckernels._C.layer_norm
        monkeypatch.setattr(ckernels._C, "layer_norm",
                            lambda *a: (calls.append(a[6:8]), real(*a))[1], raising=True)
    y, mean, inv = ours(model, feeds)
    assert bool(calls) == (not pure)
    ey, emean, einv = _exact(x, s, b, ax, 1e-5)
    n = int(np.prod(norm))
    assert y.dtype == mean.dtype == inv.dtype == np.float32
    assert y.shape == shape and mean.shape == emean.shape and inv.shape == einv.shape
    lanes = 4 if pure else 32  # the compiled kernel: double sums, within the 32-lane bound
    assert np.all(np.abs(y - ey) <= _bound(x, s, b, ax, n, einv, lanes))
    w = np.abs(x.astype(np.float64)).mean(axis=tuple(range(ax, len(shape))), keepdims=True)
    assert np.all(np.abs(mean - emean) <= (n / lanes + 8) * U * w)
    assert np.all(np.abs(inv - einv) <= (n / lanes + 16) * U * einv)


@pytest.mark.skipif(ckernels._C is None, reason="compiled kernels not built")
def test_constant_rows_offset_rows_nan_and_float16():
    x = np.empty((4, 48), np.float32)
    x[0] = 2.5                                                     # variance 0
    x[1] = 1e4 + RNG.standard_normal(48).astype(np.float32)       # a large mean: two passes
    x[2] = RNG.standard_normal(48)
    x[2, 7] = np.nan                                               # a NaN row
    x[3] = RNG.standard_normal(48)
    s = np.full(48, 2.0, np.float32)
    feeds = {"x": x, "s": s}
    model = node_model("LayerNormalization", feeds, ["x", "s"], ["y", "mean", "inv"],
                       epsilon=1e-5)
    y, mean, inv = ours(model, feeds)
    np.testing.assert_array_equal(y[0], 0.0)
    assert inv[0, 0] == np.float32(1 / np.sqrt(np.float32(1e-5)))
    ey, _, einv = _exact(x[1:2], s, None, 1, 1e-5)
    assert np.all(np.abs(y[1] - ey[0]) <= _bound(x[1:2], s, None, 1, 48, einv)[0])
    assert np.isnan(y[2]).all() and np.isnan(mean[2, 0]) and not np.isnan(y[3]).any()
    # equal values whose float32 sum overflows: the compiled kernel's double sums keep the
    # mean (3.4e38) and the variance (0) finite, y = 0 (numpy's float32 path gives NaN here)
    big = np.full((4, 48), 3.4e38, np.float32)
    yb, mb, _ = ours(model, {"x": big, "s": s})
    assert (mb == np.float32(3.4e38)).all() and (yb == 0).all()
    # float16: computed in float32 (stash_type 1) and rounded once
    h = RNG.standard_normal((8, 40)).astype(np.float16)
    sh = RNG.standard_normal(40).astype(np.float16)
    hf = {"x": h, "s": sh}
    (yh,) = ours(node_model("LayerNormalization", hf, ["x", "s"], ["y"]), hf)
    eh, _, einv = _exact(h, sh, None, 1, 1e-5)
    assert yh.dtype == np.float16
    assert np.all(np.abs(yh - eh) <= 2.0 ** -11 * np.abs(eh) + _bound(h, sh, None, 1, 40, einv)
                  + 2.0 ** -24)


@pytest.mark.skipif(ckernels._C is None, reason="compiled kernels not built")
def test_raw_layer_norm_refuses_wrong_buffers():
    x = np.zeros((3, 4), np.float32)
    s = np.ones(4, np.float32)
    y, m, i = np.empty_like(x), np.empty(3, np.float32), np.empty(3, np.float32)
    with pytest.raises(ValueError):
        ckernels._C.layer_norm(x, s[:3], None, y, m, i, 3, 4, 1e-5)     # scale too short
    with pytest.raises(ValueError):
        ckernels._C.layer_norm(x, s, None, y, m, i, 4, 4, 1e-5)         # rows past x
    with pytest.raises(ValueError):
        ckernels._C.layer_norm(x.astype(np.float64), s, None, y, m, i, 3, 4, 1e-5)
    with pytest.raises(ValueError):
        ckernels._C.layer_norm(x, s, None, y, m, i, 3, 0, 1e-5)
    ro = np.empty_like(x)
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        ckernels._C.layer_norm(x, s, None, ro, m, i, 3, 4, 1e-5)
    with pytest.raises(TypeError):
        ckernels._C.layer_norm(x, s, None, y, m, i, 3, 4)
    with pytest.raises(ValueError):  # a residual shorter than x
        ckernels._C.layer_norm(x, s, None, y, m, i, 3, 4, 1e-5, x[:2])


@pytest.mark.skipif(ckernels._C is None, reason="compiled kernels not built")
def test_layer_norm_of_a_sum_is_the_layer_norm_of_the_float32_sum():
    """With a residual the rows normalized are x + r rounded to float32: the same values as
    the kernel given that sum (the same operations on the same floats)."""
    x = RNG.standard_normal((5, 70)).astype(np.float32)
    r = RNG.standard_normal((5, 70)).astype(np.float32)
    s = RNG.standard_normal(70).astype(np.float32)
    b = RNG.standard_normal(70).astype(np.float32)
    got = ckernels.layer_norm(x, s, b, 1, 1e-5, residual=r)
    want = ckernels.layer_norm(x + r, s, b, 1, 1e-5)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert ckernels.layer_norm(x, s, b, 1, 1e-5, residual=r[:, :35]) is None  # not x's shape


@pytest.mark.skipif(ckernels._C is None, reason="compiled kernels not built")
@pytest.mark.parametrize("view", ["transposed", "reversed rows", "multi-axis packed"])
def test_layer_norm_of_a_sum_with_a_residual_view(view):
    """A residual that is a view (a Transpose's, rows in reverse) is read in place: the same
    values as its packed copy; over two normalized axes a packed residual is taken whole and a
    view left to numpy (None)."""
    x = RNG.standard_normal((4, 6, 16)).astype(np.float32)
    s = RNG.standard_normal(16).astype(np.float32)
    r = RNG.standard_normal((6, 4, 16)).astype(np.float32).transpose(1, 0, 2)
    if view == "reversed rows":
        r = np.ascontiguousarray(r)[:, ::-1]
    axis = 2
    if view == "multi-axis packed":
        r, s, axis = np.ascontiguousarray(r), RNG.standard_normal((6, 16)).astype(np.float32), 1
        assert ckernels.layer_norm(x, s, None, axis, 1e-5,
                                   residual=r.transpose(1, 0, 2).copy().transpose(1, 0, 2)) is None
    got = ckernels.layer_norm(x, s, None, axis, 1e-5, residual=r)
    want = ckernels.layer_norm(x, s, None, axis, 1e-5, residual=np.ascontiguousarray(r))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(got[0], ckernels.layer_norm(x + r, s, None, axis, 1e-5)[0])
    with pytest.raises(ValueError):  # the raw kernel: rows of another length
        ckernels._C.layer_norm(x, s[:16], None, np.empty_like(x), np.empty(24, np.float32),
                               np.empty(24, np.float32), 24, 16, 1e-5, r.reshape(-1)[:384:2])
