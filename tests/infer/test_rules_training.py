"""Inference rules of the optimizers of ai.onnx.preview.training (onemodel/inference/rules/
training.py): the variadic outputs group by group (X_new..., then the new states), each with
the broadcast shape of the tensors its pseudo code computes it from, the element type of the
optimized tensors; contradictions for input counts that do not split into groups and for R or
T that are not scalars; unknown ranks; the evaluator agreeing (``sound``)."""

import pytest
from onnx import TensorProto as T

from onemodel.inference import Expr
from tests.infer.harness import inferred, node_model
from tests.infer.rules_check import (
    check_family_registered,
    check_unknown_inputs,
    contradicts,
    expect,
)

DOMAIN = "ai.onnx.preview.training"
F, D64, I64 = T.FLOAT, T.DOUBLE, T.INT64
GROUPS = {"Adagrad": "XGH", "Adam": "XGVH", "Momentum": "XGV"}
ATTRS = {"Momentum": {"alpha": 0.9, "beta": 0.1, "norm_coefficient": 0.0, "mode": "standard"}}


def test_every_kernel_has_a_rule_at_its_versions():
    assert check_family_registered("training") == 3


def test_unknown_inputs_never_raise():
    assert check_unknown_inputs("training") == 9   # 3 operators, 3 kinds of input


def optimizer(op, shapes, elem=F, r=(), t=()):
    """A model of ``op`` optimizing tensors of ``shapes`` (each group member gets the same
    shape unless ``shapes`` gives a dict member -> shape)."""
    ins = [("r", elem, list(r)), ("t", I64, list(t))]
    for g in GROUPS[op]:
        for k, s in enumerate(shapes):
            ins.append((f"{g.lower()}{k}", elem, s.get(g, s["X"]) if isinstance(s, dict) else s))
    n_out = (len(GROUPS[op]) - 1) * len(shapes)
    return node_model(op, ins, n_out, domain=DOMAIN, **ATTRS.get(op, {})), n_out


@pytest.mark.parametrize("op", list(GROUPS))
@pytest.mark.parametrize("elem", [F, D64])
def test_outputs_have_the_shapes_of_the_optimized_tensors(op, elem):
    m, n_out = optimizer(op, [["N", 2], [3]], elem)
    for k in range(n_out):
        expect(m, ["N", 2] if k % 2 == 0 else [3], elem, out=f"y{k}", check_onnx=False)


def test_one_tensor_and_broadcast_members():
    m, _ = optimizer("Adam", [{"X": ["N", 4], "G": ["N", 1], "V": [4], "H": [1, 4]}])
    got = inferred(m)
    assert [got[f"y{k}"].shape for k in range(3)] == [(Expr.var("N"), 4)] * 3
    # a state is computed from X, G and itself only
    m, _ = optimizer("Adagrad", [{"X": [1], "G": [1], "H": [5]}])
    got = inferred(m)
    assert got["y0"].shape == (5,) and got["y1"].shape == (5,)
    m, _ = optimizer("Momentum", [{"X": ["N", 3], "G": ["N", 3], "V": [3]}])
    expect(m, ["N", 3], F, out="y1", check_onnx=False)


@pytest.mark.parametrize("op,extra,r,t,words", [
    ("Adagrad", 1, (), (), ("do not split into 3",)),
    ("Adam", 2, (), (), ("do not split into 4",)),
    ("Momentum", 0, (2,), (), ("R must be a scalar",)),
    ("Adam", 0, (), (1, 3), ("T must be a scalar",)),
])
def test_contradictions(op, extra, r, t, words):
    ins = [("r", F, list(r)), ("t", I64, list(t))]
    ins += [(f"x{k}", F, [2]) for k in range(len(GROUPS[op]) + extra)]
    contradicts(node_model(op, ins, 2, domain=DOMAIN, **ATTRS.get(op, {})), *words)


def test_scalars_of_one_element_and_unknown_ranks():
    m, _ = optimizer("Adagrad", [[2]], r=(1,), t=(1,))
    expect(m, [2], F, out="y0", check_onnx=False)
    m, _ = optimizer("Adagrad", [None])
    got = inferred(m)
    assert got["y0"].shape is None and got["y0"].elem == F and got["y1"].elem == F
