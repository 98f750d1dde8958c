"""Inference rules of If, Loop and Scan (onemodel/inference/rules/control.py): the exact inferred
type of every output (symbolic where the inputs are), checked against the evaluator (``sound``)
and, where onnx's inference has an answer, against it; contradictions; unknown inputs."""

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

F, I64, B = P.FLOAT, P.INT64, P.BOOL


def _graph(nodes, inputs, outputs, name="body"):
    return helper.make_graph(nodes, name, [helper.make_tensor_value_info(*i) for i in inputs],
                             [helper.make_tensor_value_info(*o) if len(o) == 3
                              else helper.make_empty_tensor_value_info(o[0]) for o in outputs])


def _branch(op, out, *ins, **attrs):
    """A branch of one node reading outer names ``ins``, output ``out`` (no declared type)."""
    return _graph([helper.make_node(op, list(ins), [out], **attrs)], [], [(out,)], out)


def _with_outer(model, outer):
    """``model`` with graph inputs ``outer`` (``(name, elem, shape)``) its node does not take
    but its subgraphs read."""
    proto = onnx.load_from_string(onemodel.to_bytes(model))
    for o in outer:
        proto.graph.input.append(helper.make_tensor_value_info(*o))
    return onemodel.load(proto.SerializeToString())


# -- If --------------------------------------------------------------------------------------
def _if(then_g, else_g, cond=("c", B, []), inputs=(), n=1):
    m = node_model("If", [cond], n, then_branch=then_g, else_branch=else_g)
    return _with_outer(m, inputs)


X = ("x", F, ["N", 3])
Z = ("z", F, ["N", 4])


def test_if_equal_branches_keep_the_shape():
    m = _if(_branch("Identity", "t", "x"), _branch("Relu", "e", "x"), inputs=[X])
    expect(m, ["N", 3], F)


def test_if_branches_of_different_extents_join():
    m = _if(_branch("Identity", "t", "x"), _branch("Identity", "e", "z"), inputs=[X, Z])
    expect(m, ["N", None], F)


def test_if_branches_of_different_ranks_give_an_unknown_rank():
    flat = _branch("ReduceMax", "e", "z", keepdims=0)
    m = _if(_branch("Identity", "t", "x"), flat, inputs=[X, Z])
    v = inferred(m)["y"]
    assert v.shape is None and v.elem == F
    assert sound(m, subgraphs=False) == 0  # no rank to compare; the element type is checked
    assert sound(m) == 3     # the output of the branch that ran, on each of the 3 runs


def test_if_known_condition_picks_its_branch():
    for flag, shape in ((True, ["N", 3]), (False, ["N", 4])):
        m = _if(_branch("Identity", "t", "x"), _branch("Identity", "e", "z"),
                cond=("c", np.array(flag)), inputs=[X, Z])
        expect(m, shape, F, check_onnx=False)


def test_if_shape_data_of_equal_branches_is_kept():
    m = _if(_branch("Shape", "t", "x"), _branch("Shape", "e", "x"), inputs=[X])
    v = inferred(m)["y"]
    assert str(v) == "tensor(int64)[2]" and str(v.data[0]) == "N" and v.data[1] == 3
    assert sound(m) == 6     # y and the output of the branch that ran, on each of 3 runs


def test_if_element_types_that_differ_contradict():
    m = _if(_branch("Identity", "t", "x"), _branch("Shape", "e", "x"), inputs=[X])
    contradicts(m, "element types")


def test_if_branch_with_another_number_of_outputs_contradicts():
    two = _graph([helper.make_node("Identity", ["x"], ["a"]),
                  helper.make_node("Identity", ["x"], ["b"])], [], [("a",), ("b",)], "two")
    m = _if(two, _branch("Identity", "e", "x"), inputs=[X])
    contradicts(m, "then_branch", "2 outputs")


# -- Loop --------------------------------------------------------------------------------------
def _loop_body(nodes, carried, scans, extra_inputs=()):
    ins = [("i", I64, []), ("cond_in", B, [])] + list(carried)
    outs = [("cond_out",)] + [(n,) for n in scans[0]] + [(n,) for n in scans[1]]
    return _graph(nodes, ins + list(extra_inputs), outs)


def _doubling_body(cond="Identity"):
    """Carried v [N] -> v + v, scan output v (the carried value as it entered)."""
    nodes = [helper.make_node(cond, ["cond_in"], ["cond_out"]),
             helper.make_node("Add", ["v", "v"], ["v_out"]),
             helper.make_node("Identity", ["v"], ["s"])]
    return _loop_body(nodes, [("v", F, None)], (["v_out"], ["s"]))


def _loop(body, m, cond, inputs, n=2):
    return node_model("Loop", [m, cond, *inputs], n, body=body)


V = ("v0", F, ["N"])


def test_loop_known_trip_count_stacks_on_a_leading_axis():
    m = _loop(_doubling_body(), ("M", np.array(3, np.int64)), ("c", np.array(True)), [V])
    expect(m, ["N"], F, out="y0")
    expect(m, [3, "N"], F, out="y1")


def test_loop_trip_count_of_an_extent():
    """M = Shape(w)[0] = K: K iterations (the body's condition is the constant true)."""
    proto = onnx.load_from_string(onemodel.to_bytes(
        _loop(_doubling_body(), ("M", I64, []), ("c", np.array(True)), [V])))
    g = proto.graph
    g.node.insert(0, helper.make_node("Shape", ["w"], ["shp"]))
    g.node.insert(1, helper.make_node("ReduceMax", ["shp"], ["M"], keepdims=0))
    del g.input[[i.name for i in g.input].index("M")]
    g.input.append(helper.make_tensor_value_info("w", F, ["K"]))
    m = onemodel.load(proto.SerializeToString())
    expect(m, ["K", "N"], F, out="y1")


def test_loop_trip_count_with_the_condition_omitted():
    m = _loop(_doubling_body(cond="Not"), ("M", np.array(4, np.int64)), None, [V])
    expect(m, [4, "N"], F, out="y1")     # the body's condition is ignored without cond


def test_loop_body_condition_not_provably_true_leaves_the_count_unknown():
    body = _doubling_body(cond="Not")
    m = _loop(body, ("M", np.array(4, np.int64)), ("c", np.array(True)), [V])
    expect(m, [None, "N"], F, out="y1")  # the first iteration runs: the body's extents hold


def test_loop_unknown_trip_count_keeps_only_what_zero_iterations_agree_with():
    m = _loop(_doubling_body(), ("M", I64, []), ("c", B, []), [V])
    v = expect(m, ["N"], F, out="y0")
    assert v.shape is not None
    # zero iterations give [0] (the body declares no shape for s): the rank is not entailed
    assert inferred(m)["y1"].shape is None and inferred(m)["y1"].elem == F


def test_loop_unknown_trip_count_with_a_declared_body_output():
    body = _doubling_body()
    body.output[2].CopyFrom(helper.make_tensor_value_info("s", F, [5]))
    m = _loop(body, ("M", I64, []), ("c", B, []), [("v0", F, [5])])
    expect(m, [None, 5], F, out="y1")


def test_loop_carried_value_that_grows_is_generalized():
    nodes = [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
             helper.make_node("Concat", ["v", "one"], ["v_out"], axis=0),
             helper.make_node("Shape", ["v"], ["s"])]
    body = _loop_body(nodes, [("v", F, None)], (["v_out"], ["s"]))
    one = helper.make_tensor("one", F, [1], [1.0])
    body.initializer.append(one)
    m = _loop(body, ("M", np.array(2, np.int64)), ("c", np.array(True)), [V])
    expect(m, [None], F, out="y0")
    expect(m, [2, 1], I64, out="y1")
    # the body was inferred again with v of unknown extent: no stale N + 1 in its values
    # (3 runs: y0 and y1; the body's 3 inputs and 3 outputs in each of 2 iterations)
    assert sound(m) == 3 * (2 + 2 * 6)


def test_loop_iteration_number_is_an_int64_scalar():
    nodes = [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
             helper.make_node("Identity", ["v"], ["v_out"]),
             helper.make_node("Identity", ["i"], ["s"])]
    body = _loop_body(nodes, [("v", F, None)], (["v_out"], ["s"]))
    m = _loop(body, ("M", np.array(3, np.int64)), ("c", np.array(True)), [V])
    expect(m, [3], I64, out="y1")


def test_loop_zero_trips():
    m = _loop(_doubling_body(), ("M", np.array(0, np.int64)), ("c", np.array(True)), [V])
    v = inferred(m)["y1"]
    assert v.shape is None or v.shape[0] == 0
    assert sound(m) >= 3


def test_loop_carried_element_type_change_contradicts():
    nodes = [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
             helper.make_node("Shape", ["v"], ["v_out"])]
    body = _loop_body(nodes, [("v", F, None)], (["v_out"], []))
    m = _loop(body, ("M", np.array(3, np.int64)), ("c", np.array(True)), [V], n=1)
    contradicts(m, "Loop carried", "element types")


# -- Scan ----------------------------------------------------------------------------------------
def _scan_body():
    """State s [2], slice x [2]: s + x, scan output s + x."""
    nodes = [helper.make_node("Add", ["s", "x"], ["s_out"]),
             helper.make_node("Identity", ["s_out"], ["o"])]
    return _graph(nodes, [("s", F, None), ("x", F, None)], [("s_out",), ("o",)])


def test_scan9_stacks_along_the_scan_output_axis():
    m = node_model("Scan", [("s0", F, [2]), ("xs", F, [3, 2])], 2, opset=16, body=_scan_body(),
                   num_scan_inputs=1)
    expect(m, [2], F, out="y0")
    expect(m, [3, 2], F, out="y1")


def test_scan9_input_and_output_axes():
    m = node_model("Scan", [("s0", F, [2]), ("xs", F, [2, 4])], 2, opset=16, body=_scan_body(),
                   num_scan_inputs=1, scan_input_axes=[-1], scan_output_axes=[-1],
                   scan_output_directions=[1])
    expect(m, [2], F, out="y0")
    expect(m, [2, 4], F, out="y1")


def test_scan9_symbolic_length_that_may_be_zero():
    m = node_model("Scan", [("s0", F, [2]), ("xs", F, ["L", 2])], 2, opset=16,
                   body=_scan_body(), num_scan_inputs=1)
    v = inferred(m)["y1"]
    assert v.shape is None   # zero steps give [0] (nothing declared): the rank is not entailed
    assert sound(m, subgraphs=False) == 3


def test_scan9_lengths_that_differ_contradict():
    body = _graph([helper.make_node("Add", ["s", "x"], ["s_out"]),
                   helper.make_node("Add", ["s_out", "w"], ["o"])],
                  [("s", F, None), ("x", F, None), ("w", F, None)], [("s_out",), ("o",)])
    m = node_model("Scan", [("s0", F, [2]), ("xs", F, [3, 2]), ("ws", F, [4, 2])], 2,
                   opset=16, body=body, num_scan_inputs=2)
    contradicts(m, "scan input sequence lengths", "3", "4")


def test_scan8_batch_and_sequence_axes():
    m = node_model("Scan", [None, ("s0", F, ["B", 2]), ("xs", F, ["B", 3, 2])], 2, opset=8,
                   body=_scan_body(), num_scan_inputs=1)
    expect(m, ["B", 2], F, out="y0")
    expect(m, ["B", 3, 2], F, out="y1")


def test_num_scan_inputs_that_do_not_fit_contradict():
    m = node_model("Scan", [("s0", F, [2]), ("xs", F, [3, 2])], 2, opset=16, body=_scan_body(),
                   num_scan_inputs=3)
    contradicts(m, "num_scan_inputs")


# -- the family --------------------------------------------------------------------------------
def test_every_kernel_of_the_family_has_its_rule():
    assert check_family_registered("control") == 3


@pytest.mark.parametrize("module", ["control"])
def test_unknown_inputs_never_raise(module):
    assert check_unknown_inputs(module) > 0
