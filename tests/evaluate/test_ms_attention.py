"""com.microsoft attention kernels (onemodel/evaluate/kernels/ms_attention.py) and their
inference rules (onemodel/inference/rules/ms_attention.py), against onnxruntime and a float64
numpy computation.

onnxruntime (CPU, graph optimizations off, one thread) defines these operators; its kernels
compute in float32 with their own summation order (MLAS GEMMs, whose blocking depends on the
CPU), so outputs are compared within rtol 1e-4, atol 1e-5: a few float32 roundings of sums of
at most 24 terms of magnitude < 10, far below that. Present (KV cache) outputs are copies or
projections, compared the same way.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import helper
from oracle import ours, tensor_info
from oracle_releases import needs_onnxruntime

from onemodel.errors import EvaluationError, InvalidModelError, UnsupportedError

RNG = np.random.default_rng(13)
RTOL, ATOL = 1e-4, 1e-5


def _rand(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def _model(op_type, feeds, ins, outs, **attrs):
    node = helper.make_node(op_type, ins, outs, domain="com.microsoft", **attrs)
    graph = helper.make_graph([node], "g", [tensor_info(n, feeds[n]) for n in ins if n],
                              [helper.make_value_info(o, onnx.TypeProto()) for o in outs if o])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 9
    return model


def _ort(model, feeds):
    import onnxruntime

    so = onnxruntime.SessionOptions()
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    so.log_severity_level = 3
    sess = onnxruntime.InferenceSession(model.SerializeToString(), so,
                                        providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _check(op_type, feeds, ins, outs, **attrs):
    return _check_model(_model(op_type, feeds, ins, outs, **attrs), feeds)


def _check_model(model, feeds):
    got, want = ours(model, feeds), _ort(model, feeds)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        assert g.shape == w.shape and g.dtype == w.dtype, (i, g.shape, w.shape, g.dtype)
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=f"output {i}")
    return got


def _softmax64(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


# ---- Attention (BERT / GPT-2) -------------------------------------------------------------

B, S, HID, N = 2, 4, 8, 2


def _attn_feeds(hidden_out=3 * HID, s=S):
    return {"x": _rand(B, s, HID), "w": _rand(HID, hidden_out, scale=0.5),
            "b": _rand(hidden_out, scale=0.5)}


MASKS = {
    "none": None,
    "lengths": np.array([3, 1], np.int32),
    "end_start": np.array([4, 3, 1, 0], np.int32),
    "raw2d": np.array([[1, 1, 0, 1], [0, 1, 1, 1]], np.int32),
    "raw2d_all_masked": np.array([[1, 1, 1, 1], [0, 0, 0, 0]], np.int32),
    "raw3d": (np.random.default_rng(3).random((B, S, S)) > 0.4).astype(np.int32),
}


@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("causal", [0, 1])
def test_attention_masks(mask, causal):
    feeds = _attn_feeds()
    ins = ["x", "w", "b"]
    if MASKS[mask] is not None:
        feeds["m"] = MASKS[mask]
        ins.append("m")
    _check("Attention", feeds, ins, ["y"], num_heads=N, unidirectional=causal)


@pytest.mark.parametrize("filter_value", [-10000.0, -3.0])
def test_attention_mask_filter_value(filter_value):
    feeds = _attn_feeds()
    feeds["m"] = MASKS["raw2d_all_masked"]
    _check("Attention", feeds, ["x", "w", "b", "m"], ["y"], num_heads=N,
           mask_filter_value=filter_value)


def test_attention_without_bias_custom_scale_and_sizes():
    feeds = _attn_feeds(hidden_out=8 + 8 + 12)
    del feeds["b"]
    _check("Attention", feeds, ["x", "w"], ["y"], num_heads=N, qkv_hidden_sizes=[8, 8, 12],
           scale=0.3)


def test_attention_present_without_past():
    """GPT-2's first step: no past input, the present output holds this step's K and V."""
    feeds = _attn_feeds()
    _, present = _check("Attention", feeds, ["x", "w", "b"], ["y", "present"], num_heads=N,
                        unidirectional=1)
    assert present.shape == (2, B, N, S, HID // N)


def test_attention_bias_input():
    feeds = _attn_feeds()
    feeds["ab"] = _rand(1, N, S, S)
    _check("Attention", feeds, ["x", "w", "b", "", "", "ab"], ["y"], num_heads=N)


@pytest.mark.parametrize("s, mask", [(4, None), (4, "raw"), (1, "raw"), (1, "lengths")])
def test_attention_gpt2_past_present(s, mask):
    past_len = 3
    feeds = _attn_feeds(s=s)
    feeds["past"] = _rand(2, B, N, past_len, HID // N)
    ins = ["x", "w", "b", "", "past"]
    if mask == "raw":
        feeds["m"] = np.ones((B, past_len + s), np.int32)
        feeds["m"][1, 0] = 0
        ins[3] = "m"
    elif mask == "lengths":
        feeds["m"] = np.array([past_len + s, past_len], np.int32)
        ins[3] = "m"
    y, present = _check("Attention", feeds, ins, ["y", "present"], num_heads=N,
                        unidirectional=1)
    assert present.shape == (2, B, N, past_len + s, HID // N)
    np.testing.assert_array_equal(present[:, :, :, :past_len], feeds["past"])


def test_attention_bert_against_float64():
    """The definition written out in float64: an oracle independent of onnxruntime; the
    float32 output is within 1e-5 relative of it (scores and sums of 8 terms)."""
    feeds = _attn_feeds()
    mask = np.array([3, 4], np.int32)
    feeds["m"] = mask
    model = _model("Attention", feeds, ["x", "w", "b", "m"], ["y"], num_heads=N)
    (y,) = ours(model, feeds)
    x, w, b = (feeds[k].astype(np.float64) for k in ("x", "w", "b"))
    proj = x @ w + b
    d = HID // N
    heads = [proj[..., i * HID:(i + 1) * HID].reshape(B, S, N, d).transpose(0, 2, 1, 3)
             for i in range(3)]
    scores = heads[0] @ heads[1].transpose(0, 1, 3, 2) / math.sqrt(d)
    scores = scores + np.where(np.arange(S)[None, :] < mask[:, None], 0.0,
                               -10000.0)[:, None, None, :]
    want = (_softmax64(scores) @ heads[2]).transpose(0, 2, 1, 3).reshape(B, S, HID)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["mask4d", "mask4d_past", "do_rotary"])
@needs_onnxruntime
def test_attention_refusals_onnxruntime_shares(case):
    """A 4-D mask_index [B, 1, max_sequence_length, max_sequence_length] and do_rotary are
    refused, as onnxruntime 1.32's CPU kernel refuses them (which the message says: checked
    here, so that the test fails if onnxruntime comes to compute them)."""
    feeds = _attn_feeds()
    ins, attrs = ["x", "w", "b"], {"num_heads": N}
    if case.startswith("mask4d"):   # (onnxruntime requires unidirectional 0 with it)
        feeds["m"] = np.tril(np.ones((6, 6), np.int32))[None, None].repeat(B, 0)
        ins.append("m")
    if case == "mask4d_past":
        feeds["past"] = _rand(2, B, N, 2, HID // N)
        ins.append("past")
    if case == "do_rotary":
        attrs["do_rotary"] = 1
    outs = ["y", "present"] if "past" in feeds else ["y"]
    model = _model("Attention", feeds, ins, outs, **attrs)
    with pytest.raises(UnsupportedError, match="CPU kernel does not implement it either"):
        ours(model, feeds)
    with pytest.raises(Exception, match="4D mask|Rotary embedding is not supported"):
        _ort(model, feeds)


def test_attention_refusals():
    feeds = _attn_feeds()
    model = _model("Attention", feeds, ["x", "w", "b"], ["y"], num_heads=N,
                   past_present_share_buffer=1)
    with pytest.raises(UnsupportedError):
        ours(model, feeds)


def test_unknown_microsoft_operator_is_refused():
    feeds = {"x": _rand(2, 3)}
    model = _model("NoSuchAttentionOp", feeds, ["x"], ["y"])
    with pytest.raises(UnsupportedError):
        ours(model, feeds)


# ---- MultiHeadAttention ---------------------------------------------------------------------

MB, MS, ML, MN, MH = 2, 3, 5, 2, 4
MD = MN * MH


def _mha_feeds(kv_len=ML, dv=MD):
    return {"q": _rand(MB, MS, MD), "k": _rand(MB, kv_len, MD), "v": _rand(MB, kv_len, dv)}


@pytest.mark.parametrize("case", ["plain", "bias", "bnsh", "bnsh_bias", "dv", "past",
                                  "past_causal_bias", "lengths", "raw2d", "raw3d", "causal",
                                  "attn_bias", "causal_raw2d"])
def test_multi_head_attention(case):
    feeds = _mha_feeds(dv=12 if case == "dv" else MD)
    if case == "causal" or case == "causal_raw2d" or case == "past_causal_bias":
        feeds = _mha_feeds(kv_len=MS)
    ins, outs, attrs = ["q", "k", "v"], ["y", "pk", "pv"], {"num_heads": MN}
    kv_len = feeds["k"].shape[1]
    if case.startswith("bnsh"):
        feeds["k"], feeds["v"] = _rand(MB, MN, ML, MH), _rand(MB, MN, ML, MH)
    if "bias" in case and case != "attn_bias":
        feeds["b"] = _rand(3 * MD)
        ins.append("b")
    if case.startswith("past"):
        feeds["past_k"], feeds["past_v"] = _rand(MB, MN, 2, MH), _rand(MB, MN, 2, MH)
        ins += [""] * (6 - len(ins)) + ["past_k", "past_v"]
    if "causal" in case:
        attrs["unidirectional"] = 1
    masks = {"lengths": np.array([5, 2], np.int32),
             "raw2d": np.array([[1, 1, 1, 1, 0], [0, 0, 0, 0, 0]], np.int32),
             "raw3d": (RNG.random((MB, MS, ML)) > 0.3).astype(np.int32),
             "causal_raw2d": np.array([[1, 1, 0], [0, 1, 1]], np.int32)}
    if case in masks:
        feeds["m"] = masks[case]
        ins += [""] * (4 - len(ins)) + ["m"]
        attrs["mask_filter_value"] = -5.0 if case == "raw3d" else -10000.0
    if case == "attn_bias":
        feeds["ab"] = _rand(1, MN, MS, kv_len)
        ins += ["", "", "ab"]
        attrs["scale"] = 0.2
    _check("MultiHeadAttention", feeds, ins, outs, **attrs)


@pytest.mark.parametrize("case", ["plain", "scale", "attn_bias", "raw2d", "lengths",
                                  "causal", "causal_raw3d_bias", "past", "bnsh"])
def test_multi_head_attention_qk_output(case):
    """Output 3 (qk): the scores before the softmax, as onnxruntime's CPU kernel gives them.
    Compared with onnxruntime within the module's tolerance (each a float32 dot product of 4
    terms, then up to 2 float32 additions: masked entries hold -10000 + s, where the relative
    tolerance covers a step of 1e-3), and with the scores written out in float64 (scaled
    Q K^T + filter value + bias) on the entries a causal mask keeps; those it drops hold the
    lowest float32."""
    causal = case.startswith("causal")
    feeds = _mha_feeds(kv_len=MS if causal else ML)
    ins, outs, attrs = ["q", "k", "v"], ["y", "pk", "pv", "qk"], {"num_heads": MN}
    kv = feeds["k"].shape[1]
    if case == "bnsh":
        feeds["k"], feeds["v"] = _rand(MB, MN, ML, MH), _rand(MB, MN, ML, MH)
    if case == "scale":
        attrs["scale"] = 0.3
    if causal:
        attrs["unidirectional"] = 1
    if case == "past":   # onnxruntime 1.32 reads a past only with the present outputs asked
        feeds["past_k"], feeds["past_v"] = _rand(MB, MN, 2, MH), _rand(MB, MN, 2, MH)
        ins += ["", "", "", "past_k", "past_v"]
    masks = {"raw2d": np.array([[1, 1, 1, 1, 0], [0, 1, 1, 0, 1]], np.int32),
             "lengths": np.array([5, 2], np.int32),
             "causal_raw3d_bias": (RNG.random((MB, MS, MS)) > 0.3).astype(np.int32)}
    if case in masks:
        feeds["m"] = masks[case]
        ins += ["", "m"]
    if "bias" in case:
        feeds["ab"] = _rand(MB, 1, MS, kv)
        ins += [""] * (5 - len(ins)) + ["ab"]
    model = _model("MultiHeadAttention", feeds, ins, outs, **attrs)
    # qk has a type constraint of its own, which onnxruntime does not infer from the query's
    model.graph.output[3].type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    got = _check_model(model, feeds)
    qk = got[3]
    k = got[1].astype(np.float64)   # the keys used (past included), checked above
    q = feeds["q"].astype(np.float64).reshape(MB, MS, MN, MH).transpose(0, 2, 1, 3)
    total = k.shape[2]
    assert qk.shape == (MB, MN, MS, total) and qk.dtype == np.float32
    want = q @ k.transpose(0, 1, 3, 2) * attrs.get("scale", 1 / math.sqrt(MH))
    if "m" in feeds:
        m = feeds["m"]
        keep = (np.arange(total)[None, :] < m[:, None])[:, None, None, :] if m.ndim == 1 else \
            (m[:, None, None, :] if m.ndim == 2 else m[:, None]) > 0
        want = want + np.where(keep, 0.0, -10000.0)
    if "ab" in feeds:
        want = want + feeds["ab"]
    kept = np.broadcast_to(np.tril(np.ones((MS, total), bool), total - MS) if causal else True,
                           want.shape)
    np.testing.assert_allclose(qk[kept], want[kept], rtol=RTOL, atol=ATOL)
    assert (qk[~kept] == np.finfo(np.float32).min).all()
    if causal:
        assert (~kept).any()


def test_multi_head_attention_packed_forms_match_unpacked():
    """onnxruntime's CPU kernel refuses packed QKV [B, S, N, 3, H] and packed KV
    [B, L, N, 2, H]; they are the same heads laid out differently, so the packed result must
    match onnxruntime's on the unpacked tensors (same tolerance)."""
    q, k, v = _rand(MB, MS, MN, MH), _rand(MB, MS, MN, MH), _rand(MB, MS, MN, MH)
    bias = _rand(3 * MD)
    flat = {"q": q.reshape(MB, MS, MD), "k": k.reshape(MB, MS, MD), "v": v.reshape(MB, MS, MD),
            "b": bias}
    want = _ort(_model("MultiHeadAttention", flat, ["q", "k", "v", "b"], ["y"],
                       num_heads=MN), flat)[0]
    packed = {"qkv": np.stack([q, k, v], axis=3), "b": bias}
    (got,) = ours(_model("MultiHeadAttention", packed, ["qkv", "", "", "b"], ["y"],
                         num_heads=MN), packed)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    kv = {"q": flat["q"], "kv": np.stack([k, v], axis=3)}
    want = _ort(_model("MultiHeadAttention", {k_: flat[k_] for k_ in "qkv"}, ["q", "k", "v"],
                       ["y"], num_heads=MN), {k_: flat[k_] for k_ in "qkv"})[0]
    (got,) = ours(_model("MultiHeadAttention", kv, ["q", "kv"], ["y"], num_heads=MN), kv)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_multi_head_attention_cross_length_causal_is_refused():
    feeds = _mha_feeds()
    model = _model("MultiHeadAttention", feeds, ["q", "k", "v"], ["y"], num_heads=MN,
                   unidirectional=1)
    with pytest.raises(UnsupportedError):
        ours(model, feeds)


# ---- RotaryEmbedding -------------------------------------------------------------------------

RB, RS, RN, RH, RM = 2, 3, 2, 8, 10


def _rot_feeds(x, half=RH // 2, pos=None, dtype=np.float32):
    angles = RNG.random((RM, half)) * 3
    pos = np.array([[0, 1, 2], [4, 5, 9]], np.int64) if pos is None else pos
    return {"x": x.astype(dtype), "p": pos, "c": np.cos(angles).astype(dtype),
            "s": np.sin(angles).astype(dtype)}


@pytest.mark.parametrize("layout", ["bsd", "bnsh"])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("partial", [False, True])
def test_rotary_embedding(layout, interleaved, partial):
    x = _rand(RB, RS, RN * RH) if layout == "bsd" else _rand(RB, RN, RS, RH)
    attrs = {"interleaved": interleaved}
    if partial:
        attrs.update(num_heads=RN, rotary_embedding_dim=4)
    feeds = _rot_feeds(x, half=2 if partial else RH // 2)
    _check("RotaryEmbedding", feeds, ["x", "p", "c", "s"], ["y"], **attrs)


def test_rotary_embedding_offset_positions_and_float16():
    """position_ids [1] is a start offset. The float16 case is compared with onnxruntime
    within 1e-3 (half a float16 step at 1-2; both compute the rotation of float16 values)."""
    feeds = _rot_feeds(_rand(RB, RS, RN * RH), pos=np.array([4], np.int64))
    _check("RotaryEmbedding", feeds, ["x", "p", "c", "s"], ["y"])
    feeds = _rot_feeds(_rand(RB, RS, RN * RH), dtype=np.float16)
    model = _model("RotaryEmbedding", feeds, ["x", "p", "c", "s"], ["y"])
    (got,), (want,) = ours(model, feeds), _ort(model, feeds)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-3,
                               atol=1e-3)


def test_rotary_embedding_against_float64():
    """Rotation of the half-split pairs written out in float64 (each output is two products
    and a sum: within 2 float32 steps)."""
    x = _rand(RB, RS, RN * RH)
    feeds = _rot_feeds(x)
    (got,) = ours(_model("RotaryEmbedding", feeds, ["x", "p", "c", "s"], ["y"]), feeds)
    h = x.astype(np.float64).reshape(RB, RS, RN, RH)
    c = feeds["c"].astype(np.float64)[feeds["p"]][:, :, None, :]
    s = feeds["s"].astype(np.float64)[feeds["p"]][:, :, None, :]
    a, b = h[..., :RH // 2], h[..., RH // 2:]
    want = np.concatenate([a * c - b * s, b * c + a * s], -1).reshape(x.shape)
    np.testing.assert_allclose(got, want, rtol=0, atol=4 * np.finfo(np.float32).eps * 4)


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding_packed_batching(interleaved):
    """is_packed_batching: three sequences (lengths 4, 2, 3) packed in one batch entry of 9
    tokens, their positions restarting at 0, with caches of 5 rows (fewer than the 9 tokens,
    which onnxruntime refuses without the attribute). Against onnxruntime (the module's
    tolerance) and equal to the same rotation of each sequence on its own (unpacked, batch 1),
    which the kernel computes from the same cache rows."""
    x = _rand(1, 9, RN * RH)
    pos = np.array([[0, 1, 2, 3, 0, 1, 0, 1, 2]], np.int64)
    angles = RNG.random((5, RH // 2)) * 3
    feeds = {"x": x, "p": pos, "c": np.cos(angles).astype(np.float32),
             "s": np.sin(angles).astype(np.float32)}
    (got,) = _check("RotaryEmbedding", feeds, ["x", "p", "c", "s"], ["y"], is_packed_batching=1,
                    interleaved=interleaved)
    for start, length in ((0, 4), (4, 2), (6, 3)):
        one = dict(feeds, x=x[:, start:start + length], p=np.arange(length)[None, :])
        (want,) = ours(_model("RotaryEmbedding", one, ["x", "p", "c", "s"], ["y"],
                              interleaved=interleaved), one)
        np.testing.assert_array_equal(got[:, start:start + length], want)


def test_rotary_embedding_refusals():
    feeds = _rot_feeds(_rand(RB, RS, RN * RH))
    model = _model("RotaryEmbedding", feeds, ["x", "p", "c", "s"], ["y"], rotary_embedding_dim=4)
    with pytest.raises(InvalidModelError):
        ours(model, feeds)
    feeds["p"] = np.array([[0, 1, 2], [4, 5, 10]], np.int64)
    with pytest.raises(EvaluationError):
        ours(_model("RotaryEmbedding", feeds, ["x", "p", "c", "s"], ["y"]), feeds)


# ---- GroupQueryAttention ---------------------------------------------------------------------

GB, GN, GKV = 2, 4, 2


def _gqa_feeds(s, past, lens, total, head=16, packed=False, rotary_half=None, batch=GB):
    """Feeds and input names of a GroupQueryAttention node: ``lens`` the total length of each
    batch entry (seqlens_k + 1), ``past`` the cache length (None: no past inputs)."""
    if packed:
        feeds = {"q": _rand(batch, s, (GN + 2 * GKV) * head)}
        ins = ["q", "", ""]
    else:
        feeds = {"q": _rand(batch, s, GN * head), "k": _rand(batch, s, GKV * head),
                 "v": _rand(batch, s, GKV * head)}
        ins = ["q", "k", "v"]
    if past is None:
        ins += ["", ""]
    else:
        feeds["pk"], feeds["pv"] = _rand(batch, GKV, past, head), _rand(batch, GKV, past, head)
        ins += ["pk", "pv"]
    feeds["sl"] = np.array(lens, np.int32) - 1
    feeds["t"] = np.array(total, np.int32)
    ins += ["sl", "t"]
    if rotary_half is not None:
        angles = RNG.random((16, rotary_half)) * 3
        feeds["cos"] = np.cos(angles).astype(np.float32)
        feeds["sin"] = np.sin(angles).astype(np.float32)
        ins += ["cos", "sin"]
    return feeds, ins


GQA_CASES = {
    "prompt": (dict(s=3, past=None, lens=[3, 3], total=3), {}),
    "prompt_empty_past": (dict(s=3, past=0, lens=[3, 3], total=3), {}),
    "prompt_right_padded": (dict(s=3, past=None, lens=[3, 2], total=3), {}),
    "decode": (dict(s=1, past=4, lens=[5, 3], total=5), {}),
    "decode_larger_buffer": (dict(s=1, past=6, lens=[5, 3], total=5), {}),
    "continue_batch1": (dict(s=2, past=4, lens=[6], total=6, batch=1), {}),
    "packed_prompt": (dict(s=3, past=None, lens=[3, 3], total=3, packed=True), {}),
    "packed_decode_rotary": (dict(s=1, past=4, lens=[5, 2], total=5, packed=True,
                                  rotary_half=8), {"do_rotary": 1}),
    "rotary_prompt": (dict(s=3, past=None, lens=[3, 3], total=3, rotary_half=8),
                      {"do_rotary": 1}),
    "rotary_decode_interleaved": (dict(s=1, past=4, lens=[5, 3], total=5, rotary_half=8),
                                  {"do_rotary": 1, "rotary_interleaved": 1}),
    "rotary_partial": (dict(s=1, past=4, lens=[5, 3], total=5, head=32, rotary_half=8),
                       {"do_rotary": 1}),
    "window_prompt": (dict(s=3, past=None, lens=[3, 3], total=3), {"local_window_size": 1}),
    "window_decode": (dict(s=1, past=6, lens=[7, 4], total=7), {"local_window_size": 2}),
    "softcap": (dict(s=1, past=4, lens=[5, 3], total=5), {"softcap": 0.5}),
    "scale_smooth": (dict(s=1, past=4, lens=[5, 3], total=5), {"scale": 0.7,
                                                              "smooth_softmax": 1}),
}


@pytest.mark.parametrize("case", sorted(GQA_CASES))
def test_group_query_attention(case):
    shape, attrs = GQA_CASES[case]
    feeds, ins = _gqa_feeds(**shape)
    _, pk, pv = _check("GroupQueryAttention", feeds, ins, ["y", "pk_out", "pv_out"],
                       num_heads=GN, kv_num_heads=GKV, **attrs)
    if "pk" in feeds and not attrs.get("do_rotary"):
        for b, total in enumerate(shape["lens"]):   # the cache keeps the past it read
            past = total - shape["s"]
            np.testing.assert_array_equal(pk[b, :, :past], feeds["pk"][b, :, :past])
            np.testing.assert_array_equal(pv[b, :, :past], feeds["pv"][b, :, :past])


@pytest.mark.parametrize("extra", ["position_ids", "attention_bias",
                                   "attention_bias_softcap_window", "head_sink",
                                   "head_sink_window"])
def test_group_query_attention_position_ids_and_bias(extra):
    past = 7 if extra.endswith("window") else 4
    feeds, ins = _gqa_feeds(s=1, past=past, lens=[5, 3], total=5, rotary_half=8)
    attrs = {"do_rotary": 1}
    if extra == "position_ids":
        feeds["pos"] = np.array([[7], [9]], np.int64)
        ins += ["pos"]
    elif extra.startswith("head_sink"):
        feeds["sink"] = _rand(GN, scale=3.0)
        ins += ["", "", "sink"]
        if extra.endswith("window"):
            attrs = {"local_window_size": 2}
    else:
        feeds["ab"] = _rand(GB, 1, 1, 5)
        ins += ["", "ab"]
        if extra.endswith("window"):
            attrs.update(softcap=0.8, local_window_size=2)
    _check("GroupQueryAttention", feeds, ins, ["y", "pk_out", "pv_out"], num_heads=GN,
           kv_num_heads=GKV, **attrs)


def test_group_query_attention_refusals():
    feeds, ins = _gqa_feeds(s=1, past=4, lens=[5, 3], total=5)
    feeds = {k: (v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in feeds.items()}
    model = _model("GroupQueryAttention", feeds, ins, ["y"], num_heads=GN, kv_num_heads=GKV)
    with pytest.raises(UnsupportedError):
        ours(model, feeds)
    feeds, ins = _gqa_feeds(s=1, past=4, lens=[9, 3], total=9)
    model = _model("GroupQueryAttention", feeds, ins, ["y"], num_heads=GN, kv_num_heads=GKV)
    with pytest.raises(EvaluationError):
        ours(model, feeds)
    model = _model("GroupQueryAttention", feeds, ins, ["y"], num_heads=GN, kv_num_heads=3)
    with pytest.raises(InvalidModelError):
        ours(model, feeds)


# ---- inference rules ----------------------------------------------------------------------


def test_every_kernel_has_a_rule_at_its_versions():
    from tests.infer.rules_check import check_family_registered, check_unknown_inputs

    assert check_family_registered("ms_attention") >= 1
    assert check_unknown_inputs("ms_attention") >= 1


def test_attention_rule_shapes():
    from onnx import TensorProto as T

    from onemodel.inference import Expr
    from tests.infer.harness import inferred, node_model, sound

    m = node_model("Attention", [("x", T.FLOAT, ["B", "S", 8]), ("w", T.FLOAT, [8, 28]),
                                 ("b", T.FLOAT, [28])], domain="com.microsoft", num_heads=2,
                   qkv_hidden_sizes=[8, 8, 12])
    y = inferred(m)["y"]
    assert y.shape == (Expr.var("B"), Expr.var("S"), 12) and y.elem == T.FLOAT
    assert sound(m) > 0
    m = node_model("Attention", [("x", T.FLOAT, ["B", "S", 8]), ("w", T.FLOAT, [8, 24]),
                                 ("b", T.FLOAT, [24]), ("",), ("p", T.FLOAT, [2, "B", 2, "P", 4])],
                   2, domain="com.microsoft", num_heads=2, unidirectional=1)
    v = inferred(m)
    b, s, p = (Expr.var(k) for k in "BSP")
    assert v["y0"].shape == (b, s, 8)
    assert v["y1"].shape == (2, b, 2, p + s, 4)
    assert sound(m) > 0


def test_multi_head_attention_rule_shapes():
    from onnx import TensorProto as T

    from onemodel.inference import Expr
    from tests.infer.harness import inferred, node_model, sound

    b, s, length, p = (Expr.var(k) for k in ("B", "S", "L", "P"))
    m = node_model("MultiHeadAttention", [("q", T.FLOAT, ["B", "S", 8]),
                                          ("k", T.FLOAT, ["B", "L", 8]),
                                          ("v", T.FLOAT, ["B", "L", 12]), ("b", T.FLOAT, [28]),
                                          ("",), ("",), ("pk", T.FLOAT, ["B", 2, "P", 4]),
                                          ("pv", T.FLOAT, ["B", 2, "P", 6])],
                   3, domain="com.microsoft", num_heads=2)
    v = inferred(m)
    assert v["y0"].shape == (b, s, 12) and v["y0"].elem == T.FLOAT
    assert v["y1"].shape == (b, 2, p + length, 4)
    assert v["y2"].shape == (b, 2, p + length, 6)
    assert sound(m) > 0
    m = node_model("MultiHeadAttention", [("q", T.FLOAT, ["B", "S", 8]),
                                          ("k", T.FLOAT, ["B", 2, "L", 4]),
                                          ("v", T.FLOAT, ["B", 2, "L", 4])],
                   3, domain="com.microsoft", num_heads=2)
    v = inferred(m)
    assert v["y0"].shape == (b, s, 8) and v["y1"].shape == (b, 2, length, 4)
    m = node_model("MultiHeadAttention", [("q", T.FLOAT, ["B", "S", 2, 3, 4])], 1,
                   domain="com.microsoft", num_heads=2)
    assert inferred(m)["y"].shape == (b, s, 8)
    assert sound(m) > 0
    m = node_model("MultiHeadAttention", [("q", T.FLOAT, ["B", "S", 8]),
                                          ("k", T.FLOAT, ["B", "L", 8]),
                                          ("v", T.FLOAT, ["B", "L", 8]), ("",), ("",), ("",),
                                          ("pk", T.FLOAT, ["B", 2, "P", 4]),
                                          ("pv", T.FLOAT, ["B", 2, "P", 4])],
                   4, domain="com.microsoft", num_heads=2)
    v = inferred(m)
    assert v["y3"].shape == (b, 2, s, p + length) and v["y3"].elem == T.FLOAT
    assert sound(m) > 0


def test_rotary_embedding_rule_shapes():
    from onnx import TensorProto as T

    from onemodel.inference import Expr
    from tests.infer.harness import inferred, node_model

    m = node_model("RotaryEmbedding", [("x", T.FLOAT16, ["B", "S", 16]),
                                       ("p", T.INT64, [2, "S"]), ("c", T.FLOAT16, [10, 4]),
                                       ("s", T.FLOAT16, [10, 4])], domain="com.microsoft")
    y = inferred(m)["y"]
    assert y.shape == (2, Expr.var("S"), 16) and y.elem == T.FLOAT16


def test_group_query_attention_rule_shapes():
    from onnx import TensorProto as T

    from onemodel.inference import Expr
    from tests.infer.harness import inferred, node_model

    b = Expr.var("B")
    m = node_model("GroupQueryAttention", [("q", T.FLOAT, ["B", 1, 64]),
                                           ("k", T.FLOAT, ["B", 1, 32]),
                                           ("v", T.FLOAT, ["B", 1, 32]),
                                           ("pk", T.FLOAT, ["B", 2, 8, 16]),
                                           ("pv", T.FLOAT, ["B", 2, 8, 16]),
                                           ("sl", T.INT32, ["B"]),
                                           ("t", np.array(6, np.int32))],
                   3, domain="com.microsoft", num_heads=4, kv_num_heads=2)
    v = inferred(m)
    assert v["y0"].shape == (b, 1, 64) and v["y0"].elem == T.FLOAT
    assert v["y1"].shape == (b, 2, 8, 16) and v["y2"].shape == (b, 2, 8, 16)
    m = node_model("GroupQueryAttention", [("q", T.FLOAT, ["B", "S", 128]), ("",), ("",),
                                           ("",), ("",), ("sl", T.INT32, ["B"]),
                                           ("t", T.INT32, [])],
                   3, domain="com.microsoft", num_heads=4, kv_num_heads=2)
    v = inferred(m)
    assert v["y0"].shape == (b, Expr.var("S"), 64) and v["y1"].shape == (b, 2, None, 16)
