"""Inference rules of the sequence and optional operators (onemodel/inference/rules/
sequence.py): the exact inferred type of every output (a sequence's element symbolic where the
inputs are), checked against the evaluator (``sound``, which compares every element of a
computed sequence with the inferred element); contradictions; unknown inputs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as P
from onnx import helper

import onemodel
from tests.infer.harness import inferred, node_model, sound
from tests.infer.rules_check import (
    check_family_registered,
    check_unknown_inputs,
    contradicts,
    expect,
)

F, I64, I32, B = P.FLOAT, P.INT64, P.INT32, P.BOOL


def _chain(nodes, inputs, out="y", opset=21, inits=()):
    """A model of ``nodes`` (onnx NodeProtos) with graph inputs ``inputs`` and output ``out``."""
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_empty_tensor_value_info(out)], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return onemodel.load(m.SerializeToString())


def _text(model, name="y"):
    v = inferred(model)[name]
    assert sound(model) >= 1
    return str(v)


A = ("a", F, ["N", 3])
B3 = ("b", F, ["N", 3])
B4 = ("b", F, ["N", 4])


def test_sequence_construct_of_equal_shapes():
    assert _text(node_model("SequenceConstruct", [A, B3])) == "sequence(tensor(float)[N,3])"


def test_sequence_construct_of_different_extents():
    assert _text(node_model("SequenceConstruct", [A, B4])) == "sequence(tensor(float)[N,?])"


def test_sequence_construct_of_two_element_types_contradicts():
    contradicts(node_model("SequenceConstruct", [A, ("b", I64, [2])]), "element types")


def test_sequence_empty_has_the_dtype():
    m = node_model("SequenceEmpty", [], dtype=I32)
    assert str(inferred(m)["y"]) == "sequence(tensor(int32))"
    m = node_model("SequenceEmpty", [])
    assert str(inferred(m)["y"]) == "sequence(tensor(float))"


@pytest.mark.parametrize("other, want", [(B3, "sequence(tensor(float)[N,3])"),
                                         (B4, "sequence(tensor(float)[N,?])")])
def test_sequence_insert_joins_the_inserted_tensor(other, want):
    m = _chain([helper.make_node("SequenceConstruct", ["a"], ["s"]),
                helper.make_node("SequenceInsert", ["s", "b"], ["y"])], [A, other])
    assert _text(m) == want


def test_sequence_erase_at_and_length():
    nodes = [helper.make_node("SequenceConstruct", ["a", "b"], ["s"]),
             helper.make_node("SequenceErase", ["s", "p"], ["e"]),
             helper.make_node("SequenceAt", ["e", "p"], ["y"]),
             helper.make_node("SequenceLength", ["e"], ["n"])]
    p = helper.make_tensor("p", I64, [], [0])
    m = _chain(nodes, [A, B3], inits=[p])
    v = inferred(m)
    assert str(v["e"]) == "sequence(tensor(float)[N,3])"
    assert str(v["n"]) == "tensor(int64)[]"
    expect(m, ["N", 3], F)


def _concat(new_axis, axis):
    nodes = [helper.make_node("SequenceConstruct", ["a", "b"], ["s"]),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=axis, new_axis=new_axis)]
    return _chain(nodes, [A, B3])


@pytest.mark.parametrize("new_axis, axis, shape", [(0, 0, [None, 3]), (0, -1, ["N", None]),
                                                   (1, 0, [None, "N", 3]),
                                                   (1, 2, ["N", 3, None])])
def test_concat_from_sequence(new_axis, axis, shape):
    expect(_concat(new_axis, axis), shape, F)


def test_concat_from_sequence_axis_out_of_range_contradicts():
    contradicts(_concat(0, 2), "axis 2 is out of range")


def _split(x, split=None, **attrs):
    ins = [x] + ([split] if split is not None else [])
    return node_model("SplitToSequence", ins, **attrs)


X = ("x", F, [6, "N"])


@pytest.mark.parametrize("split, attrs, want", [
    (None, {}, "sequence(tensor(float)[1,N])"),
    (None, {"keepdims": 0}, "sequence(tensor(float)[N])"),
    (("s", np.array(2, np.int64)), {}, "sequence(tensor(float)[2,N])"),
    (("s", np.array(4, np.int64)), {}, "sequence(tensor(float)[?,N])"),
    (("s", np.array([3, 3], np.int64)), {}, "sequence(tensor(float)[3,N])"),
    (("s", np.array([2, 4], np.int64)), {}, "sequence(tensor(float)[?,N])"),
    (("s", np.array(1, np.int64)), {"axis": 1}, "sequence(tensor(float)[6,1])"),
])
def test_split_to_sequence(split, attrs, want):
    m = _split(X, split, **attrs)
    assert _text(m) == want


def test_split_to_sequence_lengths_that_do_not_add_up_contradict():
    contradicts(_split(X, ("s", np.array([2, 3], np.int64))), "does not add up")


def _map_body(op):
    g = helper.make_graph([helper.make_node(op, ["e", "t"], ["o"])], "body",
                          [helper.make_tensor_value_info("e", F, None),
                           helper.make_tensor_value_info("t", F, None)],
                          [helper.make_empty_tensor_value_info("o")])
    return g


def test_sequence_map_with_a_sequence_and_a_tensor():
    nodes = [helper.make_node("SequenceConstruct", ["a", "b"], ["s"]),
             helper.make_node("SequenceMap", ["s", "t"], ["y"], body=_map_body("Add"))]
    m = _chain(nodes, [A, B3, ("t", F, [3])])
    assert _text(m) == "sequence(tensor(float)[N,3])"


def test_sequence_map_of_shapes():
    body = helper.make_graph([helper.make_node("Shape", ["e"], ["o"])], "body",
                             [helper.make_tensor_value_info("e", F, None)],
                             [helper.make_empty_tensor_value_info("o")])
    nodes = [helper.make_node("SequenceConstruct", ["a", "b"], ["s"]),
             helper.make_node("SequenceMap", ["s"], ["y"], body=body)]
    assert _text(_chain(nodes, [A, B4])) == "sequence(tensor(int64)[2])"


def test_optional_of_a_tensor_and_its_element():
    nodes = [helper.make_node("Optional", ["a"], ["o"]),
             helper.make_node("OptionalHasElement", ["o"], ["h"]),
             helper.make_node("OptionalGetElement", ["o"], ["y"])]
    m = _chain(nodes, [A], opset=18)
    v = inferred(m)
    assert str(v["o"]) == "optional(tensor(float)[N,3])"
    assert str(v["h"]) == "tensor(bool)[]"
    expect(m, ["N", 3], F)


def test_optional_without_input_has_the_type_attribute():
    t = helper.make_tensor_type_proto(I32, [2])
    nodes = [helper.make_node("Optional", [], ["o"], type=t),
             helper.make_node("OptionalHasElement", ["o"], ["y"])]
    m = _chain(nodes, [], opset=18)
    assert str(inferred(m)["o"]) == "optional(tensor(int32)[2])"
    expect(m, [], B)


@pytest.mark.parametrize("inputs, want", [([("x", F, [2])], (True,)), ([None], (False,))])
def test_optional_has_element_of_a_tensor_or_nothing_opset18(inputs, want):
    m = node_model("OptionalHasElement", inputs, opset=18)
    v = expect(m, [], B, data=want, check_onnx=False)
    assert v.data == want


def test_optional_get_element_of_a_tensor_opset18():
    expect(node_model("OptionalGetElement", [("x", F, ["N"])], opset=18), ["N"], F)


def test_optional_get_element_of_a_tensor_before_18_contradicts():
    m = node_model("OptionalGetElement", [("x", F, ["N"])], opset=15)
    proto = onnx.load_from_string(onemodel.to_bytes(m))
    assert proto.opset_import[0].version == 15
    contradicts(m, "not an optional")


def test_every_kernel_of_the_family_has_its_rule():
    assert check_family_registered("sequence") == 12


def test_unknown_inputs_never_raise():
    assert check_unknown_inputs("sequence") > 0
