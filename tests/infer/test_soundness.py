"""Soundness of the inference (issue 12, Build 4): the evaluator runs models and every value it
computes has the inferred element type, rank, extents (symbolic ones evaluated under the
binding of the dimension variables the run had) and known integer and bool elements
(:func:`tests.infer.harness.sound`).

* every model of testdata/ the evaluator runs, on random inputs for three bindings of its
  dimension variables;
* a fixed sample of the ONNX node conformance cases (every :data:`STRIDE`-th by name, plus
  every case of the control-flow and sequence operators and every case with a subgraph), on
  the input files the case ships (random inputs are not valid for many of them: indices,
  shapes, lengths).

In both, so too the inputs and outputs of every run of a subgraph of the main graph (If
branches, Loop and Scan iterations) against the inferred Values of that graph.
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper

import onemodel
from onemodel.errors import OneModelError, UnsupportedError
from onemodel.evaluate import Session
from onemodel.evaluate.constraints import suggested_dims
from onemodel.inference import Expr, infer_model
from tests.infer.harness import sound

ROOT = pathlib.Path(__file__).resolve().parents[2]
TESTDATA = sorted(p for p in (ROOT / "testdata").rglob("*.onnx"))

#: Extents a model needs that its operators do not entail: the legacy exporter froze the traced
#: sequence length of transformer_legacy.onnx (testdata/README.md; it runs only at seq 16).
FIXED = {"transformer_legacy.onnx": {"seq": 16}}

#: Node cases whose subgraphs declare types their runs do not have, with the reason: the
#: inference keeps a declared type it cannot contradict (Clause 9.4: the model states it), so
#: their subgraph values are not compared (their main-graph values are).
DECLARED_WRONG = {
    "test_loop16_seq_none": "the body declares seq_out (and opt_seq_in) a sequence of float "
    "tensors of rank 0, but inserts Slice(x, [0], [i + 1]), of rank 1",
}

#: Every STRIDE-th node case by name is in the sample.
STRIDE = 13
#: The operators whose every case is in the sample (rules/control.py and sequence.py).
ALWAYS = ("If", "Loop", "Scan", "Sequence", "Optional", "SplitToSequence",
          "ConcatFromSequence")


def _runnable(model) -> bool:
    try:
        Session(model)
    except UnsupportedError:
        return False
    return True


@pytest.mark.parametrize("path", TESTDATA, ids=lambda p: str(p.relative_to(ROOT / "testdata")))
def test_testdata_model(path):
    model = onemodel.load(str(path))
    if not _runnable(model):
        pytest.skip("the evaluator does not run this model")
    # the extents the operators pin are taken as pinned (a MatMul weight's rows; a broadcast
    # against 2 allows N in {1, 2}: the largest), the other variables drawn
    pinned = {k: v for k, v in suggested_dims(model).items() if not k.startswith("?")}
    for c in infer_model(model).constraints:
        var = c.a.variable if isinstance(c.a, Expr) else None
        if var and c.allowed and var not in pinned:
            pinned[var] = max(c.allowed)
    pinned.update(FIXED.get(path.name, {}))
    n = sound(model, draws=3, fixed=pinned)
    outputs = sum(1 for node in model.graph.nodes for o in node.outputs if o)
    assert n > 0 or outputs == 0


def _read_value():
    sys.path.insert(0, str(ROOT / "tests" / "evaluate"))
    try:
        from tests.evaluate.node_conformance import read_value
    finally:
        sys.path.pop(0)
    return read_value


def _has_subgraph(case) -> bool:
    with onemodel.load(str(case.model_path)) as m:
        return any(True for node in m.graph.nodes for _ in node.subgraphs())


def sample(cases) -> list:
    """The node cases of the sample: sorted by name, every STRIDE-th, those of
    :data:`ALWAYS`'s operators, and every case whose graph holds a subgraph (the expansions of
    AffineGrid, LinearAttention and Range, flexattention's score functions)."""
    nodes = sorted((c for c in cases if c.kind == "node"), key=lambda c: c.name)
    out = []
    for k, c in enumerate(nodes):
        low = c.name.lower()
        if k % STRIDE == 0 or any(f"_{op.lower()}" in low for op in ALWAYS) or \
                _has_subgraph(c):
            out.append(c)
    return out


def test_node_conformance_sample(conformance_cases):
    read_value = _read_value()
    cases = sample(conformance_cases)
    assert len(cases) >= 200
    compared, ran, failures = 0, 0, []
    for case in cases:
        model = onemodel.load(str(case.model_path))
        if not _runnable(model):
            continue
        feeds = [{n: read_value(p, k) for n, p, k in zip(case.input_names, ins,
                                                         case.input_kinds)}
                 for ins, _ in case.data_sets]
        try:
            compared += sound(model, feeds=feeds, subgraphs=case.name not in DECLARED_WRONG)
        except AssertionError as e:
            failures.append(f"{case.name}: {str(e)[:300]}")
        except OneModelError as e:    # the evaluator's own failures are tested elsewhere
            if "Evaluation" not in type(e).__name__:
                raise
            continue
        ran += 1
    assert not failures, failures
    assert ran >= 200 and compared >= ran


def test_subgraph_values_are_checked_against_their_graph():
    """A branch whose output is declared [N, 7] while it gives x of [N, 3]: the inference
    keeps the declared type (nothing contradicts it: x's second extent is a variable), the
    If joins it with the other branch to [N, ?], so only the branch's own value is wrong, and
    the harness finds it there."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "K"])
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])

    def branch(out, declared):
        return helper.make_graph([helper.make_node("Identity", ["x"], [out])], out, [],
                                 [helper.make_tensor_value_info(out, TensorProto.FLOAT,
                                                                declared)])

    node = helper.make_node("If", ["c"], ["y"], then_branch=branch("t", ["N", 7]),
                            else_branch=branch("e", None))
    g = helper.make_graph([node], "g", [c, x],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = onemodel.load(helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10).SerializeToString())
    res = infer_model(model)
    assert str(res.values["y"]) == "tensor(float)[N,?]"
    assert str(res.graphs["graph.nodes[0].attributes[1].g"]["t"]) == "tensor(float)[N,7]"
    feeds = [{"c": np.array(True), "x": np.zeros((2, 3), np.float32)}]
    assert sound(model, feeds=feeds, subgraphs=False) == 1
    with pytest.raises(AssertionError, match=r"attributes\[1\]\.g t"):
        sound(model, feeds=feeds)
    feeds = [{"c": np.array(False), "x": np.zeros((2, 3), np.float32)}]
    assert sound(model, feeds=feeds) == 2       # y, and e of the branch that ran
