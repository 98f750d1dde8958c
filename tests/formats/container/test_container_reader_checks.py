"""Checks the container reader makes on hand-made manifests: text that is no Unicode, sparse
tensors and tensor contents that do not fit, each refused with its kind and manifest path."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from test_container_spec import assemble

import onemodel
from onemodel.errors import InvalidModelError, MalformedError
from onemodel.formats.container import read_bytes, write_bytes
from onemodel.ir import Graph, Model, OperatorSetId, Tensor, ValueInfo


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
     "3 values in float_data for 2 elements of FLOAT"),
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


# -- sparse tensors ---------------------------------------------------------------------------
def _sparse_file(indices: list, idims: list, vdims=(2,), dims=(4,), ext=None):
    """A file with one sparse initializer: values 1.0, 2.0, ... of dims ``vdims`` at offset 0,
    INT64 ``indices`` of dims ``idims`` at offset 64, dense ``dims``."""
    nnz = int(np.prod(vdims))
    values = {"name": "s", "dtype": 1, "dims": list(vdims),
              "data": {"offset": 0, "length": 4 * nnz}}
    idx = {"dtype": 7, "dims": idims, "data": {"offset": 64, "length": 8 * len(indices)}}
    sp = {"values": values, "indices": idx, "dims": list(dims)}
    if ext is not None:
        sp["onnx"] = ext
    data = np.arange(1, nnz + 1, dtype="<f4").tobytes().ljust(64, b"\0")
    data += np.array(indices, "<i8").tobytes()
    return _manifest({"outputs": [{"name": "s"}], "sparse_initializers": [sp]}), data


@pytest.mark.parametrize("args, field, message", [
    (([1, 9], [2]), "indices", "index 9 at position 1 is outside the 4 elements of dims [4]"),
    (([0, 5], [1, 2], (1,), (2, 3)), "indices",
     "coordinate 5 of index 0 is outside dim 1 (3) of dims [2, 3]"),
    (([0, 1], [2], (1,)), "indices",
     "indices of dims [2] for 1 values of a rank-1 tensor: [1] (linear) or [1, 1] "
     "(coordinates) expected"),
    (([0], [1], (1, 1)), "values", "values of dims [1, 1]; a sparse tensor's values are 1-D [NNZ]"),
    (([0, 1], [2], (2,), (4,), {"indices": None}), "indices", "2 values and no indices"),
])
def test_sparse_tensors_are_checked_with_their_manifest_path(args, field, message):
    manifest, data = _sparse_file(*args)
    with pytest.raises(InvalidModelError) as info:
        _read(manifest, data)
    assert info.value.path == f"manifest.graph.sparse_initializers[0].{field}"
    assert info.value.message == message


def test_a_valid_sparse_tensor_reads_and_an_invalid_one_is_not_written():
    manifest, data = _sparse_file([0, 1, 1, 2], [2, 2], (2,), (2, 3))
    m = _read(manifest, data)
    assert m.graph.sparse_initializers[0].to_dense().tolist() == [[0, 1, 0], [0, 0, 2]]
    m.graph.sparse_initializers[0].indices = Tensor.from_numpy(np.array([[0, 1], [2, 0]]))
    with pytest.raises(InvalidModelError, match="coordinate 2 of index 1 is outside dim 0") as e:
        write_bytes(m)
    assert e.value.path == "graph.sparse_initializers[0].indices"


# -- no catch-all: every check names its field, and a bug in the reader is not hidden ---------
def test_a_bug_in_the_reader_surfaces_instead_of_reading_as_a_malformed_file(monkeypatch):
    from onemodel.formats.container import schema

    def broken(obj, ctx, path, lvl):
        raise KeyError("a bug, not a property of the file")

    monkeypatch.setitem(schema.DECODE, "Node", broken)
    with pytest.raises(KeyError, match="a bug"):
        _read(_manifest({"nodes": [NODE], "inputs": [{"name": "X"}]}))


@pytest.mark.parametrize("graph, path", [
    ({"nodes": [dict(NODE, attributes=[{"name": "a", "type": 7, "value": "x"}])]},
     "manifest.graph.nodes[0].attributes[0].value"),
    ({"nodes": [dict(NODE, onnx={"metadata_props": [{"key": 5}]})]},
     "manifest.graph.nodes[0].onnx.metadata_props[0].key"),
    ({"nodes": [dict(NODE, onnx={"attributes": 3})]}, "manifest.graph.nodes[0].onnx.attributes"),
    ({"initializers": [dict(W, name="W", onnx={"typed": "no_such_field"})]},
     "manifest.graph.initializers[0].onnx.typed"),
])
def test_wrong_json_types_are_malformed_with_their_path(graph, path):
    with pytest.raises(MalformedError) as info:
        _read(_manifest(dict({"inputs": [{"name": "X"}]}, **graph)), bytes(8))
    assert info.value.path == path


# -- base64 (RFC 4648, standard alphabet, padded, canonical) on every Python: 3.10 has no
# a2b_base64(strict_mode=True), and without it a2b_base64 skips bytes outside the alphabet
@pytest.mark.parametrize("text, message", [
    ("aGk", "length 3 is not a multiple of 4 (unpadded or truncated)"),
    ("aG k", "character ' ' at index 2 is not a base64 digit"),
    ("aG\nk=", "character '\\n' at index 2 is not a base64 digit"),
    ("aGk*", "character '*' at index 3 is not a base64 digit"),
    ("aG-_", "character '-' at index 2 is not a base64 digit"),   # the URL-safe alphabet
    ("aGk\u00e9", "character '\u00e9' at index 3 is not a base64 digit"),
    ("aGk=aGk=", "data after the padding at index 4"),
    ("aG==aG==", "data after the padding at index 4"),
    ("aG=a", "data after the padding at index 3"),
    ("=aGk", "data after the padding at index 1"),
    ("a===", "3 padding characters (at most 2) at index 1"),
    ("====", "4 padding characters (at most 2) at index 0"),
    ("aGk=\n", "data after the padding at index 4"),
    ("aGl=", "base64 is not in canonical form (padding or trailing bits)"),  # trailing bits
    ("aQ==", None),
])
def test_hostile_base64_in_a_string_tensor_is_refused_with_its_path(text, message):
    manifest = _manifest({"outputs": [{"name": "S"}], "initializers": [
        {"name": "S", "dtype": 8, "dims": [2], "strings": ["aGk=", text]}]})
    if message is None:
        model = _read(manifest)
        assert model.graph.initializers[0].string_data == [b"hi", b"i"]
        return
    with pytest.raises(MalformedError) as info:
        _read(manifest)
    assert info.value.path == "manifest.graph.initializers[0].strings[1]"
    want = message if message.startswith("base64") else f"invalid base64: {message}"
    assert info.value.message == want


@pytest.mark.parametrize("text, expected", [
    ("", b""), ("AA==", b"\0"), ("AAA=", b"\0\0"), ("AAAA", b"\0\0\0"),
    ("+/+/", b"\xfb\xff\xbf"), ("aGVsbG8gd29ybGQ=", b"hello world"),
])
def test_canonical_base64_decodes_to_its_bytes(text, expected):
    manifest = _manifest({"outputs": [{"name": "S"}], "initializers": [
        {"name": "S", "dtype": 8, "dims": [1], "strings": [text]}]})
    assert _read(manifest).graph.initializers[0].string_data == [expected]
