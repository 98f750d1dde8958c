"""inference.annotate's loop in C (``annotate`` of onemodel/ir/_cpass.c) against its Python
loop (``ONEMODEL_PURE_PYTHON=1``): on every conformance model with an inferred value, and on a
graph with declared, repeated, empty and unknown names, the same entries in the same order,
each with the same Type record object (entries of one inferred type share it), a fresh
metadata_props list, no doc_string and no unknown fields (Clause 9)."""

from __future__ import annotations

import pytest
from onnx import TensorProto as TP
from onnx import helper

from onemodel.formats.onnx import decode_model
from onemodel.inference import annotate, infer_model
from onemodel.ir.accelerator import passes
from onemodel.ir.walk import iter_graphs

pytestmark = pytest.mark.skipif(passes() is None, reason="onemodel/ir/_cpass.c is not built")


def _entries(data: bytes, monkeypatch, pure: bool):
    m = decode_model(data)
    res = infer_model(m)
    with monkeypatch.context() as mp:
        if pure:
            mp.setenv("ONEMODEL_PURE_PYTHON", "1")
        else:
            mp.delenv("ONEMODEL_PURE_PYTHON", raising=False)
        before = {id(g): len(g.value_info) for _, g in iter_graphs(m.graph)}
        added = annotate(m, res)
    rows = []
    for path, g in iter_graphs(m.graph):
        for vi in g.value_info[before[id(g)]:]:
            rows.append((path, vi.name, str(vi.type), vi.doc_string, vi.metadata_props,
                         vi.unknown))
    # which entries share one Type record: the index of the first entry holding it
    first: dict = {}
    shared = [first.setdefault(id(vi.type), k) for k, vi in enumerate(
        vi for _, g in iter_graphs(m.graph) for vi in g.value_info[before[id(g)]:])]
    return added, rows, shared


def _vi(name, elem=TP.FLOAT, shape=(2,)):
    return helper.make_tensor_value_info(name, elem, list(shape))


def test_names_declared_repeated_empty_and_unknown(monkeypatch):
    body = helper.make_graph([helper.make_node("Neg", ["x"], ["t"]),
                              helper.make_node("Abs", ["t"], ["in_body"])], "body", [],
                             [_vi("in_body")])
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("Relu", ["a"], ["b"]),          # declared in value_info
             helper.make_node("Split", ["b"], ["", "s1"], axis=0, num_outputs=2),
             helper.make_node("Foo", ["a"], ["custom"], domain="my.ops"),  # no type known
             helper.make_node("Cast", ["a"], ["c"], to=TP.INT64),
             helper.make_node("If", ["cond"], ["y2"], then_branch=body, else_branch=body),
             helper.make_node("Neg", ["c"], ["y"])]
    g = helper.make_graph(nodes, "g", [_vi("x"), _vi("cond", TP.BOOL, ())],
                          [_vi("y", TP.INT64), _vi("y2")], value_info=[_vi("b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21),
                                            helper.make_opsetid("my.ops", 1)])
    data = m.SerializeToString()
    got = _entries(data, monkeypatch, False)
    assert got == _entries(data, monkeypatch, True)
    added, rows, shared = got
    # b is declared, the first output of Split is empty, Foo's output has no known type, y
    # and y2 are graph outputs, in_body the branches' output: no entry for them
    assert added == 5 and [(p, n, t) for p, n, t, *_ in rows] == [
        ("graph", "a", "tensor(float)[2]"), ("graph", "s1", "tensor(float)[1]"),
        ("graph", "c", "tensor(int64)[2]"),
        ("graph.nodes[5].attributes[0].g", "t", "tensor(float)[2]"),
        ("graph.nodes[5].attributes[1].g", "t", "tensor(float)[2]")]
    assert shared == [0, 1, 2, 0, 0]  # one Type record for the Values of one signature
    assert all(r[3:] == (None, [], b"") for r in rows)
    assert len({id(r[4]) for r in rows}) == len(rows)  # a list of its own per entry


def test_conformance_models_annotate_alike(monkeypatch):
    from conformance_data import iter_cases

    seen = 0
    for c in iter_cases():
        if c.kind != "node" or seen >= 400:
            continue
        data = c.model_path.read_bytes()
        got = _entries(data, monkeypatch, False)
        assert got == _entries(data, monkeypatch, True), c.id
        seen += got[0] > 0
    assert seen >= 300
