"""The adapters of kinds shared by many operators (attributes added with the earlier
behaviour as default, renamed values, types of attributes changed, inputs added), each proved
by execution: the model converted along ``path``, check clean after each step, and the
evaluator's outputs equal, bit for bit, to the original's (the conversions move attributes
and inputs, never arithmetic)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from opset_models import I64, F, model, run, through, value

from onemodel.opset_convert import ConversionRefused, convert

RNG = np.random.default_rng(11)
X4 = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)
X3 = RNG.standard_normal((2, 3, 4)).astype(np.float32)
U8 = TensorProto.UINT8

CASES = {
    "Concat 1 <-> 4 (axis made explicit)": (
        [helper.make_node("Concat", ["x", "x"], ["y"])], [value("x", F, [2, 3, 4])],
        [value("y", F, [2, 6, 4])], {}, {"x": X3}, 1, [4, 13, 4, 1]),
    "ArgMax 11 <-> 12 (select_last_index)": (
        [helper.make_node("ArgMax", ["x"], ["y"], axis=-1, select_last_index=0)],
        [value("x", F, [2, 3, 4])], [value("y", I64)], {}, {"x": X3}, 13, [11, 1, 13]),
    "Gather 11 -> 1 (constant indices, negative axis)": (
        [helper.make_node("Gather", ["x", "i"], ["y"], axis=-1)], [value("x", F, [2, 3, 4])],
        [value("y")], {"i": np.array([3, 0], np.int64)}, {"x": X3}, 13, [11, 10, 1, 13]),
    "Split 2 (-> 13 -> 18 -> 11)": (
        [helper.make_node("Split", ["x"], ["a", "b"], axis=1, split=[1, 2])],
        [value("x", F, [2, 3, 4])], [value("a"), value("b")], {}, {"x": X3}, 2,
        [13, 18, 11, 2]),
    "Reshape 14 allowzero=1 with a constant shape": (
        [helper.make_node("Reshape", ["x", "s"], ["y"], allowzero=1)],
        [value("x", F, [2, 3, 4])], [value("y")], {"s": np.array([4, 6], np.int64)},
        {"x": X3}, 14, [13, 5, 1, 14]),
    "Shape 15 start/end down as Shape + Slice": (
        [helper.make_node("Shape", ["x"], ["y"], start=1, end=-1)],
        [value("x", F, [2, 3, 4])], [value("y", I64)], {}, {"x": X3}, 15, [14, 10, 21]),
    "Pad 18 axes down as full pads": (
        [helper.make_node("Pad", ["x", "p", "", "a"], ["y"], mode="reflect")],
        [value("x", F, [2, 3, 4])], [value("y")],
        {"p": np.array([1, 2], np.int64), "a": np.array([-1], np.int64)}, {"x": X3}, 18,
        [13, 11, 2, 19]),
    "Slice 11 negative axes -> 10": (
        [helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"])],
        [value("x", F, [2, 3, 4])], [value("y")],
        {"s": np.array([3], np.int64), "e": np.array([0], np.int64),
         "a": np.array([-1], np.int64), "st": np.array([-1], np.int64)}, {"x": X3}, 13,
        [10, 13]),
    "Dropout 12 <-> 7 <-> 6 (inference)": (
        [helper.make_node("Dropout", ["x", "r"], ["y"])], [value("x", F, [2, 3, 4])],
        [value("y")], {"r": np.array(0.3, np.float32)}, {"x": X3}, 13, [10, 6, 7, 12, 22]),
    "Upsample 7 <-> 9 (scales attribute <-> input)": (
        [helper.make_node("Upsample", ["x"], ["y"], scales=[1.0, 1.0, 2.0, 2.0])],
        [value("x", F, [1, 2, 4, 4])], [value("y")], {}, {"x": X4}, 7, [9, 7]),
    "Resize 11 <-> 13 <-> 19 (empty roi and scales)": (
        [helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear")],
        [value("x", F, [1, 2, 4, 4])], [value("y")],
        {"s": np.array([1, 1, 2, 2], np.float32)}, {"x": X4}, 13, [11, 18, 19, 13]),
    "SpaceToDepth 28 mode DCR <-> 13": (
        [helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2, mode="DCR")],
        [value("x", F, [1, 2, 4, 4])], [value("y")], {}, {"x": X4}, 28, [13, 28]),
    "GlobalLpPool 1 <-> 2 (p float <-> int)": (
        [helper.make_node("GlobalLpPool", ["x"], ["y"], p=3.0)], [value("x", F, [1, 2, 4, 4])],
        [value("y")], {}, {"x": X4}, 1, [2, 1]),
    "AveragePool 7 / 10 / 11 / 19": (
        [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2],
                          count_include_pad=0, ceil_mode=0, dilations=[1, 1])],
        [value("x", F, [1, 2, 4, 4])], [value("y")], {}, {"x": X4}, 19, [11, 10, 7, 1, 22]),
    "QuantizeLinear / DequantizeLinear 10 <-> 13 <-> 23 (one scale)": (
        [helper.make_node("QuantizeLinear", ["x", "sc", "zp"], ["q"], axis=1),
         helper.make_node("DequantizeLinear", ["q", "sc", "zp"], ["y"])],
        [value("x", F, [2, 3, 4])], [value("y")],
        {"sc": np.array(0.02, np.float32), "zp": np.array(128, np.uint8)}, {"x": X3}, 13,
        [10, 13, 19, 21, 23, 25, 13]),
    "RoiAlign 10 <-> 16 (output_half_pixel explicit)": (
        [helper.make_node("RoiAlign", ["x", "r", "b"], ["y"], output_height=2,
                          output_width=2)],
        [value("x", F, [1, 2, 4, 4])], [value("y")],
        {"r": np.array([[0, 0, 3, 3], [1, 1, 2.5, 3]], np.float32),
         "b": np.array([0, 0], np.int64)}, {"x": X4}, 10, [16, 22, 16, 10]),
    "GridSample 16 <-> 20 (modes renamed)": (
        [helper.make_node("GridSample", ["x", "g"], ["y"], mode="bicubic")],
        [value("x", F, [1, 2, 4, 4])], [value("y")],
        {"g": RNG.uniform(-1, 1, (1, 3, 3, 2)).astype(np.float32)}, {"x": X4}, 16,
        [20, 22, 16]),
    "Split 1 (split as a constant input) -> 2 -> 13": (
        [helper.make_node("Split", ["x", "s"], ["a", "b"], axis=2)],
        [value("x", F, [2, 3, 4])], [value("a"), value("b")],
        {"s": np.array([3, 1], np.float32)}, {"x": X3}, 1, [2, 13, 2]),
    "Scatter 9 -> 11 becomes ScatterElements": (
        [helper.make_node("Scatter", ["x", "i", "u"], ["y"], axis=1)],
        [value("x", F, [2, 3, 4])], [value("y")],
        {"i": np.array([[[0, 2, 1, 0]]] * 2, np.int64).reshape(2, 1, 4),
         "u": np.ones((2, 1, 4), np.float32)}, {"x": X3}, 9, [11, 18]),
    "Upsample 9 -> 10 becomes Resize": (
        [helper.make_node("Upsample", ["x", "s"], ["y"])], [value("x", F, [1, 2, 4, 4])],
        [value("y")], {"s": np.array([1, 1, 2, 2], np.float32)}, {"x": X4}, 9, [10]),
    "Range 11 <-> 27": (
        [helper.make_node("Range", ["a", "b", "c"], ["y"])], [],
        [value("y", I64)], {"a": np.array(1, np.int64), "b": np.array(9, np.int64),
                            "c": np.array(3, np.int64)}, {}, 11, [27, 13]),
    "Tile 1 <-> 6 (one axis)": (
        [helper.make_node("Tile", ["x", "t", "a"], ["y"])], [value("x", F, [2, 3, 4])],
        [value("y")], {"t": np.array([3], np.float32), "a": np.array([1], np.float32)},
        {"x": X3}, 1, [6, 13, 6, 1]),
    "LpPool 1 <-> 2 (p float <-> int)": (
        [helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2, 2], p=2.0)],
        [value("x", F, [1, 2, 4, 4])], [value("y")], {}, {"x": X4}, 1, [2, 1]),
    "OneHot 11 -> 9 (constant non-negative indices)": (
        [helper.make_node("OneHot", ["i", "d", "v"], ["y"], axis=-1)], [],
        [value("y", I64)], {"i": np.array([0, 2, 1], np.int64), "d": np.array(4, np.int64),
                            "v": np.array([0, 5], np.int64)}, {}, 11, [9, 11]),
    "NonMaxSuppression 11 -> 10 (iou_threshold in [0, 1])": (
        [helper.make_node("NonMaxSuppression", ["b", "s", "m", "t"], ["y"])], [],
        [value("y", I64)],
        {"b": np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 5, 1, 6]]], np.float32),
         "s": np.array([[[0.9, 0.8, 0.7]]], np.float32), "m": np.array([3], np.int64),
         "t": np.array([0.5], np.float32)}, {}, 11, [10, 11]),
    "Resize 13 asymmetric linear <-> 10": (
        [helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear",
                          coordinate_transformation_mode="asymmetric")],
        [value("x", F, [1, 2, 4, 4])], [value("y")],
        {"s": np.array([1, 1, 2, 1.5], np.float32)}, {"x": X4}, 13, [10, 19]),
    "Resize 10 nearest -> 11 (asymmetric, floor) -> 10": (
        [helper.make_node("Resize", ["x", "s"], ["y"], mode="nearest")],
        [value("x", F, [1, 2, 4, 4])], [value("y")],
        {"s": np.array([1, 1, 1.5, 3], np.float32)}, {"x": X4}, 10, [11, 13, 10]),
    "DFT 17 (default axis 1) <-> 20": (
        [helper.make_node("DFT", ["x"], ["y"], onesided=0)], [value("x", F, [2, 8, 6, 1])],
        [value("y")], {}, {"x": RNG.standard_normal((2, 8, 6, 1)).astype(np.float32)}, 17,
        [20, 17]),
    "DFT 20 (default axis -2) <-> 17": (
        [helper.make_node("DFT", ["x"], ["y"], inverse=1)], [value("x", F, [2, 8, 6, 2])],
        [value("y")], {}, {"x": RNG.standard_normal((2, 8, 6, 2)).astype(np.float32)}, 20,
        [17, 20]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_adapter_round_trip_computes_the_same(name):
    nodes, inputs, outputs, inits, feeds, opset, path = CASES[name]
    m = model(nodes, inputs, outputs, opset, initializers=inits)
    want = run(m, feeds)
    through(m, path, feeds, want)


def test_cast_to_is_a_name_before_6_and_a_code_from_6():
    m = model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT32)],
              [value("x", F, [2, 3, 4])], [value("y", TensorProto.INT32, [2, 3, 4])], 6)
    low = convert(m, {"": 1}).model
    assert low.graph.nodes[0].attribute("to").s == b"INT32"
    want = run(m, {"x": X3 * 10})
    through(low, [6, 21], {"x": X3 * 10}, want)


def test_ml_tree_ensemble_1_3_and_label_encoder_2_4():
    tree = helper.make_node(
        "TreeEnsembleRegressor", ["x"], ["y"], domain="ai.onnx.ml", n_targets=1,
        nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
        nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"], nodes_values=[0.0, 0.0, 0.0],
        nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0],
        target_treeids=[0, 0], target_nodeids=[1, 2], target_ids=[0, 0],
        target_weights=[-1.0, 1.0])
    m = model([tree], [value("x", F, [4, 1])], [value("y", F, [4, 1])], 13, ml=1)
    x = np.array([[-1], [0.5], [2], [-3]], np.float32)
    want = run(m, {"x": x})
    for ml in (3, 1):
        m = convert(m, {"ai.onnx.ml": ml}).model
        np.testing.assert_array_equal(run(m, {"x": x})[0], want[0])
    tensor = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain="ai.onnx.ml",
                              **{k.name: helper.get_attribute_value(k)
                                 for k in tree.attribute if k.name != "target_weights"},
                              target_weights_as_tensor=helper.make_tensor(
                                  "w", TensorProto.DOUBLE, [2], [-1.0, 0.1]))
    m3 = model([tensor], [value("x", F, [4, 1])], [value("y", F, [4, 1])], 13, ml=3)
    # 0.1 as a double is no float32: not narrowed (exact values are: test_ml_trees_conversion)
    with pytest.raises(ConversionRefused, match="target_weights_as_tensor holds 0.1"):
        convert(m3, {"ai.onnx.ml": 1})


@pytest.mark.parametrize("nodes,opset,target,match", [
    ([helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear")], 13, 10,
     "coordinate_transformation_mode 'half_pixel': Resize-10 maps coordinates as "
     "'asymmetric' only"),
    ([helper.make_node("RoiAlign", ["x", "r", "b"], ["y"])], 16, 10,
     "coordinate_transformation_mode 'half_pixel' has no equivalent"),
    ([helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[2, 2])],
     19, 18, r"attribute dilations=\[2, 2\] has no equivalent before opset 19"),
    ([helper.make_node("QuantizeLinear", ["x", "s"], ["y"])], 13, 10,
     "the scale 's' holds 4 values"),
    ([helper.make_node("Dropout", ["x", "", "t"], ["y"])], 13, 11,
     "training_mode 't' is not a constant false"),
])
def test_adapters_refuse_what_the_older_definition_cannot_express(nodes, opset, target,
                                                                   match):
    inputs = {"x": value("x", F, [1, 2, 4, 4]), "s": value("s", F, [4]),
              "t": value("t", TensorProto.BOOL, []),
              "r": value("r", F, [1, 4]), "b": value("b", I64, [1])}
    names = [n for n in nodes[0].input if n]
    m = model(nodes, [inputs[n] for n in names], [value("y", U8 if opset == 13 and
                                                        nodes[0].op_type == "QuantizeLinear"
                                                        else F)], opset)
    with pytest.raises(ConversionRefused, match=match):
        convert(m, {"": target})


def test_scatter_and_upsample_become_their_successors():
    m = model(*CASES["Scatter 9 -> 11 becomes ScatterElements"][:2],
              CASES["Scatter 9 -> 11 becomes ScatterElements"][2], 9,
              initializers=CASES["Scatter 9 -> 11 becomes ScatterElements"][3])
    assert [n.op_type for n in convert(m, {"": 11}).model.graph.nodes] == ["ScatterElements"]
    u = CASES["Upsample 9 -> 10 becomes Resize"]
    m = model(u[0], u[1], u[2], 9, initializers=u[3])
    assert [n.op_type for n in convert(m, {"": 10}).model.graph.nodes] == ["Resize"]


def test_tile_along_two_axes_is_refused_below_6():
    m = model([helper.make_node("Tile", ["x", "r"], ["y"])], [value("x", F, [2, 3, 4])],
              [value("y")], 13, initializers={"r": np.array([2, 1, 2], np.int64)})
    with pytest.raises(ConversionRefused, match=r"repeats \[2, 1, 2\] along more than one"):
        convert(m, {"": 5})


def _reshape_of_shape(extra):
    """y = Reshape(x, Concat(Shape(x)[0:1], extra), allowzero=1) at 14, x [N, 2, 3]."""
    nodes = [helper.make_node("Shape", ["x"], ["sh"], end=1),
             helper.make_node("Concat", ["sh", "e"], ["s"], axis=0),
             helper.make_node("Reshape", ["x", "s"], ["y"], allowzero=1)]
    return model(nodes, [value("x", F, ["N", 2, 3])], [value("y")], 15,
                 initializers={"e": np.array(extra, np.int64)})


def test_reshape_allowzero_of_a_computed_shape_without_a_0_goes_down_with_a_note():
    """A shape made of the input's extents and -1 holds no 0 where the input extents are at
    least 1 (inference's assumption, noted): allowzero=1 is dropped, the result computes the
    same, for N = 1 and 3."""
    m = _reshape_of_shape([-1])
    conv = convert(m, {"": 13})
    assert [a.name for a in conv.model.graph.nodes[-1].attributes] == []
    assert any("allowzero=1 dropped" in n for n in conv.notes)
    for n in (1, 3):
        x = np.arange(n * 6, dtype=np.float32).reshape(n, 2, 3)
        np.testing.assert_array_equal(run(conv.model, {"x": x})[0], x.reshape(n, 6))


def test_reshape_allowzero_of_a_shape_that_may_hold_a_0_is_refused():
    """A computed shape with an element inference does not know (data of an input) may be 0:
    allowzero=1 cannot be dropped; a constant 0 neither."""
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"], allowzero=1)]
    m = model(nodes, [value("x", F, [2, 3]), value("s", TensorProto.INT64, [2])],
              [value("y")], 15)
    with pytest.raises(ConversionRefused, match="computed shape that may hold a 0"):
        convert(m, {"": 13})
    with pytest.raises(ConversionRefused, match="computed shape that may hold a 0"):
        convert(_reshape_of_shape([0, 6]), {"": 13})   # an element known to be 0
    const = model(nodes, [value("x", F, [0, 2])], [value("y")], 15,
                  initializers={"s": np.array([0, 2], np.int64)})
    with pytest.raises(ConversionRefused, match="allowzero=1 with a 0 in its shape"):
        convert(const, {"": 13})


@pytest.mark.parametrize("mode,ok", [("up", True), ("down", False)])
def test_cast_round_mode_to_float8_goes_below_24_only_as_its_default(mode, ok):
    """Float8 types exist from 19: a Cast-24 to FLOAT8E4M3FN that states round_mode 'up' (the
    default: what Cast-19 to 23 do) goes down without it, bit for bit; another mode has no
    equivalent before 24 and is refused naming it."""
    m = model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E4M3FN,
                                round_mode=mode)],
              [value("x", F, [4])], [value("y", TensorProto.FLOAT8E4M3FN, [4])], 24)
    if not ok:
        with pytest.raises(ConversionRefused, match="round_mode='down' has no equivalent "
                                                    "before opset 24"):
            convert(m, {"": 23})
        return
    low = convert(m, {"": 23}).model
    assert [a.name for a in low.graph.nodes[0].attributes] == ["to"]
    x = np.array([0.1, -3.3, 250.0, 1e-3], np.float32)
    got, want = run(low, {"x": x})[0], run(m, {"x": x})[0]
    assert got.tobytes() == want.tobytes()
