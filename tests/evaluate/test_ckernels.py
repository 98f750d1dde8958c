"""The compiled float32 kernels (onemodel/evaluate/_ckernels.c, wrapped by
onemodel/evaluate/ckernels.py) against exact float64 computations.

``conv2d``: through the Conv operator and called directly, for output widths 1..20 (the
remainders of the 16- and 8-column blocks), output channel counts around the blocks of 6,
strides along either axis (the stride phases of the padded copy, every leading pad modulo the
stride), dilations, asymmetric and cropping pads, ``auto_pad``, 1-D, 1xK and Kx1 kernels, one
channel, batches and float16; ``relu=True``; NaN inputs. ``exp_rows``: each exponential within
1 ulp of float32 (down to the subnormal range), the row sums, NaN and infinite rows, in place,
the inputs it leaves to numpy; Softmax through the operator. The operator tests also run with
``ONEMODEL_PURE_PYTHON=1`` (the numpy path), within the same bound. The raw ``_C`` functions
refuse bad buffers and dimensions (also dimensions whose products wrap in 64 bits) with
ValueError or TypeError.

The tests are skipped when the extension is not built; ``test_c_kernels_are_built`` fails then
if ONEMODEL_REQUIRE_C=1.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from oracle import EPS32, assert_close_to_exact, node_model, ours

from onemodel.evaluate import ckernels

C = ckernels._C
needs_c = pytest.mark.skipif(C is None, reason=f"compiled kernels not built ({ckernels.C_ERROR})")
RNG = np.random.default_rng(41)
U = 2.0 ** -24  # unit roundoff of float32
TINY = 2.0 ** -149  # the smallest float32 subnormal


def test_c_kernels_are_built():
    """With ONEMODEL_REQUIRE_C=1 a missing or unusable extension is a failure, not a skip."""
    if os.environ.get("ONEMODEL_REQUIRE_C") != "1":
        pytest.skip("ONEMODEL_REQUIRE_C is not set")
    assert ckernels._C is not None, f"the compiled kernels are not in use: {ckernels.C_ERROR}"


@pytest.fixture
def compiled(monkeypatch):
    """The calls of the raw ``_C.conv2d`` / ``_C.exp_rows`` (a list of names), with
    ONEMODEL_PURE_PYTHON unset."""
    monkeypatch.delenv("ONEMODEL_PURE_PYTHON", raising=False)
    calls = []
    for name in ("conv2d", "exp_rows"):
        def spy(*args, _real=getattr(C, name), _name=name):
            calls.append(_name)
            return _real(*args)

        monkeypatch.setattr(C, name, spy)
    return calls


# -- conv2d ------------------------------------------------------------------------------------
def _geometry(attrs, spatial, kernel):
    """(begin pads, end pads, output extents, strides, dilations) of Conv ``attrs`` (ONNX
    Conv: explicit ``pads`` [b..., e...], or ``auto_pad``)."""
    n = len(spatial)
    strides = attrs.get("strides", [1] * n)
    dilations = attrs.get("dilations", [1] * n)
    dk = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        out = [-(-i // s) for i, s in zip(spatial, strides)]
        total = [max((o - 1) * s + k - i, 0) for o, s, k, i in zip(out, strides, dk, spatial)]
        begin = [t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in total]
        end = [t - b for t, b in zip(total, begin)]
    else:
        pads = attrs.get("pads", [0] * 2 * n) if auto == "NOTSET" else [0] * 2 * n
        begin, end = pads[:n], pads[n:]
    out = [(i + b + e - k) // s + 1
           for i, b, e, k, s in zip(spatial, begin, end, dk, strides)]
    return begin, end, out, strides, dilations


def _exact_conv(x, w, b, begin, end, out, strides, dilations):
    """Conv in float64 and the Conv of |x|, |w|, |b| (the sum of |terms| of each output): a
    zero-padded (or, for negative pads, cropped) float64 copy of ``x``, then one einsum per
    kernel tap."""
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    crop = [slice(None), slice(None)]
    width = [(0, 0), (0, 0)]
    for i, (p, e) in enumerate(zip(begin, end)):
        crop.append(slice(max(-p, 0), x.shape[2 + i] - max(-e, 0)))
        width.append((max(p, 0), max(e, 0)))
    xp = np.pad(x64[tuple(crop)], width)
    shape = (x.shape[0], w.shape[0]) + tuple(out)
    want, mag = np.zeros(shape), np.zeros(shape)
    for kidx in np.ndindex(*w.shape[2:]):
        sl = (slice(None), slice(None)) + tuple(
            slice(k * d, k * d + (o - 1) * s + 1, s)
            for k, d, o, s in zip(kidx, dilations, out, strides))
        tap = xp[sl]
        assert tap.shape[2:] == tuple(out)
        wk = w64[(slice(None), slice(None)) + kidx]
        want += np.einsum("nc...,mc->nm...", tap, wk)
        mag += np.einsum("nc...,mc->nm...", np.abs(tap), np.abs(wk))
    if b is not None:
        bb = b.astype(np.float64).reshape((1, -1) + (1,) * len(out))
        want, mag = want + bb, mag + np.abs(bb)
    return want, mag


def _conv_ulps(w, b):
    """Each output sums C * prod(kernel) float32 products and the bias: with fused multiply-adds
    one rounding of u = 2^-24 a term, without them two (the product, then the sum), each at most
    u times the sum of |terms|; R + 1 ulps of EPS32 = 2u covers both."""
    return math.prod(w.shape[1:]) + (b is not None)


CASES = {
    **{f"width{ow}": ((2, 3, 3, ow), (4, 3, 3, 3), True, {"pads": [1, 1, 1, 1]})
       for ow in range(1, 21)},
    **{f"m{m}": ((1, 4, 5, 9), (m, 4, 3, 3), m % 2 == 1, {"pads": [1, 1, 1, 1]})
       for m in (1, 5, 6, 7, 13, 16, 33)},
    "stride2": ((2, 3, 11, 10), (5, 3, 3, 3), True, {"strides": [2, 1], "pads": [1, 0, 0, 1]}),
    "stride3": ((1, 3, 13, 7), (7, 3, 3, 2), True, {"strides": [3, 1]}),  # row 12 unread
    "stride3_pads": ((1, 2, 10, 9), (6, 2, 2, 3), False,
                     {"strides": [3, 1], "pads": [2, 1, 1, 2]}),
    **{f"sw2_width{ow}": ((1, 3, 4, 2 * ow + 1), (4, 3, 3, 3), True,
                          {"strides": [1, 2], "pads": [1, 1, 1, 0]}) for ow in range(1, 21)},
    **{f"sw{sw}_pl{pl}": ((1, 2, 5, 23), (5, 2, 2, 3), pl % 2 == 0,
                          {"strides": [1, sw], "pads": [0, pl, 1, 1]})
       for sw in (2, 3, 5) for pl in range(4)},
    "strides23": ((2, 3, 11, 17), (7, 3, 3, 3), True, {"strides": [2, 3], "pads": [1, 2, 0, 1]}),
    "sw2_dilation2": ((1, 3, 7, 30), (6, 3, 2, 4), True,
                      {"strides": [1, 2], "dilations": [1, 2], "pads": [0, 3, 0, 0]}),
    "sw3_dilation2": ((1, 2, 6, 31), (6, 2, 3, 3), False,
                      {"strides": [1, 3], "dilations": [2, 2], "pads": [1, 1, 1, 1]}),
    "sw2_crop": ((1, 3, 6, 21), (5, 3, 3, 3), True, {"strides": [1, 2], "pads": [0, 2, 0, -3]}),
    "sw2_same_upper": ((1, 3, 8, 15), (7, 3, 3, 4), True,
                       {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    "sw2_same_lower": ((1, 3, 8, 15), (7, 3, 3, 4), True,
                       {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    "stem7x7_sw2": ((1, 3, 20, 20), (8, 3, 7, 7), True, {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
    "1d_stride2": ((2, 3, 40), (5, 3, 3), True, {"strides": [2], "pads": [1, 1]}),
    "1d_stride4_dilation3": ((1, 2, 50), (6, 2, 4), False,
                             {"strides": [4], "dilations": [3], "pads": [2, 0]}),
    "dilation21": ((1, 3, 9, 12), (7, 3, 3, 3), True, {"dilations": [2, 1], "pads": [2, 1, 2, 1]}),
    "dilation13": ((2, 3, 7, 14), (6, 3, 2, 3), True, {"dilations": [1, 3], "pads": [0, 3, 1, 0]}),
    "asymmetric": ((1, 3, 6, 9), (5, 3, 3, 3), True, {"pads": [2, 0, 1, 3]}),
    "crop_end": ((2, 3, 8, 9), (6, 3, 3, 3), True, {"pads": [2, 1, -1, -2]}),
    "crop_begin_zero": ((1, 2, 7, 11), (4, 2, 2, 3), True, {"pads": [0, 0, -3, -4]}),
    "same_upper": ((1, 3, 8, 9), (5, 3, 4, 4), True, {"auto_pad": "SAME_UPPER"}),
    "same_lower": ((1, 3, 8, 9), (5, 3, 4, 4), True, {"auto_pad": "SAME_LOWER"}),
    "same_upper_stride2": ((1, 3, 9, 6), (7, 3, 4, 3), True,
                           {"auto_pad": "SAME_UPPER", "strides": [2, 1]}),
    "same_lower_stride2": ((2, 3, 9, 6), (7, 3, 4, 3), True,
                           {"auto_pad": "SAME_LOWER", "strides": [2, 1]}),
    "valid": ((1, 3, 8, 9), (6, 3, 3, 3), True, {"auto_pad": "VALID"}),
    "1d": ((2, 3, 17), (5, 3, 4), True, {"pads": [2, 1], "dilations": [2]}),
    "1d_crop": ((1, 4, 25), (8, 4, 5), False, {"pads": [3, -2]}),
    "no_bias": ((2, 3, 6, 7), (6, 3, 3, 3), False, {"pads": [1, 1, 1, 1]}),
    "kernel1x5": ((1, 3, 5, 12), (6, 3, 1, 5), True, {"pads": [0, 2, 0, 2]}),
    "kernel5x1": ((1, 3, 12, 5), (6, 3, 5, 1), True, {"pads": [2, 0, 2, 0]}),
    # taller than wide, narrower than 8 columns: computed transposed (ckernels.NARROW_OUTPUT)
    "tall_5x1_width1": ((2, 8, 40, 1), (7, 8, 5, 1), True, {}),
    "tall_width7": ((1, 3, 30, 9), (5, 3, 3, 3), True, {}),
    "tall_strides_dilations": ((2, 3, 30, 5), (13, 3, 3, 2), True,
                               {"strides": [2, 1], "dilations": [1, 2], "pads": [1, 0, 2, 1]}),
    "tall_sw2": ((1, 4, 21, 9), (6, 4, 4, 3), False, {"strides": [1, 2], "pads": [0, 1, 0, 1]}),
    # at most 4 columns: two output rows a vector (an odd count leaves the last row alone)
    "pair_4x4_stride2": ((2, 5, 8, 8), (13, 5, 3, 3), True, {"strides": [2, 2], "pads": [1] * 4}),
    "pair_3x3": ((1, 6, 5, 5), (7, 6, 3, 3), True, {}),
    "pair_5x4_dilation2": ((1, 3, 9, 8), (5, 3, 3, 3), False,
                           {"dilations": [2, 2], "pads": [1, 0, 0, 0]}),
    "pair_2x2_stride2": ((3, 4, 4, 4), (8, 4, 3, 3), True, {"strides": [2, 2], "pads": [1] * 4}),
    # 5 to 8 columns: two output rows a block
    "rows2_8x8": ((2, 5, 8, 8), (7, 5, 3, 3), True, {"pads": [1] * 4}),
    "rows2_7x5_odd": ((1, 3, 9, 7), (13, 3, 3, 3), False, {"pads": [0, 0, 0, 0]}),
    "rows2_stride2": ((2, 4, 16, 13), (6, 4, 3, 3), True, {"strides": [2, 2], "pads": [1] * 4}),
    "c1": ((2, 1, 7, 8), (4, 1, 3, 3), True, {"pads": [1, 1, 1, 1]}),
    "n1": ((1, 5, 6, 6), (7, 5, 3, 3), True, {}),
    "n5": ((5, 3, 6, 19), (9, 3, 3, 3), True, {"pads": [1, 1, 1, 1]}),
}


def _conv_feeds(xs, ws, bias, dtype=np.float32):
    feeds = {"x": RNG.standard_normal(xs).astype(dtype),
             "w": RNG.standard_normal(ws).astype(dtype)}
    if bias:
        feeds["b"] = RNG.standard_normal(ws[0]).astype(dtype)
    return feeds


def _conv_model(feeds, attrs):
    return node_model("Conv", feeds, [k for k in ("x", "w", "b") if k in feeds], ["y"],
                      opset=22, **attrs)


@needs_c
@pytest.mark.parametrize("case", list(CASES))
def test_conv_operator_is_within_the_bound_of_exact(case, compiled, monkeypatch):
    xs, ws, bias, attrs = CASES[case]
    feeds = _conv_feeds(xs, ws, bias)
    begin, end, out, strides, dilations = _geometry(attrs, xs[2:], ws[2:])
    want, mag = _exact_conv(feeds["x"], feeds["w"], feeds.get("b"), begin, end, out, strides,
                            dilations)
    model = _conv_model(feeds, attrs)
    ulps = _conv_ulps(feeds["w"], feeds.get("b"))
    got = ours(model, feeds)
    assert compiled == ["conv2d"], "the compiled kernel was not taken"
    assert_close_to_exact(got, [want], ulps=ulps, scale=mag)
    monkeypatch.setenv("ONEMODEL_PURE_PYTHON", "1")  # the numpy path, within the same bound
    assert not ckernels.enabled()
    got = ours(model, feeds)
    assert compiled == ["conv2d"], "the compiled kernel ran with ONEMODEL_PURE_PYTHON=1"
    assert_close_to_exact(got, [want], ulps=ulps, scale=mag)


@needs_c
@pytest.mark.parametrize("case", list(CASES))
def test_conv2d_direct_is_within_the_bound_of_exact(case, compiled):
    xs, ws, bias, attrs = CASES[case]
    feeds = _conv_feeds(xs, ws, bias)
    x, w, b = feeds["x"], feeds["w"], feeds.get("b")
    begin, end, out, strides, dilations = _geometry(attrs, xs[2:], ws[2:])
    want, mag = _exact_conv(x, w, b, begin, end, out, strides, dilations)
    y = ckernels.conv2d(x, w, b, begin, out, strides, dilations)
    assert y is not None and compiled == ["conv2d"]
    assert y.dtype == np.float32 and y.flags.c_contiguous
    assert_close_to_exact(y, want, ulps=_conv_ulps(w, b), scale=mag)


def _best_ms(f, runs: int = 5) -> float:
    import time
    f()
    best = math.inf
    for _ in range(runs):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best * 1e3


@needs_c
def test_conv2d_tall_narrow_output_is_not_slower_than_its_transpose():
    # magika's Conv: a [5, 1] kernel over [512, 1]. Its 16-column register tiles computed 8
    # columns to keep 1 (121 ms against numpy's 9 ms); computed transposed it takes what the
    # wide convolution takes. Generous bound (machines differ, others share them): 3x.
    x = RNG.standard_normal((1, 64, 512, 1)).astype(np.float32)
    w = RNG.standard_normal((128, 64, 5, 1)).astype(np.float32)
    xt = np.ascontiguousarray(x.transpose(0, 1, 3, 2))
    wt = np.ascontiguousarray(w.transpose(0, 1, 3, 2))
    tall = _best_ms(lambda: ckernels.conv2d(x, w, None, [0, 0], [508, 1], [1, 1], [1, 1]))
    wide = _best_ms(lambda: ckernels.conv2d(xt, wt, None, [0, 0], [1, 508], [1, 1], [1, 1]))
    assert tall <= 3 * wide + 1.0, (tall, wide)
    y = ckernels.conv2d(x, w, None, [0, 0], [508, 1], [1, 1], [1, 1])
    want, mag = _exact_conv(x, w, None, [0, 0], [0, 0], [508, 1], [1, 1], [1, 1])
    assert y.shape == (1, 128, 508, 1) and y.flags.c_contiguous
    assert_close_to_exact(y, want, ulps=_conv_ulps(w, None), scale=mag)


@needs_c
@pytest.mark.parametrize("attrs", [{"pads": [1, 2, 1, 0]}, {"strides": [2, 1]},
                                   {"auto_pad": "SAME_LOWER", "dilations": [1, 2]}])
def test_conv_float16_is_widened_to_float32(attrs, compiled, monkeypatch):
    feeds = _conv_feeds((2, 3, 7, 18), (6, 3, 3, 3), True, np.float16)
    begin, end, out, strides, dilations = _geometry(attrs, (7, 18), (3, 3))
    want, mag = _exact_conv(feeds["x"], feeds["w"], feeds["b"], begin, end, out, strides,
                            dilations)
    # the float32 result (within 28 ulps of EPS32 * |terms|) rounded once to float16: at most
    # half a float16 ulp, 2^-11 relative, or 2^-25 in float16's subnormal range
    err32 = 28 * EPS32 * mag
    bound = 2.0 ** -11 * (np.abs(want) + err32) + err32 + 2.0 ** -25
    model = _conv_model(feeds, attrs)
    for pure in (False, True):
        if pure:
            monkeypatch.setenv("ONEMODEL_PURE_PYTHON", "1")
        (got,) = ours(model, feeds)
        assert compiled == ["conv2d"]  # once, without ONEMODEL_PURE_PYTHON
        assert got.dtype == np.float16 and got.shape == want.shape
        err = np.abs(got.astype(np.float64) - want)
        assert np.all(err <= bound), f"pure={pure}: {(err / bound).max():.3g} x the bound"


@needs_c
def test_conv_1x1_kernel_is_left_to_blas(compiled):
    """A 1x1 kernel is one matrix product (ckernels.conv2d returns None for it)."""
    feeds = _conv_feeds((2, 8, 5, 6), (4, 8, 1, 1), True)
    want, mag = _exact_conv(feeds["x"], feeds["w"], feeds["b"], [0, 0], [0, 0], [5, 6], [1, 1],
                            [1, 1])
    assert ckernels.conv2d(feeds["x"], feeds["w"], feeds["b"], [0, 0], [5, 6], [1, 1],
                           [1, 1]) is None
    got = ours(_conv_model(feeds, {}), feeds)
    assert compiled == []
    assert_close_to_exact(got, [want], ulps=9, scale=mag)


@needs_c
@pytest.mark.parametrize("case", ["width13", "m7", "stride3_pads", "dilation13", "1d",
                                  "strides23", "sw3_pl1", "1d_stride4_dilation3", "crop_end",
                                  "no_bias"])
def test_conv2d_relu_is_max_of_the_result_and_zero_bitwise(case):
    xs, ws, bias, attrs = CASES[case]
    feeds = _conv_feeds(xs, ws, bias)
    x, w, b = feeds["x"], feeds["w"], feeds.get("b")
    begin, _end, out, strides, dilations = _geometry(attrs, xs[2:], ws[2:])
    y = ckernels.conv2d(x, w, b, begin, out, strides, dilations)
    r = ckernels.conv2d(x, w, b, begin, out, strides, dilations, relu=True)
    assert (y < 0).any() and (y > 0).any()  # both sides of the clamp
    np.testing.assert_array_equal(r.view(np.uint32), np.maximum(y, np.float32(0)).view(np.uint32))


@needs_c
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("where", [(0, 1, 0, 0), (1, 0, 4, 9), (0, 2, 7, 17), (1, 1, 3, 0)])
def test_conv2d_nan_reaches_every_output_whose_window_holds_it(where, relu):
    x = RNG.standard_normal((2, 3, 8, 18)).astype(np.float32)
    w = RNG.standard_normal((7, 3, 3, 3)).astype(np.float32)
    w[:, :, 1, 1] = 0  # NaN * 0 is NaN: a zero weight does not stop it
    b = np.full(7, -100.0, np.float32)  # every finite output below 0: relu gives 0 there
    x[where] = np.nan
    begin, end, out, strides, dilations = [2, 1], [0, 1], [8, 18], [1, 1], [1, 1]
    y = ckernels.conv2d(x, w, b, begin, out, strides, dilations, relu=relu)
    want, _ = _exact_conv(x, w, b, begin, end, out, strides, dilations)
    # output (oy, ox) reads input rows oy - 2 .. oy and columns ox - 1 .. ox + 1: the NaN at
    # (r, c) reaches oy in [r, r + 2], ox in [c - 1, c + 1], every output channel of its sample
    n, _, r, c = where
    reached = np.zeros(y.shape, bool)
    reached[n, :, r:r + 3, max(c - 1, 0):c + 2] = True
    np.testing.assert_array_equal(np.isnan(want), reached)  # the float64 oracle agrees
    np.testing.assert_array_equal(np.isnan(y), reached)
    if relu:
        assert np.all(y[~reached] == 0)
    else:
        assert np.all(y[~reached] < 0)


# -- exp_rows ----------------------------------------------------------------------------------
LENGTHS = list(range(1, 21)) + [127, 128, 129]


def _ulp_ratio(got, exact):
    """|got - exact| in ulps of float32 at the float32-rounded exact value (np.spacing; the
    subnormal spacing 2^-149 in the subnormal range)."""
    sp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / sp


def _rows(n):
    """float32 rows of length n whose difference to their maximum is exact in float32, so that
    exp(a - max) in float64 is the exact result of the kernel's float32 subtraction and exp:

    * on a grid of 2^-16, max in [-8, 8], a - max spanning [-110, 0] (all multiples of 2^-16 of
      magnitude below 2^8 are float32);
    * max 0 and a arbitrary float32 in [-110, 0], of every magnitude (1e-30 to 110);
    * max 0, a in [-105, -85]: results subnormal, or 0 below 2^-150."""
    grid = 2.0 ** -16
    m = np.round(RNG.uniform(-8, 8) / grid) * grid
    d = np.round(RNG.uniform(-110, 0, n) / grid) * grid
    d[RNG.integers(n)] = 0
    rows = [m + d]
    r = -np.exp(RNG.uniform(np.log(1e-30), np.log(110), n))
    r[RNG.integers(n)] = 0
    rows.append(r)
    s = RNG.uniform(-105, -85, n)
    s[:3] = [0, -95, -104.5][:n]  # the maximum, a subnormal result, a result rounded to 0
    RNG.shuffle(s)
    rows.append(s)
    a = np.array(rows).astype(np.float32)
    assert np.array_equal(a.astype(np.float64) - a.max(1, keepdims=True),
                          (a - a.max(1, keepdims=True)).astype(np.float64))
    return a


def _sum_bound(n, total):
    """The row sum: 8 lane sums of ceil(n/8) terms, then the 8 lanes added in turn, at most
    ceil(n/8) + 6 roundings of u on a path, each at most u times the (positive) sum; plus the
    elements' own errors, 1 ulp (<= EPS32 of each value, 2^-149 in the subnormal range)."""
    return ((math.ceil(n / 8) + 6) * U + 2 * EPS32) * total + n * TINY


@needs_c
@pytest.mark.parametrize("n", LENGTHS)
def test_exp_rows_within_one_ulp_and_sums_within_bound(n, compiled):
    a = _rows(n)
    exact = np.exp(a.astype(np.float64) - a.max(1, keepdims=True))
    out = np.full_like(a, np.nan)
    res = ckernels.exp_rows(a, out)
    assert res is not None and compiled == ["exp_rows"]
    got, sums = res
    assert got is out and sums.dtype == np.float32 and sums.shape == (3,)
    ratio = _ulp_ratio(got, exact)
    assert ratio.max() <= 1, f"{ratio.max():.4g} ulps at {a.flat[ratio.argmax()]!r}"
    if n >= 3:  # the third row reaches the subnormal range, and below it
        assert ((exact[2] < 2.0 ** -126) & (got[2] > 0)).any() and (got[2] == 0).any()
    total = exact.sum(1)
    assert np.all(np.abs(sums - total) <= _sum_bound(n, total))


@needs_c
@pytest.mark.parametrize("n", [7, 8, 9, 129])
def test_exp_rows_of_any_shift_is_exp_of_the_float32_difference(n):
    """Where a - max is rounded in float32 (the operator's arithmetic), the exponential is
    within 1 ulp of exp of that float32 difference."""
    a = (RNG.standard_normal((6, n)) * 30 + RNG.uniform(-1e3, 1e3, (6, 1))).astype(np.float32)
    got, _ = ckernels.exp_rows(a, np.empty_like(a))
    diff = (a - a.max(1, keepdims=True)).astype(np.float64)
    assert _ulp_ratio(got, np.exp(diff)).max() <= 1


def _fused() -> bool:
    """Whether the kernels in use compute with fused multiply-adds (the x86-64-v3/v4 clones on
    CPUs with FMA; the baseline clone does not): a conv2d of two taps whose sum is
    -(1 + 2^-11) + (1 + 2^-12)^2 = 2^-24 with the product exact, 0 with it rounded to even."""
    if C is None:
        return False
    t = 1 + 2.0 ** -12
    y = np.zeros(1, np.float32)
    C.conv2d(np.array([-(1 + 2.0 ** -11), t], np.float32), np.array([1, t], np.float32), None,
             y, (1, 1, 1, 2, 1, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1), False)
    assert y[0] in (0, 2.0 ** -24)
    return bool(y[0] != 0)


@needs_c
def test_exp_rows_at_its_worst_inputs_within_the_stated_ulps():
    """The 14 float32 in [-110, 0] (of all 1.1e9) where the FMA clones' exp is more than 1 ulp
    off (found by an exhaustive run), at most 1.0103 (-5.8778844); the baseline clone stays
    within 0.982 there. ckernels states 1.02 ulps; each row shifts by its maximum 0."""
    bad = np.array([-5.8365803, -5.837175, -5.849531, -5.8515363, -5.8540945, -5.8737726,
                    -5.8752837, -5.8778844, -38.41421, -38.450424, -59.918983, -59.92188,
                    -59.94479, -71.03603, 0.0], np.float32)
    got, _ = ckernels.exp_rows(bad, np.empty_like(bad))
    ratio = _ulp_ratio(got, np.exp(bad.astype(np.float64)))
    bound = 1.011 if _fused() else 1.0
    assert ratio.max() <= bound, f"{ratio.max():.4g} ulps at {bad[ratio.argmax()]!r}"


@needs_c
@pytest.mark.parametrize("n", [3, 8, 13])
def test_exp_rows_nan_and_infinite_rows(n):
    a = RNG.standard_normal((6, n)).astype(np.float32)
    a[0, n // 2] = np.nan          # NaN: the whole row NaN
    a[1, n - 1] = np.inf           # maximum +inf: inf - inf is NaN there, the others 0
    a[2] = -np.inf                 # maximum -inf: -inf - -inf is NaN everywhere
    a[3, :n - 1] = -np.inf         # -inf below a finite maximum: exp gives 0
    a[4, 0] = -np.inf
    got, sums = ckernels.exp_rows(a, np.empty_like(a))
    assert np.isnan(got[0]).all() and np.isnan(sums[0])
    assert np.isnan(got[1, n - 1]) and np.all(got[1, :n - 1] == 0) and np.isnan(sums[1])
    assert np.isnan(got[2]).all() and np.isnan(sums[2])
    assert np.all(got[3, :n - 1] == 0) and got[3, n - 1] == 1 and sums[3] == 1
    assert got[4, 0] == 0 and np.isfinite(got[4:]).all() and np.isfinite(sums[4:]).all()
    diff = (a[4:] - a[4:].max(1, keepdims=True)).astype(np.float64)  # rounded in float32
    assert _ulp_ratio(got[4:], np.exp(diff)).max() <= 1
    # the numpy formula exp(a - max(a)) has NaN in the same places
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(np.exp(a - a.max(1, keepdims=True))))


@needs_c
@pytest.mark.parametrize("shape", [(4, 9), (2, 3, 17), (129,), (0, 5)])
def test_exp_rows_in_place_equals_out_of_place(shape):
    a = RNG.uniform(-40, 5, shape).astype(np.float32)
    want, want_sums = ckernels.exp_rows(a, np.empty_like(a))
    b = a.copy()
    got, sums = ckernels.exp_rows(b, b)
    assert got is b and sums.shape == shape[:-1]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(sums, want_sums)


@needs_c
def test_exp_rows_leaves_other_inputs_to_numpy(compiled, monkeypatch):
    a = RNG.standard_normal((4, 10)).astype(np.float32)
    ro = np.empty_like(a)
    ro.flags.writeable = False
    for x, out in [(a[:, ::2], np.empty((4, 5), np.float32)),   # not contiguous
                   (a, np.empty((4, 10), np.float32)[:, ::-1]),  # out not contiguous
                   (a.astype(np.float64), np.empty((4, 10))),     # float64
                   (a.astype(np.float16), np.empty((4, 10), np.float16)),
                   (np.empty((3, 0), np.float32), np.empty((3, 0), np.float32)),  # empty rows
                   (a, ro),                                        # read-only out
                   (a, np.empty((4, 9), np.float32)),              # another shape
                   (a, np.empty((4, 10)))]:                        # out float64
        assert ckernels.exp_rows(x, out) is None
    monkeypatch.setenv("ONEMODEL_PURE_PYTHON", "1")
    assert ckernels.exp_rows(a, np.empty_like(a)) is None
    assert ckernels.conv2d(np.ones((1, 1, 3, 3), np.float32), np.ones((1, 1, 2, 2), np.float32),
                           None, [0, 0], [2, 2], [1, 1], [1, 1]) is None
    assert compiled == []


def _softmax_exact(x):
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@needs_c
@pytest.mark.parametrize("shape", [(5, 1), (3, 7), (2, 4, 16), (3, 129), (2, 1000)])
@pytest.mark.parametrize("pure", [False, True])
def test_softmax_operator_within_bound_of_float64(shape, pure, compiled, monkeypatch):
    if pure:
        monkeypatch.setenv("ONEMODEL_PURE_PYTHON", "1")
    x = (RNG.standard_normal(shape) * 10).clip(-30, 30).astype(np.float32)
    n, spread = shape[-1], float(x.max() - x.min())
    (got,) = ours(node_model("Softmax", {"x": x}, ["x"], ["y"]), {"x": x})
    assert compiled == ([] if pure else ["exp_rows"])
    # relative to each probability: the float32 difference to the shift (the row's maximum, or
    # the tensor's on the numpy path) rounded, u * spread; the exponential, 3 ulps (numpy's
    # float32 exp may be a SIMD approximation; the compiled one is within 1); the row sum, at
    # most n roundings of u plus its terms' errors; the division, u: in ulps of EPS32 = 2u
    ulps = spread / 2 + n / 2 + 3 + 3 + 1
    exact = _softmax_exact(x)
    assert_close_to_exact(got, exact, ulps=ulps, scale=exact)


@needs_c
@pytest.mark.parametrize("pure", [False, True])
def test_softmax_operator_nan_and_infinite_rows(pure, monkeypatch):
    if pure:
        monkeypatch.setenv("ONEMODEL_PURE_PYTHON", "1")
    x = RNG.standard_normal((4, 9)).astype(np.float32)
    x[0, 3] = np.nan
    x[1, 8] = np.inf
    x[2] = -np.inf
    x[3, :4] = -np.inf
    (got,) = ours(node_model("Softmax", {"x": x}, ["x"], ["y"]), {"x": x})
    assert np.isnan(got[:3]).all()  # NaN, +inf and all -inf rows: NaN throughout
    assert np.all(got[3, :4] == 0)
    exact = _softmax_exact(x[3:])
    spread = float(x[3, 4:].max() - x[3, 4:].min())  # as in the test above, n = 9
    assert_close_to_exact(got[3:], exact, ulps=spread / 2 + 9 / 2 + 7, scale=exact)


# -- the raw functions refuse bad arguments ----------------------------------------------------
def _f(n):
    return np.zeros(n, np.float32)


#: conv2d of x [1, 2, 4, 5], w [3, 2, 2, 2], b [3], y [1, 3, 3, 4]
DIMS = (1, 2, 4, 5, 3, 2, 2, 0, 0, 3, 4, 1, 1, 1, 1)


def _dims(**changes):
    names = ("N", "C", "H", "W", "M", "KH", "KW", "pt", "pl", "OH", "OW", "sh", "sw", "dh", "dw")
    return tuple(changes.get(k, v) for k, v in zip(names, DIMS))


def _readonly(n):
    a = _f(n)
    a.flags.writeable = False
    return a


@needs_c
@pytest.mark.parametrize("sw", [1, 2, 3])
def test_raw_conv2d_with_good_arguments_computes(sw):
    x = RNG.standard_normal(40).astype(np.float32)
    w = RNG.standard_normal(24).astype(np.float32)
    b = RNG.standard_normal(3).astype(np.float32)
    ow = (5 - 2) // sw + 1
    y = _f(9 * ow)
    assert C.conv2d(x, w, b, y, _dims(sw=sw, OW=ow), False) is None
    want, mag = _exact_conv(x.reshape(1, 2, 4, 5), w.reshape(3, 2, 2, 2), b, [0, 0], [0, 0],
                            [3, ow], [1, sw], [1, 1])
    assert_close_to_exact(y.reshape(1, 3, 3, ow), want, ulps=9, scale=mag)


@needs_c
@pytest.mark.parametrize("args, error", [
    ((_f(39), _f(24), _f(3), _f(36), DIMS, False), ValueError),           # x one short
    ((_f(40), _f(25), _f(3), _f(36), DIMS, False), ValueError),           # w one long
    ((_f(40), _f(24), _f(2), _f(36), DIMS, False), ValueError),           # b
    ((_f(40), _f(24), None, _f(37), DIMS, False), ValueError),            # y
    ((np.zeros(40), _f(24), None, _f(36), DIMS, False), ValueError),      # float64 x
    ((_f(40), np.zeros(24), None, _f(36), DIMS, False), ValueError),      # float64 w
    ((_f(40), _f(24), np.zeros(3), _f(36), DIMS, False), ValueError),     # float64 b
    ((_f(40), _f(24), None, np.zeros(36), DIMS, False), ValueError),      # float64 y
    ((_f(40), _f(24), None, np.zeros(36, np.int32), DIMS, False), ValueError),  # int32 y
    ((_f(40), _f(24), None, _f(36).astype(">f4"), DIMS, False), ValueError),    # byte order
    ((_f(40), _f(24), None, _readonly(36), DIMS, False), ValueError),     # read-only y
    ((_f(80)[::2], _f(24), None, _f(36), DIMS, False), ValueError),       # strided x
    ((bytes(160), _f(24), None, _f(36), DIMS, False), ValueError),        # bytes x
    ((_f(40), _f(24), None, _f(36), DIMS[:14], False), TypeError),        # 14 dims
    ((_f(40), _f(24), None, _f(36), DIMS + (1,), False), TypeError),      # 16 dims
    ((_f(40), _f(24), None, _f(36), list(DIMS), False), TypeError),       # a list
    ((_f(40), _f(24), None, _f(36), _dims(H=4.0), False), TypeError),     # a float
    ((_f(40), _f(24), None, _f(36), _dims(N=-1), False), ValueError),
    ((_f(40), _f(24), None, _f(36), _dims(C=0), False), ValueError),
    ((_f(40), _f(24), None, _f(36), _dims(OW=-4), False), ValueError),
    ((_f(40), _f(24), None, _f(36), _dims(pt=-1), False), ValueError),    # negative pad
    ((_f(40), _f(24), None, _f(36), _dims(dh=0), False), ValueError),
    ((_f(40), _f(24), None, _f(36), _dims(sh=-2), False), ValueError),
    ((_f(40), _f(24), None, _f(36), _dims(sw=2, OW=2), False), ValueError),  # y for sw 1
    ((_f(40), _f(24), None, _f(36), _dims(sw=0), False), ValueError),
    ((_f(40), _f(24), None, _f(36), _dims(H=2 ** 41), False), ValueError),   # above 2^40
    ((_f(40), _f(24), None, _f(36), _dims(N=2 ** 63), False), OverflowError),
    ((_f(40), _f(24), None, _f(36), DIMS), TypeError),                    # 5 arguments
])
def test_raw_conv2d_refuses_bad_arguments(args, error):
    with pytest.raises(error):
        C.conv2d(*args)


@needs_c
@pytest.mark.parametrize("args, error", [
    ((_f(12), _f(12), _f(3), 3, 4), None),                                 # good
    ((_f(11), _f(12), _f(3), 3, 4), ValueError),                           # a short
    ((_f(12), _f(13), _f(3), 3, 4), ValueError),                           # out long
    ((_f(12), _f(12), _f(2), 3, 4), ValueError),                           # sums
    ((np.zeros(12), _f(12), _f(3), 3, 4), ValueError),                     # float64 a
    ((_f(12), np.zeros(12), _f(3), 3, 4), ValueError),                     # float64 out
    ((_f(12), _f(12), np.zeros(3), 3, 4), ValueError),                     # float64 sums
    ((_f(12), _readonly(12), _f(3), 3, 4), ValueError),                    # read-only out
    ((_f(12), _f(12), _readonly(3), 3, 4), ValueError),                    # read-only sums
    ((_f(24)[::2], _f(12), _f(3), 3, 4), ValueError),                      # strided a
    ((_f(12), _f(12), _f(3), -3, 4), ValueError),                          # negative rows
    ((_f(12), _f(12), _f(3), 3, -4), ValueError),                          # negative n
    ((_f(0), _f(0), _f(3), 3, 0), ValueError),                             # n 0
    ((_f(12), _f(12), _f(3), 2 ** 30, 2 ** 30), ValueError),               # above 2^40
    ((_f(12), _f(12), _f(3), 3.0, 4), TypeError),
    ((_f(12), _f(12), _f(3), 3), TypeError),                               # 4 arguments
])
def test_raw_exp_rows_refuses_bad_arguments(args, error):
    if error is None:
        assert C.exp_rows(*args) is None
        np.testing.assert_array_equal(args[1], np.ones(12, np.float32))  # exp(0 - 0)
        np.testing.assert_array_equal(args[2], np.full(3, 4, np.float32))
        return
    with pytest.raises(error):
        C.exp_rows(*args)


@needs_c
@pytest.mark.parametrize("changes", [
    {"C": 2 ** 32, "H": 2 ** 32},                 # C * H = 2^64
    {"M": 2 ** 32, "OH": 2 ** 32},                # M * OH = 2^64
    {"OH": 2 ** 32 + 2, "sh": 2 ** 32 - 1},       # the padded height (OH - 1) * sh + 1 = 2^64
    {"OW": 2 ** 32 + 2, "sw": 2 ** 32 - 1},       # the padded width likewise
    {"KH": 2 ** 32 + 1, "dh": 2 ** 32},           # (KH - 1) * dh = 2^64
    {"C": 2 ** 24, "H": 2 ** 40, "N": 2},         # N * C * H = 2^65
])
def test_raw_conv2d_refuses_dims_whose_products_wrap(changes):
    """All dims within [1, 2^40] but products of them wrapping in 64 bits, small buffers: a
    ValueError (sizes too large), never the wrapped product's division by zero (SIGFPE) or
    wrong sizes; run in a subprocess so that a crash fails the test only."""
    dims = _dims(**{"H": 1, "W": 1, "KH": 1, "KW": 1, "OH": 1, "OW": 1, **changes})
    code = textwrap.dedent(f"""
        import numpy as np
        from onemodel.evaluate.ckernels import _C
        f = np.zeros(64, np.float32)
        try:
            _C.conv2d(f, f, None, np.zeros(64, np.float32), {dims!r}, False)
        except ValueError as exc:
            print("ValueError", exc)
        """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("ValueError"), \
        f"exit {proc.returncode}: {proc.stdout}{proc.stderr}"


# -- the same refusals on both paths -------------------------------------------------------------
def _run_error(model, feeds):
    from onemodel.errors import EvaluationError

    with pytest.raises(EvaluationError) as info:
        ours(model, feeds)
    return info.value.message


@pytest.mark.parametrize("pure", [False, True])
@pytest.mark.parametrize("x_shape, attrs, extents", [
    ((1, 2, 1, 1), {}, "[-1, -1]"),                                  # 1x1 image, 3x3 kernel
    ((1, 2, 2, 9), {}, "[0, 7]"),                                    # 2 rows for 3 kernel rows
    ((1, 2, 5, 5), {"dilations": [1, 1000000000]}, "[3, -1999999995]"),
])
def test_a_window_that_does_not_fit_is_refused_before_either_path(pure, x_shape, attrs,
                                                                   extents, monkeypatch):
    if pure:
        monkeypatch.setenv("ONEMODEL_PURE_PYTHON", "1")
    feeds = {"x": np.ones(x_shape, np.float32), "w": np.ones((4, 2, 3, 3), np.float32)}
    message = _run_error(node_model("Conv", feeds, ["x", "w"], ["y"], **attrs), feeds)
    assert f"the window does not fit: output extents {extents}" in message


@pytest.mark.parametrize("pure", [False, True])
def test_a_conv_bias_of_another_length_is_refused_alike(pure, monkeypatch):
    if pure:
        monkeypatch.setenv("ONEMODEL_PURE_PYTHON", "1")
    feeds = {"x": np.ones((1, 2, 5, 5), np.float32), "w": np.ones((4, 2, 3, 3), np.float32),
             "b": np.ones(3, np.float32)}
    message = _run_error(node_model("Conv", feeds, ["x", "w", "b"], ["y"]), feeds)
    assert "Conv bias of shape [3] is not [4]" in message


@needs_c
def test_layer_norm_with_a_scale_that_does_not_broadcast_takes_the_numpy_path():
    w = np.ones((3, 4), np.float32)
    # 4 elements, but [4, 1] does not broadcast to the normalized shape [4]
    assert ckernels.layer_norm(w, np.ones((4, 1), np.float32), None, 1, 1e-5) is None
    assert ckernels.layer_norm(w, np.ones(4, np.float32), None, 1, 1e-5) is not None


def test_why_the_kernels_are_not_in_use_is_said_plainly():
    """Without the built module the reason names the build, not Python's import machinery."""
    code = textwrap.dedent("""
        import sys
        sys.modules["onemodel.evaluate._ckernels"] = None  # as if it had not been built
        from onemodel.evaluate import ckernels
        print(ckernels._C is None, ckernels.C_ERROR)
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.startswith("True onemodel/evaluate/_ckernels.c was not built at install"), out


# -- attention -----------------------------------------------------------------------------------
def _attention64(q, k, v):
    s = np.einsum("hmd,hnd->hmn", q.astype(np.float64), k.astype(np.float64))
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return p @ v.astype(np.float64), p


@needs_c
@pytest.mark.parametrize("m, d, n, dv", [
    (1, 1, 1, 1), (3, 4, 7, 3), (5, 16, 33, 17), (2, 3, 1, 8), (4, 64, 20, 128),
    (7, 16, 128, 16), (2, 5, 9, 9), (1, 2, 200, 24),
])
def test_attention_within_the_bound_of_float64(m, d, n, dv):
    """Scores sum d products (d roundings of |q| |k|, which a probability's relative error
    doubles, the shift cancelling), exp within 1.02 ulp, n roundings of the row sum and of the
    products with v, and the division: the bound of tests/evaluate/test_fusion.py."""
    q = (RNG.standard_normal((3, m, d)) * 2).astype(np.float32)
    k = (RNG.standard_normal((3, n, d)) * 2).astype(np.float32)
    v = RNG.standard_normal((3, n, dv)).astype(np.float32)
    # through the wrapper: b is k transposed, [heads, d, n], a view as attention's k usually is
    got = ckernels.attention(q, np.swapaxes(k, -1, -2), v)
    want, p = _attention64(q, k, v)
    ds = (d * EPS32 * np.einsum("hmd,hnd->hmn", np.abs(q).astype(np.float64),
                                np.abs(k).astype(np.float64))).max()
    bound = (2 * ds + (4 + 2 * n) * EPS32) * (p @ np.abs(v).astype(np.float64))
    assert got.dtype == np.float32 and got.shape == want.shape
    assert np.all(np.abs(got - want) <= bound + 1e-30)


@needs_c
def test_attention_of_rows_with_nan_and_infinities():
    q = np.ones((1, 4, 2), np.float32)
    k = np.ones((1, 5, 2), np.float32)
    v = RNG.standard_normal((1, 5, 3)).astype(np.float32)
    q[0, 1, 0] = np.nan                      # a NaN score row: NaN out
    k[0, 2, 1] = np.inf                      # +inf scores in every row: inf - inf is NaN
    got = ckernels.attention(q, np.swapaxes(k, -1, -2), v)
    assert np.isnan(got).all()
    k[0, 2, 1] = -np.inf                     # -inf scores: probability 0 there
    q[0, 1, 0] = 1
    got = ckernels.attention(q, np.swapaxes(k, -1, -2), v)
    keep = [0, 1, 3, 4]
    np.testing.assert_allclose(got[0], np.broadcast_to(v[0, keep].mean(0), (4, 3)), rtol=1e-6)


@needs_c
def test_attention_declines_what_it_does_not_compute():
    q = np.ones((2, 3, 4), np.float32)
    kt = np.ones((2, 4, 5), np.float32)
    assert ckernels.attention(q, kt, np.ones((2, 5, 129), np.float32)) is None  # dv > 128
    assert ckernels.attention(q.astype(np.float64), kt, np.ones((2, 5, 6))) is None
    assert ckernels.attention(q, kt, np.ones((1, 5, 6), np.float32)) is None   # broadcast
    assert ckernels.attention(q[:, :0], kt, np.ones((2, 5, 6), np.float32)) is None  # empty
    assert ckernels.attention(q[0], kt[0], np.ones((5, 6), np.float32)) is None  # 2-D


@needs_c
@pytest.mark.parametrize("args, error", [
    (lambda f: (f(2, 3, 4), f(2, 4, 5), f(2, 5, 3), f(2, 3, 3), None, None), None),
    (lambda f: (f(2, 3, 4), f(2, 4, 5), f(2, 5, 3), f(2, 3, 3), 0.5, 2.0), None),
    (lambda f: (f(3, 4), f(4, 5), f(5, 3), f(3, 3), None, None), ValueError),      # 2-D
    (lambda f: (f(2, 3, 4), f(2, 3, 5), f(2, 5, 3), f(2, 3, 3), None, None), ValueError),  # d
    (lambda f: (f(2, 3, 4), f(1, 4, 5), f(2, 5, 3), f(2, 3, 3), None, None), ValueError),
    (lambda f: (f(2, 3, 4), f(2, 4, 5), f(2, 5, 3), f(2, 3, 2), None, None), ValueError),  # out
    (lambda f: (f(2, 3, 4), f(2, 4, 0), f(2, 0, 3), f(2, 3, 3), None, None), ValueError),  # n 0
    (lambda f: (f(2, 3, 4), f(2, 4, 5), f(2, 5, 129), f(2, 3, 129), None, None), ValueError),
    (lambda f: (f(2, 3, 4).astype(np.float64), f(2, 4, 5), f(2, 5, 3), f(2, 3, 3), None, None),
     ValueError),
    (lambda f: (f(2, 3, 4), f(2, 4, 5), f(2, 5, 3), f(2, 3, 3), "x", None), TypeError),
    (lambda f: (f(2, 3, 4), f(2, 4, 5), f(2, 5, 3), f(2, 3, 3)), TypeError),
])
def test_raw_attention_refuses_bad_arguments(args, error):
    a = args(lambda *shape: np.ones(shape, np.float32))
    if error is None:
        assert C.attention(*a) is None
        np.testing.assert_allclose(a[3], 1.0, rtol=1e-6)  # the mean of equal values
        return
    with pytest.raises(error):
        C.attention(*a)


@needs_c
@pytest.mark.parametrize("layout", ["packed", "views", "reversed"])
def test_attention_reads_views_and_scales_as_mul_rounds(layout):
    """Strided operands read in place (a Transpose's views of [batch, seq, heads, d], and
    negative strides) give the values of their packed copies; scale_a / scale_b give the values
    of the chain on the Mul nodes' float32 products (equal bits: each product rounded once)."""
    base = (RNG.standard_normal((2, 9, 3, 8)) * 2).astype(np.float32)
    q = base.transpose(0, 2, 1, 3)                                   # [2, 3, 9, 8]
    kt = RNG.standard_normal((2, 11, 3, 8)).astype(np.float32).transpose(0, 2, 3, 1)
    v = RNG.standard_normal((2, 11, 3, 5)).astype(np.float32).transpose(0, 2, 1, 3)
    if layout == "packed":
        q, kt, v = (np.ascontiguousarray(x) for x in (q, kt, v))
    elif layout == "reversed":
        q, kt, v = q[:, ::-1], kt[..., ::-1], v[::-1, :, ::-1]
    packed = [np.ascontiguousarray(x) for x in (q, kt, v)]
    np.testing.assert_array_equal(ckernels.attention(q, kt, v), ckernels.attention(*packed))
    sa, sb = np.float32(0.35355339), np.float32(1.7)
    want = ckernels.attention(packed[0] * sa, packed[1] * sb, packed[2])
    np.testing.assert_array_equal(ckernels.attention(q, kt, v, float(sa), float(sb)), want)
    exact, _ = _attention64((q * sa).reshape(6, 9, 8), np.swapaxes(kt * sb, -1, -2).reshape(
        6, 11, 8), v.reshape(6, 11, 5))
    np.testing.assert_allclose(want.reshape(6, 9, 5), exact, rtol=1e-4, atol=1e-5)


# -- bias_relu -----------------------------------------------------------------------------------
@needs_c
@pytest.mark.parametrize("shape", [(1,), (7,), (3, 8), (5, 17), (2, 3, 33)])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("relu", [True, False])
def test_bias_relu_is_numpy_s_add_and_maximum(shape, with_bias, relu):
    """One float32 addition and a maximum per element: the same IEEE results as numpy's (exact
    by construction; no sum of several terms), the 8-lane body and the scalar tail alike."""
    x = (RNG.standard_normal(shape) * 3).astype(np.float32)
    x.flat[::5] = -0.0
    x.flat[1::7] = np.nan
    x.flat[2::11] = -np.inf
    bias = RNG.standard_normal(shape[-1]).astype(np.float32) if with_bias else None
    want = x + bias if with_bias else x.copy()
    if relu:
        want = np.maximum(want, np.zeros((), np.float32))
    got = ckernels.bias_relu(x, bias, relu)
    assert got is not x and got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))  # -0 -> +0 under Relu, kept else
    same = x.copy()
    assert ckernels.bias_relu(same, bias, relu, out=same) is same  # in place
    np.testing.assert_array_equal(same, want)


@needs_c
def test_bias_relu_bias_of_leading_ones_and_what_it_declines():
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    b = RNG.standard_normal((1, 6)).astype(np.float32)
    np.testing.assert_array_equal(ckernels.bias_relu(x, b, False), x + b)
    assert ckernels.bias_relu(x, b[:, :1], False) is None                  # broadcast [1, 1]
    assert ckernels.bias_relu(x, np.ones((4, 6), np.float32), False) is None  # not along rows
    assert ckernels.bias_relu(x.T, None, True) is None                     # not packed
    assert ckernels.bias_relu(x.astype(np.float64), None, True) is None
    assert ckernels.bias_relu(x, b.astype(np.float64), False) is None
    assert ckernels.bias_relu(np.float32(1.0) * np.ones((), np.float32), None, True) is None
    assert ckernels.bias_relu(x, None, True, out=x.copy()) is None         # out is x or None


@needs_c
@pytest.mark.parametrize("args, error", [
    (lambda f: (f(12), f(4), f(12), 3, 4, True), None),
    (lambda f: (f(12), f(3), f(12), 3, 4, True), ValueError),   # bias too short
    (lambda f: (f(12), None, f(11), 3, 4, False), ValueError),  # y too short
    (lambda f: (f(12), None, f(12), 3, 0, False), ValueError),  # n = 0
    (lambda f: (f(12), None, f(12), 2 ** 40, 2 ** 40, False), ValueError),
    (lambda f: (f(12), None, f(12), 3, 4), TypeError),
])
def test_raw_bias_relu_refuses_bad_arguments(args, error):
    a = args(lambda size: np.ones(size, np.float32))
    if error is None:
        assert C.bias_relu(*a) is None
        np.testing.assert_array_equal(a[2], 2.0)
        return
    with pytest.raises(error):
        C.bias_relu(*a)


def test_relu_operator_equals_numpy_maximum(monkeypatch):
    """The Relu operator (compiled for float32 where built, numpy else): max(x, 0) with NaN kept
    and -0 made +0, through both paths."""
    x = RNG.standard_normal((3, 11)).astype(np.float32)
    x[0, :3] = [-0.0, np.nan, -np.inf]
    feeds = {"x": x}
    model = node_model("Relu", feeds, ["x"], ["y"], opset=14)
    want = np.maximum(x, np.zeros((), np.float32))
    for pure in ("0", "1"):
        monkeypatch.setenv("ONEMODEL_PURE_PYTHON", pure)
        (y,) = ours(model, feeds)
        np.testing.assert_array_equal(y, want)
        assert np.array_equal(np.signbit(y), np.signbit(want))


@needs_c
@pytest.mark.parametrize("layout, packed_after", [((2, 0, 1, 3), True), ((1, 0, 2, 3), True),
                                                  ((0, 1, 3, 2), False), ((0, 1), False)])
def test_attention_lays_its_result_out_for_the_transpose_after_it(layout, packed_after):
    """With ``layout`` (a Transpose's perm keeping the last axis last) the result holds the same
    values, laid out so that the Transpose's view is packed; any other permutation is ignored
    (a C-contiguous result)."""
    q = RNG.standard_normal((2, 3, 5, 4)).astype(np.float32)
    kt = RNG.standard_normal((2, 3, 4, 7)).astype(np.float32)
    v = RNG.standard_normal((2, 3, 7, 6)).astype(np.float32)
    got = ckernels.attention(q, kt, v, layout=layout)
    np.testing.assert_array_equal(got, ckernels.attention(q, kt, v))
    if packed_after:
        assert got.transpose(layout).flags.c_contiguous and not got.flags.c_contiguous
    else:
        assert got.flags.c_contiguous


@needs_c
@pytest.mark.parametrize("m, d, n, dv", [(5, 4, 7, 1), (1, 4, 7, 3), (5, 1, 7, 3), (5, 4, 1, 3),
                                         (1, 1, 1, 1)])
def test_attention_views_and_layouts_with_axes_of_one(m, d, n, dv):
    """Axes of size 1 in views and in a laid-out result (numpy's buffer export gives such an
    axis an arbitrary stride, which the kernel never uses): the values of packed operands
    (a trial found dv = 1 under a Transpose refused)."""
    q = RNG.standard_normal((m, 3, d)).astype(np.float32).transpose(1, 0, 2)
    kt = RNG.standard_normal((n, 3, d)).astype(np.float32).transpose(1, 2, 0)
    v = RNG.standard_normal((n, 3, dv)).astype(np.float32).transpose(1, 0, 2)
    want = ckernels.attention(*(np.ascontiguousarray(x) for x in (q, kt, v)))
    np.testing.assert_array_equal(ckernels.attention(q, kt, v), want)
    got = ckernels.attention(q, kt, v, layout=(1, 0, 2))
    np.testing.assert_array_equal(got, want)
    exact, _ = _attention64(q, np.swapaxes(kt, -1, -2), v)
    np.testing.assert_allclose(want, exact, rtol=1e-5, atol=1e-6)


@needs_c
@pytest.mark.parametrize("spread", [5.0, 80.0, 200.0, "-inf"])
@pytest.mark.parametrize("n", [13, 64, 128])
def test_attention_probabilities_are_exp_rows_over_their_sum_bit_for_bit(spread, n):
    """With d = 1 and q = 1 the scores are k's values exactly, and with v the identity the
    result is the probabilities themselves (each a sum of one product by 1 and zeros): they are
    the exponentials exp_rows gives, divided by exp_rows' row sum, rounded as Softmax (numpy's
    float32 division) rounds them, whether every shifted score is within [-87, 0] (the kernel's
    path without exp's subnormal handling) or not (spreads of 200, a -inf score)."""
    k = (RNG.uniform(-1, 0, (1, 1, n)) * (200.0 if spread == "-inf" else spread)).astype(np.float32)
    if spread == "-inf":
        k[0, 0, 3] = -np.inf
    q = np.ones((1, 4, 1), np.float32)
    got = ckernels.attention(q, k, np.eye(n, dtype=np.float32)[None])
    row = np.ascontiguousarray(k[0, 0])
    e, sums = np.empty_like(row), np.empty(1, np.float32)
    C.exp_rows(row, e, sums, 1, n)
    want = e / sums[0]
    for i in range(4):
        np.testing.assert_array_equal(got[0, i], want)


@needs_c
@pytest.mark.parametrize("n", [8, 13, 64, 130])
def test_exp_rows_without_and_with_subnormal_handling_give_the_same_bits(n):
    """A row whose shifted values all lie in [-87, 0] takes the exponentials without exp8's
    subnormal handling; the same values next to one of -200 (which needs it) get the same bits
    (the shift, the row maximum, is the same)."""
    x = RNG.uniform(-86, 0, n).astype(np.float32)
    x[0] = 0.0
    rows = np.stack([np.append(x, np.float32(-1.0)), np.append(x, np.float32(-200.0))])
    out, sums = np.empty_like(rows), np.empty(2, np.float32)
    C.exp_rows(rows, out, sums, 2, n + 1)
    np.testing.assert_array_equal(out[0, :n], out[1, :n])
    assert out[1, n] == np.float32(np.exp(np.float64(-200.0)))  # 0: below the subnormals


# -- sigmoid -----------------------------------------------------------------------------------
@needs_c
@pytest.mark.parametrize("n", [1, 7, 8, 9, 100, 4099])
def test_sigmoid_within_three_ulps_of_float64(n):
    # exp(-|x|) within 1 ulp, then 1 + e and one division rounded: 3 ulps of the result,
    # down to the subnormal range (x to -110) and saturating to 1 above
    x = np.concatenate([RNG.uniform(-110, 30, n), RNG.standard_normal(n) * 4]).astype(np.float32)
    y = ckernels.sigmoid(x)
    assert y.dtype == np.float32 and y.shape == x.shape
    x64 = x.astype(np.float64)
    exact = np.where(x64 >= 0, 1 / (1 + np.exp(-x64)), np.exp(x64) / (1 + np.exp(x64)))
    assert _ulp_ratio(y, exact).max() <= 3
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 88.0, -88.0, -104.0], np.float32)
    got = ckernels.sigmoid(sp)
    assert got[:4].tolist() == [0.5, 0.5, 1.0, 0.0] and np.isnan(got[4])
    assert got[5] == 1.0 and 0 < got[6] < 1e-38 and got[7] == 0.0  # exp(-104) rounds to 0


@needs_c
def test_sigmoid_operator_takes_the_compiled_pass_and_pure_python_agrees(monkeypatch):
    x = (RNG.standard_normal((3, 257)) * 6).astype(np.float32)
    model = node_model("Sigmoid", {"x": x}, ["x"], ["y"], opset=13)
    calls = []
    real = C.sigmoid
    monkeypatch.setattr(C, "sigmoid", lambda *a: calls.append(1) or real(*a))
    (got,) = ours(model, {"x": x})
    assert calls == [1]
    monkeypatch.setenv("ONEMODEL_PURE_PYTHON", "1")
    (pure,) = ours(model, {"x": x})
    assert calls == [1]
    exact = 1 / (1 + np.exp(-x.astype(np.float64)))
    assert _ulp_ratio(got, exact).max() <= 3 and _ulp_ratio(pure, exact).max() <= 3


@needs_c
def test_raw_sigmoid_refuses_bad_arguments():
    with pytest.raises(TypeError):
        C.sigmoid(_f(4), _f(4))
    with pytest.raises(ValueError):
        C.sigmoid(_f(4), _f(4), -1)
    with pytest.raises(ValueError):
        C.sigmoid(_f(3), _f(4), 4)  # x too short
    with pytest.raises((ValueError, TypeError, BufferError)):
        C.sigmoid(_f(4), _readonly(4), 4)
    y = _f(4)
    C.sigmoid(np.zeros(4, np.float32), y, 4)
    assert y.tolist() == [0.5] * 4


# -- dwconv2d ------------------------------------------------------------------------------------
DW_CASES = {
    "3x3_pad1": ((2, 5, 9, 20), (3, 3), {"pads": [1, 1, 1, 1]}),
    "5x5_stride2": ((1, 7, 17, 23), (5, 5), {"strides": [2, 2], "pads": [2, 2, 2, 2]}),
    "stride_w3_dilation2": ((1, 3, 11, 30), (3, 3),
                            {"strides": [1, 3], "dilations": [2, 2], "pads": [0, 1, 2, 0]}),
    "narrow_rows": ((1, 4, 3, 5), (3, 3), {"pads": [1, 1, 1, 1]}),  # OH < 6, OW < 8
    "tall_1x1_output": ((1, 2, 40, 3), (3, 3), {}),
    "crop_end": ((1, 3, 8, 9), (3, 3), {"pads": [1, 1, -1, -2]}),
    "same_upper": ((1, 6, 10, 13), (4, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    "1d": ((2, 4, 37), (5,), {"pads": [2, 2], "strides": [2]}),
}


def _exact_depthwise(x, w, b, begin, end, out, strides, dilations):
    """The depthwise Conv in float64: each channel as a Conv of one channel."""
    parts = [_exact_conv(x[:, c:c + 1], w[c:c + 1], None if b is None else b[c:c + 1], begin,
                         end, out, strides, dilations) for c in range(x.shape[1])]
    return (np.concatenate([p[0] for p in parts], axis=1),
            np.concatenate([p[1] for p in parts], axis=1))


@needs_c
@pytest.mark.parametrize("case", list(DW_CASES))
def test_depthwise_conv_is_within_the_bound_of_exact(case, monkeypatch):
    xs, k, attrs = DW_CASES[case]
    ch = xs[1]
    feeds = {"x": RNG.standard_normal(xs).astype(np.float32),
             "w": RNG.standard_normal((ch, 1) + k).astype(np.float32),
             "b": RNG.standard_normal(ch).astype(np.float32)}
    begin, end, out, strides, dilations = _geometry(attrs, xs[2:], k)
    want, mag = _exact_depthwise(feeds["x"], feeds["w"], feeds["b"], begin, end, out,
                                 strides, dilations)
    ulps = math.prod(k) + 1  # R products and the bias, as _conv_ulps
    calls = []
    real = C.dwconv2d
    monkeypatch.setattr(C, "dwconv2d", lambda *a: calls.append(1) or real(*a))
    model = _conv_model(feeds, {**attrs, "group": ch})
    got = ours(model, feeds)
    assert calls == [1], "the compiled kernel was not taken"
    assert_close_to_exact(got, [want], ulps=ulps, scale=mag)
    # directly, with relu: max(y, 0) of the same sums
    y = ckernels.dwconv2d(feeds["x"], feeds["w"], feeds["b"], begin, out, strides, dilations)
    r = ckernels.dwconv2d(feeds["x"], feeds["w"], feeds["b"], begin, out, strides, dilations,
                          relu=True)
    assert y.flags.c_contiguous and y.shape == want.shape
    np.testing.assert_array_equal(r, np.maximum(y, np.float32(0)))
    monkeypatch.setenv("ONEMODEL_PURE_PYTHON", "1")  # the numpy path, within the same bound
    got = ours(model, feeds)
    assert calls == [1, 1, 1]
    assert_close_to_exact(got, [want], ulps=ulps, scale=mag)


@needs_c
def test_depthwise_conv_declines_what_it_does_not_compute():
    x = RNG.standard_normal((1, 4, 6, 6)).astype(np.float32)
    w = RNG.standard_normal((8, 1, 3, 3)).astype(np.float32)  # multiplier 2
    assert ckernels.dwconv2d(x, w, None, [0, 0], [4, 4], [1, 1], [1, 1]) is None
    assert ckernels.dwconv2d(x.astype(np.float64), w[:4].astype(np.float64), None, [0, 0],
                             [4, 4], [1, 1], [1, 1]) is None
    with pytest.raises(ValueError):
        C.dwconv2d(x, w, None, np.empty((1, 8, 4, 4), np.float32),
                   (1, 4, 6, 6, 8, 3, 3, 0, 0, 4, 4, 1, 1, 1, 1), False)  # M != C
    with pytest.raises(ValueError):
        C.dwconv2d(x, w[:4], None, np.empty((1, 4, 4, 4), np.float32),
                   (1, 4, 6, 6, 4, 3, 3, 0, 0, 4, 0, 1, 1, 1, 1), False)  # OW 0
    with pytest.raises(TypeError):
        C.dwconv2d(x, w[:4], None, np.empty((1, 4, 4, 4), np.float32), (1, 4), False)


@needs_c
@pytest.mark.parametrize("case", ["width3", "width13", "stride2", "pair_4x4_stride2",
                                  "rows2_7x5_odd", "tall_5x1_width1", "1d"])
def test_conv2d_silu_is_the_sigmoid_kernel_then_the_product_bitwise(case):
    xs, ws, bias, attrs = CASES[case]
    feeds = _conv_feeds(xs, ws, bias)
    x, w, b = feeds["x"], feeds["w"], feeds.get("b")
    begin, _, out, strides, dilations = _geometry(attrs, xs[2:], ws[2:])
    y = ckernels.conv2d(x, w, b, begin, out, strides, dilations)
    s = ckernels.conv2d(x, w, b, begin, out, strides, dilations, silu=True)
    np.testing.assert_array_equal(s.view(np.uint32), (y * ckernels.sigmoid(y)).view(np.uint32))
    # the depthwise kernel alike, on one channel and its filter
    xd, wd = np.ascontiguousarray(x[:, :1]), np.ascontiguousarray(w[:1, :1])
    yd = ckernels.dwconv2d(xd, wd, None, begin, out, strides, dilations)
    sd = ckernels.dwconv2d(xd, wd, None, begin, out, strides, dilations, silu=True)
    np.testing.assert_array_equal(sd.view(np.uint32),
                                  (yd * ckernels.sigmoid(yd)).view(np.uint32))


@needs_c
def test_raw_conv_activation_codes():
    x, w = _f(16).reshape(1, 1, 4, 4), _f(9).reshape(1, 1, 3, 3)
    dims = (1, 1, 4, 4, 1, 3, 3, 0, 0, 2, 2, 1, 1, 1, 1)
    for fn in (C.conv2d, C.dwconv2d):
        with pytest.raises(ValueError, match="activation 3"):
            fn(x, w, None, np.empty((1, 1, 2, 2), np.float32), dims, 3)
        with pytest.raises(TypeError):
            fn(x, w, None, np.empty((1, 1, 2, 2), np.float32), dims, "relu")
