"""The container against the specification text alone: a file assembled here from the spec with
``struct`` and ``json`` loads into the expected model, and a file our writer wrote is read back
by a second small reader written here with ``struct`` and ``json`` only."""

from __future__ import annotations

import base64
import json
import struct

import numpy as np
from container_models import sink_model

from onemodel.formats.container import read_bytes, write_bytes
from onemodel.ir import (
    Attribute,
    Dimension,
    Graph,
    Model,
    Node,
    OperatorSetId,
    Shape,
    StringStringEntry,
    Tensor,
    TensorType,
    Type,
    ValueInfo,
)

HEADER = struct.Struct("<8sII6Q")  # section 1.1: magic, version, flags, six u64


def assemble(manifest_text: bytes, data: bytes) -> bytes:
    data_offset = (64 + len(manifest_text) + 63) // 64 * 64
    head = HEADER.pack(b"ONEMODEL", 1, 0, 64, len(manifest_text), data_offset, len(data),
                       data_offset + len(data), 0)
    return head + manifest_text + bytes(data_offset - 64 - len(manifest_text)) + data


def test_file_assembled_from_the_spec_loads_into_the_expected_model():
    w = np.array([[1.0, -2.0], [0.5, 65504.0]], dtype="<f2").tobytes()           # 8 bytes
    b4 = bytes([0x21, 0x0F])  # int4 [1, 2, -1]: packed low nibble first, high bits of the last 0
    data = w + bytes(56) + b4
    manifest = {
        "format": "onemodel", "version": 1, "ir_version": 9,
        "producer_name": "hand", "model_version": 7,
        "opsets": [{"domain": "", "version": 19}, {"domain": "ai.onnx", "version": 19}],
        "metadata": [{"key": "author", "value": "spec"}],
        "graph": {
            "name": "g",
            "inputs": [{"name": "X", "type": {"kind": "tensor", "elem": 10,
                                              "shape": ["batch", 2, None]}},
                       {"name": "W"}],
            "outputs": [{"name": "Y", "type": {"kind": "tensor", "elem": 10}}],
            "initializers": [
                {"name": "W", "dtype": 10, "dims": [2, 2], "data": {"offset": 0, "length": 8}},
                {"name": "B", "dtype": 22, "dims": [3], "data": {"offset": 64, "length": 2}},
                {"name": "S", "dtype": 8, "dims": [2],
                 "strings": [base64.b64encode(b"hi").decode(), ""]}],
            "nodes": [
                {"op": "Mul", "domain": "ai.onnx", "inputs": ["T", "B"], "outputs": ["Y"],
                 "attributes": [{"name": "alpha", "type": 1, "value": 1065353216},
                                {"name": "mode", "type": 3, "value": "bGluZWFy"},
                                {"name": "axes", "type": 7, "value": [-1, 9007199254740993]}]},
                {"name": "mm", "op": "MatMul", "inputs": ["X", "W"], "outputs": ["T"],
                 "doc": "first"}],
            "unknown_field_of_a_later_version": [1.5, {"x": None}],
        },
    }
    text = json.dumps(manifest, separators=(", ", ": ")).encode()  # whitespace is allowed
    model = read_bytes(assemble(text, data))

    f16 = 10
    expected = Model(
        ir_version=9, producer_name="hand", model_version=7,
        opset_imports=[OperatorSetId(domain=None, version=19),
                       OperatorSetId(domain="ai.onnx", version=19)],
        metadata_props=[StringStringEntry(key="author", value="spec")],
        graph=Graph(
            name="g",
            inputs=[ValueInfo(name="X", type=Type(tensor_type=TensorType(elem_type=f16, shape=Shape(
                dims=[Dimension(dim_param="batch"), Dimension(dim_value=2), Dimension()])))),
                ValueInfo(name="W")],
            outputs=[ValueInfo(name="Y", type=Type(tensor_type=TensorType(elem_type=f16)))],
            initializers=[Tensor(name="W", data_type=f16, dims=[2, 2], raw_data=w),
                          Tensor(name="B", data_type=22, dims=[3], raw_data=b4),
                          Tensor(name="S", data_type=8, dims=[2], string_data=[b"hi", b""])],
            nodes=[  # put in dependency order: MatMul produces T, which Mul reads
                Node(name="mm", op_type="MatMul", inputs=["X", "W"], outputs=["T"],
                     doc_string="first"),
                Node(op_type="Mul", domain="ai.onnx", inputs=["T", "B"], outputs=["Y"],
                     attributes=[Attribute(name="alpha", type=1, f=np.float32(1.0)),
                                 Attribute(name="mode", type=3, s=b"linear"),
                                 Attribute(name="axes", type=7,
                                           ints=[-1, 9007199254740993])])]))
    assert model == expected
    assert model.graph.initializers[1].numpy().tolist() == [1, 2, -1]
    assert model.graph.initializers[0].numpy()[1, 1] == np.float16(65504)
    assert model.graph.nodes[1].attributes[2].ints[1] == 2 ** 53 + 1  # exact, not via a double


def small_reader(data: bytes) -> tuple[dict, dict]:
    """A reader written from the spec with struct and json only: returns the manifest and
    {manifest path of a tensor: its bytes}, checking the header, the layout and alignment."""
    magic, version, flags, m_off, m_len, d_off, d_len, f_len, reserved = HEADER.unpack_from(data)
    assert (magic, version, flags, m_off, reserved) == (b"ONEMODEL", 1, 0, 64, 0)
    assert f_len == len(data) and d_off + d_len == f_len
    assert d_off % 64 == 0 and d_off == (64 + m_len + 63) // 64 * 64
    assert data[64 + m_len:d_off] == bytes(d_off - 64 - m_len)  # zero padding
    manifest = json.loads(data[64:64 + m_len].decode("utf-8"))
    tensors, ranges = {}, []

    def walk(v, path):
        if isinstance(v, dict):
            if "dtype" in v and "data" in v:
                off, n = v["data"]["offset"], v["data"]["length"]
                assert n == 0 or off % 64 == 0
                assert 0 <= off and off + n <= d_len
                tensors[path] = data[d_off + off:d_off + off + n]
                if n:
                    ranges.append((off, n))
            for k, x in v.items():
                walk(x, f"{path}.{k}")
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, f"{path}[{i}]")

    walk(manifest, "manifest")
    # bytes between tensors are zero, and distinct ranges do not overlap
    pos = 0
    for off, n in sorted(set(ranges)):
        assert off >= pos and data[d_off + pos:d_off + off] == bytes(off - pos)
        pos = off + n
    assert pos == d_len
    return manifest, tensors


def test_a_second_small_reader_sees_what_the_writer_wrote():
    m = sink_model()
    data = write_bytes(m)
    manifest, tensors = small_reader(data)
    assert manifest["format"] == "onemodel" and manifest["version"] == 1
    g = manifest["graph"]
    for i, t in enumerate(m.graph.initializers):
        if t.data_type == 8:
            assert [base64.b64decode(s) for s in g["initializers"][i]["strings"]] == t.string_data
            continue
        assert g["initializers"][i]["dims"] == t.dims
        assert tensors[f"manifest.graph.initializers[{i}]"] == bytes(t.raw_view())
    # a float attribute is its bit pattern
    attrs = {a["name"]: a for a in g["nodes"][3]["attributes"]}
    assert attrs["f"]["value"] == 0x7FA00001 and attrs["f0"]["value"] == 0x80000000
    assert attrs["ints"]["value"] == [1, -2, 2 ** 63 - 1]
