"""Inference rules of the random generators and Dropout (onemodel/inference/rules/random.py):
Dropout (bool mask), random generators (dtype and shape attributes, *Like, Bernoulli,
Multinomial); contradictions; onnx agreeing where it has an answer."""

import pytest
from onnx import TensorProto as T

from tests.infer.harness import node_model
from tests.infer.rules_check import (
    check_family_registered,
    check_unknown_inputs,
    contradicts,
    expect,
)

F, D64, F16, I64, I32, B = T.FLOAT, T.DOUBLE, T.FLOAT16, T.INT64, T.INT32, T.BOOL


def test_every_kernel_has_a_rule_at_its_versions():
    assert check_family_registered("random") == 7


def test_unknown_inputs_never_raise():
    assert check_unknown_inputs("random") >= 57


@pytest.mark.parametrize("opset,mask", [(6, F), (7, F), (10, B), (12, B), (13, B), (22, B)])
def test_dropout(opset, mask):
    m = node_model("Dropout", [("x", F, ["N", 3])], 2, opset=opset)
    expect(m, ["N", 3], F, out="y0")
    expect(m, ["N", 3], mask, out="y1")


@pytest.mark.parametrize("op", ["RandomUniform", "RandomNormal"])
@pytest.mark.parametrize("opset", [1, 22])
def test_random_generators(op, opset):
    expect(node_model(op, [], opset=opset, shape=[2, 3]), [2, 3], F)
    expect(node_model(op, [], opset=opset, shape=[4], dtype=D64), [4], D64)
    contradicts(node_model(op, [], opset=opset, shape=[-1]), "negative")


@pytest.mark.parametrize("op", ["RandomUniformLike", "RandomNormalLike"])
@pytest.mark.parametrize("opset", [1, 22])
def test_random_like(op, opset):
    expect(node_model(op, [("x", F16, ["N", 2])], opset=opset), ["N", 2], F16)
    expect(node_model(op, [("x", F16, ["N", 2])], opset=opset, dtype=D64), ["N", 2], D64)


def test_bernoulli_and_multinomial():
    expect(node_model("Bernoulli", [("p", F, ["N", 2])], opset=15), ["N", 2], F)
    expect(node_model("Bernoulli", [("p", F, ["N", 2])], opset=15, dtype=B), ["N", 2], B)
    for opset in (7, 22):
        expect(node_model("Multinomial", [("x", F, ["N", 5])], opset=opset, sample_size=3),
               ["N", 3], I32)
        expect(node_model("Multinomial", [("x", F, ["N", 5])], opset=opset, dtype=I64),
               ["N", 1], I64)
    contradicts(node_model("Multinomial", [("x", F, [5])], opset=22), "rank 1")

