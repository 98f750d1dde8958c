"""Inference rules of the reductions (onemodel/inference/rules/reduce.py): Reduce* with axes
as attribute or input by version (keepdims, noop_with_empty_axes, unknown axes data), shape
data of ReduceProd/Sum/Max/Min, ArgMax/ArgMin, CumSum/CumProd, TopK (K from data, both
outputs); contradictions; the evaluator agreeing (``sound``) and onnx agreeing where it has an
answer."""

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

from onemodel.inference import Expr, infer_model
from tests.infer.harness import inferred, node_model, sound
from tests.infer.rules_check import (
    check_family_registered,
    check_unknown_inputs,
    contradicts,
    data_sound,
    expect,
)
from tests.infer.test_rules_shape import graph_model

F, I64 = T.FLOAT, T.INT64
N, S = Expr.var("N"), Expr.var("S")
# (op, first version with the axes input)
REDUCE = [("ReduceSum", 13), ("ReduceMean", 18), ("ReduceMax", 18), ("ReduceMin", 18),
          ("ReduceProd", 18), ("ReduceL1", 18), ("ReduceL2", 18), ("ReduceLogSum", 18),
          ("ReduceLogSumExp", 18), ("ReduceSumSquare", 18)]


def test_every_kernel_has_a_rule_at_its_versions():
    assert check_family_registered("reduce") == 15


def test_unknown_inputs_never_raise():
    assert check_unknown_inputs("reduce") >= 40


@pytest.mark.parametrize("op,v", REDUCE)
def test_reduce_axes_attribute(op, v):
    x = [("x", F, ["N", 3, "S"])]
    expect(node_model(op, x, opset=v - 1, axes=[1]), ["N", 1, "S"], F)
    expect(node_model(op, x, opset=v - 1, axes=[-1, 0], keepdims=0), [3], F)
    expect(node_model(op, x, opset=v - 1), [1, 1, 1], F)
    expect(node_model(op, x, opset=v - 1, keepdims=0), [], F)


@pytest.mark.parametrize("op,v", REDUCE)
def test_reduce_axes_input(op, v):
    x = [("x", F, ["N", 3, "S"])]
    expect(node_model(op, x + [("a", np.array([1], np.int64))], opset=v), ["N", 1, "S"], F)
    expect(node_model(op, x + [("a", np.array([-1, 0], np.int64))], opset=v, keepdims=0),
           [3], F)
    expect(node_model(op, x, opset=v), [1, 1, 1], F)
    # no axes with noop_with_empty_axes: the identity
    expect(node_model(op, x, opset=v, noop_with_empty_axes=1), ["N", 3, "S"], F)
    expect(node_model(op, x + [("a", np.zeros(0, np.int64))], opset=v,
                      noop_with_empty_axes=1), ["N", 3, "S"], F)
    expect(node_model(op, x + [("a", np.zeros(0, np.int64))], opset=v, keepdims=0), [], F)


def test_reduce_axes_input_without_data():
    # keepdims=1: rank known, every extent unknown but a 1 (1 either way)
    m = node_model("ReduceSum", [("x", F, ["N", 1, 4]), ("a", I64, [1])], opset=13)
    expect(m, [None, 1, None], F)
    m = node_model("ReduceMax", [("x", F, ["N", 1, 4]), ("a", I64, [1])], opset=18,
                   keepdims=0)
    expect(m, [None, None], F)
    m = node_model("ReduceMax", [("x", F, ["N", 1, 4]), ("a", I64, [2])], opset=18,
                   keepdims=0)
    assert inferred(m)["y"].shape is None   # [1, 1] drops one axis, [0, 1] two


def test_reduce_scalar_and_unknown_rank():
    expect(node_model("ReduceSum", [("x", F, [])], opset=11), [], F)
    contradicts(node_model("ReduceSum", [("x", F, [])], opset=11, axes=[0]), "rank 0")
    assert inferred(node_model("ReduceMean", [("x", F, None)], opset=11, axes=[0]))["y"].shape \
        is None


def test_reduce_contradictions():
    contradicts(node_model("ReduceSum", [("x", F, ["N", 3])], opset=11, axes=[2]),
                "axis 2", "rank 2")
    contradicts(node_model("ReduceL2", [("x", F, ["N", 3]), ("a", np.array([-3]))],
                           opset=18), "axis -3")
    m = node_model("ReduceMean", [("x", F, ["N", 3])], opset=11, axes=1)   # INT, not INTS
    contradicts(m, "axes is 1", "not a list")
    assert infer_model(m).values["y"].shape is None


@pytest.mark.parametrize("op,want", [("ReduceProd", N * S * 3), ("ReduceSum", N + S + 3),
                                     ("ReduceMax", None), ("ReduceMin", None)])
def test_reduce_of_a_shape_carries_data(op, want):
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node(op, ["s"], ["y"], keepdims=0)]
    m = graph_model(nodes, [("x", F, ["N", 3, "S"])], opset=13)
    v = inferred(m)["y"]
    assert v.shape == () and v.elem == I64
    assert v.data == ((want,) if want is not None else None)
    assert data_sound(m) == 3 * (3 + (want is not None))  # Shape: 3 elements a draw


def test_reduce_max_min_of_known_ints():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ReduceMax", ["s"], ["y"], keepdims=1),
             helper.make_node("ReduceMin", ["s"], ["z"], keepdims=0)]
    m = graph_model(nodes, [("x", F, [2, 7, 3])], outputs=("y", "z"), opset=13)
    v = inferred(m)
    assert v["y"].shape == (1,) and v["y"].data == (7,)
    assert v["z"].shape == () and v["z"].data == (2,)
    assert data_sound(m) == 3 * 5


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("opset", [1, 11, 12, 13])
def test_arg_reductions(op, opset):
    x = [("x", F, ["N", 3, "S"])]
    expect(node_model(op, x, opset=opset, axis=1), ["N", 1, "S"], I64)
    expect(node_model(op, x, opset=opset, axis=-1 if opset >= 11 else 2, keepdims=0),
           ["N", 3], I64)
    expect(node_model(op, x, opset=opset), [1, 3, "S"], I64)
    contradicts(node_model(op, x, opset=opset, axis=3), "axis 3")


@pytest.mark.parametrize("op,opset", [("CumSum", 11), ("CumSum", 14), ("CumProd", 26)])
def test_cumulative(op, opset):
    m = node_model(op, [("x", F, ["N", 3]), ("a", np.array(1, np.int64))], opset=opset,
                   reverse=1)
    expect(m, ["N", 3], F, check_onnx=opset < 26)
    contradicts(node_model(op, [("x", F, ["N", 3]), ("a", np.array(2, np.int64))],
                           opset=opset), "axis 2")


def test_topk_v1_attribute():
    m = node_model("TopK", [("x", F, ["N", 5])], 2, opset=1, k=3)
    v = inferred(m)
    assert v["y0"].shape == (N, 3) and v["y0"].elem == F
    assert v["y1"].shape == (N, 3) and v["y1"].elem == I64
    assert sound(m) > 0


@pytest.mark.parametrize("opset", [10, 11, 24])
def test_topk_k_input(opset):
    m = node_model("TopK", [("x", F, [5, "N"]), ("k", np.array([2], np.int64))], 2,
                   opset=opset, axis=0)
    v = expect(m, [2, "N"], F, out="y0")
    assert v.elem == F
    expect(m, [2, "N"], I64, out="y1")
    # K from the data of a shape: a symbolic extent
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1),
             helper.make_node("TopK", ["x", "s"], ["v", "i"], axis=1)]
    m = graph_model(nodes, [("x", F, [4, "N"])], outputs=("v", "i"), opset=max(opset, 15))
    got = inferred(m)
    assert got["v"].shape == (4, N) and got["i"].shape == (4, N) and got["i"].elem == I64
    assert sound(m) > 0
    # K unknown: the axis extent unknown
    m = node_model("TopK", [("x", F, [5, "N"]), ("k", I64, [1])], 2, opset=opset)
    assert inferred(m)["y0"].shape == (5, None)


def test_topk_contradictions():
    contradicts(node_model("TopK", [("x", F, ["N", 5]), ("k", np.array([6], np.int64))], 2,
                           opset=11), "K 6")
    contradicts(node_model("TopK", [("x", F, ["N", 5])], 2, opset=1, k=2, axis=2), "axis 2")


def evaluator_agrees(m) -> bool:
    """False when the evaluator refuses ``m`` on random inputs; else assert inference finds no
    contradiction and agrees with the evaluator (``sound``, one draw), and return True."""
    from onemodel.evaluate import Session
    from onemodel.evaluate.inputs import random_inputs

    try:
        with np.errstate(all="ignore"):
            Session(m).run(random_inputs(m, seed=1))
    except Exception:
        return False
    assert not infer_model(m).contradictions, infer_model(m).contradictions
    with np.errstate(all="ignore"):
        assert sound(m, draws=1) > 0
    return True


def test_random_reductions_agree_with_the_evaluator():
    """Random reductions (ranks 0-4 with extents 0-3, axes in and out of range, keepdims,
    noop_with_empty_axes, attribute and input forms; a fixed seed): whenever the evaluator
    computes one, inference finds no contradiction and agrees with it (``sound``)."""
    import random

    rng = random.Random(3)
    ran = refused = 0
    for _ in range(150):
        op, v = rng.choice(REDUCE)
        opset = rng.choice([v - 1, v, 21])
        r = rng.randint(0, 4)
        axes = [rng.randint(-r - 1, r) for _ in range(rng.randint(0, 3))]
        attrs = {"keepdims": rng.randint(0, 1)} if rng.random() < 0.5 else {}
        ins = [("x", F, [rng.randint(0, 3) for _ in range(r)])]
        if opset >= v:
            if rng.random() < 0.5:
                attrs["noop_with_empty_axes"] = rng.randint(0, 1)
            if rng.random() < 0.7:
                ins.append(("a", np.array(axes, np.int64)))
        elif axes:
            attrs["axes"] = axes
        if evaluator_agrees(node_model(op, ins, opset=opset, **attrs)):
            ran += 1
        else:
            refused += 1
    assert ran >= 80 and refused >= 40, (ran, refused)   # 85 and 65
