"""Checks the container reader makes on hand-made manifests: text that is no Unicode, sparse
tensors and tensor contents that do not fit, each refused with its kind and manifest path."""

from __future__ import annotations

import json

import pytest

from onemodel.errors import MalformedError
from onemodel.formats.container import read_bytes
from test_container_spec import assemble


def _manifest(graph: dict, **top) -> dict:
    g = {"name": "g", "inputs": [], "outputs": [], "initializers": [], "nodes": []}
    g.update(graph)
    return {"format": "onemodel", "version": 1, "ir_version": 9,
            "opsets": [{"domain": "", "version": 19}], "graph": g, **top}


def _read(manifest: dict, data: bytes = b""):
    return read_bytes(assemble(json.dumps(manifest).encode(), data))


NODE = {"op": "Relu", "inputs": ["X"], "outputs": ["Y"]}


@pytest.mark.parametrize("graph, top, path", [
    ({"name": "g\ud800"}, {}, "manifest.graph.name"),
    ({"nodes": [dict(NODE, inputs=["X\udfff"])]}, {}, "manifest.graph.nodes[0].inputs[0]"),
    ({"inputs": [{"name": "X", "type": {"kind": "tensor", "elem": 1, "shape": ["n\udc80"]}}]},
     {}, "manifest.graph.inputs[0].type.shape[0]"),
    ({}, {"metadata": [{"key": "k", "value": "\ud800"}]}, "manifest.metadata[0].value"),
    ({"nodes": [dict(NODE, onnx={"doc_string": "\udbff"})]}, {},
     "manifest.graph.nodes[0].onnx.doc_string"),
    ({"nodes": [dict(NODE, onnx={"outputs": ["Y", "\ud800"]})]}, {},
     "manifest.graph.nodes[0].onnx.outputs[1]"),
])
def test_a_lone_surrogate_escape_is_refused_where_it_is(graph, top, path):
    with pytest.raises(MalformedError) as info:
        _read(_manifest(graph, **top))
    assert info.value.path == path
    assert "surrogate" in info.value.message


def test_a_surrogate_pair_escape_is_text_and_reads():
    manifest = _manifest({"name": "g\ud83d\ude00", "nodes": [dict(NODE, inputs=["\u00e9"])],
                          "inputs": [{"name": "\u00e9"}]})
    text = json.dumps(manifest).encode()
    assert b"\\ud83d\\ude00" in text  # the pair is written as two escapes
    model = read_bytes(assemble(text, b""))
    assert model.graph.name == "g\U0001F600"
    assert model.graph.nodes[0].inputs == ["\u00e9"]
