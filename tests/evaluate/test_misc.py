"""Kernels of the random, signal and text families (onemodel/evaluate/kernels/random.py,
signal.py, text.py), LRN (norm.py) and Col2Im (conv.py) against onnxruntime, the onnx reference
evaluator, numpy and hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
from exact_misc import lrn
from oracle import assert_close_to_exact, assert_outputs, node_model, ort, ours, reference

from onemodel.errors import EvaluationError

RNG = np.random.default_rng(13)


@pytest.mark.parametrize("opset", [7, 10, 12, 13, 22])
def test_dropout_inference_is_identity_with_true_mask(opset):
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    model = node_model("Dropout", {"x": x}, ["x"], ["y", "mask"], opset=opset, ir_version=8)
    y, mask = ours(model, {"x": x})
    np.testing.assert_array_equal(y, x)
    assert mask.all() and mask.shape == x.shape
    if opset >= 10:
        assert mask.dtype == np.bool_


def test_dropout_training_mode_scales_kept_values_and_seed_repeats():
    x = np.ones((200, 50), np.float32)
    feeds = {"x": x, "r": np.array(0.25, np.float32), "t": np.array(True)}
    model = node_model("Dropout", feeds, ["x", "r", "t"], ["y", "mask"], opset=13, seed=3)
    y, mask = ours(model, feeds)
    np.testing.assert_allclose(y[mask], 1 / 0.75)
    assert (y[~mask] == 0).all()
    assert 0.2 < 1 - mask.mean() < 0.3
    y2, _ = ours(model, feeds)
    np.testing.assert_array_equal(y, y2)


@pytest.mark.parametrize("size", [1, 3, 4, 5])
def test_lrn_against_exact(size):
    x = RNG.standard_normal((2, 6, 3, 3)).astype(np.float32)
    model = node_model("LRN", {"x": x}, ["x"], ["y"], opset=13, size=size, alpha=0.01,
                       beta=0.6, bias=1.5)
    (got,) = ours(model, {"x": x})
    # exact: the definition in float64 with the attributes' stored float32 values. In float32
    # the denominator's base b = bias + alpha / size * (sum of <= size squares) is a sum of
    # positive terms: size squares, size - 1 sums, 2 roundings of the scaling and 1 of the
    # bias, (2 size + 2) u relative; pow turns it into beta times that plus its own 2 ulps,
    # the division adds u: (beta (2 size + 2) + 5) u < (size + 4) ulps of |y| (EPS32 = 2u)
    exact = lrn(x, size=size, alpha=float(np.float32(0.01)), beta=float(np.float32(0.6)),
                bias=1.5)
    assert_close_to_exact(got, exact, ulps=size + 4, scale=np.abs(exact))


def test_lrn_even_size_window_by_hand():
    # size 4: channel c sums the squares of channels c-1 .. c+2 (ONNX LRN formula)
    x = RNG.standard_normal((1, 5, 2)).astype(np.float32)
    model = node_model("LRN", {"x": x}, ["x"], ["y"], opset=13, size=4, alpha=0.4, beta=0.5)
    (y,) = ours(model, {"x": x})
    sq = x.astype(np.float64) ** 2
    want = np.stack([x[:, c] / (1 + 0.1 * sq[:, max(0, c - 1):c + 3].sum(1)) ** 0.5
                     for c in range(5)], axis=1)
    np.testing.assert_allclose(y, want, rtol=1e-6)


def test_random_generators_shapes_types_ranges_and_seeds():
    x = np.zeros((40, 30), np.float64)
    model = node_model("RandomUniformLike", {"x": x}, ["x"], ["y"], opset=22, low=2.0, high=3.0,
                       seed=1.0)
    (a,) = ours(model, {"x": x})
    (b,) = ours(model, {"x": x})
    assert a.dtype == np.float64 and a.shape == x.shape and (a >= 2).all() and (a < 3).all()
    np.testing.assert_array_equal(a, b)
    model = node_model("RandomNormal", {}, [], ["y"], opset=22, shape=[2000], mean=5.0,
                       scale=0.1, seed=2.0)
    (n,) = ours(model, {})
    assert n.dtype == np.float32 and abs(n.mean() - 5) < 0.02 and abs(n.std() - 0.1) < 0.02
    p = np.array([[0.0, 1.0, 0.0, 1.0]], np.float32)
    model = node_model("Bernoulli", {"p": p}, ["p"], ["y"], opset=22)
    (bern,) = ours(model, {"p": p})
    np.testing.assert_array_equal(bern, p)
    logits = np.log(np.array([[1e-9, 1.0, 1e-9], [1.0, 1e-9, 1e-9]], np.float32))
    model = node_model("Multinomial", {"x": logits}, ["x"], ["y"], opset=22, sample_size=5,
                       seed=4.0)
    (draws,) = ours(model, {"x": logits})
    assert draws.dtype == np.int32
    np.testing.assert_array_equal(draws, [[1] * 5, [0] * 5])


@pytest.mark.parametrize("op_type", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows_match_reference(op_type, periodic):
    feeds = {"n": np.array(10, np.int64)}
    model = node_model(op_type, feeds, ["n"], ["y"], opset=17, periodic=periodic)
    assert_outputs(ours(model, feeds), reference(model, feeds), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("inverse, onesided, length", [(0, 0, None), (0, 1, None), (1, 0, None),
                                                       (0, 0, 12), (1, 1, None)])
def test_dft_matches_numpy(inverse, onesided, length):
    x = RNG.standard_normal((2, 8, 3, 2 if inverse else 1)).astype(np.float32)
    feeds = {"x": x}
    ins = ["x"]
    if length is not None:
        feeds["n"] = np.array(length, np.int64)
        ins.append("n")
    else:
        ins.append("")
    feeds["a"] = np.array(1, np.int64)
    ins.append("a")
    model = node_model("DFT", feeds, ins, ["y"], opset=20, inverse=inverse, onesided=onesided)
    (y,) = ours(model, feeds)
    c = x[..., 0] + (1j * x[..., 1] if inverse else 0)
    if inverse and onesided:
        want = np.fft.irfft(c, axis=1)[..., None]
    else:
        want = (np.fft.ifft if inverse else np.fft.fft)(c, n=length, axis=1)
        if onesided:
            want = want[:, :want.shape[1] // 2 + 1]
        want = np.stack([want.real, want.imag], -1)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)


def test_stft_and_mel_weight_matrix_match_reference():
    signal = RNG.standard_normal((2, 64, 1)).astype(np.float32)
    feeds = {"s": signal, "step": np.array(8, np.int64),
             "w": np.hanning(16).astype(np.float32)}
    model = node_model("STFT", feeds, ["s", "step", "w"], ["y"], opset=17)
    (y,) = ours(model, feeds)
    assert y.shape == (2, 7, 9, 2)
    assert_outputs([y], reference(model, feeds), rtol=1e-4, atol=1e-4)
    feeds = {"bins": np.array(8, np.int32), "dft": np.array(64, np.int32),
             "rate": np.array(16000, np.int32), "lo": np.array(100, np.float32),
             "hi": np.array(7000, np.float32)}
    model = node_model("MelWeightMatrix", feeds, ["bins", "dft", "rate", "lo", "hi"], ["y"],
                       opset=17)
    (mel,) = ours(model, feeds)
    assert mel.shape == (33, 8) and mel.max() == 1.0
    assert_outputs([mel], reference(model, feeds))


def test_string_operators_match_reference():
    words = np.array(["Monday", "tuesday", "WEDNESDAY", "monday"], object)
    for attrs in ({"case_change_action": "LOWER", "stopwords": ["monday"]},
                  {"case_change_action": "UPPER", "stopwords": ["monday"],
                   "is_case_sensitive": 1},
                  {"stopwords": ["Monday", "tuesday", "WEDNESDAY", "monday"]}):
        model = node_model("StringNormalizer", {"x": words}, ["x"], ["y"], opset=10, **attrs)
        assert_outputs(ours(model, {"x": words}), reference(model, {"x": words}))
    feeds = {"a": np.array([["a", "b"], ["c", "d"]], object), "b": np.array(["1", "2"], object)}
    model = node_model("StringConcat", feeds, ["a", "b"], ["y"], opset=20)
    (y,) = ours(model, feeds)
    assert y.tolist() == [["a1", "b2"], ["c1", "d2"]]
    text = np.array(["a,b,,c", "  x  y ", ""], object)
    for attrs in ({"delimiter": ","}, {}, {"delimiter": ",", "maxsplit": 1}):
        model = node_model("StringSplit", {"x": text}, ["x"], ["y", "z"], opset=20, **attrs)
        assert_outputs(ours(model, {"x": text}), reference(model, {"x": text}))
    emails = np.array(["a@b.com", "nope", "x.y@z.org"], object)
    model = node_model("RegexFullMatch", {"x": emails}, ["x"], ["y"], opset=20,
                       pattern=r"[\w.]+@\w+\.(com|org)")
    (m,) = ours(model, {"x": emails})
    assert m.tolist() == [True, False, True]


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("skip", [0, 2])
def test_tfidf_vectorizer_matches_onnxruntime(mode, skip):
    x = np.array([[1, 1, 3, 3, 3, 7], [8, 6, 7, 5, 6, 8]], np.int32)
    model = node_model("TfIdfVectorizer", {"x": x}, ["x"], ["y"], opset=9, mode=mode,
                       min_gram_length=1, max_gram_length=2, max_skip_count=skip,
                       ngram_counts=[0, 4], ngram_indexes=[0, 1, 2, 3, 4, 5, 6],
                       pool_int64s=[2, 3, 5, 4, 5, 6, 7, 8, 6, 7],
                       weights=[1.0, 0.5, 2.0, 1.0, 3.0, 1.5, 0.25])
    assert_outputs(ours(model, {"x": x}), ort(model, {"x": x},
        relies_on="TfIdfVectorizer counts n-grams (integers) and scales them by weights that are "
                  "dyadic fractions: exact"))


def test_col2im_matches_reference():
    x = RNG.standard_normal((1, 2 * 4, 9)).astype(np.float32)
    feeds = {"x": x, "img": np.array([5, 6], np.int64), "blk": np.array([2, 2], np.int64)}
    model = node_model("Col2Im", feeds, ["x", "img", "blk"], ["y"], opset=18,
                       strides=[2, 2], pads=[1, 0, 0, 1], dilations=[1, 2])
    (y,) = ours(model, feeds)
    assert y.shape == (1, 2, 5, 6)
    assert_outputs([y], reference(model, feeds), rtol=1e-5)


@pytest.mark.parametrize("opset,axis,along", [(17, -2, 2), (17, -3, 1), (17, 1, 1),
                                              (20, -2, 2), (20, -4, 0)])
def test_dft_negative_axis_counts_from_the_back_of_the_whole_input(opset, axis, along):
    """DFT-17's axis attribute and DFT-20's input both take [-r, -2] and [0, r-2], r the rank
    of the input with its real/imaginary axis: -2 is the last signal axis (the definitions'
    text; onnx.reference's DFT_17 takes axis % r too). Compared with numpy's float64 FFT."""
    x = RNG.standard_normal((2, 4, 6, 1)).astype(np.float32)
    feeds, ins, attrs = {"x": x}, ["x"], {}
    if opset == 17:
        attrs["axis"] = axis
    else:
        feeds["a"] = np.array(axis, np.int64)
        ins += ["", "a"]
    model = node_model("DFT", feeds, ins, ["y"], opset=opset, **attrs)
    (y,) = ours(model, feeds)
    want = np.fft.fft(x[..., 0].astype(np.float64), axis=along)
    np.testing.assert_allclose(y, np.stack([want.real, want.imag], -1), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opset", [17, 20])
def test_dft_axis_minus_one_is_the_complex_axis_and_refused(opset):
    x = np.zeros((2, 4, 1), np.float32)
    feeds, ins, attrs = {"x": x}, ["x"], {}
    if opset == 17:
        attrs["axis"] = -1
    else:
        feeds["a"] = np.array(-1, np.int64)
        ins += ["", "a"]
    with pytest.raises(EvaluationError, match="DFT axis -1 does not name a signal axis"):
        ours(node_model("DFT", feeds, ins, ["y"], opset=opset, **attrs), feeds)
