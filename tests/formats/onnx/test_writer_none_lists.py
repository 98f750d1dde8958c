"""The .onnx writer refuses a repeated field holding None, as the OneModel writer does (commit
ab74eb4, tests/formats/container): a repeated field has no absent state in the IR (a list, []
when empty), so such a record is not a model. It used to be written as if empty (node.inputs,
a shape's dims, opset_imports: a different model, quietly) or to fail with a TypeError (nodes,
a tensor's dims: an internal error)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import onemodel
from onemodel.errors import InvalidModelError
from onemodel.formats.onnx import decode_model
from onemodel.formats.onnx.writer import LAYOUTS, encode_message


def _model():
    """y = x + k, k an initializer of 2000 float32 (past every layout's inline threshold)."""
    g = helper.make_graph([helper.make_node("Add", ["x", "k"], ["y"], name="n")], "g",
                          [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2000])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2000])],
                          [numpy_helper.from_array(np.ones(2000, np.float32), "k")])
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return decode_model(proto.SerializeToString())


FIELDS = [  # (record, field, its path)
    ("model", "opset_imports", "opset_imports"),
    ("graph", "nodes", "graph.nodes"),
    ("graph", "initializers", "graph.initializers"),
    ("graph", "outputs", "graph.outputs"),
    ("node", "inputs", "graph.nodes[0].inputs"),
    ("node", "attributes", "graph.nodes[0].attributes"),
    ("tensor", "dims", "graph.initializers[0].dims"),
    ("tensor", "string_data", "graph.initializers[0].string_data"),
    ("tensor", "external_data", "graph.initializers[0].external_data"),
    ("tensor", "metadata_props", "graph.initializers[0].metadata_props"),
    ("shape", "dims", "graph.inputs[0].type.tensor_type.shape.dims"),
]


def _with_none(where: str, field: str):
    m = _model()
    rec = {"model": m, "graph": m.graph, "node": m.graph.nodes[0],
           "tensor": m.graph.initializers[0],
           "shape": m.graph.inputs[0].type.tensor_type.shape}[where]
    setattr(rec, field, None)
    return m


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("where, field, path", FIELDS)
def test_a_repeated_field_holding_none_is_refused_naming_it(tmp_path, where, field, path,
                                                            layout):
    m = _with_none(where, field)
    with pytest.raises(InvalidModelError) as info:
        onemodel.save(m, tmp_path / "m.onnx", layout=layout)
    assert info.value.message == f"repeated field {field} holds None, not a list ([] when empty)"
    assert info.value.path == path
    assert not any(tmp_path.iterdir())  # nothing written, no data file either


@pytest.mark.parametrize("where, field, path", FIELDS)
def test_encoding_in_memory_refuses_it_too(where, field, path):
    m = _with_none(where, field)
    with pytest.raises(InvalidModelError, match="holds None, not a list") as info:
        encode_message(m)
    assert info.value.path == path


def test_empty_lists_and_absent_number_arrays_are_written():
    """The same fields as [] write (an empty list is the field's empty value), and so does a
    number array left None (float_data: its empty value is None, not a list)."""
    m = _model()
    m.graph.nodes[0].attributes = []
    m.graph.initializers[0].metadata_props = []
    assert m.graph.initializers[0].float_data is None
    back = onnx.load_from_string(encode_message(m))
    assert list(back.graph.node[0].input) == ["x", "k"]
    assert numpy_helper.to_array(back.graph.initializer[0]).tolist() == [1.0] * 2000
