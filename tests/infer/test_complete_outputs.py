"""onemodel.inference.complete_outputs: a graph output gets what inference knows of its type and
it does not state (a missing type, element type or shape, unknown dimensions), as
onnx.shape_inference does; what it states is kept, a contradiction is not replaced (Clause 9.4);
and the splice that writes it encodes again only the outputs completed."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import onemodel
from onemodel.formats.onnx.splice import splice_value_info
from onemodel.formats.onnx.wire_encode import encode
from onemodel.inference import complete_outputs, infer_model
from onemodel.ir import Dimension, Shape, Type, ValueInfo
from onemodel.ir.types import SequenceType, TensorType


def _model(outputs) -> onemodel.Model:
    """x [N,2,3] float -> Relu -> y; Shape(x) -> s (int64 [3]); ``outputs``: the declared
    y, s ValueInfoProtos."""
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"]),
                           helper.make_node("Shape", ["x"], ["s"])], "g",
                          [helper.make_tensor_value_info("x", T.FLOAT, ["N", 2, 3])], outputs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return onemodel.load(m.SerializeToString())


def _complete(m) -> tuple[int, list[str]]:
    n = complete_outputs(m, infer_model(m))
    return n, [str(vi.type) if vi.type is not None else None for vi in m.graph.outputs]


def test_a_missing_shape_or_element_type_is_filled():
    m = _model([helper.make_tensor_value_info("y", T.FLOAT, None),
                helper.make_tensor_value_info("s", T.UNDEFINED, None)])
    assert _complete(m) == (2, ["tensor(float)[N,2,3]", "tensor(int64)[3]"])


def test_a_missing_type_is_the_inferred_one():
    m = _model([helper.make_tensor_value_info("y", T.FLOAT, None),
                helper.make_tensor_value_info("s", T.INT64, [3])])
    m.graph.outputs[0].type = None  # (a ValueInfoProto without its type field)
    assert _complete(m) == (1, ["tensor(float)[N,2,3]", "tensor(int64)[3]"])


def test_only_unknown_dimensions_are_filled_and_stated_ones_kept():
    # axis 0 states another variable (B): kept; axis 1 unknown: filled; axis 2 stated: kept
    m = _model([helper.make_tensor_value_info("y", T.FLOAT, ["B", None, 3]),
                helper.make_tensor_value_info("s", T.INT64, [None])])
    y = m.graph.outputs[0].type.tensor_type.shape
    y.dims[1].denotation = "CHANNEL"
    declared = m.graph.outputs[0].type
    assert _complete(m) == (2, ["tensor(float)[B,2,3]", "tensor(int64)[3]"])
    # a new record: the declared one (records may be shared) is not changed
    assert str(declared) == "tensor(float)[B,?,3]" and m.graph.outputs[0].type is not declared
    assert m.graph.outputs[0].type.tensor_type.shape.dims[1].denotation == "CHANNEL"


def test_contradictions_and_complete_outputs_are_kept_as_stated():
    # another rank and another element type: reported by inference, not replaced
    m = _model([helper.make_tensor_value_info("y", T.FLOAT, ["N", 6]),
                helper.make_tensor_value_info("s", T.INT32, [3])])
    before = [vi.type for vi in m.graph.outputs]
    res = infer_model(m)
    assert complete_outputs(m, res) == 0
    assert [vi.type for vi in m.graph.outputs] == before
    assert res.contradictions


def test_a_type_of_a_kind_not_known_is_kept():
    """A TypeProto holding only a field this reader does not know (a kind of a later ONNX) is
    kept as the file has it, not replaced by the inferred tensor type."""
    m = _model([helper.make_tensor_value_info("y", T.FLOAT, None),
                helper.make_tensor_value_info("s", T.INT64, [3])])
    future = Type()
    future.unknown = b"\x52\x00"  # field 10, length-delimited, empty
    m.graph.outputs[0].type = future
    assert complete_outputs(m, infer_model(m)) == 0
    assert m.graph.outputs[0].type is future


def test_an_output_whose_declared_type_contradicts_the_operators_is_not_completed():
    """A new-user trial: y declared int64 without a shape (Relu gives float [N,2,3]) got the
    inferred shape as int64 [N,2,3]; y without a type but with a value_info of [3,3,3] got
    that contradicted shape. Neither is completed: nothing states such a type in full."""
    m = _model([helper.make_tensor_value_info("y", T.INT64, None),
                helper.make_tensor_value_info("s", T.INT64, None)])
    res = infer_model(m)
    assert [c.name for c in res.contradictions] == ["y"]
    assert complete_outputs(m, res) == 1  # s only
    assert [str(vi.type) for vi in m.graph.outputs] == ["tensor(int64)", "tensor(int64)[3]"]
    m = _model([helper.make_tensor_value_info("y", T.FLOAT, None),
                helper.make_tensor_value_info("s", T.INT64, [3])])
    m.graph.outputs[0].type = None
    m.graph.value_info.append(ValueInfo(name="y", type=Type.tensor(T.FLOAT, [3, 3, 3])))
    res = infer_model(m)
    assert [(c.path, c.name) for c in res.contradictions] == [("graph.nodes[0]", "y")]
    assert complete_outputs(m, res) == 0
    assert m.graph.outputs[0].type is None


def test_a_sequence_output_is_kept():
    m = _model([helper.make_tensor_value_info("y", T.FLOAT, None),
                helper.make_tensor_value_info("s", T.INT64, [3])])
    seq = Type(sequence_type=SequenceType(elem_type=Type.tensor(T.FLOAT)))
    m.graph.outputs[0].type = seq
    assert _complete(m) == (0, [str(seq), "tensor(int64)[3]"])


@pytest.mark.parametrize("which", [[0], [1], [0, 1]])
def test_spliced_outputs_equal_the_writers_encoding(which):
    """The octets with the completed outputs encoded again in their places and value_info
    entries appended equal the writer's encoding of the model so changed."""
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"]),
                           helper.make_node("Shape", ["y"], ["s"])], "g",
                          [helper.make_tensor_value_info("x", T.FLOAT, ["N", 2, 3])],
                          [helper.make_tensor_value_info("y", T.FLOAT, None),
                           helper.make_tensor_value_info("s", T.INT64, None)], [w])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    m = onemodel.load(data)
    done = {}
    for k in which:
        vi = m.graph.outputs[k]
        vi.type = Type(tensor_type=TensorType(elem_type=vi.type.elem_type, shape=Shape(dims=[
            Dimension(dim_param="N"), Dimension(dim_value=2), Dimension(dim_value=3)][:3 - 2 * k]
        )))
        done[k] = vi
    got = b"".join(bytes(p) for p in splice_value_info(data, [], done))
    assert got == encode(m)
    back = onemodel.load(got)
    assert [str(vi.type) for vi in back.graph.outputs] == [str(vi.type) for vi in m.graph.outputs]
    # an index past the file's outputs: not spliced (the model is encoded instead)
    assert splice_value_info(data, [], {2: m.graph.outputs[0]}) is None
