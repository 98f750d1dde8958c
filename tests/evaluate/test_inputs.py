"""Graph inputs (onemodel/evaluate/inputs.py): dims and shapes for random inputs and their
checks, declared extents of -1, and the hint that names the generated inputs and axes when a
model fails on them."""

from __future__ import annotations

import pathlib
import warnings

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import TypeProto, helper

import onemodel
from onemodel.errors import (
    EvaluationError,
    InputError,
    InvalidModelError,
    OneModelWarning,
    Setting,
    UsageError,
)
from onemodel.evaluate import random_inputs, run
from onemodel.evaluate.input_hints import add_dims_hint, add_inputs_hint
from onemodel.evaluate.inputs import check_dims_shapes, generated_axes
from onemodel.formats.onnx import decode_model

MODELS = pathlib.Path(__file__).resolve().parents[2] / "testdata" / "models"
LEGACY = MODELS / "transformer_legacy.onnx"  # tokens int64 [batch, seq], runs only at seq 16


def _model(inputs, nodes=None, outputs=("y",)):
    """A model of ``nodes`` (default: Identity of the first input to y) over ``inputs``, a list
    of (name, elem_type, dims) with dims of ints, strings and None."""
    vis = []
    for name, elem, dims in inputs:
        t = helper.make_tensor_type_proto(elem, None)
        if dims is not None:
            shape = t.tensor_type.shape
            for d in dims:
                dim = shape.dim.add()
                if isinstance(d, int):
                    dim.dim_value = d
                elif isinstance(d, str):
                    dim.dim_param = d
        vis.append(helper.make_value_info(name, t))
    nodes = nodes or [helper.make_node("Identity", [inputs[0][0]], ["y"])]
    g = helper.make_graph(nodes, "g", vis, [helper.make_value_info(o, TypeProto())
                                             for o in outputs])
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    return decode_model(proto.SerializeToString())


# -- dims and shapes ---------------------------------------------------------------------------
def test_shapes_override_the_declared_dims_of_one_input():
    m = _model([("a", TP.FLOAT, ["n", 3]), ("b", TP.INT64, [None, "n"])],
               [helper.make_node("Identity", ["a"], ["y"])])
    r = random_inputs(m, dims={"n": 4}, shapes={"b": (5, 2)})
    assert r["a"].shape == (4, 3) and r["b"].shape == (5, 2)
    r = random_inputs(m, shapes={"a": (0, 3)})
    assert r["a"].shape == (0, 3) and r["b"].shape == (1, 1)  # unnamed and unset dims are 1


@pytest.mark.parametrize("dims, shapes, match", [
    ({"m": 2}, None, r"^dims=\{'m': 2\}: the model has no symbolic "
     r"dimension 'm'; its dims are: n$"),
    ({"n": -1}, None, r"n=-1: an extent is an integer >= 0"),
    ({"n": 1.5}, None, r"an extent is an integer"),
    (None, {"z": (1, 3)}, r"shapes=\{'z': \(1, 3\)\}: it is not a graph input;"
     r" inputs that need a value: a, b"),
    (None, {"w": (2,)}, r"shapes=\{'w': \(2,\)\}: it has an initializer"),
    (None, {"a": (1, 3, 1)}, r"rank 3; the graph declares rank 2 \[n, 3\]"),
    (None, {"a": (2, 4)}, r"axis 1 is 4; the graph declares \[n, 3\]"),
    (None, {"a": (2, -3)}, r"every extent is an integer >= 0"),
])
def test_dims_and_shapes_that_do_not_fit_are_usage_errors(dims, shapes, match):
    m = _model([("a", TP.FLOAT, ["n", 3]), ("b", TP.INT64, [None]), ("w", TP.FLOAT, [2])])
    from onemodel.ir import Tensor
    m.graph.initializers.append(Tensor.from_numpy(np.zeros(2, np.float32), name="w"))
    with pytest.raises(UsageError, match=match):
        check_dims_shapes(m, dims, shapes)
    with pytest.raises(UsageError, match=match):
        random_inputs(m, dims=dims, shapes=shapes)
    assert issubclass(UsageError, ValueError)


def test_a_shape_for_an_input_without_a_declared_shape_takes_any_rank():
    m = _model([("a", TP.FLOAT, None)])
    assert random_inputs(m, shapes={"a": (2, 3, 4)})["a"].shape == (2, 3, 4)
    assert random_inputs(m)["a"].shape == ()


# -- declared extent -1 ------------------------------------------------------------------------
def test_a_declared_extent_of_minus_one_is_unknown_with_one_warning_per_input():
    m = _model([("x", TP.FLOAT, [-1, 3, None, None])])  # what PaddlePaddle exports declare
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        feeds = random_inputs(m)
    assert feeds["x"].shape == (1, 3, 1, 1)
    ours = [x for x in w if issubclass(x.category, OneModelWarning)]
    assert len(ours) == 1
    assert "input 'x' declares the extent -1 in [-1, 3, ?, ?]" in str(ours[0].message)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = run(m, {"x": np.ones((5, 3, 2, 2), np.float32)})["y"]  # any extent on axis 0
    assert y.shape == (5, 3, 2, 2)
    assert len([x for x in w if issubclass(x.category, OneModelWarning)]) == 1
    with pytest.raises(InputError, match="extent 4 on axis 1"):  # fixed ones still hold
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run(m, {"x": np.ones((5, 4, 2, 2), np.float32)})
    # --shape may set the unknown axis, and must keep the fixed one
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert random_inputs(m, shapes={"x": (7, 3, 2, 2)})["x"].shape == (7, 3, 2, 2)
    with pytest.raises(UsageError, match="axis 1 is 2"):
        random_inputs(m, shapes={"x": (7, 2, 2, 2)})


# -- the hint after a failure on generated inputs ---------------------------------------------
def test_generated_axes_name_the_open_axes():
    m = _model([("a", TP.FLOAT, ["n", 3, None]), ("b", TP.INT64, [2]), ("c", TP.FLOAT, [-1])])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert generated_axes(m, {"n": 4}, {"c": (2,)}) == [("a", [4, 3, 1],
                                                             ["n = 4", "axis 2 = 1"])]
        assert generated_axes(m, None, None)[1] == ("c", [1], ["axis 0 = 1"])


def test_legacy_transformer_fails_on_defaults_with_a_hint_naming_input_and_axes():
    with onemodel.load(LEGACY) as model:
        feeds = random_inputs(model)
        assert feeds["tokens"].shape == (1, 1)
        with pytest.raises(EvaluationError) as e:
            run(model, feeds)
        err = add_inputs_hint(e.value, model, {}, None)
        assert err is e.value and err.kind == "EvaluationError"
        assert not isinstance(err, InvalidModelError)
        text = str(err)
        assert "(Reshape '/encoder/layers.0/self_attn/Reshape_4') failed" in text
        assert "float32[1, 1, 64]" in text  # the shapes of the failing node's inputs
        # the one axis at fault, found by running with the extents the failure quotes
        assert ("(inputs were generated: tokens [1, 1] with batch = 1, seq = 1; input 'tokens' "
                "axis 1 (seq) = 1 does not fit node 75: with dims={'seq': 16} the model runs)") \
            in text
        assert "'batch'" not in text.split("inputs were generated")[1].split(";")[1]
        assert err.source is not None and str(err.source).endswith("transformer_legacy.onnx")
        # with the traced length it runs, by dims or by shapes
        y = run(model, random_inputs(model, dims={"seq": 16}))["logits"]
        assert y.shape == (1, 16, 10) and y.dtype == np.float32
        y = run(model, random_inputs(model, shapes={"tokens": (2, 16)}))["logits"]
        assert y.shape == (2, 16, 10)
        # the old name still works (the CLI used it) and gives the same hint
        with pytest.raises(EvaluationError) as e2:
            run(model, feeds)
        assert "with dims={'seq': 16} the model runs" in str(add_dims_hint(e2.value, model, {}))
        # without trying, the axes the failing node depends on and their flags
        with pytest.raises(EvaluationError) as e3:
            run(model, feeds)
        assert ("node 75 depends on input 'tokens' axis 0 (batch) = 1, input 'tokens' axis 1 "
                "(seq) = 1: set dims={'batch': N}, dims={'seq': N} or "
                "shapes={'tokens': (D0, D1)})") \
            in add_inputs_hint(e3.value, model, {}, None, probe=False).message


def _const(name, dims, values, elem=TP.FLOAT):
    return helper.make_node("Constant", [], [name],
                            value=helper.make_tensor(name + "_v", elem, dims, values))


def test_generated_inputs_take_the_extents_inference_pins():
    """Two generated inputs, one reaching a MatMul whose weight has 8 rows: inference entails
    that x's unnamed axis 1 is 8 (issue 12 Build 5), so the generated x is [1, 8] and the model
    runs; the other input's dimension keeps its default."""
    m = _model([("a", TP.FLOAT, ["n"]), ("x", TP.FLOAT, [None, None])],
               [_const("w", [8, 2], [0.5] * 16), helper.make_node("MatMul", ["x", "w"], ["y"]),
                helper.make_node("Identity", ["a"], ["z"])], outputs=("y", "z"))
    feeds = random_inputs(m, seed=3)
    assert feeds["x"].shape == (1, 8) and feeds["a"].shape == (1,)
    assert generated_axes(m, None, None) == [("a", [1], ["n = 1"]),
                                             ("x", [1, 8], ["axis 0 = 1", "axis 1 = 8"])]
    assert run(m, feeds)["y"].shape == (1, 2)
    # an input given with another inner extent is refused at the input, naming the axis
    with pytest.raises(InputError) as e:
        run(m, {"a": feeds["a"], "x": np.zeros((1, 3), np.float32)})
    assert e.value.path == "graph.inputs[1]" and "axis 1 (unnamed)" in e.value.message


def test_when_no_quoted_extent_fits_the_axes_reaching_the_node_are_named():
    """b must hold 6 elements, a number the failure does not quote (it says (2,3)): no trial
    runs, so the hint names the open axes the failing node depends on (b's, not a's) and
    their flags."""
    m = _model([("a", TP.FLOAT, ["n"]), ("b", TP.FLOAT, ["m"])],
               [_const("s", [2], [2, 3], TP.INT64), helper.make_node("Reshape", ["b", "s"], ["y"]),
                helper.make_node("Identity", ["a"], ["z"])], outputs=("y", "z"))
    with pytest.raises(EvaluationError) as e:
        run(m, random_inputs(m))
    text = add_inputs_hint(e.value, m, {"n": 2}, None).message
    assert text.endswith("(inputs were generated: a [2] with n = 2; b [1] with m = 1; node 1 "
                         "depends on input 'b' axis 0 (m) = 1: set dims={'m': N} or "
                         "shapes={'b': (D0,)})"), text
    assert run(m, random_inputs(m, dims={"m": 6}))["y"].shape == (2, 3)


def test_the_hint_is_left_out_when_no_axis_was_chosen():
    m = _model([("a", TP.FLOAT, [2]), ("s", TP.INT64, [1])],
               [helper.make_node("Reshape", ["a", "s"], ["y"])])
    feeds = random_inputs(m)
    feeds["s"] = np.array([3], np.int64)
    with pytest.raises(EvaluationError) as e:
        run(m, feeds)
    before = e.value.message
    assert add_inputs_hint(e.value, m, {}, None).message == before
    # an error other than EvaluationError (the model's own fault) is never given the hint
    err = InvalidModelError("bad")
    assert add_inputs_hint(err, _model([("a", TP.FLOAT, ["n"])]), {}, None).message == "bad"


def test_the_hint_keeps_its_settings_as_fields_that_each_interface_writes():
    """issue 25 item 3: the hint names the settings that make the model run as fields
    (:class:`onemodel.errors.Setting`), written as Python writes them in the message and as the
    command line writes them by its own spelling (``--dim seq=16``), never parsed from text."""
    from onemodel.cli.application import flag_of

    with onemodel.load(LEGACY) as model:
        with pytest.raises(EvaluationError) as e:
            run(model, random_inputs(model))
        err = add_inputs_hint(e.value, model, {}, None)
        assert err.settings == (Setting("dims", {"seq": 16}),)
        assert err.message.endswith("with dims={'seq': 16} the model runs)")
        assert err.spelled(flag_of).endswith("with --dim seq=16 the model runs)")
        assert err.spelled(flag_of).replace("--dim seq=16", "dims={'seq': 16}") == err.message
        assert err.spell_as(flag_of) is err and err.message.endswith("--dim seq=16 the model runs)")
    # a message naming no setting is left as it is
    plain = UsageError("dimension 'x': no graph input has a dimension of that name")
    assert plain.spelled(flag_of) == plain.message and plain.settings == ()
    # braces in a name are text, not a setting's place
    m = _model([("a", TP.FLOAT, ["n"])])
    with pytest.raises(UsageError) as e:
        random_inputs(m, shapes={"{0}": (1,)})
    assert e.value.message.startswith("shapes={'{0}': (1,)}: it is not a graph input")
    assert e.value.spelled(flag_of).startswith("--shape {0}=1: it is not a graph input")


def test_dims_or_shapes_that_make_an_input_too_large_are_usage_errors_naming_them():
    """An input of 2^28 elements or more made by the caller's dims or shapes is their usage
    error, naming the value, the input and its shape; one the declared extents alone make so
    large stays the UnsupportedError of the limit."""
    from onemodel.errors import UnsupportedError

    m = _model([("x", TP.FLOAT, ["batch", 3, 32, 32])])
    big = 99999999999
    with pytest.raises(UsageError) as e:
        random_inputs(m, dims={"batch": big})
    assert str(e.value) == (f"dims={{'batch': {big}}} makes input 'x' [{big},3,32,32] of "
                            f"{big * 3 * 32 * 32} elements, past the limit of 2^28 for "
                            "generated inputs")
    assert e.value.settings == (Setting("dims", {"batch": big}),)
    # past 2^63 (an int64 element count overflows): still the caller's value
    with pytest.raises(UsageError, match=r"^dims=\{'batch': \d{25}\} makes input 'x'"):
        random_inputs(m, dims={"batch": 10 ** 24})
    with pytest.raises(UsageError) as e:
        random_inputs(m, shapes={"x": (1 << 19, 3, 32, 32)})
    assert str(e.value).startswith(f"shapes={{'x': ({1 << 19}, 3, 32, 32)}} makes input 'x' "
                                   f"[{1 << 19},3,32,32] of {(1 << 19) * 3072} elements")
    # two dims of one input: both named
    m2 = _model([("t", TP.INT64, ["b", "s"])])
    with pytest.raises(UsageError, match=r"^dims=\{'b': 65536, 's': 4096\} make input 't' "
                                         r"\[65536,4096\] of 268435456 elements"):
        random_inputs(m2, dims={"b": 65536, "s": 4096})
    # just below the limit is generated (a dim of 0 too: no elements)
    assert random_inputs(m2, dims={"b": 0, "s": 1 << 40})["t"].shape == (0, 1 << 40)
    # the declared extents alone: the model's size, not the caller's
    fixed = _model([("w", TP.FLOAT, [1 << 15, 1 << 14])])
    with pytest.raises(UnsupportedError, match=r"2\^28 or more \(the limit\)"):
        random_inputs(fixed)


# -- dim_params that name no variable (issue 23) -----------------------------------------------
def _classifier():
    """The inputs of the PaddleOCR text-direction classifier rapidocr ships: x [-1, 3, ?, ?];
    a Conv (3x3, 2 channels) and a Relu, so that every extent of x is used."""
    w = np.arange(54, dtype=np.float32).reshape(2, 3, 3, 3) / 54 - 0.5
    from onnx import numpy_helper
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    vis = [helper.make_tensor_value_info("x", TP.FLOAT, [-1, 3, "?", "?"])]
    g = helper.make_graph(nodes, "g", vis, [helper.make_tensor_value_info("y", TP.FLOAT,
                                                                          [-1, 2, "?", "?"])],
                          [numpy_helper.from_array(w, "w")])
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return proto, w


def _conv_relu64(x, w):
    """Conv (pads 1, stride 1) and Relu computed in float64."""
    n, c, h, wd = x.shape
    p = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, w.shape[0], h, wd))
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,oc->nohw", p[:, :, i:i + h, j:j + wd],
                             w[:, :, i, j].astype(np.float64))
    return np.maximum(out, 0)


def test_two_question_marks_are_two_unknown_extents_with_a_warning():
    proto, w = _classifier()
    m = decode_model(proto.SerializeToString())
    x = np.random.default_rng(5).uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = run(m, {"x": x})["y"]
    assert y.shape == (1, 2, 48, 192)
    np.testing.assert_allclose(y, _conv_relu64(x, w), rtol=1e-5, atol=1e-5)
    ours = [str(c.message) for c in caught if issubclass(c.category, OneModelWarning)]
    assert ours == ["input 'x' declares the extent -1 and the dim_param '?' in [-1, 3, ?, ?] "
                    "(graph.inputs[0]); a negative extent and a dim_param that is not a name are "
                    "read as unknown, each '?' its own extent"]
    ort = pytest.importorskip("onnxruntime")  # the oracle runs it too
    got = ort.InferenceSession(proto.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, _conv_relu64(x, w), rtol=1e-5, atol=1e-5)
    # generated: each '?' is its own open axis, set by --shape (no --dim names it)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert generated_axes(m, None, None) == [
            ("x", [1, 3, 1, 1], ["axis 0 = 1", "axis 2 = 1", "axis 3 = 1"])]
        with pytest.raises(UsageError, match="no symbolic dimension '\\?'"):
            random_inputs(m, dims={"?": 4})


def test_a_dim_param_that_is_a_name_or_an_expression_is_still_one_variable():
    from onemodel.ir.types import names_variable
    assert [names_variable(p) for p in ("N", "batch_size", "unk__3", "seq + 1", "2*s")] == \
        [True] * 5
    assert [names_variable(p) for p in ("?", "-1", "", "*", " ", None)] == [False] * 6
    m = _model([("a", TP.FLOAT, ["N", "N"])])
    with pytest.raises(InputError, match="for the same dimension"):
        run(m, {"a": np.zeros((2, 3), np.float32)})
    m = _model([("a", TP.FLOAT, ["?", "?"])])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert run(m, {"a": np.zeros((2, 3), np.float32)})["y"].shape == (2, 3)


# -- inputs that do not fit the graph are the caller's, not the model's (issue 23) -------------
def test_inputs_that_do_not_fit_are_an_input_error_not_an_invalid_model():
    m = _model([("a", TP.FLOAT, [2, 3])])
    cases = [({"a": np.zeros((2, 4), np.float32)}, "input 'a' has extent 4 on axis 1; the "
              "graph declares [2,3]"),
             ({"a": np.zeros((2, 3), np.int32)}, "input 'a' has dtype int32; the graph "
              "declares float"),
             ({"a": np.zeros((2, 3, 1), np.float32)}, "input 'a' has rank 3; the graph declares "
              "2 [2,3]"),
             ({"a": np.zeros((2, 3), np.float32), "b": 1}, "'b' is not an input of the graph"),
             ({}, "no value given for input(s) ['a']")]
    for feeds, message in cases:
        with pytest.raises(InputError) as e:
            run(m, feeds)
        assert message in e.value.message
        assert isinstance(e.value, ValueError) and not isinstance(e.value, InvalidModelError)
        assert str(e.value).startswith("InputError: ")


def test_the_hint_keeps_its_former_public_path():
    """add_inputs_hint moved to evaluate.input_hints (it runs the model, so it sits above the
    runner, which imports evaluate.inputs: inputs <-> runner was a cycle); docs/api.md named
    ``onemodel.evaluate.inputs.add_inputs_hint``, which still gives the same function."""
    from onemodel.evaluate import input_hints, inputs

    assert inputs.add_inputs_hint is input_hints.add_inputs_hint
    assert inputs.add_dims_hint is input_hints.add_dims_hint
    with pytest.raises(AttributeError):
        inputs.no_such_name  # noqa: B018
