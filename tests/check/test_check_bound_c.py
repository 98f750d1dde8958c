"""The binding of nodes to operator definitions in C (``bound`` of onemodel/ir/_cpass.c) against
the Python walk of onemodel.validation.operators.bound_nodes (``ONEMODEL_PURE_PYTHON=1``): the
same rows, in the same order (each node before the nodes of its subgraphs), on every
conformance model with a subgraph and on nodes of every kind of binding (a definition, a
model-local function, a custom domain, no import, no definition, no op_type; Clause 14.3)."""

from __future__ import annotations

import pytest
from onnx import TensorProto as TP
from onnx import helper

from onemodel.formats.onnx import decode_model
from onemodel.ir.accelerator import passes
from onemodel.validation.operators import bound_nodes

pytestmark = pytest.mark.skipif(passes() is None, reason="onemodel/ir/_cpass.c is not built")


def _rows(model, monkeypatch, pure: bool):
    with monkeypatch.context() as m:
        if pure:
            m.setenv("ONEMODEL_PURE_PYTHON", "1")
        else:
            m.delenv("ONEMODEL_PURE_PYTHON", raising=False)
        return [(p, i, id(n), d, v, s if type(s) is str else id(s))
                for p, i, n, d, v, s in bound_nodes(model)]


def _vi(name):
    return helper.make_tensor_value_info(name, TP.FLOAT, [2])


def _mixed():
    then = helper.make_graph([helper.make_node("Neg", ["x"], ["t"]),
                              helper.make_node("Foo", ["t"], ["t2"], domain="my.ops")],
                             "then", [], [_vi("t2")])
    other = helper.make_graph([helper.make_node("Abs", ["x"], ["e"])], "else", [], [_vi("e")])
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("If", ["c"], ["b"], then_branch=then, else_branch=other),
             helper.make_node("Local", ["a"], ["l"], domain="local"),
             helper.make_node("Gelu", ["a"], ["g"], domain="ai.onnx"),   # no Gelu at 17
             helper.make_node("Relu", ["a"], ["r"], domain="com.microsoft"),
             helper.make_node("Normalizer", ["a"], ["u"], domain="ai.onnx.ml"),  # no import
             helper.make_node("", ["a"], ["z"])]
    g = helper.make_graph(nodes, "g", [_vi("x"), helper.make_tensor_value_info("c", TP.BOOL, [])],
                          [_vi("b")])
    f = helper.make_function("local", "Local", ["i"], ["o"],
                             [helper.make_node("Relu", ["i"], ["o"])],
                             [helper.make_opsetid("", 17)])
    m = helper.make_model(g, functions=[f], opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("local", 1),
        helper.make_opsetid("my.ops", 1), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 10
    return decode_model(m.SerializeToString())


def test_every_kind_of_binding_in_c_equals_the_python_walk(monkeypatch):
    m = _mixed()
    got = _rows(m, monkeypatch, False)
    assert got == _rows(m, monkeypatch, True)
    # the If's branches (else_branch, then then_branch: onnx.helper sorts the attributes) come
    # right after the If, before the node after it
    assert [(p, i) for p, i, *_ in got][:6] == [
        ("graph", 0), ("graph", 1), ("graph.nodes[1].attributes[0].g", 0),
        ("graph.nodes[1].attributes[1].g", 0), ("graph.nodes[1].attributes[1].g", 1),
        ("graph", 2)]
    kinds = {(p, i): s for p, i, _, _, _, s in got if type(s) is str}
    assert kinds == {("graph.nodes[1].attributes[1].g", 1): "custom", ("graph", 2): "local",
                     ("graph", 3): "undefined", ("graph", 4): "custom",
                     ("graph", 5): "unimported"}


def test_conformance_models_with_subgraphs_bind_alike(monkeypatch):
    from conformance_data import iter_cases

    from onemodel.formats.onnx import decode_model as decode

    seen = 0
    for c in iter_cases():
        data = c.model_path.read_bytes()
        if b"then_branch" not in data and b"body" not in data:
            continue
        m = decode(data)
        assert _rows(m, monkeypatch, False) == _rows(m, monkeypatch, True), c.id
        seen += 1
    assert seen > 40
