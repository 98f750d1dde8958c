"""A torch-style transformer attention block, as the legacy exporter writes it (Shape ->
Gather -> Unsqueeze -> Concat -> Reshape, Transpose, MatMul, Softmax, Range for positions,
Expand of a mask) and as the dynamo exporter does (Shape with start/end, Concat of Constant
nodes), infers completely from its input extents [batch, seq] (issue 12 Build 2): every value
has a known element type and symbolic shape, equal to the shape the block computes, and the
evaluator agrees under random bindings (``sound``). The rules of other families it needs
(MatMul, Softmax, Add/Sub/Mul/Div, Cast, Equal/Where) are held too."""

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import onemodel
from onemodel.inference import Expr, infer_model
from tests.infer.harness import sound
from tests.infer.test_rules_shape import onnx_agrees

B, S = Expr.var("batch"), Expr.var("seq")
HIDDEN, HEADS, HEAD = 32, 4, 8
MAX_POS = 16
F, I64 = T.FLOAT, T.INT64


def _const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def _i64(*v):
    return np.array(v, dtype=np.int64)


def _weights(rng):
    inits = []
    for p in "qkvo":
        inits.append(_const(f"W{p}", rng.standard_normal((HIDDEN, HIDDEN)).astype(np.float32)))
        inits.append(_const(f"b{p}", rng.standard_normal(HIDDEN).astype(np.float32)))
    inits.append(_const("pos_table", rng.standard_normal((MAX_POS, HIDDEN)).astype(np.float32)))
    return inits


def legacy_block():
    """The legacy exporter's pattern; returns (model, expected {name: (elem, shape)})."""
    n = helper.make_node
    nodes = [
        n("Shape", ["x"], ["shape_x"]),
        n("Gather", ["shape_x", "c0"], ["bsz"], axis=0),
        n("Gather", ["shape_x", "c1"], ["tgt"], axis=0),
        n("Unsqueeze", ["bsz", "ax0"], ["bsz1"]),
        n("Unsqueeze", ["tgt", "ax0"], ["tgt1"]),
        # positions: Range(0, seq, 1) expanded to [batch, seq], looked up in a table
        n("Range", ["c0", "tgt", "c1"], ["pos"]),
        n("Unsqueeze", ["pos", "ax0"], ["pos1"]),
        n("Concat", ["bsz1", "tgt1"], ["pos_shape"], axis=0),
        n("Expand", ["pos1", "pos_shape"], ["positions"]),
        n("Gather", ["pos_table", "positions"], ["pos_emb"], axis=0),
        n("Add", ["x", "pos_emb"], ["h"]),
        # heads: Reshape by Concat(batch, seq, heads, head) and Transpose
        n("Concat", ["bsz1", "tgt1", "heads", "head"], ["split_shape"], axis=0),
    ]
    for p in "qkv":
        nodes += [n("MatMul", ["h", f"W{p}"], [f"{p}_mm"]),
                  n("Add", [f"{p}_mm", f"b{p}"], [f"{p}_lin"]),
                  n("Reshape", [f"{p}_lin", "split_shape"], [f"{p}_4"]),
                  n("Transpose", [f"{p}_4"], [f"{p}_h"],
                    perm=[0, 2, 3, 1] if p == "k" else [0, 2, 1, 3])]
    nodes += [
        n("MatMul", ["q_h", "k_h"], ["scores"]),
        n("Div", ["scores", "scale"], ["scaled"]),
        # the padding mask [batch, seq] -> [batch, 1, 1, seq], expanded to the scores' shape
        n("Unsqueeze", ["mask", "ax12"], ["mask4"]),
        n("Cast", ["mask4"], ["maskf"], to=F),
        n("Sub", ["one", "maskf"], ["inv"]),
        n("Mul", ["inv", "neg"], ["bias"]),
        n("Concat", ["bsz1", "heads", "tgt1", "tgt1"], ["scores_shape"], axis=0),
        # torch's expand(): -1 entries replaced through ConstantOfShape/Equal/Where
        n("Shape", ["scores_shape"], ["ss_len"]),
        n("ConstantOfShape", ["ss_len"], ["ones"], value=helper.make_tensor("v", I64, [1], [1])),
        n("Mul", ["ones", "minus1"], ["minus_ones"]),
        n("Equal", ["scores_shape", "minus_ones"], ["is_any"]),
        n("Where", ["is_any", "ones", "scores_shape"], ["expand_shape"]),
        n("Expand", ["bias", "expand_shape"], ["bias_full"]),
        n("Add", ["scaled", "bias_full"], ["masked"]),
        n("Softmax", ["masked"], ["probs"], axis=-1),
        n("MatMul", ["probs", "v_h"], ["ctx"]),
        n("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
        n("Concat", ["bsz1", "tgt1", "hidden"], ["merge_shape"], axis=0),
        n("Reshape", ["ctx_t", "merge_shape"], ["merged"]),
        n("MatMul", ["merged", "Wo"], ["o_mm"]),
        n("Add", ["o_mm", "bo"], ["y"]),
    ]
    inits = _weights(np.random.default_rng(0)) + [
        _const("c0", _i64(0).reshape(())), _const("c1", _i64(1).reshape(())),
        _const("ax0", _i64(0)), _const("ax12", _i64(1, 2)), _const("heads", _i64(HEADS)),
        _const("head", _i64(HEAD)), _const("hidden", _i64(HIDDEN)),
        _const("scale", np.array(np.sqrt(HEAD), np.float32)),
        _const("one", np.array(1.0, np.float32)), _const("neg", np.array(-1e4, np.float32)),
        _const("minus1", _i64(-1).reshape(()))]
    g = helper.make_graph(nodes, "attention", [
        helper.make_tensor_value_info("x", F, ["batch", "seq", HIDDEN]),
        helper.make_tensor_value_info("mask", I64, ["batch", "seq"])],
        [helper.make_tensor_value_info("y", F, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    want = {
        "shape_x": (I64, (3,)), "bsz": (I64, ()), "tgt": (I64, ()), "bsz1": (I64, (1,)),
        "tgt1": (I64, (1,)), "pos": (I64, (S,)), "pos1": (I64, (1, S)),
        "pos_shape": (I64, (2,)), "positions": (I64, (B, S)), "pos_emb": (F, (B, S, HIDDEN)),
        "h": (F, (B, S, HIDDEN)), "split_shape": (I64, (4,)),
        "scores": (F, (B, HEADS, S, S)), "scaled": (F, (B, HEADS, S, S)),
        "mask4": (I64, (B, 1, 1, S)), "maskf": (F, (B, 1, 1, S)), "inv": (F, (B, 1, 1, S)),
        "bias": (F, (B, 1, 1, S)), "scores_shape": (I64, (4,)), "ss_len": (I64, (1,)),
        "ones": (I64, (4,)), "minus_ones": (I64, (4,)), "is_any": (T.BOOL, (4,)),
        "expand_shape": (I64, (4,)),
        "bias_full": (F, (B, HEADS, S, S)), "masked": (F, (B, HEADS, S, S)),
        "probs": (F, (B, HEADS, S, S)), "ctx": (F, (B, HEADS, S, HEAD)),
        "ctx_t": (F, (B, S, HEADS, HEAD)), "merge_shape": (I64, (3,)),
        "merged": (F, (B, S, HIDDEN)), "o_mm": (F, (B, S, HIDDEN)), "y": (F, (B, S, HIDDEN)),
    }
    for p in "qkv":
        want[f"{p}_mm"] = want[f"{p}_lin"] = (F, (B, S, HIDDEN))
        want[f"{p}_4"] = (F, (B, S, HEADS, HEAD))
        want[f"{p}_h"] = (F, (B, HEADS, HEAD, S) if p == "k" else (B, HEADS, S, HEAD))
    return _load(m), want


def dynamo_block():
    """The dynamo exporter's pattern: Shape with start/end, Concat of Constant nodes,
    Reshape by [0, 0, heads, head] ... returns (model, expected)."""
    n = helper.make_node
    nodes = [
        n("Shape", ["x"], ["b1"], start=0, end=1),
        n("Shape", ["x"], ["s1"], start=1, end=2),
        n("Constant", [], ["k_heads"], value_ints=[HEADS, HEAD]),
        n("Constant", [], ["k_hidden"], value=helper.make_tensor("t", I64, [1], [HIDDEN])),
        n("Constant", [], ["k_zero"], value_int=0),
        n("Constant", [], ["k_one"], value_int=1),
        n("Concat", ["b1", "s1", "k_heads"], ["split_shape"], axis=0),
        n("Squeeze", ["s1"], ["seq_len"]),
        n("Range", ["k_zero", "seq_len", "k_one"], ["pos"]),
        n("Gather", ["pos_table", "pos"], ["pos_emb"], axis=0),
        n("Add", ["x", "pos_emb"], ["h"]),
        n("Constant", [], ["k_zz"], value_ints=[0, 0, HEADS, HEAD]),
    ]
    for p in "qkv":
        target = "split_shape" if p != "v" else "k_zz"
        nodes += [n("MatMul", ["h", f"W{p}"], [f"{p}_mm"]),
                  n("Add", [f"{p}_mm", f"b{p}"], [f"{p}_lin"]),
                  n("Reshape", [f"{p}_lin", target], [f"{p}_4"]),
                  n("Transpose", [f"{p}_4"], [f"{p}_h"], perm=[0, 2, 1, 3])]
    nodes += [
        n("Transpose", ["k_h"], ["k_t"], perm=[0, 1, 3, 2]),
        n("MatMul", ["q_h", "k_t"], ["scores"]),
        n("Softmax", ["scores"], ["probs"], axis=-1),
        n("MatMul", ["probs", "v_h"], ["ctx"]),
        n("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
        n("Concat", ["b1", "s1", "k_hidden"], ["merge_shape"], axis=0),
        n("Reshape", ["ctx_t", "merge_shape"], ["merged"]),
        # linear as view + matmul + view: [batch*seq, hidden] and back (allowzero=1)
        n("Mul", ["b1", "s1"], ["bs"]),
        n("Concat", ["bs", "k_hidden"], ["flat_shape"], axis=0),
        n("Reshape", ["merged", "flat_shape"], ["merged_flat"]),
        n("MatMul", ["merged_flat", "Wo"], ["o_mm"]),
        n("Add", ["o_mm", "bo"], ["o_lin"]),
        n("Reshape", ["o_lin", "merge_shape"], ["y"], allowzero=1),
    ]
    g = helper.make_graph(nodes, "attention", [
        helper.make_tensor_value_info("x", F, ["batch", "seq", HIDDEN])],
        [helper.make_tensor_value_info("y", F, None)], _weights(np.random.default_rng(1)))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    want = {
        "b1": (I64, (1,)), "s1": (I64, (1,)), "k_heads": (I64, (2,)), "k_hidden": (I64, (1,)),
        "k_zero": (I64, ()), "k_one": (I64, ()), "split_shape": (I64, (4,)),
        "seq_len": (I64, ()), "pos": (I64, (S,)), "pos_emb": (F, (S, HIDDEN)),
        "h": (F, (B, S, HIDDEN)), "k_zz": (I64, (4,)), "k_t": (F, (B, HEADS, HEAD, S)),
        "scores": (F, (B, HEADS, S, S)), "probs": (F, (B, HEADS, S, S)),
        "ctx": (F, (B, HEADS, S, HEAD)), "ctx_t": (F, (B, S, HEADS, HEAD)),
        "merge_shape": (I64, (3,)), "merged": (F, (B, S, HIDDEN)), "bs": (I64, (1,)),
        "flat_shape": (I64, (2,)), "merged_flat": (F, (B * S, HIDDEN)),
        "o_mm": (F, (B * S, HIDDEN)), "o_lin": (F, (B * S, HIDDEN)), "y": (F, (B, S, HIDDEN)),
    }
    for p in "qkv":
        want[f"{p}_mm"] = want[f"{p}_lin"] = (F, (B, S, HIDDEN))
        want[f"{p}_4"] = (F, (B, S, HEADS, HEAD))
        want[f"{p}_h"] = (F, (B, HEADS, S, HEAD))
    return _load(m), want


def _load(proto):
    return onemodel.load(proto.SerializeToString())


@pytest.mark.parametrize("build", [legacy_block, dynamo_block], ids=["legacy", "dynamo"])
def test_attention_block_infers_every_value_from_batch_and_seq(build):
    model, want = build()
    res = infer_model(model)
    assert not res.contradictions, res.contradictions
    assert not res.no_rule, res.no_rule
    values = res.values
    produced = [o for node in model.graph.nodes for o in node.outputs]
    assert sorted(produced) == sorted(want)
    for name, (elem, shape) in want.items():
        v = values[name]
        assert v.complete, (name, str(v))
        assert (v.elem, v.shape) == (elem, shape), (name, str(v))
    # the shape tensors carry their elements, symbolic
    assert values["split_shape"].data == (B, S, HEADS, HEAD)
    assert values["merge_shape"].data == (B, S, HIDDEN)
    # the evaluator agrees on every value (one per node output, three draws of batch and seq)
    assert sound(model, draws=3, high=MAX_POS) == 3 * len(want)
    assert onnx_agrees(model) > 0


def test_the_shape_path_alone_is_complete_without_other_families():
    # every value computed from Shape(x) is this family's: element data [batch, seq, ...]
    model, _ = legacy_block()
    v = infer_model(model).values
    assert v["shape_x"].data == (B, S, HIDDEN)
    assert v["bsz"].data == (B,) and v["tgt"].data == (S,)
    assert v["pos_shape"].data == (B, S)
    assert v["scores_shape"].data == (B, HEADS, S, S)
    assert v["ones"].data == (1, 1, 1, 1)
    assert v["expand_shape"].data == (B, HEADS, S, S)  # Equal/Where: the element-wise rules
    assert v["bias_full"].shape == (B, HEADS, S, S)
    assert v["positions"].shape == (B, S)
    model, _ = dynamo_block()
    v = infer_model(model).values
    assert v["split_shape"].data == (B, S, HEADS, HEAD)
    assert v["k_zz"].data == (0, 0, HEADS, HEAD)
    assert v["seq_len"].data == (S,) and v["pos"].shape == (S,)
    assert v["flat_shape"].data == (B * S, HIDDEN)  # Mul on shape data: element-wise rules
