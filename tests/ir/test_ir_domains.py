"""The default ONNX domain has three spellings ("", absent, "ai.onnx"); every part of onemodel
compares domains through ``onemodel.ir.normalize_domain``."""

from __future__ import annotations

import pytest

from onemodel.errors import UnsupportedError
from onemodel.evaluate import run
from onemodel.formats.container import read_bytes, write_bytes
from onemodel.ir import Graph, Model, Node, OperatorSetId, ValueInfo, normalize_domain
from onemodel.summary import summarize


@pytest.mark.parametrize("domain, normal", [(None, ""), ("", ""), ("ai.onnx", ""),
                                            ("ai.onnx.ml", "ai.onnx.ml"), ("com.x", "com.x")])
def test_normalize_domain(domain, normal):
    assert normalize_domain(domain) == normal


def _model(node_domain, opset_domain) -> Model:
    return Model(ir_version=10, opset_imports=[OperatorSetId(domain=opset_domain, version=21)],
                 graph=Graph(name="g", inputs=[ValueInfo(name="x")], outputs=[ValueInfo(name="y")],
                             nodes=[Node(op_type="Frob", domain=node_domain, name="f",
                                         inputs=["x"], outputs=["y"])]))


@pytest.mark.parametrize("node_domain", [None, "", "ai.onnx"])
@pytest.mark.parametrize("opset_domain", [None, "", "ai.onnx"])
def test_every_spelling_is_the_default_domain_everywhere(node_domain, opset_domain):
    m = _model(node_domain, opset_domain)
    assert m.opset_version() == m.opset_version("ai.onnx") == 21
    assert m.opset_version("com.x") is None
    assert summarize(m)["ops"] == {"Frob": 1}
    assert read_bytes(write_bytes(m)).graph.nodes[0].domain == node_domain  # rule 4 holds
    with pytest.raises(UnsupportedError) as e:  # no kernel: the label has no domain prefix
        run(m, {"x": 1})
    assert "(ai.onnx, Frob, 21)" in e.value.message


def test_another_domain_keeps_its_name():
    m = _model("com.x", "com.x")
    assert summarize(m)["ops"] == {"com.x.Frob": 1}
    assert m.opset_version("") is None and m.opset_version("com.x") == 21
