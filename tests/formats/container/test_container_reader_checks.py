"""Checks the container reader makes on hand-made manifests: text that is no Unicode, sparse
tensors and tensor contents that do not fit, each refused with its kind and manifest path."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

import onemodel
from onemodel.errors import InvalidModelError, MalformedError
from onemodel.formats.container import read_bytes, write_bytes
from onemodel.ir import Graph, Model, OperatorSetId, Tensor, ValueInfo
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


# -- tensor contents the extension sets are checked like an ONNX reader checks them -----------
def _b64(array) -> str:
    return base64.b64encode(np.ascontiguousarray(array).tobytes()).decode()


def _with_tensor(tensor: dict) -> dict:
    return _manifest({"outputs": [{"name": "W"}], "initializers": [dict(tensor, name="W")]})


W = {"dtype": 1, "dims": [2], "data": {"offset": 0, "length": 8}}


@pytest.mark.parametrize("ext, message", [
    ({"float_data": _b64(np.array([1, 2], "<f4"))}, "more than one storage field"),
    ({"data_location": 1}, "external tensor also carries contents"),
    ({"raw_data": None, "float_data": _b64(np.array([1, 2, 3], "<f4"))},
     "3 values in float_data for 2 elements of FLOAT (2 expected)"),
    ({"raw_data": None, "int64_data": _b64(np.array([1, 2], "<i8"))},
     "FLOAT contents in int64_data; float_data expected"),
    ({"raw_data": None}, "tensor of 2 elements has no contents"),
])
def test_tensor_contents_set_by_the_extension_are_checked(ext, message):
    with pytest.raises(InvalidModelError) as info:
        _read(_with_tensor(dict(W, onnx=ext)), bytes(8))
    assert info.value.path == "manifest.graph.initializers[0].onnx"
    assert message in info.value.message


@pytest.mark.parametrize("dims, strings, message", [
    ([1], ["YQ=="], "contents in more than one storage field"),
    ([0], [], "STRING tensor with contents outside string_data")])
def test_a_string_tensor_with_raw_data_in_the_extension_is_refused(dims, strings, message):
    t = {"dtype": 8, "dims": dims, "strings": strings, "onnx": {"raw_data": "AAAA"}}
    with pytest.raises(InvalidModelError, match=message) as info:
        _read(_with_tensor(t))
    assert info.value.path == "manifest.graph.initializers[0].onnx"


def test_a_refused_tensor_is_not_written_and_what_is_written_converts_to_onnx(tmp_path):
    both = Tensor(name="W", data_type=1, dims=[1], raw_data=b"\x00\x00\x80\x3f",
                  float_data=np.array([2.0], "<f4"))
    m = Model(ir_version=9, opset_imports=[OperatorSetId(domain="", version=19)],
              graph=Graph(name="g", outputs=[ValueInfo(name="W")], initializers=[both]))
    with pytest.raises(InvalidModelError, match="more than one storage field") as info:
        write_bytes(m)
    assert info.value.path == "graph.initializers[0]"
    both.raw_data = None  # typed storage alone: written, read back, and readable as ONNX too
    (tmp_path / "m.onemodel").write_bytes(write_bytes(m))
    onemodel.convert(tmp_path / "m.onemodel", tmp_path / "m.onnx")
    back = onemodel.load(tmp_path / "m.onnx")
    assert back.graph.initializers[0].numpy().tolist() == [2.0]
