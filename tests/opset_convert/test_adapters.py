"""Each version adapter of the first batch, proved by execution: a small model converted up and
down through the adapter's change, ``check`` clean after every step, and the evaluator giving
the original's outputs (exactly for integers and data movement, within rtol 1e-6 of float64
for float arithmetic)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from opset_models import F64, I8, I64, F, clean, model, ops, run, through, value

from onemodel.opset_convert import ConversionRefused, convert

onnx_bool = TensorProto.BOOL
RNG = np.random.default_rng(26)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)


def softmax64(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def coerced64(x, axis):
    """Softmax-1..11: normalized over every axis from ``axis`` on together."""
    flat = x.reshape(int(np.prod(x.shape[:axis])), -1).astype(np.float64)
    return softmax64(flat, 1).reshape(x.shape)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
def test_softmax_axis_1_at_11_goes_up_by_its_coercion_and_back(op):
    """axis 1 of a rank-3 input at 11 is a coercion over axes 1 and 2 together: up, the node is
    written out as Flatten, the operator along axis 1, Reshape; the values stay."""
    m = model([helper.make_node(op, ["x"], ["y"], axis=1)], [value("x", F, [2, 3, 4])],
              [value("y")], 11)
    want = coerced64(X, 1)
    if op == "LogSoftmax":
        want = np.log(want)
    elif op == "Hardmax":
        flat = X.reshape(2, -1)
        want = (np.arange(12) == flat.argmax(1)[:, None]).astype(np.float32).reshape(X.shape)
    tol = {"rtol": 1e-6, "atol": 1e-7} if op != "Hardmax" else {}
    got = run(m, {"x": X})[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    up = through(m, [13, 21], {"x": X}, [want.astype(np.float32) if op == "Hardmax" else want],
                 **tol)
    assert ops(up) == ["Shape", "Flatten", op, "Reshape"]
    low = through(up, [11, 5, 1], {"x": X},
                  [want.astype(np.float32) if op == "Hardmax" else want], **tol)
    # the shape Reshape takes is folded by inference into Reshape-1's attribute
    assert low.graph.nodes[-1].attribute("shape").ints == [2, 3, 4]


def test_softmax_last_axis_at_13_goes_down_to_1_with_the_axis_made_non_negative():
    m = model([helper.make_node("Softmax", ["x"], ["y"])], [value("x", F, [2, 3, 4])],
              [value("y")], 13)
    want = softmax64(X.astype(np.float64), -1)
    low = through(m, [11, 1], {"x": X}, [want], rtol=1e-6, atol=1e-7)
    assert low.graph.nodes[0].attribute("axis").i == 2
    through(low, [13], {"x": X}, [want], rtol=1e-6, atol=1e-7)


def test_softmax_down_refused_when_the_axis_is_not_last_unless_later_extents_are_1():
    x = value("x", F, [2, 3, 4])
    m = model([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [x], [value("y")], 13)
    with pytest.raises(ConversionRefused, match=r"axis 1 is not the last axis of 'x' "
                       r"\(shape \[2, 3, 4\]\)"):
        convert(m, {"": 12})
    y = RNG.standard_normal((2, 3, 1)).astype(np.float32)
    m = model([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [value("x", F, [2, 3, 1])],
              [value("y")], 13)
    through(m, [12, 13], {"x": y}, [softmax64(y.astype(np.float64), 1)], rtol=1e-6,
            atol=1e-7)


def test_reduce_axes_attribute_and_input_both_ways():
    sum1 = X.astype(np.float64).sum(axis=1)
    m = model([helper.make_node("ReduceSum", ["x"], ["y"], axes=[1], keepdims=0)],
              [value("x", F, [2, 3, 4])], [value("y")], 11)
    up = through(m, [13, 18], {"x": X}, [sum1], rtol=1e-6, atol=1e-6)
    assert len(up.graph.nodes[0].inputs) == 2
    low = through(up, [12, 1], {"x": X}, [sum1], rtol=1e-6, atol=1e-6)
    assert low.graph.nodes[0].inputs == ["x"] and not low.graph.initializers
    mean = model([helper.make_node("ReduceMean", ["x", "axes"], ["y"])],
                 [value("x", F, [2, 3, 4])], [value("y")], 18,
                 initializers={"axes": np.array([-1], np.int64)})
    want = X.astype(np.float64).mean(axis=-1, keepdims=True)
    through(mean, [17, 10, 13, 18], {"x": X}, [want], rtol=1e-6, atol=1e-7)


def test_reduce_noop_with_empty_axes_goes_down_as_identity():
    m = model([helper.make_node("ReduceMax", ["x"], ["y"], noop_with_empty_axes=1)],
              [value("x", F, [2, 3, 4])], [value("y")], 18)
    low = through(m, [13], {"x": X}, [X])
    assert ops(low) == ["Identity"]


def test_reduce_with_computed_axes_is_refused_naming_the_input():
    m = model([helper.make_node("Shape", ["x"], ["s"]),
               helper.make_node("ReduceSum", ["x", "a"], ["y"])],
              [value("x", F, [2, 3, 4]), value("a", I64, [1])], [value("y")], 13)
    with pytest.raises(ConversionRefused, match=r"input 1 'a' \(axes\) is computed"):
        convert(m, {"": 12})


def test_squeeze_unsqueeze_13_and_negative_axes_down_to_1():
    m = model([helper.make_node("Unsqueeze", ["x", "a"], ["u"]),
               helper.make_node("Squeeze", ["u", "b"], ["y"])],
              [value("x", F, [2, 3, 4])], [value("y")], 13,
              initializers={"a": np.array([-1, 0], np.int64), "b": np.array([0], np.int64)})
    want = X[..., None]
    low = through(m, [12, 10, 1], {"x": X}, [want])
    assert low.graph.nodes[0].attribute("axes").ints == [4, 0]
    through(low, [11, 13, 21], {"x": X}, [want])


def test_split_11_13_18_and_uneven_num_outputs_down():
    m = model([helper.make_node("Split", ["x"], ["a", "b"], axis=2, split=[1, 3])],
              [value("x", F, [2, 3, 4])], [value("a"), value("b")], 11)
    want = [X[..., :1], X[..., 1:]]
    through(m, [13, 18, 13, 11, 2], {"x": X}, want)
    even = model([helper.make_node("Split", ["x"], ["a", "b"], axis=2)],
                 [value("x", F, [2, 3, 4])], [value("a"), value("b")], 13)
    up = through(even, [18], {"x": X}, [X[..., :2], X[..., 2:]])
    assert up.graph.nodes[0].attribute("num_outputs").i == 2
    uneven = model([helper.make_node("Split", ["x"], ["a", "b"], axis=1, num_outputs=2)],
                   [value("x", F, [2, 3, 4])], [value("a"), value("b")], 18)
    low = through(uneven, [13, 11], {"x": X}, [X[:, :2], X[:, 2:]])
    assert low.graph.nodes[0].attribute("split").ints == [2, 1]


def test_clip_min_max_attributes_and_inputs():
    m = model([helper.make_node("Clip", ["x"], ["y"], min=-0.5, max=0.25)],
              [value("x", F, [2, 3, 4])], [value("y")], 6)
    want = np.clip(X, np.float32(-0.5), np.float32(0.25))
    up = through(m, [11, 13], {"x": X}, [want])
    assert len(up.graph.nodes[0].inputs) == 3
    through(up, [12, 6, 1], {"x": X}, [want])
    d = model([helper.make_node("Clip", ["x", "lo"], ["y"])], [value("x", F64, [3])],
              [value("y")], 13, initializers={"lo": np.array(0.1, np.float64)})
    with pytest.raises(ConversionRefused, match="min 0.1 is not exactly a float32 value"):
        convert(d, {"": 6})


def test_pad_attributes_and_inputs():
    m = model([helper.make_node("Pad", ["x"], ["y"], pads=[0, 1, 0, 0, 2, 1], value=1.5)],
              [value("x", F, [2, 3, 4])], [value("y")], 2)
    want = np.pad(X, [(0, 0), (1, 2), (0, 1)], constant_values=1.5)
    up = through(m, [11, 13, 19], {"x": X}, [want])
    through(up, [18, 11, 2], {"x": X}, [want])
    wrap = model([helper.make_node("Pad", ["x", "p"], ["y"], mode="wrap")],
                 [value("x", F, [2, 3, 4])], [value("y")], 19,
                 initializers={"p": np.array([0, 0, 1, 0, 0, 1], np.int64)})
    with pytest.raises(ConversionRefused, match="attribute mode='wrap' has no equivalent"):
        convert(wrap, {"": 18})


def test_slice_attributes_and_inputs():
    m = model([helper.make_node("Slice", ["x"], ["y"], starts=[1, -3], ends=[3, 100],
                                axes=[1, 2])],
              [value("x", F, [2, 3, 4])], [value("y")], 1)
    want = X[:, 1:3, -3:]
    up = through(m, [10, 13], {"x": X}, [want])
    through(up, [9, 1], {"x": X}, [want])
    step = model([helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"])],
                 [value("x", F, [2, 3, 4])], [value("y")], 13,
                 initializers={"s": np.array([0], np.int64), "e": np.array([4], np.int64),
                               "a": np.array([2], np.int64), "st": np.array([2], np.int64)})
    with pytest.raises(ConversionRefused, match="steps .* other than 1"):
        convert(step, {"": 9})


def test_topk_k_attribute_and_input():
    m = model([helper.make_node("TopK", ["x"], ["v", "i"], k=2, axis=-1)],
              [value("x", F, [2, 3, 4])], [value("v"), value("i", I64)], 1)
    order = np.argsort(-X, axis=-1, kind="stable")[..., :2]
    want = [np.take_along_axis(X, order, -1), order.astype(np.int64)]
    up = through(m, [10, 11, 21], {"x": X}, want)
    through(up, [10, 1], {"x": X}, want)
    small = model([helper.make_node("TopK", ["x", "k"], ["v", "i"], largest=0)],
                  [value("x", F, [2, 3, 4])], [value("v"), value("i", I64)], 11,
                  initializers={"k": np.array([1], np.int64)})
    with pytest.raises(ConversionRefused, match="attribute largest=0 has no equivalent"):
        convert(small, {"": 10})


def test_legacy_broadcast_at_7_both_ways():
    b = RNG.standard_normal((3,)).astype(np.float32)
    m = model([helper.make_node("Add", ["x", "b"], ["y"], broadcast=1, axis=1)],
              [value("x", F, [2, 3, 4]), value("b", F, [3])], [value("y")], 6)
    want = X + b[:, None]
    up = through(m, [7, 14], {"x": X, "b": b}, [want])
    assert ops(up) == ["Unsqueeze", "Add"]
    suffix = model([helper.make_node("Mul", ["x", "c"], ["y"])],
                   [value("x", F, [2, 3, 4]), value("c", F, [4])], [value("y")], 14)
    c = RNG.standard_normal((4,)).astype(np.float32)
    low = through(suffix, [6], {"x": X, "c": c}, [X * c])
    assert low.graph.nodes[0].attribute("broadcast").i == 1
    both = model([helper.make_node("Sub", ["x", "c"], ["y"])],
                 [value("x", F, [2, 1, 4]), value("c", F, [3, 1])], [value("y")], 14)
    with pytest.raises(ConversionRefused, match=r"shapes \[2, 1, 4\] and \[3, 1\] has no "
                                                "legacy equivalent"):
        convert(both, {"": 6})


def test_relu_and_consumed_inputs_exact_from_1_to_21_and_back():
    m = model([helper.make_node("Relu", ["x"], ["y"], consumed_inputs=[0])],
              [value("x", F, [2, 3, 4])], [value("y")], 1)
    up = through(m, [6, 14, 21], {"x": X}, [np.maximum(X, 0)])
    assert up.graph.nodes[0].attribute("consumed_inputs") is None
    through(up, [13, 6, 1], {"x": X}, [np.maximum(X, 0)])


def test_types_only_change_refuses_a_type_the_target_does_not_admit():
    """Add-14 admits int8, Add-13 does not: the types-only change is refused naming it."""
    m = model([helper.make_node("Add", ["x", "x"], ["y"])], [value("x", I8, [3])],
              [value("y", I8)], 14)
    with pytest.raises(ConversionRefused, match=r"'x' is tensor\(int8\), which Add-13 does "
                                                "not admit"):
        convert(m, {"": 13})
    xs = np.array([1, -2, 3], np.int8)
    through(m, [21], {"x": xs}, [xs + xs])


def test_every_refused_node_is_listed_at_once():
    m = model([helper.make_node("Softmax", ["x"], ["s"], axis=0),
               helper.make_node("Add", ["i", "i"], ["j"]),
               helper.make_node("Relu", ["x"], ["y"])],
              [value("x", F, [2, 3, 4]), value("i", I8, [3])],
              [value("s"), value("j", I8), value("y")], 14)
    with pytest.raises(ConversionRefused) as e:
        convert(m, {"": 12})
    assert [(p, op) for p, op, _ in e.value.refusals] == [
        ("graph.nodes[0]", "Softmax-14 -> 12"), ("graph.nodes[1]", "Add-14 -> 12")]
    assert "cannot convert 2 nodes" in str(e.value)


def test_an_operator_that_does_not_exist_yet_is_refused():
    # (Gelu, once the example here, is now written out below 20: test_function_bodies.py)
    m = model([helper.make_node("Trilu", ["x"], ["y"])], [value("x", F, [3, 3])], [value("y")],
              14)
    with pytest.raises(ConversionRefused, match="Trilu does not exist before opset 14"):
        convert(m, {"": 13})


def test_semantic_change_without_adapter_is_refused_down_and_identical_up(monkeypatch):
    """A change listed in SEMANTIC with no adapter is refused down, with its reason, and
    identical up. (Every listed change has an adapter now: one is listed here for Relu-14.)"""
    from onemodel.opset_convert import changes

    monkeypatch.setitem(changes.SEMANTIC, ("", "Relu", 14), "a behaviour for the test")
    monkeypatch.setattr(changes, "_CACHE", {})
    m = model([helper.make_node("Relu", ["x"], ["y"])], [value("x", F, [2])], [value("y")], 14)
    with pytest.raises(ConversionRefused, match="Relu-14 admits a behaviour for the test"):
        convert(m, {"": 13})
    low = model([helper.make_node("Relu", ["x"], ["y"])], [value("x", F, [2])], [value("y")], 13)
    clean(convert(low, {"": 14}).model)


def test_depth_to_space_28_and_gemm_6_go_down_unchanged():
    """DepthToSpace-28 and Gemm-6 state the computation of 13 and 1 word for word (the
    attributes, types and defaults the same): a node goes down unchanged and computes the
    same."""
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 2, 2)
    m = model([helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2, mode="CRD")],
              [value("x", F, [1, 4, 2, 2])], [value("y")], 28)
    through(m, [13], {"x": x}, run(m, {"x": x}))
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], alpha=2.0)],
              [value("a", F, [2, 3]), value("b", F, [3, 2]), value("c", F, [2, 2])],
              [value("y")], 6)
    feeds = {"a": a, "b": a.T.copy(), "c": np.ones((2, 2), np.float32)}
    low = convert(g, {"": 1}).model
    np.testing.assert_array_equal(run(low, feeds)[0], 2 * a @ a.T + 1)


def test_constant_value_ints_goes_down_as_a_value_tensor():
    m = model([helper.make_node("Constant", [], ["c"], value_ints=[3, -1]),
               helper.make_node("Reshape", ["x", "c"], ["y"])],
              [value("x", F, [2, 3, 4])], [value("y")], 13)
    low = through(m, [11, 9], {"x": X}, [X.reshape(3, -1)])
    assert low.graph.nodes[0].attribute("value").t.numpy().tolist() == [3, -1]
    with pytest.raises(ConversionRefused, match=r"'c' is tensor\(int64\), which Constant-1 "
                                                "does not admit"):
        convert(low, {"": 8})


def test_batchnorm_dropout_maxpool_gemm_of_inference_exports_down_to_6_and_back():
    """The layers of a CNN export: BatchNormalization (14 -> 9 -> 7 -> 6: is_test=1), Dropout
    (12 -> 7 -> 6), MaxPool (dilations 1, Indices unused), Gemm (C a suffix of Y: broadcast=1
    at 6), Conv's strides written out below 11; exact against the original's outputs."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    s, b, mean = (rng.standard_normal(4).astype(np.float32) for _ in range(3))
    var = (rng.random(4) + 0.5).astype(np.float32)
    fc, fb = rng.standard_normal((16, 5)).astype(np.float32), rng.standard_normal(5).astype(
        np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
             helper.make_node("Relu", ["n"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2],
                              dilations=[1, 1]),
             helper.make_node("Dropout", ["p"], ["d"]),
             helper.make_node("Flatten", ["d"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fb"], ["y"])]
    m = model(nodes, [value("x", F, [1, 3, 4, 4])], [value("y", F, [1, 5])], 15,
              initializers={"w": w, "s": s, "b": b, "m": mean, "v": var, "fc": fc, "fb": fb})
    x = rng.standard_normal((1, 3, 4, 4)).astype(np.float32)
    want = run(m, {"x": x})
    low = through(m, [13, 9, 7, 6], {"x": x}, want)
    bn = low.graph.nodes[1]
    assert bn.attribute("is_test").i == 1 and low.graph.nodes[6].attribute("broadcast").i == 1
    assert low.graph.nodes[0].attribute("strides").ints == [1, 1]
    through(low, [7, 12, 15, 21], {"x": x}, want)
    train = model([helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"],
                                    ["n", "rm", "rv"], training_mode=1)],
                  [value("c", F, [1, 4, 2, 2])], [value("n"), value("rm"), value("rv")], 15,
                  initializers={"s": s, "b": b, "m": mean, "v": var})
    with pytest.raises(ConversionRefused, match="training mode"):
        convert(train, {"": 13})


def test_layer_normalization_below_17_is_written_out():
    rng = np.random.default_rng(17)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    s, b = rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    m = model([helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1,
                                epsilon=1e-3)],
              [value("x", F, [2, 3, 8])], [value("y", F, [2, 3, 8])], 17,
              initializers={"s": s, "b": b})
    x64 = x.astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    want = (x64 - mean) / np.sqrt(((x64 - mean) ** 2).mean(-1, keepdims=True)
                                  + np.float32(1e-3)) * s + b
    np.testing.assert_allclose(run(m, {"x": x})[0], want, rtol=1e-5, atol=1e-6)
    low = through(m, [16, 13, 9], {"x": x}, [want], rtol=1e-5, atol=1e-6)
    assert "LayerNormalization" not in ops(low) and ops(low)[:2] == ["ReduceMean", "Sub"]
    through(low, [17], {"x": x}, [want], rtol=1e-5, atol=1e-6)
    stats = model([helper.make_node("LayerNormalization", ["x", "s"], ["y", "mean"])],
                  [value("x", F, [2, 3, 8])], [value("y"), value("mean")], 17,
                  initializers={"s": s})
    with pytest.raises(ConversionRefused, match="the Mean and InvStdDev outputs"):
        convert(stats, {"": 16})


def test_greater_or_equal_below_12_keeps_nan_false():
    a = np.array([1.0, np.nan, 2.0, 3.0], np.float32)
    b = np.array([1.0, 1.0, np.nan, 4.0], np.float32)
    for op in ("GreaterOrEqual", "LessOrEqual"):
        m = model([helper.make_node(op, ["a", "b"], ["y"])],
                  [value("a", F, [4]), value("b", F, [4])],
                  [value("y", onnx_bool, [4])], 12)
        want = run(m, {"a": a, "b": b})
        low = through(m, [11], {"a": a, "b": b}, want)
        assert ops(low) == [{"GreaterOrEqual": "Greater"}.get(op, "Less"), "Equal", "Or"]
        # Equal admits float from 11 only: below, the written-out form is refused by type
        with pytest.raises(ConversionRefused, match=r"'a' is tensor\(float\), which Equal-7 "
                                                    "does not admit"):
            convert(m, {"": 9})


def test_cast_below_6_names_its_type_and_infers_and_runs():
    """Cast-1 names its target type (``to`` a STRING, 'DOUBLE'): converted down to opset 5 the
    node is inferred (float64 output, no contradiction) and evaluated to the same values."""
    from onemodel.inference import infer_model
    from onemodel.opset_convert import convert_checked

    m = model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.DOUBLE)],
              [value("x", F, [3])], [value("y", F64, [3])], 13)
    x = np.array([1.5, -2.25, 3e8], np.float32)
    down = convert_checked(m, {"": 5}).model
    node = down.graph.nodes[0]
    assert [a.s for a in node.attributes if a.name == "to"] in ([b"DOUBLE"], ["DOUBLE"])
    assert not infer_model(down).contradictions
    (y,) = run(down, {"x": x})
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, x.astype(np.float64))
    back = through(down, [13], {"x": x}, [x.astype(np.float64)])
    assert ops(back) == ["Cast"]


def test_batchnormalization_down_to_1_has_its_required_consumed_inputs():
    """BatchNormalization-1 requires ``consumed_inputs``: converted down to opset 5 the node
    gets it (0 for each of its five inputs: none used in place), check is clean and the
    outputs are the same; back up to 15 it is dropped again."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    inits = {"s": np.array([1.0, 2.0, 0.5], np.float32), "b": np.array([0.0, 1.0, -1.0],
                                                                       np.float32),
             "mean": np.array([0.1, -0.2, 0.3], np.float32),
             "var": np.array([1.0, 0.5, 2.0], np.float32)}
    m = model([helper.make_node("BatchNormalization", ["x", "s", "b", "mean", "var"], ["y"],
                                epsilon=1e-3)],
              [value("x", F, [2, 3, 4])], [value("y", F, [2, 3, 4])], 15, initializers=inits)
    c = (1, 3, 1)
    want = ((x.astype(np.float64) - inits["mean"].reshape(c))
            / np.sqrt(inits["var"].reshape(c).astype(np.float64) + np.float64(np.float32(1e-3)))
            * inits["s"].reshape(c) + inits["b"].reshape(c))
    low = through(m, [5], {"x": x}, [want], rtol=1e-5, atol=1e-6)
    (node,) = low.graph.nodes
    assert [list(a.ints) for a in node.attributes if a.name == "consumed_inputs"] == [[0] * 5]
    back = through(low, [15], {"x": x}, [want], rtol=1e-5, atol=1e-6)
    assert not [a for a in back.graph.nodes[0].attributes if a.name == "consumed_inputs"]


@pytest.mark.parametrize("to", [TensorProto.FLOAT8E4M3FNUZ, TensorProto.FLOAT8E5M2FNUZ])
def test_saturating_cast_to_fnuz_is_refused_across_24(to):
    """Cast-24 restated the saturation of +-Inf to the FNUZ float8 types (NaN before, the
    largest finite value from 24): a saturating cast to one is refused both ways, naming why;
    saturate=0 (Inf gives NaN in both) and a cast to FLOAT8E4M3FN convert and compute the
    same."""
    x = np.array([np.inf, -np.inf, 1.0, 1e6], np.float32)

    def cast(target, version, **attrs):
        return model([helper.make_node("Cast", ["x"], ["y"], to=target, **attrs)],
                     [value("x", F, [4])], [value("y", target, [4])], version)

    for m, v in ((cast(to, 25), 23), (cast(to, 23), 25)):
        with pytest.raises(ConversionRefused, match="saturating cast to FLOAT8E.M.FNUZ: "
                                                    r"\+-Inf gives NaN before opset 24"):
            convert(m, {"": v})
    for m in (cast(to, 25, saturate=0), cast(TensorProto.FLOAT8E4M3FN, 25)):
        (want,) = run(m, {"x": x})
        low = convert(m, {"": 23}).model
        clean(low)
        (got,) = run(low, {"x": x})
        assert got.tobytes() == want.tobytes()
