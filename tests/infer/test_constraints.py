"""What inference entails of input extents, used by the evaluator: inputs checked at the input
before anything runs, and generated inputs that satisfy the constraints (issue 12 Build 5)."""

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import onemodel
from onemodel.errors import InputError
from onemodel.evaluate import Session
from onemodel.evaluate.inputs import generated_axes, random_inputs
from onemodel.inference import infer_model


def _model(nodes, inputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, [helper.make_empty_tensor_value_info("y")],
                          list(inits))
    return onemodel.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
                         .SerializeToString())


def test_an_unnamed_extent_gets_a_fresh_variable_that_is_never_written():
    w = numpy_helper.from_array(np.ones(3, np.float32), "w")
    m = _model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
               [helper.make_tensor_value_info("x", T.FLOAT, ["N", None])], [w])
    res = infer_model(m, fresh_inputs=True)
    assert [str(c) for c in res.constraints] == ["Constraint(?x:1 in (1, 3) at graph.nodes[0])"]
    assert str(res.values["y"]) == "tensor(float)[N,3]"
    # without fresh variables the unnamed extent stays unknown and entails nothing
    assert infer_model(m).constraints == []


def test_the_evaluator_refuses_an_input_that_breaks_a_constraint_at_the_input():
    w = numpy_helper.from_array(np.ones(3, np.float32), "w")
    m = _model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
               [helper.make_tensor_value_info("x", T.FLOAT, ["N", None])], [w])
    s = Session(m)
    assert s.run({"x": np.ones((2, 3), np.float32)})["y"].shape == (2, 3)
    assert s.run({"x": np.ones((2, 1), np.float32)})["y"].shape == (2, 3)
    with pytest.raises(InputError) as e:
        s.run({"x": np.ones((2, 2), np.float32)})
    assert e.value.path == "graph.inputs[0]"
    assert e.value.message.startswith("input 'x' has extent 2 on axis 1 (unnamed)")
    assert "x.shape[1] in {1, 3}" in e.value.message and "graph.nodes[0]" in e.value.message


def test_one_variable_bound_to_two_extents_is_refused():
    m = _model([helper.make_node("Concat", ["a", "b"], ["y"], axis=0)],
               [helper.make_tensor_value_info("a", T.FLOAT, ["N"]),
                helper.make_tensor_value_info("b", T.FLOAT, ["N"])])
    with pytest.raises(InputError) as e:
        Session(m).run({"a": np.ones(2, np.float32), "b": np.ones(3, np.float32)})
    assert e.value.path == "graph.inputs[1]"
    assert "input 'b' has extent 3 on axis 0 (N), but input 'a' has 2" in e.value.message


def test_generated_inputs_keep_their_defaults_where_nothing_is_pinned():
    w = numpy_helper.from_array(np.ones(3, np.float32), "w")
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])],
               [helper.make_tensor_value_info("x", T.FLOAT, ["N", None])], [w])
    assert random_inputs(m)["x"].shape == (1, 1)
    assert generated_axes(m, None, None) == [("x", [1, 1], ["N = 1", "axis 1 = 1"])]


def test_a_constraint_of_two_inputs_names_both_extents():
    # Concat along axis 1 needs the extents of axis 0 equal: N == M
    m = _model([helper.make_node("Concat", ["a", "b"], ["y"], axis=1, name="cat")],
               [helper.make_tensor_value_info("a", T.FLOAT, ["N", 2]),
                helper.make_tensor_value_info("b", T.FLOAT, ["M", 3])])
    s = Session(m)
    assert s.run({"a": np.ones((2, 2), np.float32),
                  "b": np.ones((2, 3), np.float32)})["y"].shape == (2, 5)
    with pytest.raises(InputError) as e:
        s.run({"a": np.ones((2, 2), np.float32), "b": np.ones((3, 3), np.float32)})
    assert e.value.path == "graph.inputs[0]"
    assert e.value.message.startswith("input 'a' has extent 2 on axis 0 (N), input 'b' has "
                                      "extent 3 on axis 0 (M); Concat 'cat'")
