"""The com.microsoft fused operators (onemodel/evaluate/kernels/ms_fused.py) against onnxruntime
and against float64 computations of their definitions.

onnxruntime runs each node on the CPU provider with graph optimizations off and one thread (so
it runs the contrib kernel itself, not a rewrite). Its float32 kernels round differently from
ours (MLAS's erf and tanh are polynomial approximations within a few ulps; its normalizations
accumulate row statistics in another order, Welford's method for SkipLayerNormalization), so
float32 outputs are compared with rtol 1e-4 and atol 1e-5: two float32 results of the same
formula over at most a few hundred terms agree far within that, and a wrong formula (a missing
term, a wrong epsilon, a wrong axis) misses it by orders of magnitude. Where the definition is a
short formula, ours is also held to the float64 value of that formula within a bound stated at
the test. Integer outputs (mask_index) are compared exactly. float16 outputs within 2 ulps of
float16 (rtol and atol 2e-3): each side rounds its float32 result to float16 once.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from oracle import node_model, ours

import onemodel
from onemodel.errors import EvaluationError, UnsupportedError
from onemodel.evaluate import run
from tests.infer.harness import sound

MS = "com.microsoft"
RNG = np.random.default_rng(2026)
F32 = dict(rtol=1e-4, atol=1e-5)
F16 = dict(rtol=2e-3, atol=2e-3)


def f32(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def ms_model(op_type, feeds, inputs, outputs, **attrs):
    """One com.microsoft node (com.microsoft 1, ai.onnx 21)."""
    return node_model(op_type, feeds, inputs, outputs, opset=1, domain=MS, **attrs)


def ort_run(model: onnx.ModelProto, feeds: dict) -> list:
    """onnxruntime's outputs: CPU provider, optimizations off, one thread (module doc)."""
    import onnxruntime

    so = onnxruntime.SessionOptions()
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    sess = onnxruntime.InferenceSession(model.SerializeToString(), so,
                                        providers=["CPUExecutionProvider"])
    return sess.run(None, _inputs(model, feeds))


def _inputs(model, feeds: dict) -> dict:
    names = {i.name for i in model.graph.input}
    return {k: v for k, v in feeds.items() if k in names}


def ours_of(model, feeds: dict) -> list:
    """onemodel's outputs on the feeds that are graph inputs."""
    return ours(model, _inputs(model, feeds))


def inferred_soundly(model, feeds: dict) -> None:
    """The inference rules (onemodel/inference/rules/ms_fused.py) give every output the element
    type and extents the evaluator computes, without a contradiction."""
    assert sound(onemodel.load(model.SerializeToString()), feeds=[_inputs(model, feeds)]) > 0


def against_ort(model, feeds, tol=F32) -> list:
    """Our outputs, each asserted equal to onnxruntime's in dtype and shape and within ``tol``
    (module doc), and inferred soundly; returns ours."""
    inferred_soundly(model, feeds)
    got, want = ours_of(model, feeds), ort_run(model, feeds)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, (i, g.dtype, g.shape, w.dtype, w.shape)
        if w.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w, err_msg=f"output {i}")
        else:
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64),
                                       err_msg=f"output {i}", **tol)
    return got


def gelu64(x):
    x = x.astype(np.float64)
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def tanh_gelu64(x):
    x = x.astype(np.float64)
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def layer_norm64(s, gamma, beta, eps):
    s = s.astype(np.float64)
    mean = s.mean(-1, keepdims=True)
    inv = 1 / np.sqrt(((s - mean) ** 2).mean(-1, keepdims=True) + eps)
    y = (s - mean) * inv * gamma.astype(np.float64)
    return (y if beta is None else y + beta), mean, inv


# -- activations ---------------------------------------------------------------------------
# A float32 Gelu is within a few ulps of the float64 formula: rtol 1e-6 of |x| (the erf or
# tanh, one product and one sum round a handful of times) bounds it; onnxruntime by F32.


def test_gelu_is_the_erf_gelu():
    x = np.concatenate([f32(2, 3, 16, scale=3), np.array([[[-9, -0.0, 0, 1e-8, 9] * 3 + [40]]] *
                                                          3, np.float32).reshape(1, 3, 16)])
    feeds = {"x": x}
    (got,) = against_ort(ms_model("Gelu", feeds, ["x"], ["y"]), feeds)
    np.testing.assert_allclose(got, gelu64(x), rtol=0, atol=1e-6 * (1 + np.abs(x)).max())


@pytest.mark.parametrize("with_bias", [False, True])
def test_fast_gelu_is_the_tanh_gelu_of_x_plus_bias(with_bias):
    x, bias = f32(2, 5, 12, scale=2), f32(12)
    feeds = {"x": x, "bias": bias}
    model = ms_model("FastGelu", feeds, ["x", "bias"] if with_bias else ["x"], ["y"])
    (got,) = against_ort(model, feeds)
    v = x.astype(np.float64) + (bias if with_bias else 0)
    np.testing.assert_allclose(got, tanh_gelu64(v), rtol=0, atol=1e-6 * (1 + np.abs(v)).max())


def test_fast_gelu_float16_is_rounded_once():
    x, bias = f32(3, 8, scale=2).astype(np.float16), f32(8).astype(np.float16)
    feeds = {"x": x, "bias": bias}
    (got,) = ours_of(ms_model("FastGelu", feeds, ["x", "bias"], ["y"]), feeds)
    assert got.dtype == np.float16
    exact = tanh_gelu64(x.astype(np.float64) + bias)
    # float32 arithmetic then one rounding to float16: within one float16 ulp (2**-10 relative)
    np.testing.assert_allclose(got.astype(np.float64), exact, rtol=2 ** -10, atol=2 ** -24)


def test_bias_gelu_is_gelu_of_the_sum():
    a, b = f32(4, 3, 10, scale=2), f32(10)
    feeds = {"a": a, "b": b}
    (got,) = against_ort(ms_model("BiasGelu", feeds, ["a", "b"], ["c"]), feeds)
    v = a.astype(np.float64) + b
    np.testing.assert_allclose(got, gelu64(v), rtol=0, atol=1e-6 * (1 + np.abs(v)).max())
    bad = {"a": a, "b": f32(3)}
    with pytest.raises(EvaluationError, match="BiasGelu"):
        ours_of(ms_model("BiasGelu", bad, ["a", "b"], ["c"]), bad)


@pytest.mark.parametrize("op_type,inputs", [
    ("Gelu", ["x"]), ("FastGelu", ["x", "bias"]), ("BiasGelu", ["x", "bias"]),
    ("QuickGelu", ["x"]), ("FusedMatMul", ["x", "xt"]),
    ("SkipSimplifiedLayerNormalization", ["x", "skip", "gamma"])])
def test_float16_against_onnxruntime(op_type, inputs):
    x = f32(4, 16, scale=2)
    feeds = {k: v.astype(np.float16) for k, v in
             {"x": x, "xt": f32(16, 4), "bias": f32(16), "skip": f32(4, 16),
              "gamma": f32(16)}.items()}
    (got,) = against_ort(ms_model(op_type, feeds, inputs, ["y"]), feeds, F16)
    assert got.dtype == np.float16


def test_bias_add_adds_bias_then_skip():
    x, bias, skip = f32(2, 6, 4), f32(4), f32(2, 6, 4)
    feeds = {"x": x, "bias": bias, "skip": skip}
    # onnxruntime has BiasAdd for CUDA only. Two float32 additions in the definition's order
    # (each correctly rounded): exactly (x + bias) + skip
    model = ms_model("BiasAdd", feeds, ["x", "bias", "skip"], ["y"])
    inferred_soundly(model, feeds)
    (got,) = ours_of(model, feeds)
    np.testing.assert_array_equal(got, (x + bias) + skip)
    bad = dict(feeds, skip=skip[:1])
    with pytest.raises(EvaluationError, match="BiasAdd"):
        ours_of(ms_model("BiasAdd", bad, ["x", "bias", "skip"], ["y"]), bad)


# -- normalizations ------------------------------------------------------------------------

SKIP_CASES = [  # (input shape, skip shape, beta, bias)
    ((2, 3, 16), (2, 3, 16), True, True),
    ((2, 3, 16), (1, 3, 16), False, True),
    ((2, 3, 16), (3, 16), True, False),
    ((5, 16), (5, 16), False, False),
]


@pytest.mark.parametrize("shape,skip_shape,beta,bias", SKIP_CASES)
def test_skip_layer_normalization_every_output(shape, skip_shape, beta, bias):
    h = shape[-1]
    feeds = {"x": f32(*shape, scale=2), "skip": f32(*skip_shape), "gamma": f32(h),
             "beta": f32(h), "bias": f32(h)}
    inputs = ["x", "skip", "gamma", "beta" if beta else "", "bias" if bias else ""]
    model = ms_model("SkipLayerNormalization", feeds, inputs, ["y", "mean", "inv", "sum"],
                     epsilon=1e-5)
    y, mean, inv, total = against_ort(model, feeds)
    s = feeds["x"].astype(np.float64) + feeds["skip"] + (feeds["bias"] if bias else 0)
    y64, mean64, inv64 = layer_norm64(s, feeds["gamma"], feeds["beta"] if beta else None, 1e-5)
    # float32 statistics over 16 elements and a few roundings per element: 1e-5 of the row
    # scale (|y| is at most a few units here) bounds the error against the float64 values
    np.testing.assert_allclose(y, y64, rtol=0, atol=1e-5 * np.abs(y64).max())
    np.testing.assert_allclose(mean, mean64, rtol=0, atol=1e-6 * np.abs(s).max())
    np.testing.assert_allclose(inv, inv64, rtol=1e-5)
    np.testing.assert_allclose(total, s, rtol=1e-6, atol=1e-6)
    assert mean.shape == shape[:-1] + (1,) and mean.dtype == np.float32


def test_skip_layer_normalization_default_epsilon_and_only_the_first_output():
    feeds = {"x": f32(1, 4, 8), "skip": f32(1, 4, 8), "gamma": f32(8), "beta": f32(8)}
    against_ort(ms_model("SkipLayerNormalization", feeds, ["x", "skip", "gamma", "beta"],
                         ["y"]), feeds)


def test_skip_layer_normalization_float16():
    feeds = {k: v.astype(np.float16) for k, v in
             {"x": f32(2, 3, 32), "skip": f32(2, 3, 32), "gamma": f32(32), "beta": f32(32),
              "bias": f32(32)}.items()}
    model = ms_model("SkipLayerNormalization", feeds, ["x", "skip", "gamma", "beta", "bias"],
                     ["y", "mean", "inv", "sum"])
    got = against_ort(model, feeds, F16)
    assert [g.dtype for g in got] == [np.float16, np.float32, np.float32, np.float16]


@pytest.mark.parametrize("bias", [False, True])
def test_skip_simplified_layer_normalization(bias):
    feeds = {"x": f32(2, 4, 24), "skip": f32(2, 4, 24), "gamma": f32(24), "bias": f32(24)}
    inputs = ["x", "skip", "gamma"] + (["bias"] if bias else [])
    model = ms_model("SkipSimplifiedLayerNormalization", feeds, inputs,
                     ["y", "mean", "inv", "sum"], epsilon=1e-6)
    y, mean, inv, total = against_ort(model, feeds)
    s = feeds["x"].astype(np.float64) + feeds["skip"] + (feeds["bias"] if bias else 0)
    inv64 = 1 / np.sqrt((s * s).mean(-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(y, s * inv64 * feeds["gamma"], rtol=0,
                               atol=1e-5 * np.abs(s * inv64 * feeds["gamma"]).max())
    np.testing.assert_allclose(inv, inv64, rtol=1e-5)
    np.testing.assert_array_equal(mean, np.zeros((2, 4, 1), np.float32))


def test_skip_layer_normalization_refuses_other_ranks():
    feeds = {"x": f32(1, 2, 3, 8), "skip": f32(1, 2, 3, 8), "gamma": f32(8)}
    for op_type in ("SkipLayerNormalization", "SkipSimplifiedLayerNormalization"):
        with pytest.raises(EvaluationError, match="rank 4"):
            ours_of(ms_model(op_type, feeds, ["x", "skip", "gamma"], ["y"]), feeds)
    bad = {"x": f32(2, 3, 8), "skip": f32(2, 1, 8), "gamma": f32(8)}
    with pytest.raises(EvaluationError, match="skip"):
        ours_of(ms_model("SkipLayerNormalization", bad, ["x", "skip", "gamma"], ["y"]), bad)


def _as_default_domain(model):
    """The same node in the default domain, where onnxruntime 1.32 registers
    SimplifiedLayerNormalization (it has no com.microsoft kernel for it)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.graph.node[0].domain = ""
    return m


@pytest.mark.parametrize("shape,axis,scale_dtype", [
    ((2, 3, 16), -1, np.float32),
    ((2, 3, 4, 4), 2, np.float32),
    ((3, 8), -1, np.float16),        # Y in scale's element type
])
def test_simplified_layer_normalization(shape, axis, scale_dtype):
    scale = f32(*shape[axis:]).astype(scale_dtype)
    feeds = {"x": f32(*shape, scale=3), "scale": scale}
    model = _as_default_domain(ms_model("SimplifiedLayerNormalization", feeds, ["x", "scale"],
                                        ["y", "inv"], axis=axis))
    inferred_soundly(model, feeds)
    got = ours_of(model, feeds)
    want = ort_run(model, feeds)
    tol = F16 if scale_dtype == np.float16 else F32
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g.astype(np.float64), w, **tol)
    x = feeds["x"].astype(np.float64)
    axes = tuple(range(axis % len(shape), len(shape)))
    inv64 = 1 / np.sqrt((x * x).mean(axes, keepdims=True) + 1e-5)   # epsilon default 1e-5
    np.testing.assert_allclose(got[1], inv64, rtol=1e-5)


def _embed_feeds(b=2, s=5, h=16, vocab=11, positions=7, segments=2):
    return {"ids": RNG.integers(0, vocab, (b, s)).astype(np.int32),
            "seg": RNG.integers(0, segments, (b, s)).astype(np.int32),
            "word": f32(vocab, h), "pos": f32(positions, h), "segemb": f32(segments, h),
            "gamma": f32(h), "beta": f32(h),
            "mask": np.array([[1, 1, 1, 0, 0], [1, 2, 1, 1, 0]][:b], np.int32),
            "pids": RNG.integers(0, positions, (b, s)).astype(np.int32),
            "pids1": RNG.integers(0, positions, (1, s)).astype(np.int32)}


@pytest.mark.parametrize("segment,mask,pids", [
    (True, True, None), (False, False, None), (True, True, "pids"), (False, True, "pids1")])
def test_embed_layer_normalization(segment, mask, pids):
    feeds = _embed_feeds()
    inputs = ["ids", "seg" if segment else "", "word", "pos", "segemb" if segment else "",
              "gamma", "beta", "mask" if mask else ""] + ([pids] if pids else [])
    model = ms_model("EmbedLayerNormalization", feeds, inputs, ["y", "mask_index", "sum"])
    y, mask_index, total = against_ort(model, feeds)
    b, s = feeds["ids"].shape
    p = np.broadcast_to(feeds[pids] if pids else np.arange(s), (b, s))
    e = feeds["word"][feeds["ids"]] + feeds["pos"][p]
    if segment:
        e = e + feeds["segemb"][feeds["seg"]]
    np.testing.assert_allclose(total, e, rtol=1e-6, atol=1e-6)
    y64 = layer_norm64(e, feeds["gamma"], feeds["beta"], 1e-12)[0]
    np.testing.assert_allclose(y, y64, rtol=0, atol=1e-5 * np.abs(y64).max())
    # the number of mask elements equal to 1 per row (a 2 does not count), zeros without one
    np.testing.assert_array_equal(mask_index, [3, 3] if mask else [0, 0])


def test_embed_layer_normalization_refuses_an_index_outside_its_table():
    feeds = _embed_feeds()
    inputs = ["ids", "", "word", "pos", "", "gamma", "beta"]
    bad = dict(feeds, ids=np.full((2, 5), 11, np.int32))
    with pytest.raises(EvaluationError, match="word index"):
        ours_of(ms_model("EmbedLayerNormalization", bad, inputs, ["y"]), bad)
    short = dict(feeds, pos=feeds["pos"][:3])     # 5 positions, a table of 3
    with pytest.raises(EvaluationError, match="position index"):
        ours_of(ms_model("EmbedLayerNormalization", short, inputs, ["y"]), short)


# -- matrix products -----------------------------------------------------------------------


def _unfused(logical, batch, trans):
    """The stored operand whose FusedMatMul reading (transBatch, then trans) is ``logical``."""
    x = np.swapaxes(logical, -1, -2) if trans else logical
    return np.ascontiguousarray(np.moveaxis(x, x.ndim - 2, 0) if batch else x)


@pytest.mark.parametrize("rank", [2, 3, 4])
@pytest.mark.parametrize("flags", [(0, 0, 0, 0), (1, 0, 0, 0), (0, 1, 0, 0), (1, 1, 0, 0),
                                   (0, 0, 1, 0), (0, 0, 0, 1), (1, 0, 1, 1), (0, 1, 1, 1),
                                   (1, 1, 1, 1)])
def test_fused_matmul_transpositions_and_alpha(rank, flags):
    ta, tb, tba, tbb = flags
    batch = (2, 3)[: rank - 2]
    a, b = f32(*batch, 4, 5), f32(*batch, 5, 6)
    feeds = {"a": _unfused(a, tba, ta), "b": _unfused(b, tbb, tb)}
    model = ms_model("FusedMatMul", feeds, ["a", "b"], ["y"], alpha=0.375, transA=ta,
                     transB=tb, transBatchA=tba, transBatchB=tbb)
    if rank == 2 and (tba or tbb):   # onnxruntime refuses it too
        with pytest.raises(EvaluationError, match="transBatch"):
            ours_of(model, feeds)
        return
    (got,) = against_ort(model, feeds)
    exact = 0.375 * np.matmul(a.astype(np.float64), b)
    # 5-term float32 dot products and one scaling: 1e-6 of the sum of |terms|
    mag = 0.375 * np.matmul(np.abs(a).astype(np.float64), np.abs(b))
    assert np.all(np.abs(got - exact) <= 1e-6 * mag)


def test_fused_matmul_broadcasts_batches_and_defaults_to_alpha_one():
    feeds = {"a": f32(2, 1, 3, 4), "b": f32(5, 4, 2)}
    (got,) = against_ort(ms_model("FusedMatMul", feeds, ["a", "b"], ["y"]), feeds)
    assert got.shape == (2, 5, 3, 2)


def test_an_unknown_com_microsoft_operator_is_still_refused():
    feeds = {"x": f32(2, 3)}
    model = ms_model("NoSuchFusedOperator", feeds, ["x"], ["y"])
    with pytest.raises(UnsupportedError, match="NoSuchFusedOperator"):
        run(onemodel.load(model.SerializeToString()), feeds)


# -- convolutions, QuickGelu, Trilu --------------------------------------------------------

def _default_conv(x, w, b=None, **attrs):
    """onnxruntime's default-domain Conv of the same operands (the convolution FusedConv and
    NhwcConv compose with)."""
    feeds = {"x": x, "w": w, "b": b}
    inputs = ["x", "w"] + (["b"] if b is not None else [])
    return ort_run(node_model("Conv", feeds, inputs, ["y"], opset=21, **attrs), feeds)[0]


ACTIVATIONS = {  # name: (activation_params, float64 formula)
    "Relu": ([], lambda y: np.maximum(y, 0)),
    "Tanh": ([], np.tanh),
    "Sigmoid": ([], lambda y: 1 / (1 + np.exp(-y))),
    "LeakyRelu": ([0.125], lambda y: np.where(y >= 0, y, 0.125 * y)),
    "Clip": ([-0.5, 0.75], lambda y: np.clip(y, -0.5, 0.75)),
    "HardSigmoid": ([0.25, 0.375], lambda y: np.clip(0.25 * y + 0.375, 0, 1)),
    "HardSwish": ([], lambda y: y * np.clip(y / 6 + 0.5, 0, 1)),
}


@pytest.mark.parametrize("activation", [None, *ACTIVATIONS])
@pytest.mark.parametrize("with_z", [False, True])
def test_fused_conv_is_the_activation_of_conv_plus_z(activation, with_z):
    x, w, b = f32(2, 4, 6, 5), f32(6, 2, 3, 3), f32(6)
    conv_attrs = dict(group=2, pads=[1, 0, 1, 2], strides=[1, 2])
    y = _default_conv(x, w, b, **conv_attrs).astype(np.float64)
    z = f32(*y.shape)
    feeds = {"x": x, "w": w, "b": b, "z": z}
    attrs = dict(conv_attrs)
    if activation is not None:
        attrs["activation"] = activation
        if ACTIVATIONS[activation][0]:
            attrs["activation_params"] = ACTIVATIONS[activation][0]
    model = ms_model("FusedConv", feeds, ["x", "w", "b", "z"] if with_z else ["x", "w", "b"],
                     ["y"], **attrs)
    (got,) = against_ort(model, feeds)
    # against onnxruntime's own Conv followed by the float64 activation: the activations are
    # Lipschitz with constant at most 1, so F32 covers the float32 activation's rounding too
    pre = y + (z if with_z else 0)
    fn = ACTIVATIONS[activation][1] if activation else (lambda v: v)
    np.testing.assert_allclose(got, fn(pre), **F32)


def test_fused_conv_silu():
    # Silu (x * Sigmoid(x)) is in onnxruntime's later FusedConv activations, not in 1.32's:
    # against the float64 formula of onnxruntime's Conv, within F32
    x, w = f32(1, 2, 6, 6, scale=2), f32(3, 2, 3, 3)
    feeds = {"x": x, "w": w}
    (got,) = ours_of(ms_model("FusedConv", feeds, ["x", "w"], ["y"], activation="Silu"), feeds)
    y = _default_conv(x, w).astype(np.float64)
    np.testing.assert_allclose(got, y / (1 + np.exp(-y)), **F32)


def test_fused_conv_without_bias_one_and_three_spatial_axes():
    for x, w in ((f32(1, 3, 10), f32(2, 3, 3)), (f32(1, 2, 4, 5, 4), f32(3, 2, 2, 2, 2))):
        feeds = {"x": x, "w": w}
        against_ort(ms_model("FusedConv", feeds, ["x", "w"], ["y"], activation="Relu",
                             auto_pad="SAME_UPPER"), feeds)


def test_fused_conv_refuses_an_activation_it_does_not_define():
    feeds = {"x": f32(1, 2, 5, 5), "w": f32(2, 2, 3, 3)}
    for attrs in (dict(activation="Elu"), dict(activation="LeakyRelu"),
                  dict(activation="Clip", activation_params=[0.0])):
        with pytest.raises(UnsupportedError, match="activation"):
            ours_of(ms_model("FusedConv", feeds, ["x", "w"], ["y"], **attrs), feeds)
    bad = dict(feeds, z=f32(1, 1, 3, 3))
    with pytest.raises(EvaluationError, match="Z"):
        ours_of(ms_model("FusedConv", bad, ["x", "w", "", "z"], ["y"]), bad)


@pytest.mark.parametrize("attrs", [dict(), dict(group=2, strides=[2, 1], pads=[1, 1, 0, 2]),
                                   dict(auto_pad="SAME_LOWER"), dict(dilations=[2, 1])])
def test_nhwc_conv_is_conv_with_channels_last(attrs):
    # onnxruntime has no CPU NhwcConv: the oracle is its Conv on the channels-first operands
    x, w, b = f32(2, 7, 6, 4), f32(6, 3, 3, 4 // attrs.get("group", 1)), f32(6)
    feeds = {"x": x, "w": w, "b": b}
    model = ms_model("NhwcConv", feeds, ["x", "w", "b"], ["y"], **attrs)
    inferred_soundly(model, feeds)
    (got,) = ours_of(model, feeds)
    want = _default_conv(x.transpose(0, 3, 1, 2).copy(), w.transpose(0, 3, 1, 2).copy(), b,
                         **attrs).transpose(0, 2, 3, 1)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, **F32)


@pytest.mark.parametrize("alpha", [None, 1.0, -0.5])
def test_quick_gelu_is_x_times_sigmoid_of_alpha_x(alpha):
    x = np.concatenate([f32(3, 10, scale=3).ravel(), [-100, -30, 0, 30, 100]]).astype(
        np.float32)
    feeds = {"x": x}
    attrs = {} if alpha is None else {"alpha": alpha}
    (got,) = against_ort(ms_model("QuickGelu", feeds, ["x"], ["y"], **attrs), feeds)
    a = 1.702 if alpha is None else alpha
    v = x.astype(np.float64)
    exact = v / (1 + np.exp(-np.float64(np.float32(a)) * v))
    np.testing.assert_allclose(got, exact, rtol=1e-6, atol=1e-30)


@pytest.mark.parametrize("upper,k", [(None, None), (0, None), (1, -1), (0, 2)])
def test_trilu_is_the_default_domain_trilu(upper, k):
    x = RNG.integers(-9, 9, (2, 4, 5)).astype(np.int64)
    feeds = {"x": x, "k": np.array(k if k is not None else 0, np.int64)}
    attrs = {} if upper is None else {"upper": upper}
    model = ms_model("Trilu", feeds, ["x", "k"] if k is not None else ["x"], ["y"], **attrs)
    (got,) = against_ort(model, feeds)   # data movement: exact
    kk = 0 if k is None else k
    np.testing.assert_array_equal(got, np.tril(x, kk) if upper == 0 else np.triu(x, kk))


# -- inference on declared (symbolic) shapes -----------------------------------------------

def _declared(op_type, inputs: dict, outputs, **attrs):
    """A com.microsoft node whose graph inputs are declared ``name: (element type, shape)``,
    shapes with dimension names; inferred by onemodel."""
    from onemodel.inference import infer_model

    infos = [onnx.helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()]
    node = onnx.helper.make_node(op_type, list(inputs), outputs, domain=MS, **attrs)
    graph = onnx.helper.make_graph([node], "g", infos,
                                   [onnx.helper.make_value_info(o, onnx.TypeProto())
                                    for o in outputs])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 21),
                                                         onnx.helper.make_opsetid(MS, 1)])
    model.ir_version = 10
    return infer_model(onemodel.load(model.SerializeToString()))


FLOAT, INT32 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT32


def test_inference_keeps_symbolic_extents():
    res = _declared("SkipLayerNormalization", {"x": (FLOAT, ["b", "s", 8]),
                                               "skip": (FLOAT, ["b", "s", 8]),
                                               "gamma": (FLOAT, [8])},
                    ["y", "mean", "inv", "sum"])
    assert not res.contradictions
    assert res.values["mean"].shape == res.values["x"].shape[:2] + (1,)
    assert res.values["y"].shape == res.values["x"].shape and res.values["inv"].elem == FLOAT
    res = _declared("FusedMatMul", {"a": (FLOAT, [3, "b", "m", 4]), "b": (FLOAT, ["b", 5, 4])},
                    ["y"], transBatchA=1, transB=1)
    assert res.contradictions        # transBatchA needs one rank for both
    res = _declared("FusedMatMul", {"a": (FLOAT, ["m", "b", 4]), "b": (FLOAT, ["b", 5, 4])},
                    ["y"], transBatchA=1, transB=1)
    assert not res.contradictions
    b, m = res.values["a"].shape[1], res.values["a"].shape[0]
    assert res.values["y"].shape == (b, m, 5)
    res = _declared("EmbedLayerNormalization", {
        "ids": (INT32, ["b", "s"]), "seg": (INT32, ["b", "s"]), "word": (FLOAT, [30, 16]),
        "pos": (FLOAT, [20, 16]), "segemb": (FLOAT, [2, 16]), "gamma": (FLOAT, [16]),
        "beta": (FLOAT, [16])}, ["y", "mask_index"])
    assert not res.contradictions
    ids = res.values["ids"].shape
    assert res.values["y"].shape == ids + (16,) and res.values["mask_index"].shape == ids[:1]
    assert res.values["mask_index"].elem == INT32


def test_inference_reports_the_ranks_the_definitions_exclude():
    res = _declared("SkipLayerNormalization", {"x": (FLOAT, [1, 2, 3, 8]),
                                               "skip": (FLOAT, [1, 2, 3, 8]),
                                               "gamma": (FLOAT, [8])}, ["y"])
    assert any("rank 2 or 3" in str(c) for c in res.contradictions)
    res = _declared("BiasAdd", {"x": (FLOAT, [2, 3, 4]), "bias": (FLOAT, [4]),
                                "skip": (FLOAT, [2, 5, 4])}, ["y"])
    assert res.contradictions
