"""Inference rules of the attention operators (onemodel/inference/rules/attention.py):
Attention 3-D and 4-D (q_num_heads/kv_num_heads, grouped heads, past/present KV cache with the
present length P + L as an expression, the qk matmul output), RotaryEmbedding, TensorScatter,
SwiGLU, LinearAttention, FlexAttention; contradictions; the evaluator agreeing (``sound``)
and onnx agreeing where it has an answer."""

import pytest
from onnx import TensorProto as T

from onemodel.inference import Expr
from tests.infer.harness import inferred, node_model, sound
from tests.infer.rules_check import (
    check_family_registered,
    check_unknown_inputs,
    contradicts,
    onnx_output,
)

F, F16 = T.FLOAT, T.FLOAT16
B, S, L, P = (Expr.var(v) for v in ("B", "S", "L", "P"))


def test_every_kernel_has_a_rule_at_its_versions():
    assert check_family_registered("attention") == 6


def test_unknown_inputs_never_raise():
    assert check_unknown_inputs("attention") >= 24


def _outs(m, n):
    v = inferred(m)
    return [v[f"y{k}"] for k in range(n)]


@pytest.mark.parametrize("opset", [23, 24, 25])
def test_attention_4d_with_past(opset):
    m = node_model("Attention", [("q", F, ["B", 4, "S", 8]), ("k", F, ["B", 2, "L", 8]),
                                 ("v", F, ["B", 2, "L", 6]), ("", ), ("pk", F, ["B", 2, "P", 8]),
                                 ("pv", F, ["B", 2, "P", 6])], 4, opset=opset)
    y, pk, pv, qk = _outs(m, 4)
    assert y.shape == (B, 4, S, 6) and y.elem == F
    assert pk.shape == (B, 2, P + L, 8) and pv.shape == (B, 2, P + L, 6)
    assert qk.shape == (B, 4, S, P + L) and qk.elem == F
    assert sound(m) > 0
    for name, v in (("y0", y), ("y1", pk), ("y2", pv)):   # onnx knows no extent we do not
        o = onnx_output(m, name)
        if o is not None and o[1] is not None:
            assert len(o[1]) == 4 and o[0] == F
            assert all(a is None or a == b for a, b in zip(o[1], v.shape)), (name, o)


def test_attention_3d_heads():
    m = node_model("Attention", [("q", F16, ["B", "S", 12]), ("k", F16, ["B", "L", 4]),
                                 ("v", F16, ["B", "L", 10])], 4, opset=23, q_num_heads=6,
                   kv_num_heads=2)
    y, pk, pv, qk = _outs(m, 4)
    assert y.shape == (B, S, 30) and y.elem == F16   # Hq * Dv = 6 * (10 / 2)
    assert pk.shape == (B, 2, L, 2) and pv.shape == (B, 2, L, 5)
    assert qk.shape == (B, 6, S, L)
    assert sound(m) > 0


def test_attention_mask():
    base = [("q", F, ["B", 2, 3, 4]), ("k", F, ["B", 2, 5, 4]), ("v", F, ["B", 2, 5, 4])]
    m = node_model("Attention", base + [("m", T.BOOL, [3, 5])], opset=23)
    assert inferred(m)["y"].shape == (B, 2, 3, 4)
    assert sound(m) > 0
    m = node_model("Attention", base + [("m", F, [1, 1, 3, 4])], opset=23)   # padded to 5
    assert sound(m) > 0
    contradicts(node_model("Attention", base + [("m", F, [4, 5])], opset=23), "attn_mask",
                "[3, 4]")
    contradicts(node_model("Attention", base + [("m", F, [3, 6])], opset=23), "exceeds")


def test_attention_one_output_and_unknown_ranks():
    m = node_model("Attention", [("q", F, ["B", 2, "S", 4]), ("k", F, None), ("v", F, None)],
                   opset=23)
    assert inferred(m)["y"].shape == (B, 2, S, None)


def test_attention_contradictions():
    contradicts(node_model("Attention", [("q", F, ["B", 3, "S", 4]), ("k", F, ["B", 2, "L", 4]),
                                         ("v", F, ["B", 2, "L", 4])], opset=23),
                "3 query heads", "2 key heads")
    contradicts(node_model("Attention", [("q", F, ["B", "S", 10]), ("k", F, ["B", "L", 8]),
                                         ("v", F, ["B", "L", 8])], opset=23, q_num_heads=4,
                           kv_num_heads=2), "10", "4 heads")
    contradicts(node_model("Attention", [("q", F, [2, 2, "S", 4]), ("k", F, [3, 2, "L", 4]),
                                         ("v", F, [3, 2, "L", 4])], opset=23), "batch")
    contradicts(node_model("Attention", [("q", F, ["B", 2, "S", 4]), ("k", F, ["B", 2, "L", 5]),
                                         ("v", F, ["B", 2, "L", 4])], opset=23), "head sizes")


@pytest.mark.parametrize("shape,attrs", [(["B", 2, "S", 8], {}),
                                         (["B", "S", 16], {"num_heads": 2})])
def test_rotary_embedding(shape, attrs):
    cache = ["B", "S", 4]
    m = node_model("RotaryEmbedding", [("x", F, shape), ("c", F, cache), ("s", F, cache)],
                   opset=23, **attrs)
    v = inferred(m)["y"]
    assert v.shape == tuple(Expr.var(d) if isinstance(d, str) else d for d in shape)
    assert v.elem == F
    assert sound(m) > 0
    contradicts(node_model("RotaryEmbedding", [("x", F, ["B", 8]), ("c", F, cache),
                                               ("s", F, cache)], opset=23), "rank 2")
    contradicts(node_model("RotaryEmbedding", [("x", F, shape), ("c", F, ["B", "S", 3]),
                                               ("s", F, ["B", "S", 3])], opset=23, **attrs),
                "4 and 3")


def test_rotary_embedding_extents_from_caches_and_positions():
    # sequence length unknown in X: the caches say S; with position_ids they say it
    m = node_model("RotaryEmbedding", [("x", F, ["B", 2, None, 8]), ("c", F, ["B", "S", 2]),
                                       ("s", F, ["B", "S", 2])], opset=23,
                   rotary_embedding_dim=4)
    assert inferred(m)["y"].shape == (B, 2, S, 8)
    m = node_model("RotaryEmbedding", [("x", F, [None, "S", 16]), ("c", F, [32, 4]),
                                       ("s", F, [32, 4]), ("p", T.INT64, ["B", "S"])],
                   opset=23, num_heads=2)
    v = inferred(m)["y"]
    assert v.shape == (B, S, 16) and v.elem == F
    contradicts(node_model("RotaryEmbedding", [("x", F, ["B", 2, "S", 8]), ("c", F, [32, 4]),
                                               ("s", F, [32, 4])], opset=23), "rank 2")


def test_tensor_scatter():
    m = node_model("TensorScatter", [("c", F, ["B", 2, 9, 4]), ("u", F, ["B", 2, "S", 4])],
                   opset=24)
    v = inferred(m)["y"]
    assert v.shape == (B, 2, 9, 4) and v.elem == F
    assert sound(m, high=4) > 0
    contradicts(node_model("TensorScatter", [("c", F, ["B", 2, 9, 4]),
                                             ("u", F, ["B", 3, 1, 4])], opset=24), "axis 1")
    contradicts(node_model("TensorScatter", [("c", F, ["B", 9]), ("u", F, ["B", 1])],
                           opset=24, axis=0), "batch")


def test_swiglu():
    m = node_model("SwiGLU", [("a", F, ["B", None]), ("b", F, ["B", 5])], opset=28)
    v = inferred(m)["y"]
    assert v.shape == (B, 5) and v.elem == F
    assert sound(m) > 0
    contradicts(node_model("SwiGLU", [("a", F, ["B", 4]), ("b", F, ["B", 5])], opset=28),
                "4 and 5")


def test_linear_attention():
    m = node_model("LinearAttention", [("q", F, ["B", "S", 8]), ("k", F, ["B", "S", 4]),
                                       ("v", F, ["B", "S", 6])], 2, opset=27, q_num_heads=4,
                   kv_num_heads=2, update_rule="linear")
    y, st = _outs(m, 2)
    assert y.shape == (B, S, 12) and y.elem == F   # Hq * dv = 4 * 3
    assert st.shape == (B, 2, 2, 3) and st.elem == F
    assert sound(m) > 0
    contradicts(node_model("LinearAttention", [("q", F, ["B", "S", 8]), ("k", F, ["B", "S", 6]),
                                               ("v", F, ["B", "S", 6])], 2, opset=27,
                           q_num_heads=4, kv_num_heads=2), "head sizes")


def test_flex_attention():
    m = node_model("FlexAttention", [("q", F, ["B", 4, "S", 8]), ("k", F, ["B", 2, "L", 8]),
                                     ("v", F, ["B", 2, "L", 5])], opset=23,
                   domain="ai.onnx.preview")
    v = inferred(m)["y"]
    assert v.shape == (B, 4, S, 5) and v.elem == F
    assert sound(m) > 0
    contradicts(node_model("FlexAttention", [("q", F, ["B", 4, "S"]), ("k", F, ["B", 2, "L", 8]),
                                             ("v", F, ["B", 2, "L", 5])], opset=23,
                           domain="ai.onnx.preview"), "rank 3")


def _flex_with(mod_node, out_name="o"):
    from onnx import helper

    import onemodel
    body = helper.make_graph([mod_node], "mod", [helper.make_tensor_value_info("s", F, None)],
                             [helper.make_empty_tensor_value_info(out_name)])
    node = helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], domain="ai.onnx.preview",
                            score_mod=body)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("q", F, ["B", 2, "S", 4]),
                                        helper.make_tensor_value_info("k", F, ["B", 1, "L", 4]),
                                        helper.make_tensor_value_info("v", F, ["B", 1, "L", 3])],
                          [helper.make_empty_tensor_value_info("y")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 23),
                                            helper.make_opsetid("ai.onnx.preview", 1)])
    m.ir_version = 10
    return onemodel.load(m.SerializeToString())


def test_flex_attention_score_mod_inferred_on_the_scores():
    from onnx import helper

    from onemodel.inference import infer_model
    m = _flex_with(helper.make_node("Neg", ["s"], ["o"]))
    res = infer_model(m)
    assert not res.contradictions
    assert res.values["y"].shape == (B, 2, S, 3)
    body = res.graphs["graph.nodes[0].attributes[0].g"]
    assert body["o"].shape == (B, 2, S, L) and body["o"].elem == F   # float32 precision
    assert sound(m) > 0
    contradicts(_flex_with(helper.make_node("ReduceSum", ["s"], ["o"], keepdims=0)),
                "score_mod gives rank 0")


def test_random_attention_agrees_with_the_evaluator():
    """Random Attention nodes (3-D and 4-D, grouped heads, masks of several shapes, past
    caches, causal, qk output modes; a fixed seed): whenever the evaluator computes one,
    inference finds no contradiction and agrees with it."""
    import random

    from tests.infer.test_rules_reduce import evaluator_agrees

    rng = random.Random(3)
    ran = 0
    for _ in range(80):
        b, hq, hkv = rng.randint(1, 2), rng.choice([1, 2, 4]), rng.choice([1, 2])
        s, kv, d, dv, past = (rng.randint(1, 3), rng.randint(1, 3), rng.choice([2, 4]),
                              rng.choice([2, 3]), rng.randint(0, 2))
        attrs = {}
        if rng.random() < 0.5:
            ins = [("q", F, [b, s, hq * d]), ("k", F, [b, kv, hkv * d]),
                   ("v", F, [b, kv, hkv * dv])]
            attrs = dict(q_num_heads=hq, kv_num_heads=hkv)
        else:
            ins = [("q", F, [b, hq, s, d]), ("k", F, [b, hkv, kv, d]), ("v", F, [b, hkv, kv, dv])]
        if rng.random() < 0.5:
            ins.append(("m", rng.choice([F, T.BOOL]), rng.choice(
                [[s, kv + past], [1, 1, s, kv], [b, 1, s, kv + past], [s, kv + past + 1]])))
        else:
            ins.append(("",))
        if rng.random() < 0.5:
            ins += [("pk", F, [b, hkv, past, d]), ("pv", F, [b, hkv, past, dv])]
        if rng.random() < 0.3:
            attrs["is_causal"] = 1
        if rng.random() < 0.3:
            attrs["qk_matmul_output_mode"] = rng.randint(0, 3)
        ran += evaluator_agrees(node_model("Attention", ins, 4, opset=rng.choice([23, 24]),
                                           **attrs))
    assert ran >= 40, ran
