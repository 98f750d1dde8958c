"""If, Loop and Scan kernels (onemodel/evaluate/kernels/control.py) against onnxruntime and
hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper
from oracle import assert_outputs, node_model, ort, ours

F = TP.FLOAT
I64 = TP.INT64


def _vi(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def _graph(nodes, inputs, outputs, name="body", inits=()):
    return helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))


# -- If ---------------------------------------------------------------------------------------

def _if_model(cond_shape=()):
    then_g = _graph([helper.make_node("Add", ["x", "x"], ["t"])], [], [_vi("t")], "then")
    else_g = _graph([helper.make_node("Neg", ["x"], ["e"])], [], [_vi("e")], "else")
    node = helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)
    g = helper.make_graph([node], "g", [_vi("c", TP.BOOL, cond_shape), _vi("x", F, [3])],
                          [_vi("y")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


@pytest.mark.parametrize("cond, expected", [(True, [2.0, -4.0, 6.0]), (False, [-1.0, 2.0, -3.0])])
def test_if_picks_branch_and_reads_outer_scope(cond, expected):
    model = _if_model()
    feeds = {"c": np.array(cond), "x": np.array([1, -2, 3], dtype=np.float32)}
    (y,) = ours(model, feeds)
    np.testing.assert_array_equal(y, np.array(expected, dtype=np.float32))
    assert_outputs(ours(model, feeds), ort(model, feeds,
        relies_on="If routes values and the branch Mul by 2 / Neg of small integers is exact"))


def test_if_branch_returning_a_sequence():
    seq_t = helper.make_tensor_sequence_value_info("s", F, None)
    then_g = _graph([helper.make_node("SequenceConstruct", ["x", "x"], ["s"])], [], [seq_t])
    else_g = _graph([helper.make_node("SequenceConstruct", ["x"], ["s"])], [], [seq_t])
    node = helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)
    g = helper.make_graph([node], "g", [_vi("c", TP.BOOL, []), _vi("x", F, [2])],
                          [helper.make_tensor_sequence_value_info("y", F, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    x = np.array([1.5, 2.5], dtype=np.float32)
    (y,) = ours(model, {"c": np.array(True), "x": x})
    assert isinstance(y, list) and len(y) == 2
    (y,) = ours(model, {"c": np.array(False), "x": x})
    assert len(y) == 1
    np.testing.assert_array_equal(y[0], x)


# -- Loop -------------------------------------------------------------------------------------

def _loop_body(stop_at=None):
    """Body: acc += i; scan output acc * 2; condition: i + 1 < stop_at (or pass-through)."""
    nodes = [
        helper.make_node("Cast", ["i"], ["fi"], to=F),
        helper.make_node("Add", ["acc_in", "fi"], ["acc_out"]),
        helper.make_node("Mul", ["acc_out", "two"], ["scan"]),
    ]
    inits = [helper.make_tensor("two", F, [], [2.0])]
    if stop_at is None:
        nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    else:
        inits += [helper.make_tensor("one", I64, [], [1]), helper.make_tensor("lim", I64, [],
                                                                              [stop_at])]
        nodes += [helper.make_node("Add", ["i", "one"], ["next"]),
                  helper.make_node("Less", ["next", "lim"], ["cond_out"])]
    return _graph(nodes, [_vi("i", I64, []), _vi("cond_in", TP.BOOL, []), _vi("acc_in", F, [2])],
                  [_vi("cond_out", TP.BOOL, []), _vi("acc_out", F, [2]), _vi("scan", F, [2])],
                  inits=inits)


def _loop_model(body, with_m=True, with_cond=True):
    ins = ["M" if with_m else "", "cond" if with_cond else "", "acc"]
    node = helper.make_node("Loop", ins, ["acc_final", "scans"], body=body)
    gin = [_vi("acc", F, [2])]
    if with_m:
        gin.insert(0, _vi("M", I64, []))
    if with_cond:
        gin.insert(1 if with_m else 0, _vi("cond", TP.BOOL, []))
    g = helper.make_graph([node], "g", gin, [_vi("acc_final"), _vi("scans")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def test_loop_trip_count_carried_value_and_scan_output():
    model = _loop_model(_loop_body())
    feeds = {"M": np.array(4, dtype=np.int64), "cond": np.array(True),
             "acc": np.array([10, 20], dtype=np.float32)}
    acc, scans = ours(model, feeds)
    # acc after i = 0..3: +0, +1, +2, +3
    np.testing.assert_array_equal(acc, np.array([16, 26], dtype=np.float32))
    np.testing.assert_array_equal(scans[:, 0], np.array([20, 22, 26, 32], dtype=np.float32))
    assert scans.shape == (4, 2)
    assert_outputs(ours(model, feeds), ort(model, feeds,
        relies_on="Loop adds small integers in float32: every sum is exact"))


def test_loop_stops_when_body_condition_turns_false():
    model = _loop_model(_loop_body(stop_at=2))
    feeds = {"M": np.array(10, dtype=np.int64), "cond": np.array(True),
             "acc": np.array([0, 0], dtype=np.float32)}
    acc, scans = ours(model, feeds)
    assert scans.shape == (2, 2)
    np.testing.assert_array_equal(acc, np.array([1, 1], dtype=np.float32))
    assert_outputs(ours(model, feeds), ort(model, feeds,
        relies_on="Loop adds small integers in float32: every sum is exact"))


def test_loop_condition_only_and_trip_count_only():
    model = _loop_model(_loop_body(stop_at=3), with_m=False)
    feeds = {"cond": np.array(True), "acc": np.array([0, 0], dtype=np.float32)}
    acc, scans = ours(model, feeds)
    assert scans.shape == (3, 2)
    assert_outputs(ours(model, feeds), ort(model, feeds,
        relies_on="Loop adds small integers in float32: every sum is exact"))
    # trip count only: the body's condition output is ignored
    model = _loop_model(_loop_body(stop_at=1), with_cond=False)
    feeds = {"M": np.array(3, dtype=np.int64), "acc": np.array([0, 0], dtype=np.float32)}
    acc, scans = ours(model, feeds)
    assert scans.shape == (3, 2)
    np.testing.assert_array_equal(acc, np.array([3, 3], dtype=np.float32))


def test_loop_zero_iterations_gives_initial_values_and_empty_scan():
    model = _loop_model(_loop_body())
    feeds = {"M": np.array(0, dtype=np.int64), "cond": np.array(True),
             "acc": np.array([5, 6], dtype=np.float32)}
    acc, scans = ours(model, feeds)
    np.testing.assert_array_equal(acc, feeds["acc"])
    assert scans.shape == (0, 2) and scans.dtype == np.float32


def test_loop_with_a_sequence_as_loop_carried_value():
    seq = helper.make_tensor_sequence_value_info
    body = _graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Unsqueeze", ["i", "ax"], ["iv"]),
         helper.make_node("SequenceInsert", ["s_in", "iv"], ["s_out"])],
        [_vi("i", I64, []), _vi("cond_in", TP.BOOL, []), seq("s_in", I64, None)],
        [_vi("cond_out", TP.BOOL, []), seq("s_out", I64, None)],
        inits=[helper.make_tensor("ax", I64, [1], [0])])
    loop = helper.make_node("Loop", ["M", "", "s0"], ["s_final"], body=body)
    empty = helper.make_node("SequenceEmpty", [], ["s0"], dtype=I64)
    g = helper.make_graph([empty, loop], "g", [_vi("M", I64, [])], [seq("s_final", I64, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    feeds = {"M": np.array(3, dtype=np.int64)}
    (got,) = ours(model, feeds)
    assert [v.tolist() for v in got] == [[0], [1], [2]]
    assert_outputs([got], ort(model, feeds,
        relies_on="sequence building is data movement of int64 tensors"))


# -- Scan -------------------------------------------------------------------------------------

def _sum_body(shape):
    """State s (shape), scan input x (shape): s' = s + x; scan output s'."""
    return _graph([helper.make_node("Add", ["s", "x"], ["s2"]),
                   helper.make_node("Identity", ["s2"], ["out"])],
                  [_vi("s", F, shape), _vi("x", F, shape)], [_vi("s2", F, shape),
                                                             _vi("out", F, shape)])


@pytest.mark.parametrize("attrs", [
    {},
    {"scan_input_directions": [1]},
    {"scan_input_axes": [1]},
    {"scan_output_directions": [1], "scan_output_axes": [-1]},
    {"scan_input_axes": [-1], "scan_output_axes": [1]},
])
def test_scan9_axes_and_directions_match_onnxruntime(attrs):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    state = np.zeros(3 if attrs.get("scan_input_axes", [0])[0] == 0 else 4, dtype=np.float32)
    body = _sum_body([state.shape[0]])
    feeds = {"s0": state, "x": x}
    model = node_model("Scan", feeds, ["s0", "x"], ["s_final", "ys"], opset=21, body=body,
                       num_scan_inputs=1, **attrs)
    got = ours(model, feeds)
    assert_outputs(got, ort(model, feeds,
        relies_on="Scan runs the body's Add once per step in scan order: one IEEE float32 addition "
                  "each, the same on every CPU"))
    if not attrs:
        np.testing.assert_allclose(got[1], np.cumsum(x, axis=0), rtol=1e-6)


def test_scan8_batch_and_sequence_lens():
    body = _sum_body([2])
    x = np.arange(2 * 3 * 2, dtype=np.float32).reshape(2, 3, 2)
    feeds = {"lens": np.array([3, 2], dtype=np.int64), "s0": np.zeros((2, 2), np.float32),
             "x": x}
    model = node_model("Scan", feeds, ["lens", "s0", "x"], ["s_final", "ys"], opset=8,
                       ir_version=3, body=body, num_scan_inputs=1)
    s_final, ys = ours(model, feeds)
    np.testing.assert_array_equal(s_final, [[6, 9], [14, 16]])
    np.testing.assert_array_equal(ys[0], np.cumsum(x[0], axis=0))
    np.testing.assert_array_equal(ys[1], [[6, 7], [14, 16], [0, 0]])


def test_scan8_reverse_without_sequence_lens_matches_onnxruntime():
    body = _sum_body([2])
    x = np.random.default_rng(0).standard_normal((2, 3, 2)).astype(np.float32)
    feeds = {"s0": np.ones((2, 2), np.float32), "x": x}
    model = node_model("Scan", feeds, ["", "s0", "x"], ["s_final", "ys"], opset=8,
                       ir_version=3, body=body, num_scan_inputs=1, directions=[1])
    assert_outputs(ours(model, feeds), ort(model, feeds,
        relies_on="Scan runs the body's Add once per step in scan order: one IEEE float32 addition "
                  "each, the same on every CPU"))


def test_loop_body_with_wrong_output_count_is_invalid_model():
    from onemodel.errors import InvalidModelError

    body = _graph([helper.make_node("Identity", ["cond_in"], ["cond_out"])],
                  [_vi("i", I64, []), _vi("cond_in", TP.BOOL, []), _vi("acc_in", F, [2])],
                  [_vi("cond_out", TP.BOOL, [])])
    model = _loop_model(body)
    feeds = {"M": np.array(2, dtype=np.int64), "cond": np.array(True),
             "acc": np.array([0, 0], dtype=np.float32)}
    with pytest.raises(InvalidModelError):
        ours(model, feeds)


def test_if_condition_with_two_elements_is_an_evaluation_error():
    from onemodel.errors import EvaluationError

    model = _if_model(cond_shape=None)
    with pytest.raises(EvaluationError):
        ours(model, {"c": np.array([True, False]), "x": np.zeros(3, np.float32)})
