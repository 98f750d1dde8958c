"""Windowed operators whose output extent does not fit (onemodel/inference/rules/conv.py
``fitting``, shared by Conv, ConvInteger, QLinearConv, DeformConv, the poolings, ConvTranspose and
MaxUnpool): an int spatial extent below 1 is a contradiction at the node naming the input
extents, kernel, pads, strides, dilations and the computed extents, and the extent is unknown,
never printed negative; the evaluator refuses the same models. The poolings' definitions make
an extent of 0 an empty output: only a negative one is a contradiction there. Symbolic extents
are kept. The engine's guard: a negative int extent any rule gives is made unknown and
reported once."""

import numpy as np
import pytest
from onnx import TensorProto as T

from onemodel.errors import EvaluationError
from onemodel.evaluate import Session
from onemodel.inference import Expr, infer_model
from onemodel.inference.engine import Engine
from onemodel.inference.value import Value
from tests.infer.harness import inferred, node_model, sound
from tests.infer.rules_check import contradicts

F = T.FLOAT
U8 = T.UINT8


def _w(*shape, dtype=np.float32):
    return np.ones(shape, dtype)


def _one(model):
    """(the output Value, the single contradiction's message) of inferring ``model``."""
    res = infer_model(model)
    assert len(res.contradictions) == 1, res.contradictions
    c = res.contradictions[0]
    assert c.path == "graph.nodes[0]"
    return res.values["y"], c.message


def _refused(model, feed):
    with pytest.raises(EvaluationError):
        Session(model).run(feed)


def test_conv_kernel_larger_than_the_image():
    m = node_model("Conv", [("x", F, [1, 3, 1, 1]), ("w", _w(4, 3, 3, 3))], opset=17)
    y, msg = _one(m)
    assert y.shape == (1, 4, None, None)
    assert msg == ("Conv: the window does not fit: output extents [-1, -1] (input [1, 1], "
                   "kernel [3, 3], pads [0, 0, 0, 0], strides [1, 1], dilations [1, 1])")
    _refused(m, {"x": np.zeros((1, 3, 1, 1), np.float32)})


def test_conv_one_axis_empty_the_other_kept():
    m = node_model("Conv", [("x", F, [1, 3, 2, 9]), ("w", _w(4, 3, 3, 3))], opset=17)
    y, msg = _one(m)
    assert y.shape == (1, 4, None, 7)
    assert "output extents [0, 7] (input [2, 9], kernel [3, 3]" in msg
    _refused(m, {"x": np.zeros((1, 3, 2, 9), np.float32)})


def test_conv_huge_dilation():
    m = node_model("Conv", [("x", F, [1, 3, 10, 10]), ("w", _w(3, 3, 3, 3))], opset=17,
                   dilations=[499999999, 1])
    y, msg = _one(m)
    assert y.shape == (1, 3, None, 8)
    assert "output extents [-999999988, 8]" in msg and "dilations [499999999, 1]" in msg


def test_pads_and_strides_are_named():
    m = node_model("Conv", [("x", F, [1, 1, 2, 5]), ("w", _w(1, 1, 5, 1))], opset=17,
                   pads=[1, 0, 0, 0], strides=[2, 1])
    y, msg = _one(m)
    # (2 + 1 + 0 - 5) // 2 + 1 = 0 and (5 - 1) // 1 + 1 = 5
    assert y.shape == (1, 1, None, 5)
    assert "output extents [0, 5]" in msg and "pads [1, 0, 0, 0]" in msg \
        and "strides [2, 1]" in msg


def test_extent_one_fits():
    m = node_model("Conv", [("x", F, [1, 2, 3, 5]), ("w", _w(4, 2, 3, 5))], opset=17)
    assert inferred(m)["y"].shape == (1, 4, 1, 1)
    sound(m)


def test_symbolic_extent_is_kept():
    m = node_model("Conv", [("x", F, [1, 1, "H", 1]), ("w", _w(1, 1, 3, 1))], opset=17)
    assert inferred(m)["y"].shape == (1, 1, Expr.var("H") - 2, 1)


@pytest.mark.parametrize("op", ["ConvInteger", "QLinearConv"])
def test_integer_convolutions(op):
    if op == "ConvInteger":
        ins = [("x", U8, [1, 1, 1, 2]), ("w", _w(1, 1, 3, 3, dtype=np.uint8))]
    else:
        s, z = np.array(1, np.float32), np.array(0, np.uint8)
        ins = [("x", U8, [1, 1, 1, 2]), ("xs", s), ("xz", z), ("w", _w(1, 1, 3, 3, dtype=np.uint8)),
               ("ws", s), ("wz", z), ("ys", s), ("yz", z)]
    y, msg = _one(node_model(op, ins, opset=21))
    assert y.shape == (1, 1, None, None)
    assert msg.startswith(f"{op}: the window does not fit: output extents [-1, 0] (input [1, 2]")


def test_deform_conv():
    m = node_model("DeformConv", [("x", F, [1, 1, 1, 1]), ("w", _w(1, 1, 3, 3)),
                                  ("o", F, [1, 18, None, None])], opset=19)
    y, msg = _one(m)
    assert y.shape == (1, 1, None, None)
    assert "DeformConv: the window does not fit: output extents [-1, -1]" in msg


POOLS = [("MaxPool", 12), ("AveragePool", 19), ("LpPool", 18)]


def _reference_shape(model, feed):
    import onnx
    from onnx.reference import ReferenceEvaluator

    import onemodel
    proto = onnx.load_from_string(onemodel.to_bytes(model))
    return ReferenceEvaluator(proto).run(None, feed)[0].shape


@pytest.mark.parametrize("op,opset", POOLS)
def test_pooling_extent_zero_is_an_empty_output(op, opset):
    # floor((2 - 3)/2) + 1 = 0 on the second axis: the definition's formula gives an empty
    # output (onnx.reference computes it; a PaddleOCR classifier at small sizes has one)
    m = node_model(op, [("x", F, [1, 2, 5, 2])], opset=opset, kernel_shape=[3, 3],
                   strides=[2, 2])
    res = infer_model(m)
    assert res.contradictions == []
    assert res.values["y"].shape == (1, 2, 2, 0)
    feed = {"x": np.ones((1, 2, 5, 2), np.float32)}
    (y,) = Session(m).run(feed).values()
    assert y.shape == (1, 2, 2, 0) and y.dtype == np.float32
    assert _reference_shape(m, feed) == (1, 2, 2, 0)


@pytest.mark.parametrize("op,opset", POOLS)
def test_pooling_negative_extent_is_refused(op, opset):
    m = node_model(op, [("x", F, [1, 2, 1, 1])], opset=opset, kernel_shape=[3, 3])
    res = infer_model(m)
    assert [c.message for c in res.contradictions] == [
        f"{op}: the window does not fit: output extents [-1, -1] (input [1, 1], kernel [3, 3], "
        f"pads [0, 0, 0, 0], strides [1, 1], dilations [1, 1])"]
    assert res.values["y"].shape == (1, 2, None, None)
    with pytest.raises(EvaluationError, match=r"output extents \[-1, -1\]"):
        Session(m).run({"x": np.zeros((1, 2, 1, 1), np.float32)})


def test_max_pool_indices_empty_too():
    m = node_model("MaxPool", [("x", F, [1, 2, 2, 2])], 2, opset=12, kernel_shape=[3, 3],
                   ceil_mode=1)
    res = infer_model(m)
    assert res.contradictions == []
    assert res.values["y0"].shape == res.values["y1"].shape == (1, 2, 0, 0)
    y, idx = Session(m).run({"x": np.zeros((1, 2, 2, 2), np.float32)}).values()
    assert y.shape == idx.shape == (1, 2, 0, 0) and idx.dtype == np.int64


def test_global_average_pool_of_an_empty_pooling_is_nan_without_a_warning():
    import warnings
    m = node_model("GlobalAveragePool", [("x", F, [1, 2, 0, 0])], opset=17)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (y,) = Session(m).run({"x": np.zeros((1, 2, 0, 0), np.float32)}).values()
    assert y.shape == (1, 2, 1, 1) and np.isnan(y).all()
    x = np.arange(6, dtype=np.float32).reshape(1, 2, 3, 1)
    (y,) = Session(node_model("GlobalAveragePool", [("x", F, [1, 2, 3, 1])], opset=17)).run(
        {"x": x}).values()
    assert y.ravel().tolist() == [1.0, 4.0]


def test_same_padding_over_an_empty_axis():
    m = node_model("AveragePool", [("x", F, [1, 2, 0, 4])], opset=19, kernel_shape=[3, 3],
                   auto_pad="SAME_UPPER")
    assert infer_model(m).contradictions == []
    assert inferred(m)["y"].shape == (1, 2, 0, 4)
    (y,) = Session(m).run({"x": np.zeros((1, 2, 0, 4), np.float32)}).values()
    assert y.shape == (1, 2, 0, 4)


def test_conv_transpose_pads_larger_than_the_output():
    m = node_model("ConvTranspose", [("x", F, [1, 2, 2, 3]), ("w", _w(2, 2, 3, 3))], opset=17,
                   pads=[2, 0, 3, 0])
    y, msg = _one(m)
    # (2 - 1) + 3 - 2 - 3 = -1 and (3 - 1) + 3 = 5
    assert y.shape == (1, 2, None, 5)
    assert msg == ("ConvTranspose: the output is empty or negative: output extents [-1, 5] "
                   "(input [2, 3], kernel [3, 3], pads [2, 0, 3, 0], strides [1, 1], "
                   "dilations [1, 1], output_padding [0, 0])")
    _refused(m, {"x": np.zeros((1, 2, 2, 3), np.float32)})


def test_conv_transpose_output_shape_not_positive():
    m = node_model("ConvTranspose", [("x", F, [1, 2, 2, 2]), ("w", _w(2, 2, 3, 3))], opset=17,
                   output_shape=[0, 4])
    y, msg = _one(m)
    assert y.shape == (1, 2, None, 4)
    assert "output_shape [0, 4] has extents that are not positive: [0]" in msg


def test_conv_transpose_same_over_an_empty_axis():
    m = node_model("ConvTranspose", [("x", F, [1, 2, 0, 3]), ("w", _w(2, 2, 3, 3))], opset=17,
                   auto_pad="SAME_UPPER", strides=[2, 2])
    y, msg = _one(m)
    assert y.shape == (1, 2, None, 6)
    assert msg == ("ConvTranspose: the output is empty: output extents [0, 6] (input [0, 3], "
                   "kernel [3, 3], auto_pad SAME_UPPER, strides [2, 2], dilations [1, 1])")


def test_max_unpool_negative():
    ins = [("x", F, [1, 2, 2, 2]), ("i", T.INT64, [1, 2, 2, 2])]
    y, msg = _one(node_model("MaxUnpool", ins, opset=11, kernel_shape=[2, 2],
                             pads=[3, 0, 1, 0]))
    # (2 - 1) + 2 - 3 - 1 = -1 and (2 - 1) + 2 = 3
    assert y.shape == (1, 2, None, 3)
    assert msg == ("MaxUnpool: the unpooled extents are negative: output extents [-1, 3] "
                   "(input [2, 2], kernel [2, 2], pads [3, 0, 1, 0], strides [1, 1])")


def test_max_unpool_zero_extent_is_no_contradiction():
    m = node_model("MaxUnpool", [("x", F, [1, 2, 2, 2]), ("i", T.INT64, [1, 2, 2, 2])],
                   opset=11, kernel_shape=[2, 2], pads=[3, 0, 0, 0])
    assert inferred(m)["y"].shape == (1, 2, 0, 3)


# -- the engine's guard: any rule's negative extent ----------------------------------------------
def test_guard_reports_a_negative_extent_of_any_rule():
    m = node_model("RoiAlign", [("x", F, [1, 2, 5, 5]), ("r", F, [3, 4]), ("b", T.INT64, [3])],
                   opset=16, output_height=-2)
    y, msg = _one(m)
    assert y.shape == (3, 2, None, 1)
    assert msg == "RoiAlign: output 0 ('y') would have the negative extents of [3,2,-2,1]"


def test_guard_on_stft_frames():
    m = node_model("STFT", [("x", F, [1, 4, 1]), ("s", np.array(1, np.int64)), ("",),
                            ("l", np.array(8, np.int64))], opset=17)
    y, msg = _one(m)
    assert y.shape[1] is None and "negative extents" in msg


def test_guard_does_not_report_twice():
    m = node_model("Reshape", [("x", F, [2, 3]), ("s", np.array([-2, 3], np.int64))])
    msgs = contradicts(m, "has the extent -2")
    assert len(msgs) == 1


def test_guard_reaches_the_element_of_a_sequence():
    m = node_model("Identity", [("x", F, [2])])
    eng = Engine(m)
    seq = Value.sequence(Value.tensor(F, (2, -3)))
    got = eng._no_negative(seq, m.graph.nodes[0], "graph.nodes[0]", 0, False)
    assert got == Value.sequence(Value.tensor(F, (2, None)))
    assert [c.message for c in eng.result.contradictions] == [
        "Identity: output 0 ('y') would have the negative extents of [2,-3]"]
    # a rule that said why already: made unknown, not reported again
    got = eng._no_negative(Value.tensor(F, (-1,)), m.graph.nodes[0], "graph.nodes[0]", 0, True)
    assert got.shape == (None,) and len(eng.result.contradictions) == 1
