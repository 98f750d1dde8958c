"""Conv's shifted products (onemodel/evaluate/kernels/conv.py, ``_shifted_conv``: unit strides,
non-negative pads) against Conv computed in float64, with groups, dilations, asymmetric pads,
1-D to 3-D, a bias, batch chunks and float64 inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from oracle import assert_close_to_exact, node_model, ours, reference64

from onemodel.evaluate.kernels import conv as conv_module

RNG = np.random.default_rng(29)


@pytest.fixture
def shifted_calls(monkeypatch):
    """Counts the calls of ``_shifted_conv`` and ``_shifted_conv_last`` (the cases below must
    take one). The compiled Conv kernel (tests/evaluate/test_ckernels.py) is turned off: these
    are the tests of the numpy path it replaces where it is built."""
    monkeypatch.setenv("ONEMODEL_PURE_PYTHON", "1")
    calls = []
    for name in ("_shifted_conv", "_shifted_conv_last"):  # groups / one group
        def spy(*args, _real=getattr(conv_module, name)):
            calls.append(args[0].shape)
            return _real(*args)

        monkeypatch.setattr(conv_module, name, spy)
    return calls


@pytest.mark.parametrize("x, w, attrs", [
    ((3, 4, 9, 8), (6, 4, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 4, 9, 9), (6, 2, 3, 2), {"group": 2, "pads": [1, 0, 2, 1]}),
    ((2, 3, 12, 12), (4, 3, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    ((1, 4, 6, 6), (4, 1, 3, 3), {"group": 4, "auto_pad": "SAME_UPPER"}),   # depthwise
    ((2, 3, 11), (5, 3, 4), {"pads": [2, 1], "dilations": [2]}),             # 1-D
    ((1, 2, 4, 10, 12), (3, 2, 2, 3, 3), {"pads": [0, 1, 1, 0, 1, 1]}),    # 3-D
])
@pytest.mark.parametrize("chunked", [False, True])
def test_shifted_conv_is_within_the_bound_of_exact(x, w, attrs, chunked, shifted_calls,
                                                     monkeypatch):
    feeds = {"x": RNG.standard_normal(x).astype(np.float32),
             "w": RNG.standard_normal(w).astype(np.float32),
             "b": RNG.standard_normal(w[:1]).astype(np.float32)}
    model = node_model("Conv", feeds, ["x", "w", "b"], ["y"], opset=22, **attrs)
    if chunked:
        monkeypatch.setattr(conv_module, "_COLUMN_BYTES", 1)  # one sample at a time
    got = ours(model, feeds)
    assert shifted_calls, "the case did not take the shifted products"
    # exact: Conv in float64. Each output sums C/group x prod(kernel) products and the bias,
    # each a float32 rounding of a partial sum at most the sum of |terms| (Conv of |x|, |w|, |b|)
    terms = w[1] * math.prod(w[2:]) + 1
    mag = reference64(model, {k: np.abs(v) for k, v in feeds.items()})[0]
    assert_close_to_exact(got, reference64(model, feeds), ulps=terms, scale=mag)


def test_shifted_conv_in_float64_without_bias(shifted_calls):
    x = RNG.standard_normal((2, 3, 7, 7))
    w = RNG.standard_normal((4, 3, 3, 3))
    feeds = {"x": x, "w": w}
    model = node_model("Conv", feeds, ["x", "w"], ["y"], opset=22, pads=[1, 1, 1, 1])
    (got,) = ours(model, feeds)
    assert shifted_calls and got.dtype == np.float64
    # exact: the same sums by a direct loop over the kernel taps, in float64; 27 products,
    # within 27 float64 roundings of the sum of |terms|
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((2, 4, 7, 7))
    mag = np.zeros((2, 4, 7, 7))
    for i in range(3):
        for j in range(3):
            tap = xp[:, :, i:i + 7, j:j + 7]
            want += np.einsum("nchw,mc->nmhw", tap, w[:, :, i, j])
            mag += np.einsum("nchw,mc->nmhw", np.abs(tap), np.abs(w[:, :, i, j]))
    assert np.all(np.abs(got - want) <= 27 * 2.0 ** -52 * mag * 2)


def test_wasteful_geometry_takes_im2col(shifted_calls):
    # rows of 8 and a kernel 7 wide: 2 output columns, whole padded rows would be 4x as many
    feeds = {"x": RNG.standard_normal((1, 2, 3, 8)).astype(np.float32),
             "w": RNG.standard_normal((2, 2, 1, 7)).astype(np.float32)}
    model = node_model("Conv", feeds, ["x", "w"], ["y"], opset=22)
    got = ours(model, feeds)
    assert not shifted_calls
    mag = reference64(model, {k: np.abs(v) for k, v in feeds.items()})[0]
    assert_close_to_exact(got, reference64(model, feeds), ulps=14, scale=mag)


@pytest.mark.parametrize("channels_last", [False, True])
def test_one_group_gives_a_channels_last_view_and_reads_one(channels_last):
    x = RNG.standard_normal((3, 5, 6, 7)).astype(np.float32)
    w = RNG.standard_normal((4, 5, 3, 2)).astype(np.float32)
    b = RNG.standard_normal(4).astype(np.float32)
    given = np.moveaxis(np.ascontiguousarray(np.moveaxis(x, 1, -1)), -1, 1) if channels_last \
        else x
    assert (given.strides[1] == 4) == channels_last
    y = conv_module._shifted_conv_last(given, w, b, [3, 2], [1, 1], [1, 0], [1, 1], [6, 7])
    assert y.shape == (3, 4, 6, 7) and y.strides[1] == 4  # channels innermost in memory
    # exact: the sums over the taps in float64; 30 products and the bias, each output within
    # 31 float32 roundings of the sum of |terms|
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (0, 1)))
    want = np.zeros((3, 4, 6, 7)) + b[:, None, None]
    mag = np.zeros((3, 4, 6, 7)) + np.abs(b)[:, None, None]
    for i in range(3):
        for j in range(2):
            tap = xp[:, :, i:i + 6, j:j + 7]
            want += np.einsum("nchw,mc->nmhw", tap, w[:, :, i, j])
            mag += np.einsum("nchw,mc->nmhw", np.abs(tap), np.abs(w[:, :, i, j]))
    assert np.all(np.abs(y - want) <= 31 * 2.0 ** -24 * mag)
