"""Sequence and optional kernels (onemodel/evaluate/kernels/sequence.py) against onnxruntime and
hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper
from oracle import assert_outputs, assert_same, node_model, ort, ours, reference

F = TP.FLOAT
I64 = TP.INT64


def _seq_info(name, elem=F):
    return helper.make_tensor_sequence_value_info(name, elem, None)


def _model(nodes, inputs, outputs, opset=21):
    g = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


A = np.array([[1, 2], [3, 4]], dtype=np.float32)
B = np.array([[5, 6]], dtype=np.float32)
C = np.array([[7, 8], [9, 10], [11, 12]], dtype=np.float32)


def _construct_then(op, extra_inputs, extra_infos, attrs=None, out_seq=True):
    """SequenceConstruct(a, b, c) -> op(seq, *extra) -> y."""
    nodes = [helper.make_node("SequenceConstruct", ["a", "b", "c"], ["s"]),
             helper.make_node(op, ["s"] + extra_inputs, ["y"], **(attrs or {}))]
    ins = [helper.make_tensor_value_info(n, F, None) for n in "abc"] + extra_infos
    out = _seq_info("y") if out_seq else helper.make_tensor_value_info("y", F, None)
    return _model(nodes, ins, [out])


@pytest.mark.parametrize("pos, expected", [(None, [A, B, C, B]), (0, [B, A, B, C]),
                                           (-1, [A, B, B, C]), (3, [A, B, C, B])])
def test_sequence_insert_positions(pos, expected):
    extra = ["t"] + (["p"] if pos is not None else [])
    infos = [helper.make_tensor_value_info("t", F, None)]
    feeds = {"a": A, "b": B, "c": C, "t": B}
    if pos is not None:
        infos.append(helper.make_tensor_value_info("p", I64, []))
        feeds["p"] = np.array(pos, dtype=np.int64)
    model = _construct_then("SequenceInsert", extra, infos)
    (got,) = ours(model, feeds)
    assert_same(got, expected)
    assert_outputs([got], ort(model, feeds,
        relies_on="sequence operators are data movement of float32 tensors"))


@pytest.mark.parametrize("pos, expected", [(None, [A, B]), (0, [B, C]), (-2, [A, C])])
def test_sequence_erase(pos, expected):
    infos, extra, feeds = [], [], {"a": A, "b": B, "c": C}
    if pos is not None:
        infos = [helper.make_tensor_value_info("p", I64, [])]
        extra = ["p"]
        feeds["p"] = np.array(pos, dtype=np.int64)
    model = _construct_then("SequenceErase", extra, infos)
    (got,) = ours(model, feeds)
    assert_same(got, expected)
    assert_outputs([got], ort(model, feeds,
        relies_on="sequence operators are data movement of float32 tensors"))


def test_sequence_at_length_and_out_of_range():
    from onemodel.errors import EvaluationError

    infos = [helper.make_tensor_value_info("p", I64, [])]
    model = _construct_then("SequenceAt", ["p"], infos, out_seq=False)
    (got,) = ours(model, {"a": A, "b": B, "c": C, "p": np.array(-1, dtype=np.int64)})
    np.testing.assert_array_equal(got, C)
    with pytest.raises(EvaluationError):
        ours(model, {"a": A, "b": B, "c": C, "p": np.array(3, dtype=np.int64)})
    model = _construct_then("SequenceLength", [], [], out_seq=False)
    (n,) = ours(model, {"a": A, "b": B, "c": C})
    assert n.dtype == np.int64 and n.shape == () and int(n) == 3


@pytest.mark.parametrize("axis, new_axis", [(0, 0), (1, 1), (-1, 1), (0, 1)])
def test_concat_from_sequence(axis, new_axis):
    x = [np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * i for i in range(3)]
    feeds = {"a": x[0], "b": x[1], "c": x[2]}
    model = _construct_then("ConcatFromSequence", [], [], {"axis": axis, "new_axis": new_axis},
                            out_seq=False)
    (got,) = ours(model, feeds)
    want = np.stack(x, axis=axis) if new_axis else np.concatenate(x, axis=axis)
    np.testing.assert_array_equal(got, want)
    assert_outputs([got], ort(model, feeds,
        relies_on="sequence operators are data movement of float32 tensors"))


@pytest.mark.parametrize("split, attrs", [
    (None, {}), (None, {"keepdims": 0, "axis": 1}), (np.array(2, np.int64), {"axis": 1}),
    (np.array([1, 3], np.int64), {"axis": 1}), (np.array([2, 1], np.int64), {}),
])
def test_split_to_sequence(split, attrs):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    feeds = {"x": x}
    ins = ["x"]
    if split is not None:
        feeds["split"] = split
        ins.append("split")
    model = node_model("SplitToSequence", feeds, ins, ["s"], **attrs)
    (got,) = ours(model, feeds)
    assert_outputs([got], ort(model, feeds,
        relies_on="sequence operators are data movement of float32 tensors"))
    assert_same(np.concatenate(got, axis=attrs.get("axis", 0)) if attrs.get("keepdims", 1)
                else np.stack(got, axis=attrs.get("axis", 0)), x)


def test_sequence_empty_then_insert():
    nodes = [helper.make_node("SequenceEmpty", [], ["e"], dtype=F),
             helper.make_node("SequenceInsert", ["e", "x"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", F, None)], [_seq_info("y")])
    (got,) = ours(model, {"x": A})
    assert_same(got, [A])


def test_sequence_map_with_a_sequence_and_a_tensor():
    body = helper.make_graph(
        [helper.make_node("Add", ["xi", "t"], ["o1"]), helper.make_node("Shape", ["xi"], ["o2"])],
        "body", [helper.make_tensor_value_info("xi", F, None),
                 helper.make_tensor_value_info("t", F, None)],
        [helper.make_tensor_value_info("o1", F, None),
         helper.make_tensor_value_info("o2", I64, None)])
    nodes = [helper.make_node("SequenceMap", ["s", "t"], ["y1", "y2"], body=body)]
    model = _model(nodes, [_seq_info("s"), helper.make_tensor_value_info("t", F, None)],
                   [_seq_info("y1"), _seq_info("y2", I64)])
    s = [np.ones((2,), np.float32), np.arange(3, dtype=np.float32)]
    t = np.array(10, dtype=np.float32)
    y1, y2 = ours(model, {"s": s, "t": t})
    assert_same(y1, [s[0] + 10, s[1] + 10])
    assert_same(y2, [np.array([2]), np.array([3])])
    assert_outputs([y1, y2], reference(model, {"s": s, "t": t}))


def test_optional_has_and_get_element():
    opt_t = helper.make_optional_type_proto(helper.make_tensor_type_proto(F, None))
    nodes = [helper.make_node("Optional", ["x"], ["o"]),
             helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("OptionalGetElement", ["o"], ["v"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", F, None)],
                   [helper.make_tensor_value_info("has", TP.BOOL, None),
                    helper.make_tensor_value_info("v", F, None)], opset=18)
    has, v = ours(model, {"x": A})
    assert has.dtype == np.bool_ and has.shape == () and bool(has)
    np.testing.assert_array_equal(v, A)
    # an empty optional: Optional without input, typed by its attribute
    nodes = [helper.make_node("Optional", [], ["o"], type=opt_t.optional_type.elem_type),
             helper.make_node("OptionalHasElement", ["o"], ["has"])]
    model = _model(nodes, [], [helper.make_tensor_value_info("has", TP.BOOL, None)], opset=18)
    (has,) = ours(model, {})
    assert not bool(has)


def test_optional_get_element_of_empty_optional_is_an_evaluation_error():
    from onemodel.errors import EvaluationError

    elem = helper.make_tensor_type_proto(F, None)
    nodes = [helper.make_node("Optional", [], ["o"], type=elem),
             helper.make_node("OptionalGetElement", ["o"], ["v"])]
    model = _model(nodes, [], [helper.make_tensor_value_info("v", F, None)], opset=18)
    with pytest.raises(EvaluationError):
        ours(model, {})
