"""Graphs nested 10,000 deep through the Python API (issue 24, item 5): every walk is iterative
or bounded by one check made first (onemodel.ir.walk.check_nesting, MAX_MODEL_NESTING), so
check(full=True), save, digest and infer give one clear error, never a RecursionError."""

from __future__ import annotations

import copy
import io

import pytest
from guards import bounded

import onemodel
from onemodel.errors import UnsupportedError
from onemodel.inference import infer_model
from onemodel.ir import Attribute, Graph, Model, Node, OperatorSetId, Type, ValueInfo
from onemodel.ir.walk import all_tensors, graph_depths, iter_graphs, iter_tensors, nesting_error
from onemodel.limits import MAX_MODEL_NESTING
from onemodel.verify import compare_models

MiB = 1 << 20
MESSAGE = "graphs nested more than 64 deep (MAX_MODEL_NESTING)"


def _nested(depth: int) -> Model:
    """``depth`` graphs, each If's then_branch the next, its else_branch a Constant's graph
    (``leaves`` of them in all); the innermost graph holds a Constant too."""
    out = [ValueInfo(name="y", type=Type.tensor(1, []))]

    def leaf(name):
        return Graph(name=name, outputs=out,
                     nodes=[Node(op_type="Constant", outputs=["y"],
                                 attributes=[Attribute.make("value_float", 1.0)])])

    g = leaf(f"g{depth}")
    for i in range(depth - 1, 0, -1):
        g = Graph(name=f"g{i}", outputs=out,
                  nodes=[Node(op_type="If", inputs=["c"], outputs=["y"],
                              attributes=[Attribute.make("then_branch", g),
                                          Attribute.make("else_branch", leaf(f"e{i}"))])])
    g.inputs = [ValueInfo(name="c", type=Type.tensor(9, []))]
    return Model(ir_version=10, opset_imports=[OperatorSetId(domain="", version=17)], graph=g)


def _path(depth: int) -> str:
    return "graph" + ".nodes[0].attributes[0].g" * (depth - 1)


def test_ten_thousand_nested_graphs_are_one_clear_error():
    m = _nested(10_000)
    where = _path(MAX_MODEL_NESTING + 1)
    with bounded(seconds=60, peak=64 * MiB):
        report = onemodel.check(m, full=True)
        errors = []
        for call in (lambda: onemodel.to_bytes(m, "onnx"), lambda: onemodel.to_bytes(m, "onemodel"),
                     lambda: onemodel.save(m, io.BytesIO(), "onnx"), lambda: onemodel.digest(m),
                     lambda: infer_model(m), lambda: compare_models(m, m)):
            with pytest.raises(UnsupportedError) as e:
                call()
            errors.append((e.value.message, e.value.path))
    assert [(f.code, f.message, f.path) for f in report.findings] == [("OM119", MESSAGE, where)]
    assert not report.ok
    assert errors == [(MESSAGE, where)] * 6


def test_the_walks_themselves_are_iterative():
    """Deeper than Python's recursion limit (1000): the walks need no check first. (Their
    paths are strings, so a walk's memory grows with the square of the depth: the entry points
    check the nesting first, and the check itself stops at MAX_MODEL_NESTING.)"""
    m = _nested(1_500)
    with bounded(seconds=60, peak=128 * MiB):
        graphs = [(k, p) for k, (p, _) in enumerate(iter_graphs(m.graph))
                  if k in (0, 1, 2, 1_499, 1_500, 2_998)]
        count = sum(1 for _ in iter_graphs(m.graph))
        tensors = list(iter_tensors(m))
        flat = all_tensors(m)
        depths = [d for _, _, d in graph_depths(m)]
    assert count == 2_999  # 1 500 deep, and 1 499 else branches
    assert graphs == [(0, "graph"), (1, _path(2)), (2, _path(3)), (1_499, _path(1_500)),
                      (1_500, _path(1_499) + ".nodes[0].attributes[1].g"),  # depth first
                      (2_998, "graph.nodes[0].attributes[1].g")]
    assert tensors == [] and flat == []
    assert sorted(depths) == sorted(list(range(1, 1_501)) + list(range(2, 1_501)))


def test_at_the_limit_everything_works():
    m = _nested(MAX_MODEL_NESTING)
    assert nesting_error(m) is None
    assert onemodel.check(m, full=True).ok
    assert onemodel.to_bytes(m, "onnx")[:2] == b"\x08\x0a"  # ir_version 10 first
    assert onemodel.digest(m).digest == onemodel.digest(m).digest
    assert infer_model(m).values["y"].to_type() == Type.tensor(1, [])
    assert nesting_error(_nested(MAX_MODEL_NESTING + 1)).path == _path(MAX_MODEL_NESTING + 1)


def test_records_nested_deeper_than_the_recursion_limit_copy_compare_and_print():
    """The generic record operations (copy, ==, repr) are iterative or depth-bounded too
    (3 000 deep: three times Python's recursion limit)."""
    m = _nested(3_000)
    with bounded(seconds=60, peak=256 * MiB):
        c = m.copy()
        same = c == m
        c.graph.nodes[0].attributes[0].g.nodes[0].attributes[0].g.name = "changed"
        differs = c != m
        text = repr(m)
    assert same and differs
    assert c.graph is not m.graph and c.graph.nodes[0].attributes[0].g is not \
        m.graph.nodes[0].attributes[0].g
    assert text.startswith("Model(ir_version=10, graph=Graph(nodes=[Node(") and len(text) < 1000


def test_deepcopy_of_records_nested_deeper_than_the_recursion_limit_is_the_iterative_copy():
    """copy.deepcopy of a Record is Record.copy(): no RecursionError at 3,000 graphs deep (three
    times Python's recursion limit; a RecursionError before), an equal model of new records."""
    m = _nested(3_000)
    with bounded(seconds=60, peak=256 * MiB):
        c = copy.deepcopy(m)
        same = c == m
    assert same and c is not m and c.graph is not m.graph
    inner_c = c.graph.nodes[0].attributes[0].g
    inner_m = m.graph.nodes[0].attributes[0].g
    assert inner_c is not inner_m and inner_c.name == inner_m.name == "g2"
    inner_c.name = "changed"
    assert inner_m.name == "g2" and c != m
    box = copy.deepcopy([m, m])  # the memo: one copy for one record
    assert box[0] is box[1] and box[0] == m
