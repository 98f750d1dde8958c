"""The ONNX wire encoder refuses an integer outside its field's range (Clause 12.2: int64,
int32, an enumeration, uint64) with an InvalidModelError naming the field, its path and the
value. It used to mask every value to 64 bits: a dim_value of 2^80 was written as 0, one of
2^63 as -2^63, a uint64 of -1 as 2^64 - 1 (issue 23, item 2)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

import onemodel
from onemodel.errors import InvalidModelError
from onemodel.formats.onnx import decode_model
from onemodel.formats.onnx.wire_encode import encode
from onemodel.formats.protobuf import encode_varint
from onemodel.ir import Tensor
from onemodel.ir.types import Dimension


def _model():
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", T.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [3])])
    return decode_model(helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())


@pytest.mark.parametrize("value", [1 << 80, 1 << 63, (1 << 64) + 5, -(1 << 63) - 1])
def test_a_dim_value_outside_int64_is_refused_not_masked(tmp_path, value):
    m = _model()
    m.graph.inputs[0].type.tensor_type.shape.dims[0] = Dimension(dim_value=value)
    with pytest.raises(InvalidModelError) as e:
        encode(m)
    assert e.value.path == "graph.inputs[0].type.tensor_type.shape.dims[0].dim_value"
    assert f"TensorShapeProto.Dimension.dim_value holds {value}, outside the range of its " \
        "type int64" in str(e.value)
    out = tmp_path / "m.onnx"
    with pytest.raises(InvalidModelError):
        onemodel.save(m, str(out))
    assert not out.exists()  # refused before a byte was written


def test_the_extremes_of_each_type_are_written_exactly():
    m = _model()
    m.graph.inputs[0].type.tensor_type.shape.dims[0] = Dimension(dim_value=(1 << 63) - 1)
    m.model_version = -(1 << 63)
    p = onnx.load_from_string(encode(m))
    assert p.graph.input[0].type.tensor_type.shape.dim[0].dim_value == (1 << 63) - 1
    assert p.model_version == -(1 << 63)
    t = Tensor(name="t", dims=[2], data_type=T.UINT64,
               uint64_data=np.array([0, (1 << 64) - 1], dtype=np.uint64))
    assert list(onnx.TensorProto.FromString(encode(t)).uint64_data) == [0, (1 << 64) - 1]
    t = Tensor(name="t", dims=[2], data_type=T.INT32,
               int32_data=np.array([-(1 << 31), (1 << 31) - 1], dtype=np.int64))
    assert list(onnx.TensorProto.FromString(encode(t)).int32_data) == [-(1 << 31),
                                                                      (1 << 31) - 1]


@pytest.mark.parametrize("record,field,value,kind", [
    (dict(dims=[2], data_type=T.INT64,
          int64_data=np.array([1, 1 << 63], dtype=np.uint64)), "int64_data", 1 << 63, "int64"),
    (dict(dims=[2], data_type=T.INT32,
          int32_data=np.array([1, 1 << 31], dtype=np.int64)), "int32_data", 1 << 31, "int32"),
    (dict(dims=[2], data_type=T.UINT64,
          uint64_data=np.array([3, -1], dtype=np.int64)), "uint64_data", -1, "uint64"),
    (dict(dims=[2, 1 << 63], data_type=T.FLOAT), "dims", 1 << 63, "int64"),
    (dict(dims=[2], data_type=1 << 31), "data_type", 1 << 31, "int32"),
    (dict(dims=[2], data_type=T.FLOAT, data_location=-(1 << 31) - 1), "data_location",
     -(1 << 31) - 1, "int32 (an enumeration)"),
])
def test_every_integer_kind_is_checked(record, field, value, kind):
    with pytest.raises(InvalidModelError) as e:
        encode(Tensor(name="t", **record))
    assert e.value.path == field
    assert f"TensorProto.{field} holds {value}, outside the range of its type {kind}" \
        in str(e.value)


def test_varint_refuses_what_no_varint_holds():
    assert encode_varint(-1) == b"\xff" * 9 + b"\x01"
    assert encode_varint((1 << 64) - 1) == b"\xff" * 9 + b"\x01"
    for v in (1 << 64, -(1 << 63) - 1):
        with pytest.raises(OverflowError):
            encode_varint(v)
