"""Inference rules of the activation family (onemodel/inference/rules/activations.py): every
operator keeps its input's shape and element type (symbolic extents too), PRelu's slope
broadcasts unidirectionally to X (Clause 6.6.3), the softmax family checks its axis against the
rank from opset 11; contradictions, unknown ranks, the evaluator agreeing (``sound``) and onnx's
inference agreeing where it has an answer."""

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

F, D64, F16 = T.FLOAT, T.DOUBLE, T.FLOAT16


def test_every_kernel_has_a_rule_at_its_versions():
    assert check_family_registered("activations") == 19


def test_unknown_inputs_never_raise():
    assert check_unknown_inputs("activations") > 80


SAME = [
    ("Relu", 14, T.INT32, {}), ("Relu", 13, F, {}), ("Relu", 6, D64, {}), ("Relu", 1, F, {}),
    ("LeakyRelu", 16, F, {"alpha": 0.2}), ("LeakyRelu", 6, F, {}), ("Elu", 22, F, {}),
    ("Elu", 6, D64, {"alpha": 0.5}), ("Selu", 22, F, {}), ("Selu", 6, F, {}),
    ("Celu", 12, F, {"alpha": 2.0}), ("Sigmoid", 13, F, {}), ("Sigmoid", 6, F16, {}),
    ("HardSigmoid", 22, F, {}), ("HardSigmoid", 6, F, {"alpha": 0.1}),
    ("HardSwish", 14, F, {}), ("HardSwish", 22, F, {}), ("Softplus", 22, F, {}),
    ("Softplus", 1, D64, {}), ("Softsign", 22, F, {}), ("Gelu", 20, F, {}),
    ("Gelu", 20, F, {"approximate": "tanh"}), ("Mish", 18, F, {}), ("Mish", 22, F, {}),
    ("ThresholdedRelu", 10, F, {}), ("ThresholdedRelu", 22, F, {"alpha": 0.5}),
    ("Swish", 24, F, {}), ("Shrink", 9, F, {"lambd": 0.5}), ("Shrink", 9, T.INT32, {}),
]


@pytest.mark.parametrize("op,opset,elem,attrs", SAME,
                         ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(SAME)])
def test_activations_keep_shape_and_type(op, opset, elem, attrs):
    m = node_model(op, [("x", elem, ["N", 3, "H"])], opset=opset, **attrs)
    expect(m, ["N", 3, "H"], elem)


@pytest.mark.parametrize("opset,x,slope,shape", [
    (16, ["N", 3, "H"], [3, 1], ["N", 3, "H"]),
    (16, ["N", None, 4], [3, 1], ["N", 3, 4]),     # the slope's 3 is X's extent
    (9, [2, 3], [], [2, 3]),
    (7, ["N", 5], [5], ["N", 5]),
    (6, ["N", 3, 4, 4], [3], ["N", 3, 4, 4]),       # opset 6: one slope per channel
    (1, [2, 3], [1], [2, 3]),
])
def test_prelu(opset, x, slope, shape):
    m = node_model("PRelu", [("x", F, x), ("s", F, slope)], opset=opset)
    if None in x:
        assert inferred(m)["y"].shape == (Expr.var("N"), 3, 4)
    else:
        expect(m, shape, F)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("opset,shape,axis", [
    (13, ["N", 3, 4], None), (13, ["N", 3], 0), (13, [2, "M"], -2), (11, ["N", 3, 4], None),
    (11, [5], -1), (1, ["N", 4], None), (1, [4], 1), (1, [2, 3], 2),   # opset 1: any axis
])
def test_softmax_family_keeps_the_shape(op, opset, shape, axis):
    attrs = {} if axis is None else {"axis": axis}
    m = node_model(op, [("x", F, shape)], opset=opset, **attrs)
    expect(m, shape, F)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("opset,shape,axis,words", [
    (13, ["N", 3], 2, ("axis 2", "rank 2")), (13, ["N", 3], -3, ("axis -3",)),
    (11, [4], None, ("axis 1", "rank 1")), (13, [], None, ("rank 0",)),
    (11, [], None, ("rank 0",)),
])
def test_softmax_axis_out_of_range_is_a_contradiction(op, opset, shape, axis, words):
    attrs = {} if axis is None else {"axis": axis}
    contradicts(node_model(op, [("x", F, shape)], opset=opset, **attrs), *words)


@pytest.mark.parametrize("x,slope,words", [
    ([2, 3], [4], ("differ", "3 and 4")),
    ([3], [2, 3], ("higher rank",)),
    ([2, 1], [2, 5], ("differ", "1 and 5")),   # X's 1 cannot take the slope's 5
])
def test_prelu_slope_that_does_not_broadcast_to_x(x, slope, words):
    contradicts(node_model("PRelu", [("x", F, x), ("s", F, slope)], opset=16), *words)


def test_unknown_rank():
    for op, opset in [("Relu", 14), ("Softmax", 13), ("Softmax", 11), ("PRelu", 16)]:
        ins = [("x", F, None), ("s", F, [3])][:2 if op == "PRelu" else 1]
        v = inferred(node_model(op, ins, opset=opset))["y"]
        assert v.shape is None and v.elem == F
    v = inferred(node_model("PRelu", [("x", F, [2, 3]), ("s", F, None)], opset=16))["y"]
    assert v.shape == (2, 3)
