"""com.microsoft QAttention, QEmbedLayerNormalization and FusedGemm
(onemodel/evaluate/kernels/ms_transformers.py) against onnxruntime's CPU kernels.

Tolerances: the float parts are float32 computations (GEMMs, softmax, layer normalization)
that onnxruntime rounds in another order (MLAS blocking, its own exp and tanh): rtol 1e-4,
atol 1e-5, with every value of order 1. Integer outputs (the mask index) are compared exactly.
The integer products of QAttention are exact in both engines as long as no int16 pair sum
saturates (onnxruntime's u8 x s8 AVX2 path sums pairs of products in int16): the signed weights
here lie in [-63, 63], so a pair sum is at most 2 * 255 * 63 < 32767 on every x86-64 CPU.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from oracle import node_model, ort, ours

from onemodel.errors import EvaluationError, InvalidModelError, UnsupportedError
from onemodel.formats.onnx import decode_model
from onemodel.inference import infer_model

MS = "com.microsoft"
RTOL, ATOL = 1e-4, 1e-5
RELIES = ("float32 GEMM / softmax / normalization rounded once per operation in another order; "
          "integer products exact (no int16 pair saturation: |w| <= 63)")


def _close(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)


def _both(op_type, feeds, inputs, outputs, **attrs):
    model = node_model(op_type, feeds, inputs, outputs, opset=1, domain=MS, **attrs)
    given = {k: v for k, v in feeds.items() if k in inputs}
    return ours(model, given), ort(model, given, relies_on=RELIES)


# ------------------------------------------------------------------------------------------
# QAttention
# ------------------------------------------------------------------------------------------

B, S, D, H, N = 2, 5, 16, 12, 3


def _qattention_feeds(rng, signed_weight: bool, per_column: bool, past_len: int = 0):
    x = rng.integers(0, 256, (B, S, D)).astype(np.uint8)
    if signed_weight:
        w = rng.integers(-63, 64, (D, 3 * H)).astype(np.int8)
        wz = (rng.integers(-5, 6, 3 * H) if per_column else np.array(2)).astype(np.int8)
    else:
        w = rng.integers(0, 256, (D, 3 * H)).astype(np.uint8)
        wz = (rng.integers(120, 136, 3 * H) if per_column else np.array(128)).astype(np.uint8)
    ws = (rng.uniform(0.5, 1.5, 3 * H) if per_column else np.array(1.0)).astype(np.float32)
    # scales chosen so the projected values are of order 1 (|acc| ~ 1e4 .. 1e5)
    ws = np.asarray(ws * np.float32(2e-5 if signed_weight else 1e-5), np.float32)
    feeds = {
        "x": x, "w": w, "bias": rng.uniform(-0.5, 0.5, 3 * H).astype(np.float32),
        "xs": np.array(0.5, np.float32), "ws": ws.astype(np.float32),
        "xz": np.array(131, np.uint8), "wz": wz,
    }
    if past_len:
        feeds["past"] = rng.uniform(-1, 1, (2, B, N, past_len, H // N)).astype(np.float32)
    return feeds


MASKS = {
    "none": None,
    "lengths": np.array([5, 3], np.int32),
    "start_end": np.array([5, 4, 0, 1], np.int32),
    "raw2d": np.array([[1, 1, 0, 1, 1], [1, 1, 1, 0, 0]], np.int32),
    "raw3d": (np.random.default_rng(3).random((B, S, S)) > 0.3).astype(np.int32),
}


@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("signed_weight, per_column", [(False, False), (True, True),
                                                       (True, False)])
def test_qattention_matches_onnxruntime(mask, signed_weight, per_column):
    rng = np.random.default_rng(1)
    feeds = _qattention_feeds(rng, signed_weight, per_column)
    inputs = ["x", "w", "bias", "xs", "ws", "", "xz", "wz"]
    if MASKS[mask] is not None:
        feeds["m"] = MASKS[mask]
        inputs[5] = "m"
    got, want = _both("QAttention", feeds, inputs, ["y"], num_heads=N)
    _close(got, want)


@pytest.mark.parametrize("attrs", [{"unidirectional": 1}, {"scale": 0.7},
                                   {"mask_filter_value": -50.0}])
def test_qattention_attributes_match_onnxruntime(attrs):
    rng = np.random.default_rng(2)
    feeds = _qattention_feeds(rng, True, True)
    feeds["m"] = MASKS["raw2d"]
    got, want = _both("QAttention", feeds, ["x", "w", "bias", "xs", "ws", "m", "xz", "wz"],
                      ["y"], num_heads=N, **attrs)
    _close(got, want)


@pytest.mark.parametrize("unidirectional", [0, 1])
def test_qattention_past_and_present_match_onnxruntime(unidirectional):
    rng = np.random.default_rng(4)
    feeds = _qattention_feeds(rng, False, False, past_len=3)
    got, want = _both("QAttention", feeds, ["x", "w", "bias", "xs", "ws", "", "xz", "wz",
                                            "past"], ["y", "present"], num_heads=N,
                      unidirectional=unidirectional)
    assert got[1].shape == (2, B, N, 3 + S, H // N)
    _close(got, want)


def test_qattention_without_zero_points_matches_onnxruntime():
    rng = np.random.default_rng(5)
    feeds = _qattention_feeds(rng, True, False)
    got, want = _both("QAttention", feeds, ["x", "w", "bias", "xs", "ws"], ["y"], num_heads=N)
    _close(got, want)


def test_qattention_int8_input_is_the_shifted_uint8_input():
    # onnxruntime's CPU kernel takes only uint8 inputs; an int8 input x with zero point z
    # denotes the same integers as the uint8 input x + 128 with zero point z + 128.
    rng = np.random.default_rng(6)
    feeds = _qattention_feeds(rng, True, True)
    inputs = ["x", "w", "bias", "xs", "ws", "", "xz", "wz"]
    model = node_model("QAttention", feeds, inputs, ["y"], opset=1, domain=MS, num_heads=N)
    (base,) = ours(model, feeds)
    signed = dict(feeds, x=(feeds["x"].astype(np.int16) - 128).astype(np.int8),
                  xz=np.array(int(feeds["xz"]) - 128, np.int8))
    model8 = node_model("QAttention", signed, inputs, ["y"], opset=1, domain=MS, num_heads=N)
    (shifted,) = ours(model8, signed)
    assert shifted.tobytes() == base.tobytes()


def test_qattention_refusals():
    rng = np.random.default_rng(7)
    feeds = _qattention_feeds(rng, False, False)
    inputs = ["x", "w", "bias", "xs", "ws", "", "xz", "wz"]
    rotary = node_model("QAttention", feeds, inputs, ["y"], opset=1, domain=MS, num_heads=N,
                        do_rotary=1)
    with pytest.raises(UnsupportedError, match="do_rotary"):
        ours(rotary, feeds)
    bad_heads = node_model("QAttention", feeds, inputs, ["y"], opset=1, domain=MS,
                           num_heads=5)
    with pytest.raises(EvaluationError, match="heads"):
        ours(bad_heads, feeds)
    feeds["m"] = np.ones((B, 1, S, S), np.int32)
    inputs[5] = "m"
    four_d = node_model("QAttention", feeds, inputs, ["y"], opset=1, domain=MS, num_heads=N)
    with pytest.raises(EvaluationError, match="mask_index"):
        ours(four_d, feeds)


# ------------------------------------------------------------------------------------------
# QEmbedLayerNormalization
# ------------------------------------------------------------------------------------------

V, P, G, HID = 20, 8, 3, 16


def _qembed_feeds(rng, dtype):
    lo, hi = (-128, 128) if dtype == np.int8 else (0, 256)

    def table(*shape):
        return rng.integers(lo, hi, shape).astype(dtype)

    def zp(v):
        return np.array(v if dtype == np.int8 else v + 128, dtype)

    return {
        "ids": rng.integers(0, V, (2, 6)).astype(np.int32),
        "seg": rng.integers(0, G, (2, 6)).astype(np.int32),
        "wq": table(V, HID), "pq": table(P, HID), "sq": table(G, HID),
        "gq": table(HID), "bq": table(HID),
        "mask": np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], np.int32),
        "wsc": np.array(0.02, np.float32), "psc": np.array(0.01, np.float32),
        "ssc": np.array(0.015, np.float32), "gsc": np.array(0.01, np.float32),
        "bsc": np.array(0.005, np.float32),
        "wz": zp(3), "pz": zp(-2), "sz": zp(0), "gz": zp(-60), "bz": zp(1),
    }


ALL_QEMBED = ["ids", "seg", "wq", "pq", "sq", "gq", "bq", "mask", "wsc", "psc", "ssc", "gsc",
              "bsc", "wz", "pz", "sz", "gz", "bz"]


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("variant", ["all", "no_segment", "no_mask"])
def test_qembed_layer_normalization_matches_onnxruntime(dtype, variant):
    rng = np.random.default_rng(11)
    feeds = _qembed_feeds(rng, dtype)
    inputs = list(ALL_QEMBED)
    if variant == "no_segment":
        for name in ("seg", "sq", "ssc", "sz"):
            inputs[inputs.index(name)] = ""
    if variant == "no_mask":
        inputs[inputs.index("mask")] = ""
    got, want = _both("QEmbedLayerNormalization", feeds, inputs, ["y", "mask_index"],
                      epsilon=1e-5)
    _close(got, want)
    if variant != "no_mask":
        np.testing.assert_array_equal(got[1], [4, 6])


def test_qembed_layer_normalization_refuses_an_index_out_of_range():
    rng = np.random.default_rng(12)
    feeds = _qembed_feeds(rng, np.uint8)
    feeds["ids"][1, 2] = V
    model = node_model("QEmbedLayerNormalization", feeds, ALL_QEMBED, ["y", "mask_index"],
                       opset=1, domain=MS)
    with pytest.raises(EvaluationError, match="word index out of range"):
        ours(model, feeds)


# ------------------------------------------------------------------------------------------
# FusedGemm
# ------------------------------------------------------------------------------------------

ACTIVATIONS = [
    ("Relu", {}), ("Tanh", {}), ("Sigmoid", {}), ("Softsign", {}), ("Softplus", {}),
    ("LeakyRelu", {"activation_alpha": 0.1}), ("ThresholdedRelu", {"activation_alpha": 0.3}),
    ("Elu", {"activation_alpha": 0.8}),
    ("HardSigmoid", {"activation_alpha": 0.3, "activation_beta": 0.4}),
    ("Selu", {"activation_alpha": 1.6, "activation_gamma": 1.1}),
]


@pytest.mark.parametrize("activation, params", ACTIVATIONS)
def test_fused_gemm_activations_match_onnxruntime(activation, params):
    rng = np.random.default_rng(21)
    feeds = {"a": rng.uniform(-1, 1, (4, 6)).astype(np.float32),
             "b": rng.uniform(-1, 1, (5, 6)).astype(np.float32),
             "c": rng.uniform(-1, 1, (5,)).astype(np.float32)}
    attrs = dict(params, transB=1, activation=activation)
    got, want = _both("FusedGemm", feeds, ["a", "b", "c"], ["y"], **attrs)
    _close(got, want)


def test_fused_gemm_transposes_alpha_beta_and_no_c_match_onnxruntime():
    rng = np.random.default_rng(22)
    feeds = {"a": rng.uniform(-1, 1, (6, 4)).astype(np.float32),
             "b": rng.uniform(-1, 1, (6, 5)).astype(np.float32),
             "c": rng.uniform(-1, 1, (4, 1)).astype(np.float32)}
    got, want = _both("FusedGemm", feeds, ["a", "b", "c"], ["y"], transA=1, alpha=0.5,
                      beta=2.0, activation="Tanh")
    _close(got, want)
    got, want = _both("FusedGemm", feeds, ["a", "b"], ["y"], transA=1, activation="Relu")
    _close(got, want)


def test_fused_gemm_refusals():
    rng = np.random.default_rng(23)
    feeds = {"a": rng.uniform(-1, 1, (2, 3)).astype(np.float32),
             "b": rng.uniform(-1, 1, (3, 2)).astype(np.float32)}
    bare = node_model("FusedGemm", feeds, ["a", "b"], ["y"], opset=1, domain=MS)
    with pytest.raises(InvalidModelError, match="needs an activation"):
        ours(bare, feeds)
    missing = node_model("FusedGemm", feeds, ["a", "b"], ["y"], opset=1, domain=MS,
                         activation="LeakyRelu")
    with pytest.raises(InvalidModelError, match="activation_alpha"):
        ours(missing, feeds)
    other = node_model("FusedGemm", feeds, ["a", "b"], ["y"], opset=1, domain=MS,
                       activation="Mish")
    with pytest.raises(UnsupportedError, match="Mish"):
        ours(other, feeds)


# ------------------------------------------------------------------------------------------
# Required inputs and inference rules
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("op_type", ["QAttention", "QEmbedLayerNormalization", "FusedGemm"])
def test_a_node_without_its_required_inputs_is_refused(op_type):
    feeds = {"x": np.zeros((2, 3, 4), np.uint8)}
    model = node_model(op_type, feeds, ["x"], ["y"], opset=1, domain=MS, num_heads=1,
                       activation="Relu")
    with pytest.raises(InvalidModelError, match="needs its input"):
        ours(model, feeds)


def test_every_kernel_has_a_rule_and_unknown_inputs_do_not_raise():
    from tests.infer.rules_check import check_family_registered, check_unknown_inputs

    assert check_family_registered("ms_transformers") == 3
    assert check_unknown_inputs("ms_transformers") >= 3


def _inferred(model):
    res = infer_model(decode_model(model.SerializeToString()))
    return res


def test_rules_give_the_shapes_the_kernels_compute():
    cases = []
    rng = np.random.default_rng(31)
    feeds = _qattention_feeds(rng, False, False, past_len=3)
    cases.append((node_model("QAttention", feeds, ["x", "w", "bias", "xs", "ws", "", "xz", "wz",
                                                   "past"], ["y", "present"], opset=1,
                             domain=MS, num_heads=N), feeds))
    feeds = _qembed_feeds(rng, np.uint8)
    cases.append((node_model("QEmbedLayerNormalization", feeds, ALL_QEMBED,
                             ["y", "mask_index"], opset=1, domain=MS), feeds))
    feeds = {"a": np.ones((6, 4), np.float32), "b": np.ones((5, 6), np.float32),
             "c": np.ones((1, 5), np.float32)}
    cases.append((node_model("FusedGemm", feeds, ["a", "b", "c"], ["y"], opset=1, domain=MS,
                             transA=1, transB=1, activation="Relu"), feeds))
    for model, given in cases:
        res = _inferred(model)
        assert not res.contradictions, res.contradictions
        outs = ours(model, {k: v for k, v in given.items()
                            if k in {i.name for i in model.graph.input}})
        for vi, value in zip(model.graph.output, outs):
            v = res.values[vi.name]
            assert v.shape == value.shape, (vi.name, str(v), value.shape)
            assert v.elem == {np.float32: 1, np.int32: 6}[value.dtype.type], (vi.name, str(v))


def test_rules_report_contradictions():
    from onnx import TensorProto, helper

    def contradictions(op_type, inputs, **attrs):
        graph = helper.make_graph(
            [helper.make_node(op_type, [n for n, _, _ in inputs], ["y"], domain=MS, **attrs)],
            "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
            [helper.make_value_info("y", onnx.TypeProto())])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                        helper.make_opsetid(MS, 1)])
        model.ir_version = 10
        return " ".join(c.message for c in _inferred(model).contradictions)

    F, U8, I32 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT32
    assert "heads" in contradictions("QAttention", [("x", U8, [1, 2, 4]), ("w", U8, [4, 12]),
                                                    ("b", F, [12]), ("xs", F, []),
                                                    ("ws", F, [])], num_heads=3)
    assert "inner" in contradictions("QAttention", [("x", U8, [1, 2, 5]), ("w", U8, [4, 12]),
                                                    ("b", F, [12]), ("xs", F, []),
                                                    ("ws", F, [])], num_heads=2)
    assert "rank" in contradictions("QEmbedLayerNormalization", [("ids", I32, [4])])
    assert "inner" in contradictions("FusedGemm", [("a", F, [2, 3]), ("b", F, [4, 2])],
                                     activation="Relu")
