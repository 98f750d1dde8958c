"""ONNX bytes -> our ONNX reader -> OneModel container -> container reader -> our ONNX writer gives
back the original bytes: for the ONNX files under testdata/models and for models built here with
the ``onnx`` helper (the test oracle; onemodel itself never imports it)."""

from __future__ import annotations

import glob
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onemodel
from onemodel.formats.container import read, read_bytes, write, write_bytes
from onemodel.formats.onnx import decode_model, encode_model
from onemodel.storage import BytesSink, LocalSink, LocalSource

MODELS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "testdata", "models")
FILES = sorted(glob.glob(os.path.join(MODELS, "**", "*.onnx"), recursive=True))


@pytest.mark.parametrize("path", FILES, ids=[os.path.relpath(p, MODELS) for p in FILES])
def test_testdata_models_come_back_byte_identical(path, tmp_path):
    with open(path, "rb") as f:
        original = f.read()
    with onemodel.load(path) as model:  # resolves external data next to the file
        dest = str(tmp_path / "m.onemodel")
        with LocalSink(dest) as sink:
            assert write(model, sink) == []
        with read(LocalSource(dest)) as back:
            assert back == model
            assert encode_model(back) == original
            assert write_bytes(back) == write_bytes(model)


def _subgraph_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])
    w = numpy_helper.from_array(np.arange(3, dtype=np.float32), "w")
    then_g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    else_g = helper.make_graph([helper.make_node("Sub", ["x", "w"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["acc", "w"], ["acc_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, None)])
    nodes = [
        helper.make_node("If", ["c"], ["r"], then_branch=then_g, else_branch=else_g, name="if"),
        helper.make_node("Loop", ["", "", "r"], ["y"], body=body, name="loop", doc_string="d"),
    ]
    g = helper.make_graph(nodes, "main", [x, c], [y], initializer=[w], doc_string="graph doc")
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)],
                          producer_name="t", doc_string="model doc")
    helper.set_model_props(m, {"k": "v", "empty": ""})
    return m


def _typed_storage_model() -> onnx.ModelProto:
    inits = [
        helper.make_tensor("f", TensorProto.FLOAT, [3], [1.0, -0.0, float("nan")]),
        helper.make_tensor("f16", TensorProto.FLOAT16, [2], np.array([1.5, -2], np.float16)),
        helper.make_tensor("bf16", TensorProto.BFLOAT16, [2], [1.0, 3.0]),
        helper.make_tensor("i8", TensorProto.INT8, [3], [-1, 0, 127]),
        helper.make_tensor("u4", TensorProto.UINT4, [3], [1, 15, 7]),
        helper.make_tensor("i4", TensorProto.INT4, [3], [-8, 7, 1]),
        helper.make_tensor("f8", TensorProto.FLOAT8E4M3FN, [2], [1.0, 0.5]),
        helper.make_tensor("b", TensorProto.BOOL, [2], [True, False]),
        helper.make_tensor("i64", TensorProto.INT64, [2], [-(2 ** 62), 3]),
        helper.make_tensor("u32", TensorProto.UINT32, [1], [4000000000]),
        helper.make_tensor("u64", TensorProto.UINT64, [1], [2 ** 64 - 1]),
        helper.make_tensor("d", TensorProto.DOUBLE, [2], [0.1, 2.5]),
        helper.make_tensor("c64", TensorProto.COMPLEX64, [1], [complex(1, 2)]),
        helper.make_tensor("s", TensorProto.STRING, [2], [b"a", b"\xff"]),
        helper.make_tensor("raw", TensorProto.FLOAT, [2], np.array([1, 2], "<f4").tobytes(),
                           raw=True),
        helper.make_tensor("empty", TensorProto.FLOAT, [0], []),
    ]
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([5.0, 6.0], np.float32), "sp"),
        numpy_helper.from_array(np.array([1, 3], np.int64), "sp_idx"), [4])
    out = helper.make_tensor_value_info("o", TensorProto.FLOAT, [2])
    g = helper.make_graph([helper.make_node("Identity", ["raw"], ["o"])], "g", [], [out],
                          initializer=inits, sparse_initializer=[sparse])
    qa = onnx.TensorAnnotation(tensor_name="raw")
    qa.quant_parameter_tensor_names.add(key="SCALE_TENSOR", value="f")
    g.quantization_annotation.append(qa)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


def _attributes_and_functions_model() -> onnx.ModelProto:
    t = numpy_helper.from_array(np.arange(4, dtype=np.int32).reshape(2, 2), "t")
    sp = helper.make_sparse_tensor(numpy_helper.from_array(np.array([1], np.int64), "v"),
                                   numpy_helper.from_array(np.array([0], np.int64), "i"), [3])
    sub = helper.make_graph([], "sub", [], [])
    seq_type = helper.make_sequence_type_proto(helper.make_tensor_type_proto(1, [2]))
    map_type = helper.make_map_type_proto(TensorProto.INT64, seq_type)
    opt_type = helper.make_optional_type_proto(helper.make_tensor_type_proto(7, None))
    attrs = dict(f=1.25, i=-7, s=b"bytes", t=t, g=sub, floats=[1.0, float("inf")],
                 ints=[1, 2 ** 62], strings=[b"a", b""], tensors=[t], graphs=[sub],
                 sparse_tensor=sp, sparse_tensors=[sp], tp=map_type,
                 type_protos=[seq_type, opt_type])
    node = helper.make_node("Everything", ["a"], ["b"], domain="custom", **attrs)
    node.metadata_props.add(key="node", value="meta")
    ref = helper.make_attribute_ref("alpha", AttributeProtoType.FLOAT)
    fnode = helper.make_node("Mul", ["p", "p"], ["q"])
    fnode.attribute.append(ref)
    fn = helper.make_function(
        "custom", "Fn", ["p"], ["q"], [fnode], [helper.make_opsetid("", 21)],
        attributes=["beta"], attribute_protos=[helper.make_attribute("alpha", 0.5)],
        doc_string="fn doc")
    fn.value_info.append(helper.make_tensor_value_info("q", TensorProto.FLOAT, ["N"]))
    call = helper.make_node("Fn", ["b"], ["c"], domain="custom")
    a_in = helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N"])
    a_in.type.denotation = "TENSOR"
    a_in.type.tensor_type.shape.dim[0].denotation = "DATA_BATCH"
    a_in.doc_string = "input a"
    c_out = helper.make_tensor_value_info("c", TensorProto.FLOAT, ["N"])
    vi = [helper.make_value_info("b", seq_type), helper.make_value_info("z", opt_type),
          helper.make_value_info("mp", map_type),
          helper.make_value_info("sp_t", helper.make_sparse_tensor_type_proto(1, [3, None]))]
    opaque = onnx.TypeProto()
    opaque.opaque_type.domain = "com.example"
    opaque.opaque_type.name = "Blob"
    vi.append(helper.make_value_info("op", opaque))
    g = helper.make_graph([node, call], "g", [a_in], [c_out], value_info=vi)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21),
                                            helper.make_opsetid("custom", 1)],
                          functions=[fn])
    ti = m.training_info.add()
    ti.initialization.name = "init"
    ti.initialization.initializer.append(numpy_helper.from_array(np.ones(2, np.float32), "lr"))
    ti.initialization_binding.add(key="a", value="lr")
    return m


AttributeProtoType = onnx.AttributeProto.AttributeType

BUILT = {"subgraphs": _subgraph_model, "typed_storage": _typed_storage_model,
         "attributes_functions": _attributes_and_functions_model}


@pytest.mark.parametrize("name", sorted(BUILT))
def test_helper_built_models_come_back_byte_identical(name):
    original = BUILT[name]().SerializeToString()
    model = decode_model(original)
    data = write_bytes(model)
    back = read_bytes(data)
    assert back == model
    assert encode_model(back) == original
    # the oracle agrees that the file's model is the original one
    assert onnx.load_from_string(encode_model(back)) == onnx.load_from_string(original)


def test_unknown_fields_of_a_later_onnx_survive():
    m = _subgraph_model()
    original = m.SerializeToString() + b"\xa2\x06\x05hello"  # ModelProto field 100, unknown
    model = decode_model(original)
    assert model.unknown
    back = read_bytes(write_bytes(model))
    assert encode_model(back) == original


def test_plain_v1_of_an_onnx_model_loads_and_lists_what_it_left_out():
    model = decode_model(_attributes_and_functions_model().SerializeToString())
    sink = BytesSink()
    left_out = write(model, sink, strict_v1=True)
    assert any(line.startswith("manifest: ") and "training_info" in line for line in left_out)
    assert any("manifest.graph.nodes[0]: metadata_props" in line for line in left_out)
    plain = read_bytes(sink.getvalue())
    assert plain.training_info == [] and plain.graph.nodes[0].metadata_props == []
    assert [n.op_type for n in plain.graph.nodes] == ["Everything", "Fn"]
    assert plain.graph.inputs[0].type.denotation is None
