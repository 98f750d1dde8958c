"""The input hint of onemodel/evaluate/inputs.py taken from what inference knows (issue 24, item
6): extents that break what the operators entail get extents with which every constraint holds,
found without running the model; a node that contradicts itself whatever the input extents gets
no dims= / shapes= suggestion and no trial run; the trial runs keep their wall-clock budget,
a run stopped between two nodes when it is spent."""

from __future__ import annotations

import time

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from onemodel.errors import NAME_ONLY, EvaluationError, InputError, OneModelWarning, Setting
from onemodel.evaluate import input_hints as hint
from onemodel.evaluate import random_inputs, register_kernel, run
from onemodel.evaluate.constraints import model_constraints
from onemodel.evaluate.inputs import generated_axes
from onemodel.evaluate.registry import unregister_kernel
from onemodel.formats.onnx import decode_model


def _model(inputs, nodes, inits=(), opsets=(("", 21),)):
    vis = [helper.make_tensor_value_info(n, e, d) for n, e, d in inputs]
    g = helper.make_graph(nodes, "g", vis, [helper.make_empty_tensor_value_info("y")],
                          list(inits))
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets],
                              ir_version=10)
    return decode_model(proto.SerializeToString())


def _even_model():
    """x [1, 1, h] -> Conv (k 3, stride 2, pad 1): floor((h - 1)/2) + 1 -> Resize x2 ->
    Concat with x on the channels: 2*(floor((h - 1)/2) + 1) == h, so h must be even."""
    w = numpy_helper.from_array(np.ones((1, 1, 3), np.float32), "w")
    scales = numpy_helper.from_array(np.array([1, 1, 2], np.float32), "scales")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], strides=[2], pads=[1, 1]),
             helper.make_node("Resize", ["c", "", "scales"], ["r"], mode="nearest"),
             helper.make_node("Concat", ["r", "x"], ["y"], axis=1)]
    return _model([("x", TP.FLOAT, [1, 1, "h"])], nodes, [w, scales])


def test_unset_extents_are_chosen_to_keep_the_constraints():
    # h unset: not 1 (which breaks the Concat) but the first extent that keeps every
    # constraint, found without a run (nudenet at default sizes, make run EXAMPLE=, alike)
    m = _even_model()
    feeds = random_inputs(m)
    assert feeds["x"].shape == (1, 1, 32)
    assert run(m, feeds)["y"].shape == (1, 2, 32)
    assert generated_axes(m, None, None) == [("x", [1, 1, 32], ["h = 32"])]


def test_extents_breaking_a_constraint_get_extents_that_keep_them():
    m = _even_model()
    feeds = random_inputs(m, dims={"h": 1})  # set by the caller: kept
    assert feeds["x"].shape == (1, 1, 1)
    with pytest.raises(InputError) as e:
        run(m, feeds)
    calls = []
    err = hint.add_inputs_hint(e.value, m, {"h": 1}, None,
                               runner=lambda *a: calls.append(a))
    assert calls == []  # found from the constraints, no trial run
    assert err.message.endswith(
        "(inputs were generated: x [1, 1, 1] with h = 1; with dims={'h': 32} the extents the "
        "operators need hold (inference))"), err.message
    assert err.settings == (Setting("dims", {"h": 32}),)
    assert run(m, random_inputs(m, dims={"h": 32}))["y"].shape == (1, 2, 32)


def test_fitting_extents_search():
    from onemodel.evaluate.constraints import fitting_extents
    cs = model_constraints(_even_model())
    assert fitting_extents(cs, {"h": 1}) == {"h": 32}
    assert fitting_extents(cs, {"h": 6}) is None  # nothing broken: nothing to say


def _squeeze_model():
    """x [batch, 3] -> Relu -> Squeeze(axis 1): the axis has the constant extent 3."""
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Squeeze", ["r", "axes"], ["y"])]
    return _model([("x", TP.FLOAT, ["batch", 3])], nodes, [axes])


def test_a_node_that_fails_whatever_the_extents_gets_no_flags_and_no_trial_run():
    m = _squeeze_model()
    with pytest.raises(EvaluationError) as e:
        run(m, random_inputs(m))
    calls = []
    err = hint.add_inputs_hint(e.value, m, {}, None, runner=lambda *a: calls.append(a))
    assert calls == []
    assert "'batch'" not in err.message and "shapes=" not in err.message.split(
        "no dims or shapes can help")[0]
    assert err.message.endswith(
        "(inputs were generated: x [1, 3] with batch = 1; node 1 fails whatever the input "
        "extents (inference, with every open extent a variable: Squeeze: Squeeze axis 1 has "
        "extent 3, not 1): no dims or shapes can help)"), err.message
    assert err.settings == (Setting("dims", NAME_ONLY), Setting("shapes", NAME_ONLY))


def test_the_trial_runs_keep_their_wall_clock_budget(monkeypatch):
    # 30 nodes of 0.1 s each before a Reshape that fails at n = 1: one trial run takes 3 s;
    # with a budget of 0.3 s, the run is stopped between two nodes. Before, the first trial
    # always ran to its end (the budget was checked between runs only).
    sleeping = []

    def slow(ctx, x):
        if sleeping:  # (the run that makes the error is quick)
            time.sleep(0.1)
        return x

    register_kernel("test.slow", "Slow", 1, slow)
    try:
        shape = numpy_helper.from_array(np.array([2, 3], np.int64), "s")
        nodes = [helper.make_node("Slow", ["x" if i == 0 else f"t{i}"], [f"t{i + 1}"],
                                  domain="test.slow") for i in range(30)]
        nodes.append(helper.make_node("Reshape", ["t30", "s"], ["y"]))
        m = _model([("x", TP.FLOAT, ["n"])], nodes, [shape],
                   opsets=(("", 21), ("test.slow", 1)))
        with pytest.raises(EvaluationError) as e:
            run(m, random_inputs(m))
        monkeypatch.setattr(hint, "PROBE_SECONDS", 0.3)
        sleeping.append(True)
        t = time.monotonic()
        err = hint.add_inputs_hint(e.value, m, {}, None)
        took = time.monotonic() - t
        assert took < 2.0, took  # generous: 0.3 s and one node of 0.1 s, plus the set-up
        assert "node 30 depends on input 'x' axis 0 (n) = 1: set dims={'n': N}" in err.message
    finally:
        unregister_kernel("test.slow", "Slow")


def test_a_dim_param_named_question_mark_is_an_unnamed_extent():
    # PaddlePaddle exports declare the dim_param "?" (PP-OCRv4 rec, the PaddleOCR classifier):
    # not a name (Clause 6.5.2), so read as unknown, each "?" its own extent (issue 23 item 7);
    # the message and the hint spell it by its input and axis, and --shape sets it
    m = _even_model()
    m.graph.inputs[0].type.shape.dims[2].dim_param = "?"
    with pytest.warns(OneModelWarning, match="dim_param '\\?'"):
        with pytest.raises(InputError) as e:
            run(m, {"x": np.zeros((1, 1, 1), np.float32)})
    text = hint.add_inputs_hint(e.value, m, {}, None).message
    assert text.startswith("input 'x' has extent 1 on axis 2 (unnamed); Concat needs equal "
                           "axis 2 extents at graph.nodes[2]: 2*floor((x.shape[2] - 1)/2) + 2 "
                           "== x.shape[2] does not hold"), text
    assert "with shapes={'x': (1, 1, 32)} the extents the operators need hold" in text


def test_the_probe_tries_extents_computed_into_the_failing_node_first():
    # x [b, 1, w] -> Conv (k 3, stride 2, pad 1) -> [b, 1, floor((w - 1)/2) + 1] -> Conv (k 5)
    # fails at w = 1; b reaches the failing node as it is, w through the first Conv: w's
    # candidates are tried first (PP-OCRv4 rec: its width, not its batch, had to change)
    w1 = numpy_helper.from_array(np.ones((1, 1, 3), np.float32), "w1")
    w2 = numpy_helper.from_array(np.ones((1, 1, 5), np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], strides=[2], pads=[1, 1]),
             helper.make_node("Conv", ["c", "w2"], ["y"])]
    m = _model([("x", TP.FLOAT, ["b", 1, "w"])], nodes, [w1, w2])
    feeds = random_inputs(m)
    assert feeds["x"].shape == (1, 1, 1)
    with pytest.raises(EvaluationError) as e:
        run(m, feeds)
    tried = []

    def runner(model, feeds):
        tried.append(feeds["x"].shape)
        return run(model, feeds)

    hint.add_inputs_hint(e.value, m, {}, None, runner=runner)
    assert tried and tried[0][0] == 1 and tried[0][2] != 1, tried
