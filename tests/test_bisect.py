"""bisect: the first node whose outputs differ between two runs, and whether the node itself or
its inputs are to blame (verify --run --bisect; issue 13).

The detector is testdata/models/detector_legacy.onnx, a YOLO-style network exported by torch
(testdata/README.md). Comparisons within one engine are bit for bit (the same kernels on the
same inputs give the same bits); comparisons with onnxruntime are within the Part 1, Clause 11.5
defaults of onemodel.compare (rtol 1e-3, atol 1e-7 for float32), the tolerance onnx's own
reference tests use, which onnxruntime's float32 kernels meet on this network.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from onnx import helper
from oracle_releases import needs_onnxruntime

import onemodel
from onemodel.bisect import (
    INPUTS,
    NODE,
    bisect,
    exposed_copy,
    intermediate_values,
    lone_node_model,
    topological_order,
)
from onemodel.compare import Tolerances
from onemodel.evaluate import random_inputs, run
from onemodel.formats.onnx import decode_model
from onemodel.ir import Tensor

DETECTOR = pathlib.Path(__file__).parent.parent / "testdata" / "models" / "detector_legacy.onnx"


@pytest.fixture(scope="module")
def detector():
    m = onemodel.load(DETECTOR)
    yield m
    m.close()


def _inner_conv(model):
    """(node index, node, weight name) of the third Conv in topological order (of 8: neither
    the first nor the last)."""
    convs = [i for i in topological_order(model) if model.graph.nodes[i].op_type == "Conv"]
    assert len(convs) == 8
    i = convs[2]
    node = model.graph.nodes[i]
    return i, node, node.inputs[1]


def _with_weight_changed(model, name: str, flat_index: int, delta: float):
    """A copy of ``model`` whose initializer ``name`` has element ``flat_index`` moved by
    ``delta`` (the only change)."""
    copy = model.copy()
    inits = copy.graph.initializers
    k = [t.name for t in inits].index(name)
    w = inits[k].numpy().copy()
    w.flat[flat_index] += delta
    inits[k] = Tensor.from_numpy(w, name=name)
    return copy


def _descendants(model, index: int) -> set[int]:
    """Indices of the nodes that read, directly or not, an output of node ``index``."""
    nodes = model.graph.nodes
    reached, names = set(), set(n for n in nodes[index].outputs if n)
    changed = True
    while changed:
        changed = False
        for j, n in enumerate(nodes):
            if j not in reached and any(x in names for x in n.inputs):
                reached.add(j)
                names.update(o for o in n.outputs if o)
                changed = True
    return reached


def test_a_changed_weight_of_an_inner_conv_names_that_conv_and_blames_inputs_after_it(detector):
    index, conv, weight = _inner_conv(detector)
    b = _with_weight_changed(detector, weight, 7, 0.75)
    inputs = random_inputs(detector, seed=0)
    report = bisect(detector, b, inputs, tolerances=Tolerances.bit_exact(), max_later=None)

    first = report.first
    assert first is not None and not report.equal
    assert (first.index, first.op_type, first.name) == (index, "Conv", conv.name)
    assert first.path == f"graph.nodes[{index}]"
    # every node before it in topological order was compared and agreed
    assert first.position == topological_order(detector).index(index)
    assert report.nodes_compared > first.position
    # its inputs: the activation agrees, the weight differs in exactly the element changed
    by_name = dict(first.inputs)
    assert by_name[conv.inputs[0]].within
    w = by_name[weight]
    assert not w.within and w.n_out == 1
    assert w.first_index == np.unravel_index(7, w.shape_a)
    assert w.max_abs == pytest.approx(0.75, rel=1e-6)  # float32 rounding of w + 0.75
    ((out_name, out),) = first.outputs
    assert out_name == conv.outputs[0] and not out.within and out.n_out > 0
    # alone, B's Conv on A's inputs still differs: the node itself (its weight)
    assert first.verdict == NODE
    assert not first.rerun[0][1].within

    # every later differing node reads the Conv's output, and agrees when given A's inputs
    assert report.later and len(report.later) == report.differing - 1
    downstream = _descendants(detector, index)
    for n in report.later:
        assert n.index in downstream, n.label
        assert n.verdict == INPUTS, (n.label, n.rerun_error)
        assert all(c.within for _, c in n.rerun)
        assert any(c is not None and not c.within for _, c in n.inputs), n.label
    last = detector.graph.nodes[report.later[-1].index]
    assert last.outputs[0] == "detections"
    assert not report.unmatched and not report.skipped
    text = "\n".join(report.lines())
    assert f"first differing node graph.nodes[{index}] (Conv {conv.name!r})" in text
    assert "the node itself differs" in text and "its inputs differ" in text
    js = report.to_json()
    assert js["first"]["op_type"] == "Conv" and js["first"]["verdict"] == "node"
    assert {n["verdict"] for n in js["later"]} == {"inputs"}


def test_max_later_caps_the_reruns_and_the_report_says_how_many_more(detector):
    _, _, weight = _inner_conv(detector)
    b = _with_weight_changed(detector, weight, 0, -0.5)
    report = bisect(detector, b, random_inputs(detector, seed=1),
                    tolerances=Tolerances.bit_exact(), max_later=2)
    assert len(report.later) == 2 and report.differing > 3
    assert f"  ({report.differing - 3} more differing nodes not re-run)" in report.lines()


@needs_onnxruntime
def test_onemodel_against_onnxruntime_on_the_unmodified_detector_finds_no_node(detector):
    report = bisect(detector, detector, random_inputs(detector, seed=0),
                    engines=("onemodel", "onnxruntime"))
    assert report.equal and report.first is None and report.differing == 0, report.lines()
    assert report.nodes_compared == len(detector.graph.nodes)  # every output exposed and typed
    assert not report.skipped and not report.unmatched
    assert report.lines()[0].startswith("bisect: no node differs (78 nodes compared")


@needs_onnxruntime
def test_the_changed_conv_is_found_across_engines(detector):
    """A (onemodel) against the modified model in onnxruntime, within the Clause 11.5
    defaults: the same Conv, the node itself; the nodes after it agree on A's inputs."""
    index, conv, weight = _inner_conv(detector)
    b = _with_weight_changed(detector, weight, 3, 1.0)
    report = bisect(detector, b, random_inputs(detector, seed=0),
                    engines=("onemodel", "onnxruntime"), max_later=4)
    assert (report.first.index, report.first.name) == (index, conv.name)
    assert report.first.verdict == NODE
    assert len(report.later) == 4 and {n.verdict for n in report.later} == {INPUTS}


@needs_onnxruntime
def test_onnxruntime_exposes_every_node_output_of_a_temporary_copy(detector):
    inputs = random_inputs(detector, seed=2)
    n_out = len(detector.graph.outputs)
    values, skipped = intermediate_values(detector, inputs, "onnxruntime")
    assert len(detector.graph.outputs) == n_out  # the model itself is untouched
    names = [o for n in detector.graph.nodes for o in n.outputs if o]
    assert not skipped and set(names) <= set(values)
    mine, _ = intermediate_values(detector, inputs, "onemodel")
    assert set(mine) == set(names)
    tol = Tolerances()  # Clause 11.5 defaults, see the module docstring
    from onemodel.compare import compare_value
    for name in names:
        c = compare_value(name, values[name], mine[name], tol.for_value(name, mine[name].dtype))
        assert c.within, str(c)


def _custom_op_model():
    """x -> Relu -> r -> my.domain.Mystery -> m -> Neg -> y: no type is declared for r or m,
    and inference has no rule for Mystery."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Mystery", ["r"], ["m"], domain="my.domain"),
             helper.make_node("Neg", ["m"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [2, 3])],
                          [helper.make_tensor_value_info("y", 1, [2, 3])])
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid("my.domain", 1)])
    return decode_model(proto.SerializeToString())


def test_a_node_output_no_type_is_known_for_is_skipped_and_said_so():
    m = _custom_op_model()
    copy, outputs, skipped = exposed_copy(m)
    assert outputs == ["y", "r"]  # the graph output first, then the typed node output
    assert set(skipped) == {"m"} and "no type" in skipped["m"]
    r = next(vi for vi in copy.graph.outputs if vi.name == "r")
    assert r.type.elem_type == 1
    assert [vi.name for vi in m.graph.outputs] == ["y"]


def test_the_node_alone_has_its_initializers_and_typed_feeds(detector):
    index, conv, weight = _inner_conv(detector)
    inputs = random_inputs(detector, seed=0)
    values, _ = intermediate_values(detector, inputs, "onemodel")
    lone = lone_node_model(detector, index, values, values)
    g = lone.graph
    assert [n.op_type for n in g.nodes] == ["Conv"]
    assert {t.name for t in g.initializers} == set(conv.inputs[1:])
    assert [vi.name for vi in g.inputs] == [conv.inputs[0]]
    assert list(g.inputs[0].type.shape.values) == list(values[conv.inputs[0]].shape)
    assert [vi.name for vi in g.outputs] == list(conv.outputs)
    assert [(o.domain, o.version) for o in lone.opset_imports] == \
        [(o.domain, o.version) for o in detector.opset_imports]
    got = run(lone, {conv.inputs[0]: values[conv.inputs[0]]})
    np.testing.assert_array_equal(got[conv.outputs[0]], values[conv.outputs[0]])  # same kernel


def _chain(second_op: str):
    """x -> Neg or Abs -> b -> Relu -> y, the Relu written first (file order is not the
    evaluation order)."""
    nodes = [helper.make_node("Relu", ["b"], ["y"], name="relu"),
             helper.make_node(second_op, ["x"], ["b"], name="first")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [4])],
                          [helper.make_tensor_value_info("y", 1, [4])])
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return decode_model(proto.SerializeToString())


def test_structurally_different_models_are_walked_in_topological_order():
    a, b = _chain("Neg"), _chain("Abs")
    assert topological_order(a) == [1, 0]
    x = np.array([-1.0, 2.0, -3.0, 4.0], np.float32)
    report = bisect(a, b, {"x": x}, tolerances=Tolerances.bit_exact())
    assert (report.first.index, report.first.op_type, report.first.name) == (1, "Neg", "first")
    assert report.first.verdict == NODE  # B's node (Abs) on A's input still differs
    ((after),) = report.later
    assert (after.index, after.op_type, after.verdict) == (0, "Relu", INPUTS)


def test_names_b_does_not_have_are_unmatched_not_compared():
    a = _chain("Neg")
    b = _chain("Neg")
    b.graph.nodes[1].outputs[0] = "b2"
    b.graph.nodes[0].inputs[0] = "b2"
    report = bisect(a, b, {"x": np.ones(4, np.float32)}, tolerances=Tolerances.bit_exact())
    assert report.equal and report.unmatched == ["b"] and report.nodes_compared == 1
    assert any("not in B" in line for line in report.lines())


def test_an_unknown_engine_is_refused(detector):
    with pytest.raises(onemodel.errors.UnsupportedError, match="unknown engine"):
        bisect(detector, detector, {}, engines=("onemodel", "tvm"))


def _scaled(w: float):
    """y = x * w, w an initializer."""
    from onnx import numpy_helper
    g = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["y"], name="scale")], "g",
                          [helper.make_tensor_value_info("x", 1, [3])],
                          [helper.make_tensor_value_info("y", 1, [3])],
                          [numpy_helper.from_array(np.array([w] * 3, np.float32), "w")])
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return decode_model(proto.SerializeToString())


@needs_onnxruntime
def test_one_engine_compares_bit_for_bit_by_default_two_within_clause_11_5():
    """A weight one ulp away: x * w then differs by one ulp for x = 1 (exact products), beyond
    bit equality but within rtol 1e-3."""
    w = np.float32(0.3)
    a, b = _scaled(float(w)), _scaled(float(np.nextafter(w, np.float32(1))))
    x = {"x": np.ones(3, np.float32)}
    one = bisect(a, b, x)
    assert one.first is not None and one.first.name == "scale" and one.first.verdict == NODE
    assert one.to_json()["tolerances"]["exact"] is True
    two = bisect(a, b, x, engines=("onemodel", "onnxruntime"))
    assert two.equal and two.to_json()["tolerances"]["exact"] is False


def test_differences_within_tolerance_that_grow_past_it_are_said_so():
    """z = x * w - 1 with x * w close to 1: B's w is 1e-4 larger, within rtol 1e-3 at the Mul
    but far beyond it after the cancellation at the Sub, which agrees on A's inputs."""
    from onnx import numpy_helper

    from onemodel.compare import Tolerance

    def model(w):
        nodes = [helper.make_node("Mul", ["x", "w"], ["y"], name="scale"),
                 helper.make_node("Sub", ["y", "one"], ["z"], name="cancel")]
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [2])],
                              [helper.make_tensor_value_info("z", 1, [2])],
                              [numpy_helper.from_array(np.array([w, w], np.float32), "w"),
                               numpy_helper.from_array(np.array([1, 1], np.float32), "one")])
        proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        return decode_model(proto.SerializeToString())

    tol = Tolerances(Tolerance(rtol=1e-3))
    report = bisect(model(1.0), model(1.0001), {"x": np.array([1.0, 1.0], np.float32)},
                    tolerances=tol)
    first = report.first
    assert (first.name, first.verdict) == ("cancel", INPUTS)
    assert all(c.within for _, c in first.inputs)
    assert "each within tolerance, grow beyond it here" in "\n".join(report.lines())


def test_b_failing_on_a_inputs_is_an_evaluation_error_saying_so():
    """B reshapes to a shape its input cannot hold: an EvaluationError naming the second model."""
    from onnx import numpy_helper

    def model(target):
        g = helper.make_graph([helper.make_node("Reshape", ["x", "s"], ["y"], name="r")], "g",
                              [helper.make_tensor_value_info("x", 1, [4])],
                              [helper.make_tensor_value_info("y", 1, None)],
                              [numpy_helper.from_array(np.array(target, np.int64), "s")])
        proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        return decode_model(proto.SerializeToString())

    with pytest.raises(onemodel.errors.EvaluationError, match="the second model cannot run"):
        bisect(model([2, 2]), model([3, 2]), {"x": np.ones(4, np.float32)})


def test_b_whose_graph_does_not_take_a_inputs_is_an_evaluation_error_saying_so():
    """B's input has another name, or another extent: B cannot run on A's inputs (the same
    EvaluationError as B failing on them, not the InvalidModelError of a bad feed)."""
    def relu(name, shape):
        g = helper.make_graph([helper.make_node("Relu", [name], ["y"], name="r")], "g",
                              [helper.make_tensor_value_info(name, 1, shape)],
                              [helper.make_tensor_value_info("y", 1, shape)])
        proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        return decode_model(proto.SerializeToString())

    x = {"x": np.ones(4, np.float32)}
    with pytest.raises(onemodel.errors.EvaluationError) as e:
        bisect(relu("x", [4]), relu("z", [4]), x)
    assert e.value.message == ("the second model cannot run on the first one's inputs: 'x' is "
                               "not an input of the graph; inputs are ['z']")
    with pytest.raises(onemodel.errors.EvaluationError) as e:
        bisect(relu("x", [4]), relu("x", [3]), x)
    assert e.value.message == ("the second model cannot run on the first one's inputs: input "
                               "'x' has extent 4 on axis 0; the graph declares [3]")
    assert e.value.path == "graph.inputs[0]"
