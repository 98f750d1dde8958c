"""Inference rules of the shape family (onemodel/inference/rules/shape.py): for each operator
the exact inferred element type and shape (symbolic where the inputs are), data propagation
of shape tensors, contradictions, unknown ranks, and the evaluator agreeing
(``sound``) under random bindings of the dimension variables; onnx's own inference
(``data_prop=True``) agrees wherever it has a number."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

import onemodel
from onemodel.inference import Expr, infer_model
from onemodel.inference import dims as D
from onemodel.operators import table
from tests.infer.harness import inferred, node_model, sound
from tests.infer.rules_check import check_family_registered, check_unknown_inputs, data_sound

N, B, S, H, W, C = (Expr.var(v) for v in ("N", "B", "S", "H", "W", "C"))
I64, F = T.INT64, T.FLOAT
BIG = 2**63 - 1


def i64(*v):
    return np.array(v, dtype=np.int64)


def graph_model(nodes, inputs, outputs=("y",), inits=None, opset=21):
    """A model of several nodes: ``inputs`` (name, elem, shape) graph inputs, ``inits``
    name -> ndarray initializers, ``outputs`` names declared without a type."""
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [onnx.numpy_helper.from_array(np.asarray(a), n) for n, a in (inits or {}).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return onemodel.load(m.SerializeToString())


def onnx_agrees(model, at_least=True):
    """onnx's inference (data_prop) has no number and no element type that ours contradicts,
    and (``at_least``) no number where ours has none; returns how many extents were
    compared."""
    proto = onnx.load_from_string(onemodel.to_bytes(model))
    got = onnx.shape_inference.infer_shapes(proto, data_prop=True)
    ours = infer_model(model).values
    compared = 0
    for vi in list(got.graph.value_info) + list(got.graph.output):
        t = vi.type.tensor_type
        v = ours.get(vi.name)
        if v is None or not vi.type.HasField("tensor_type") or v.kind != "tensor":
            continue
        if t.elem_type and v.elem is not None:
            assert t.elem_type == v.elem, (vi.name, t.elem_type, v)
        if t.HasField("shape") and v.shape is not None:
            assert len(t.shape.dim) == len(v.shape), (vi.name, t.shape, v)
            for k, d in enumerate(t.shape.dim):
                if d.HasField("dim_value") and (at_least or v.shape[k] is not None):
                    assert v.shape[k] == d.dim_value, (vi.name, k, t.shape, v)
                    compared += 1
        elif t.HasField("shape") and at_least:
            assert v.shape is not None, (vi.name, t.shape, v)
    return compared


def out(model, name="y"):
    return inferred(model)[name]


# (id, model, {output: (elem, shape)}) -- shape a tuple of extents, or None for unknown rank
CASES = [
    ("shape", node_model("Shape", [("x", F, ["N", 3, "S"])]), {"y": (I64, (3,))}),
    ("shape-15-start-end", node_model("Shape", [("x", F, ["N", 3, "S"])], start=1, end=-1),
     {"y": (I64, (1,))}),
    ("shape-15-clamped", node_model("Shape", [("x", F, ["N", 3, "S"])], start=-9, end=9),
     {"y": (I64, (3,))}),
    ("size", node_model("Size", [("x", F, ["N", 3])]), {"y": (I64, ())}),
    ("gather-axis1", node_model("Gather", [("x", F, ["N", 5, 7]), ("i", I64, ["S", 2])],
                                axis=1), {"y": (F, (N, S, 2, 7))}),
    ("gather-scalar", node_model("Gather", [("x", F, ["N", 5]), ("i", i64(0).reshape(()))]),
     {"y": (F, (5,))}),
    ("slice-1-attrs", node_model("Slice", [("x", F, [10, "N"])], opset=9, starts=[2],
                                 ends=[-1], axes=[0]), {"y": (F, (7, N))}),
    ("slice-open-end", node_model("Slice", [("x", F, ["N", 10]), ("s", i64(0, 1)),
                                            ("e", i64(BIG, -2)), ("a", i64(0, 1))]),
     {"y": (F, (N, 7))}),
    ("slice-steps", node_model("Slice", [("x", F, [10, "N"]), ("s", i64(1)), ("e", i64(8)),
                                         ("a", i64(0)), ("t", i64(3))]),
     {"y": (F, (3, N))}),
    ("slice-negative-step", node_model("Slice", [("x", F, [10]), ("s", i64(-1)),
                                                 ("e", i64(-BIG)), ("a", i64(0)),
                                                 ("t", i64(-2))]), {"y": (F, (5,))}),
    ("slice-step-symbolic", node_model("Slice", [("x", F, ["N"]), ("s", i64(0)),
                                                 ("e", i64(BIG)), ("a", i64(0)),
                                                 ("t", i64(2))]),
     {"y": (F, (D.ceildiv(N, 2),))}),
    ("slice-clamp-symbolic-unknown", node_model("Slice", [("x", F, ["N"]), ("s", i64(1)),
                                                          ("e", i64(BIG))]),
     {"y": (F, (None,))}),
    ("slice-zero-minus-one-unknown", node_model("Slice", [("x", F, ["N"]), ("s", i64(0)),
                                                          ("e", i64(-1))]),
     {"y": (F, (None,))}),
    ("slice-unknown-starts", node_model("Slice", [("x", F, ["N", 4, 5]), ("s", I64, [1]),
                                                  ("e", I64, [1])]),
     {"y": (F, (None, 4, 5))}),
    ("concat", node_model("Concat", [("a", F, ["N", 2]), ("b", F, ["N", 3])], axis=1),
     {"y": (F, (N, 5))}),
    ("concat-symbolic-sum", node_model("Concat", [("a", F, ["N", 2]), ("b", F, [5, 2])],
                                       axis=0), {"y": (F, (N + 5, 2))}),
    ("concat-unknown-rank", node_model("Concat", [("a", F, None), ("b", F, [5, 2])], axis=0),
     {"y": (F, (None, 2))}),
    ("unsqueeze-1", node_model("Unsqueeze", [("x", F, ["N", 3])], opset=11, axes=[0, -1]),
     {"y": (F, (1, N, 3, 1))}),
    ("unsqueeze-13", node_model("Unsqueeze", [("x", F, ["N", 3]), ("a", i64(1))]),
     {"y": (F, (N, 1, 3))}),
    ("squeeze-1", node_model("Squeeze", [("x", F, [1, "N", 1])], opset=11, axes=[2]),
     {"y": (F, (1, N))}),
    ("squeeze-13", node_model("Squeeze", [("x", F, [1, "N", 1]), ("a", i64(0, -1))]),
     {"y": (F, (N,))}),
    ("squeeze-all-ints", node_model("Squeeze", [("x", F, [1, 4, 1])]), {"y": (F, (4,))}),
    ("squeeze-all-symbolic", node_model("Squeeze", [("x", F, [1, "N", 1])]),
     {"y": (F, None)}),
    ("reshape-0-0", node_model("Reshape", [("x", F, ["B", "S", 768]),
                                           ("s", i64(0, 0, 12, 64))]),
     {"y": (F, (B, S, 12, 64))}),
    ("reshape-minus-1", node_model("Reshape", [("x", F, ["B", "S", 768]), ("s", i64(-1, 768))]),
     {"y": (F, (B * S, 768))}),
    ("reshape-minus-1-symbolic-rest", node_model("Reshape", [("x", F, ["B", "S", 12, 64]),
                                                             ("s", i64(0, -1, 768))]),
     {"y": (F, (B, S, 768))}),
    ("reshape-1-attr", node_model("Reshape", [("x", F, [2, 3, 4])], opset=1, shape=[4, -1]),
     {"y": (F, (4, 6))}),
    ("reshape-allowzero", node_model("Reshape", [("x", F, [0, 3]), ("s", i64(3, 0))],
                                     allowzero=1), {"y": (F, (3, 0))}),
    ("reshape-unknown-target", node_model("Reshape", [("x", F, ["N", 3]), ("s", I64, [3])]),
     {"y": (F, (None, None, None))}),
    ("expand", node_model("Expand", [("x", F, ["N", 1]), ("s", i64(2, 1, 4))]),
     {"y": (F, (2, N, 4))}),
    ("constant-of-shape", node_model("ConstantOfShape", [("s", i64(2, 3))],
                                     value=helper.make_tensor("v", I64, [1], [7])),
     {"y": (I64, (2, 3))}),
    ("constant-of-shape-default", node_model("ConstantOfShape", [("s", I64, [2])]),
     {"y": (F, (None, None))}),
    ("range-int", node_model("Range", [("a", i64(2).reshape(())), ("b", i64(11).reshape(())),
                                       ("c", i64(3).reshape(()))]), {"y": (I64, (3,))}),
    ("range-float", node_model("Range", [("a", np.array(0.5, np.float32)),
                                         ("b", np.array(2.0, np.float32)),
                                         ("c", np.array(0.25, np.float32))]),
     {"y": (F, (6,))}),
    ("range-negative-delta", node_model("Range", [("a", i64(5).reshape(())),
                                                  ("b", i64(-4).reshape(())),
                                                  ("c", i64(-2).reshape(()))]),
     {"y": (I64, (5,))}),
    ("range-unknown", node_model("Range", [("a", I64, []), ("b", I64, []), ("c", I64, [])]),
     {"y": (I64, (None,))}),
    ("transpose", node_model("Transpose", [("x", F, ["N", 3, "S"])], perm=[2, 0, 1]),
     {"y": (F, (S, N, 3))}),
    ("transpose-default", node_model("Transpose", [("x", F, ["N", 3, "S"])]),
     {"y": (F, (S, 3, N))}),
    ("flatten", node_model("Flatten", [("x", F, ["N", 3, 4])], axis=2),
     {"y": (F, (N * 3, 4))}),
    ("flatten-0", node_model("Flatten", [("x", F, ["N", 3])], axis=0), {"y": (F, (1, N * 3))}),
    ("flatten-negative", node_model("Flatten", [("x", F, ["N", 3, 4])], axis=-1),
     {"y": (F, (N * 3, 4))}),
    ("tile", node_model("Tile", [("x", F, ["N", 3]), ("r", i64(2, 3))]),
     {"y": (F, (2 * N, 9))}),
    ("pad-1", node_model("Pad", [("x", F, ["N", 3])], opset=1, paddings=[0, 1, 2, 3]),
     {"y": (F, (N + 2, 7))}),
    ("pad-2", node_model("Pad", [("x", F, ["N", 3])], opset=2, pads=[1, 0, 0, 2]),
     {"y": (F, (N + 1, 5))}),
    ("pad-11-negative", node_model("Pad", [("x", F, [6, 5]), ("p", i64(-1, 2, -2, 0))],
                                   opset=11), {"y": (F, (3, 7))}),
    ("pad-18-axes", node_model("Pad", [("x", F, ["N", 5]), ("p", i64(1, 2)), ("", None),
                                       ("a", i64(-1))], mode="reflect"),
     {"y": (F, (N, 8))}),
    ("pad-unknown-pads", node_model("Pad", [("x", F, ["N", 5]), ("p", I64, [4])]),
     {"y": (F, (None, None))}),
    ("pad-symbolic-crop-unknown", node_model("Pad", [("x", F, ["N"]), ("p", i64(-1, 0))]),
     {"y": (F, (None,))}),
    ("identity", node_model("Identity", [("x", F, ["N", 3])]), {"y": (F, (N, 3))}),
    ("eye-like", node_model("EyeLike", [("x", F, ["N", 3])], dtype=T.INT32),
     {"y": (T.INT32, (N, 3))}),
    ("one-hot", node_model("OneHot", [("i", I64, ["N", 3]), ("d", i64(10)),
                                      ("v", np.array([0, 1], np.float32))], axis=1),
     {"y": (F, (N, 10, 3))}),
    ("non-zero", node_model("NonZero", [("x", F, ["N", 3])]), {"y": (I64, (2, None))}),
    ("non-zero-known", node_model("NonZero", [("x", np.array([[0, 1, 2], [3, 0, 0]],
                                                             np.float32))]),
     {"y": (I64, (2, 3))}),
    ("compress-axis", node_model("Compress", [("x", F, ["N", 3]), ("c", np.array(
        [True, False, True]))], axis=1), {"y": (F, (N, 2))}),
    ("compress-flat", node_model("Compress", [("x", F, ["N", 3]), ("c", T.BOOL, ["M"])]),
     {"y": (F, (None,))}),
    ("gather-elements", node_model("GatherElements", [("x", F, ["N", 5]), ("i", I64, ["N", 2])],
                                   axis=1), {"y": (F, (N, 2))}),
    ("gather-nd", node_model("GatherND", [("x", F, ["N", 5, 6]), ("i", I64, ["N", 4, 1])],
                             batch_dims=1), {"y": (F, (N, 4, 6))}),
    ("gather-nd-11", node_model("GatherND", [("x", F, [5, 6, 7]), ("i", I64, ["N", 2])],
                                opset=11), {"y": (F, (N, 7))}),
    ("scatter-9", node_model("Scatter", [("x", F, ["N", 5]), ("i", I64, ["N", 2]),
                                         ("u", F, ["N", 2])], opset=9, axis=1),
     {"y": (F, (N, 5))}),
    ("scatter-elements", node_model("ScatterElements", [("x", F, ["N", 5]),
                                                        ("i", I64, ["N", 2]),
                                                        ("u", F, ["N", 2])], axis=1),
     {"y": (F, (N, 5))}),
    ("scatter-nd", node_model("ScatterND", [("x", F, ["N", 5]), ("i", I64, [2, 1]),
                                            ("u", F, [2, 5])]), {"y": (F, (N, 5))}),
    ("trilu", node_model("Trilu", [("x", F, ["N", 4, 4]), ("k", i64(1).reshape(()))],
                         upper=0), {"y": (F, (N, 4, 4))}),
    ("depth-to-space", node_model("DepthToSpace", [("x", F, ["N", 8, "H", 3])], blocksize=2,
                                  mode="CRD"), {"y": (F, (N, 2, 2 * H, 6))}),
    ("space-to-depth", node_model("SpaceToDepth", [("x", F, ["N", 3, 4, 6])], blocksize=2),
     {"y": (F, (N, 12, 2, 3))}),
    ("reverse-sequence", node_model("ReverseSequence", [("x", F, [4, "N", 3]),
                                                        ("l", I64, ["N"])],
                                    batch_axis=1, time_axis=0), {"y": (F, (4, N, 3))}),
    ("center-crop-pad", node_model("CenterCropPad", [("x", F, ["N", 5, 4]), ("s", i64(3, 7))],
                                   axes=[1, 2]), {"y": (F, (N, 3, 7))}),
]


#: random inputs cannot run these (a random target shape, delta, rank or index)
NOT_RUNNABLE = {"concat-unknown-rank", "reshape-unknown-target", "range-unknown", "scatter-nd"}


#: Cases whose extent is unknown only because an input dimension may be 0: what inference gives
#: when the input's dimension variables are taken to be >= 1 (the default, ``positive_dims``)
AT_LEAST_ONE = {"slice-clamp-symbolic-unknown": (N - 1,), "slice-zero-minus-one-unknown": (N - 1,),
                "pad-symbolic-crop-unknown": (N - 1,)}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_inferred_shape_and_type(case):
    _, model, want = case
    if case[0] in AT_LEAST_ONE:
        assert inferred(model)["y"].shape == AT_LEAST_ONE[case[0]]
    values = inferred(model, positive_dims=case[0] not in AT_LEAST_ONE)
    for name, (elem, shape) in want.items():
        v = values[name]
        assert v.elem == elem, (name, v)
        assert v.shape == shape, (name, str(v))
    if case[0] not in NOT_RUNNABLE:
        assert sound(model) == (3 if shape is not None else 0)
    onnx_agrees(model)


def test_every_kernel_of_the_family_has_a_rule_at_the_same_versions_that_never_raises():
    assert check_family_registered("shape") == 33
    assert check_unknown_inputs("shape") > 3 * 33


def test_every_kernel_of_the_family_has_its_rule_in_rules_shape():
    rules = table.attachments("rule")
    family = {key: tuple(v for v, _ in entries)
              for key, entries in table.attachments("kernel").items()
              if any(fn.__module__ == "onemodel.evaluate.kernels.shape" for _, fn in entries)}
    assert len(family) == 33, sorted(family)
    for key, versions in family.items():
        assert tuple(v for v, _ in rules[key]) == versions, (key, rules[key], versions)
        assert all(fn.__module__ == "onemodel.inference.rules.shape"
                   for _, fn in rules[key]), key


# -- data propagation ---------------------------------------------------------------------------
def test_shape_data_is_the_extents_and_gather_slice_concat_follow_it():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["g"], axis=0),
             helper.make_node("Slice", ["s", "st", "en"], ["tail"]),
             helper.make_node("Unsqueeze", ["g", "ax"], ["u"]),
             helper.make_node("Concat", ["u", "tail", "c"], ["y"], axis=0),
             helper.make_node("Size", ["x"], ["n"])]
    m = graph_model(nodes, [("x", F, ["N", "S", 8])], ("y", "n"),
                    {"i0": i64(0).reshape(()), "st": i64(-2), "en": i64(BIG), "ax": i64(0),
                     "c": i64(5)})
    v = inferred(m)
    assert v["s"].data == (N, S, 8)
    assert v["g"].data == (N,) and v["g"].shape == ()
    assert v["tail"].data == (S, 8) and v["tail"].shape == (2,)
    assert v["u"].data == (N,) and v["u"].shape == (1,)
    assert v["y"].data == (N, S, 8, 5) and v["y"].shape == (4,)
    assert v["n"].data == (N * S * 8,)
    assert sound(m) > 0
    onnx_agrees(m)


def test_shape_with_start_end_carries_its_slice():
    m = node_model("Shape", [("x", F, ["B", "S", 12, 64])], start=-2)
    assert out(m).data == (12, 64)
    m = node_model("Shape", [("x", F, ["B", "S", 12, 64])], start=0, end=2)
    assert out(m).data == (B, S)


def test_reshape_by_a_computed_shape_is_symbolic():
    # [B, S, 768] -> Reshape(x, Concat(Shape(x)[0:2], [12, 64])) -> [B, S, 12, 64], and a
    # [B*S, 768] view taken back to [B, S, 768] by the first tensor's Shape
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=0, end=2),
             helper.make_node("Concat", ["s", "heads"], ["t"], axis=0),
             helper.make_node("Reshape", ["x", "t"], ["y"]),
             helper.make_node("Reshape", ["x", "flat"], ["f"]),
             helper.make_node("Shape", ["x"], ["s0"], end=1),
             helper.make_node("Concat", ["s0", "rest"], ["t2"], axis=0),
             helper.make_node("Reshape", ["f", "t2"], ["back"]),
             helper.make_node("Shape", ["x"], ["sx"]),
             helper.make_node("Reshape", ["f", "sx"], ["back2"])]
    m = graph_model(nodes, [("x", F, ["B", "S", 768])], ("y", "f", "back", "back2"),
                    {"heads": i64(12, 64), "flat": i64(-1, 768), "rest": i64(-1, 768)})
    v = inferred(m, positive_dims=False)
    assert v["y"].shape == (B, S, 12, 64)
    assert v["f"].shape == (B * S, 768)
    assert v["back"].shape == (B, S, 768)  # B: B = 0 entails B*S = 0; -1: B*S*768 / (B*768)
    # by [B, S, 768] itself: S = 0 = B copies 768 ([0, 768, 768] holds 0 elements too)
    assert v["back2"].shape == (B, None, 768)
    # with the input dimensions taken >= 1 (the default), no element of the target is 0
    assert inferred(m)["back2"].shape == (B, S, 768)
    assert sound(m) > 0
    onnx_agrees(m)


def test_reshape_to_a_product_of_extents():
    # [B, S, 32] -> [B*S, 32]: B*S = 0 copies B, which a valid run then needs to be 0
    nodes = [helper.make_node("Shape", ["x"], ["b1"], start=0, end=1),
             helper.make_node("Shape", ["x"], ["s1"], start=1, end=2),
             helper.make_node("Mul", ["b1", "s1"], ["bs"]),
             helper.make_node("Concat", ["bs", "h"], ["t"], axis=0),
             helper.make_node("Reshape", ["x", "t"], ["y"]),
             helper.make_node("Concat", ["s1", "b1", "h"], ["t2"], axis=0),
             helper.make_node("Reshape", ["x", "t2"], ["y2"]),
             helper.make_node("Reshape", ["x", "t2"], ["y3"], allowzero=1)]
    m = graph_model(nodes, [("x", F, ["B", "S", 32])], ("y", "y2", "y3"), {"h": i64(32)})
    v = inferred(m, positive_dims=False)
    assert v["y"].shape == (B * S, 32)
    assert v["y2"].shape == (None, None, 32)  # two elements that may be 0: not entailed
    assert v["y3"].shape == (S, B, 32)
    assert inferred(m)["y2"].shape == (S, B, 32)  # B, S >= 1: neither element is 0
    assert sound(m) == 3 * 8


def test_reshape_symbolic_element_that_may_be_zero_is_unknown():
    # target [S, -1] on x [B, 4]: S could be 0 (copying B), so neither extent is entailed
    nodes = [helper.make_node("Shape", ["z"], ["sz"]),
             helper.make_node("Concat", ["sz", "m1"], ["t"], axis=0),
             helper.make_node("Reshape", ["x", "t"], ["y"])]
    m = graph_model(nodes, [("x", F, ["B", 4]), ("z", F, ["S"])], ("y",), {"m1": i64(-1)})
    assert inferred(m, positive_dims=False)["y"].shape == (None, None)
    # S >= 1: S is not 0, and -1 = 4*B / S is not an expression of the extents
    assert out(m).shape == (S, None)


def test_expand_constant_of_shape_and_range_carry_data():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i1"], ["n"], axis=0),
             helper.make_node("Range", ["zero", "n", "one"], ["pos"]),
             helper.make_node("Unsqueeze", ["pos", "ax"], ["pos2"]),
             helper.make_node("Expand", ["pos2", "s"], ["y"]),
             helper.make_node("ConstantOfShape", ["s"], ["ones"],
                              value=helper.make_tensor("v", I64, [1], [1]))]
    m = graph_model(nodes, [("x", F, ["B", "S"])], ("y", "ones"),
                    {"i1": i64(1).reshape(()), "zero": i64(0).reshape(()),
                     "one": i64(1).reshape(()), "ax": i64(0)})
    v = inferred(m)
    assert v["pos"].shape == (S,) and v["pos"].elem == I64
    assert v["pos2"].shape == (1, S)
    assert v["y"].shape == (B, S)
    assert v["ones"].shape == (B, S) and v["ones"].elem == I64
    assert sound(m) > 0

    m = node_model("Expand", [("x", i64(1, 2, 3)), ("s", i64(2, 3))])
    assert out(m).data == (1, 2, 3, 1, 2, 3)
    m = node_model("ConstantOfShape", [("s", i64(2, 2))],
                   value=helper.make_tensor("v", I64, [1], [4]))
    assert out(m).data == (4, 4, 4, 4)
    m = node_model("Range", [("a", i64(5).reshape(())), ("b", i64(-4).reshape(())),
                             ("c", i64(-2).reshape(()))])
    assert out(m).data == (5, 3, 1, -1, -3)
    assert sound(m) > 0


def test_range_symbolic_only_where_the_sign_is_entailed():
    # Range(2, S, 1): S - 2 may be negative, so the extent is unknown; Range(S, S + 3, 2) = 2
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Squeeze", ["s"], ["n"]),
             helper.make_node("Range", ["two", "n", "one"], ["r1"]),
             helper.make_node("Add", ["n", "three"], ["n3"]),
             helper.make_node("Range", ["n", "n3", "two"], ["r2"]),
             helper.make_node("Range", ["zero", "n", "two"], ["r3"])]
    m = graph_model(nodes, [("x", F, ["S"])], ("r1", "r2", "r3"),
                    {"two": i64(2).reshape(()), "one": i64(1).reshape(()),
                     "three": i64(3).reshape(()), "zero": i64(0).reshape(())})
    v = inferred(m)
    assert v["n"].data == (S,)
    assert v["r1"].shape == (None,)
    from onemodel.inference import dims as D
    assert v["r3"].shape == (D.ceildiv(S, 2),)
    assert v["n3"].data == (S + 3,)  # Add on shape data: the element-wise family's rule
    assert v["r2"].shape == (2,) and v["r2"].data == (S, S + 2)
    assert sound(m) > 0


def test_squeeze_unsqueeze_and_identity_keep_data():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Unsqueeze", ["s", "ax"], ["u"]),
             helper.make_node("Squeeze", ["u", "ax"], ["q"]),
             helper.make_node("Identity", ["q"], ["y"])]
    m = graph_model(nodes, [("x", F, ["N", 2])], ("y",), {"ax": i64(0)})
    v = inferred(m)
    assert v["u"].shape == (1, 2) and v["u"].data == (N, 2)
    assert v["y"].shape == (2,) and v["y"].data == (N, 2)


def test_gather_of_data_with_negative_and_2d_indices():
    m = node_model("Gather", [("x", i64(10, 20, 30, 40)), ("i", i64(-1, 0, 2, 1).reshape(2, 2))])
    v = out(m)
    assert v.shape == (2, 2) and v.data == (40, 10, 30, 20)
    m = node_model("Gather", [("x", i64(1, 2, 3, 4, 5, 6).reshape(2, 3)), ("i", i64(2, 0))],
                   axis=1)
    assert out(m).data == (3, 1, 6, 4)
    assert sound(m) > 0


def test_slice_of_data_with_steps():
    m = node_model("Slice", [("x", i64(0, 1, 2, 3, 4, 5, 6)), ("s", i64(-1)), ("e", i64(-BIG)),
                             ("a", i64(0)), ("t", i64(-3))])
    v = out(m)
    assert v.shape == (3,) and v.data == (6, 3, 0)
    assert sound(m) > 0


def test_constant_every_value_attribute_and_its_data():
    cases = [
        (dict(value=helper.make_tensor("t", T.INT32, [2], [3, 4])), T.INT32, (2,), (3, 4)),
        (dict(value_float=1.5), F, (), (1.5,)),
        (dict(value_floats=[1.0, 2.5]), F, (2,), (1.0, 2.5)),
        (dict(value_int=7), I64, (), (7,)),
        (dict(value_ints=[1, -1, 3]), I64, (3,), (1, -1, 3)),
        (dict(value_string="a"), T.STRING, (), None),
        (dict(value_strings=["a", "b"]), T.STRING, (2,), None),
        (dict(sparse_value=helper.make_sparse_tensor(
            helper.make_tensor("v", I64, [2], [5, 6]), helper.make_tensor("i", I64, [2], [1, 3]),
            [4])), I64, (4,), (0, 5, 0, 6)),
    ]
    for attrs, elem, shape, data in cases:
        m = node_model("Constant", [], **attrs)
        v = out(m)
        assert (v.elem, v.shape, v.data) == (elem, shape, data), attrs
        if elem != T.STRING and "sparse_value" not in attrs:
            assert sound(m) == 3


def test_split_versions():
    m = node_model("Split", [("x", F, ["N", 10])], 3, opset=11, axis=1, split=[2, 3, 5])
    assert [out(m, f"y{i}").shape for i in range(3)] == [(N, 2), (N, 3), (N, 5)]
    sound(m)
    m = node_model("Split", [("x", F, ["N", 10]), ("s", i64(4, 6))], 2, opset=13, axis=1)
    assert [out(m, f"y{i}").shape for i in range(2)] == [(N, 4), (N, 6)]
    sound(m)
    m = node_model("Split", [("x", F, ["N", 10])], 3, opset=18, axis=1, num_outputs=3)
    assert [out(m, f"y{i}").shape for i in range(3)] == [(N, 4), (N, 4), (N, 2)]
    sound(m)
    m = node_model("Split", [("x", F, ["N"])], 3, opset=18, axis=0, num_outputs=3)
    assert [out(m, f"y{i}").shape for i in range(3)] == [(D.ceildiv(N, 3),), (None,), (None,)]
    assert sound(m, low=0, high=7, draws=6) == 6 * 3
    m = node_model("Split", [("x", F, [6, "N"])], 2, opset=13, axis=0)
    assert [out(m, f"y{i}").shape for i in range(2)] == [(3, N), (3, N)]
    sound(m)
    # equal parts of a symbolic extent: floor(2*N / 2) = N
    m = node_model("Split", [("x", F, ["N", 4])], 2, opset=2, axis=1)
    assert [out(m, f"y{i}").shape for i in range(2)] == [(N, 2), (N, 2)]
    m = node_model("Split", [("x", F, [6]), ("s", i64(2, 4))], 2, opset=1)
    assert [out(m, f"y{i}").shape for i in range(2)] == [(2,), (4,)]
    sound(m)


def test_unique_outputs():
    m = node_model("Unique", [("x", F, ["N", 3])], 4)
    v = inferred(m)
    assert [v[f"y{i}"].shape for i in range(4)] == [(None,), (None,), (N * 3,), (None,)]
    assert [v[f"y{i}"].elem for i in range(4)] == [F, I64, I64, I64]
    sound(m)
    m = node_model("Unique", [("x", i64(3, 1, 3, 3, 7).reshape(5, 1))], 4)
    v = inferred(m)
    assert [v[f"y{i}"].shape for i in range(4)] == [(3,), (3,), (5,), (3,)]
    assert sound(m) == 3 * 4
    m = node_model("Unique", [("x", F, ["N", 3])], 4, axis=1)
    v = inferred(m)
    assert [v[f"y{i}"].shape for i in range(4)] == [(N, None), (None,), (3,), (None,)]
    sound(m)


def test_tile_1_and_older_versions():
    m = node_model("Tile", [("x", F, ["N", 3]), ("t", i64(2).reshape(())),
                            ("a", i64(1).reshape(()))], opset=5)
    assert out(m).shape == (N, 6)
    m = node_model("OneHot", [("i", I64, ["N"]), ("d", np.array([4.0], np.float32)),
                              ("v", np.array([0, 1], np.int32))], opset=9)
    v = out(m)
    assert v.shape == (N, 4) and v.elem == T.INT32
    sound(m)


# -- contradictions and unknown ranks ----------------------------------------------------------
CONTRADICTIONS = [
    ("reshape-count", node_model("Reshape", [("x", F, [2, 3]), ("s", i64(4, 2))]), "elements"),
    ("reshape-two-minus-1", node_model("Reshape", [("x", F, [2, 3]), ("s", i64(-1, -1))]),
     "more than one -1"),
    ("reshape-zero-past-rank", node_model("Reshape", [("x", F, [6]), ("s", i64(3, 0))]),
     "no input extent"),
    ("concat-extent", node_model("Concat", [("a", F, [2, 3]), ("b", F, [2, 4])], axis=0),
     "differ"),
    ("concat-rank", node_model("Concat", [("a", F, [2, 3]), ("b", F, [2])], axis=0), "ranks"),
    ("concat-axis", node_model("Concat", [("a", F, [2, 3])], axis=2), "out of range"),
    ("gather-index", node_model("Gather", [("x", F, [3]), ("i", i64(3))]), "out of range"),
    ("squeeze-not-1", node_model("Squeeze", [("x", F, [2, 3]), ("a", i64(0))]), "not 1"),
    ("unsqueeze-repeat", node_model("Unsqueeze", [("x", F, [2]), ("a", i64(0, 0))]), "repeat"),
    ("transpose-perm", node_model("Transpose", [("x", F, [2, 3])], perm=[0, 0]),
     "permutation"),
    ("split-sum", node_model("Split", [("x", F, [5]), ("s", i64(2, 2))], 2), "add up"),
    ("split-equal", node_model("Split", [("x", F, [5])], 2, opset=13), "equal parts"),
    ("slice-step-0", node_model("Slice", [("x", F, [5]), ("s", i64(0)), ("e", i64(2)),
                                          ("a", i64(0)), ("t", i64(0))]), "step is 0"),
    ("tile-length", node_model("Tile", [("x", F, [2, 3]), ("r", i64(2))]), "do not match"),
    ("tile-negative", node_model("Tile", [("x", F, [2, 3]), ("r", i64(2, -1))]), "negative"),
    ("center-crop-negative", node_model("CenterCropPad", [("x", F, [2, 3]), ("s", i64(2, -1))]),
     "negative"),
    ("expand-broadcast", node_model("Expand", [("x", F, [3]), ("s", i64(4))]), "broadcast"),
    ("depth-to-space", node_model("DepthToSpace", [("x", F, [1, 6, 2, 2])], blocksize=2),
     "does not divide"),
    ("eye-like-rank", node_model("EyeLike", [("x", F, [2, 2, 2])]), "rank"),
    ("range-delta", node_model("Range", [("a", i64(0).reshape(())), ("b", i64(3).reshape(())),
                                         ("c", i64(0).reshape(()))]), "delta is 0"),
    ("pad-length", node_model("Pad", [("x", F, [2, 3]), ("p", i64(1, 1))]), "2 x 2"),
    ("pad-crop", node_model("Pad", [("x", F, [2, 3]), ("p", i64(0, 0, -3, 0))]),
     "remove more"),
]


@pytest.mark.parametrize("case", CONTRADICTIONS, ids=[c[0] for c in CONTRADICTIONS])
def test_contradictions_are_reported_at_the_node(case):
    _, model, text = case
    res = infer_model(model)
    assert len(res.contradictions) == 1, res.contradictions
    c = res.contradictions[0]
    assert c.path == "graph.nodes[0]" and text in c.message, c


UNKNOWN_RANK = [
    ("Shape", [("x", F, None)], {}, (None,)),
    ("Size", [("x", F, None)], {}, ()),
    ("Gather", [("x", F, None), ("i", i64(0))], {}, None),
    ("Slice", [("x", F, None), ("s", i64(0)), ("e", i64(1))], {}, None),
    ("Concat", [("a", F, None), ("b", F, None)], {"axis": 0}, None),
    ("Unsqueeze", [("x", F, None), ("a", i64(0))], {}, None),
    ("Squeeze", [("x", F, None)], {}, None),
    ("Reshape", [("x", F, None), ("s", i64(-1, 2))], {}, (None, 2)),
    ("Reshape", [("x", F, None), ("s", i64(0, 2))], {}, (None, 2)),
    ("Expand", [("x", F, None), ("s", i64(2, 3))], {}, None),
    ("Transpose", [("x", F, None)], {"perm": [1, 0]}, (None, None)),
    ("Flatten", [("x", F, None)], {}, (None, None)),
    ("Tile", [("x", F, None), ("r", i64(2, 2))], {}, (None, None)),
    ("Pad", [("x", F, None), ("p", i64(1, 1))], {}, None),
    ("Split", [("x", F, None)], {"axis": 0}, None),
    ("Identity", [("x", F, None)], {}, None),
    ("EyeLike", [("x", F, None)], {}, None),
    ("OneHot", [("i", I64, None), ("d", i64(3)), ("v", np.array([0, 1], np.float32))], {},
     None),
    ("NonZero", [("x", F, None)], {}, (None, None)),
    ("Compress", [("x", F, None), ("c", T.BOOL, [3])], {"axis": 0}, None),
    ("GatherElements", [("x", F, None), ("i", I64, None)], {}, None),
    ("GatherND", [("x", F, None), ("i", I64, None)], {}, None),
    ("ScatterND", [("x", F, None), ("i", I64, None), ("u", F, None)], {}, None),
    ("ScatterElements", [("x", F, None), ("i", I64, None), ("u", F, None)], {}, None),
    ("Trilu", [("x", F, None)], {}, None),
    ("DepthToSpace", [("x", F, None)], {"blocksize": 2}, None),
    ("SpaceToDepth", [("x", F, None)], {"blocksize": 2}, None),
    ("ReverseSequence", [("x", F, None), ("l", I64, None)], {}, None),
    ("CenterCropPad", [("x", F, None), ("s", i64(2))], {}, None),
    ("Unique", [("x", F, None)], {}, (None,)),
    ("ConstantOfShape", [("s", I64, None)], {}, None),
    ("Range", [("a", F, None), ("b", F, None), ("c", F, None)], {}, (None,)),
]


@pytest.mark.parametrize("case", UNKNOWN_RANK, ids=[f"{c[0]}-{i}" for i, c in
                                                    enumerate(UNKNOWN_RANK)])
def test_unknown_rank_inputs_never_raise(case):
    op, ins, attrs, want = case
    n = 4 if op == "Unique" else (2 if op == "Split" else 1)
    m = node_model(op, ins, n, **attrs)
    v = out(m, "y" if n == 1 else "y0")
    assert v.shape == want, str(v)


def test_slice_of_an_extent_known_to_be_large_enough_is_an_expression():
    # [N + 5] sliced [1:] is N + 4 (N + 5 >= 1 always); [N] sliced [1:] is unknown (N may be 0)
    nodes = [helper.make_node("Concat", ["a", "b"], ["x"], axis=0),
             helper.make_node("Slice", ["x", "one", "end"], ["y"]),
             helper.make_node("Slice", ["a", "one", "end"], ["z"]),
             helper.make_node("Slice", ["x", "zero", "minus6"], ["w"])]
    m = graph_model(nodes, [("a", F, ["N"]), ("b", F, [5])], ("y", "z", "w"),
                    {"one": i64(1), "end": i64(BIG), "zero": i64(0), "minus6": i64(-6)})
    v = inferred(m, positive_dims=False)
    assert v["x"].shape == (N + 5,)
    assert v["y"].shape == (N + 4,)
    assert v["z"].shape == (None,)
    assert v["w"].shape == (None,)  # N - 1 when N >= 1, else 0
    assert sound(m, low=0) == 3 * 4
    v = inferred(m)  # N >= 1 (the default for an input's dimension variable)
    assert v["z"].shape == (N - 1,) and v["w"].shape == (N - 1,)
    assert sound(m) == 3 * 4


def test_older_versions_run_as_inferred():
    cases = [
        (node_model("Concat", [("a", F, ["N", 2]), ("b", F, ["N", 3])], opset=1), (N, 5)),
        (node_model("Reshape", [("x", F, ["N", 6])], opset=1, shape=[0, 2, -1]), (N, 2, 3)),
        (node_model("Tile", [("x", F, ["N", 3]), ("t", i64(2).reshape(())),
                             ("a", i64(1).reshape(()))], opset=5), (N, 6)),
        (node_model("Squeeze", [("x", F, [1, "N"])], opset=1, axes=[0]), (N,)),
        (node_model("Unsqueeze", [("x", F, ["N"])], opset=1, axes=[1]), (N, 1)),
        (node_model("Transpose", [("x", F, ["N", 2])], opset=1), (2, N)),
        (node_model("Flatten", [("x", F, ["N", 2, 3])], opset=1), (N, 6)),
        (node_model("Pad", [("x", F, ["N", 2])], opset=2, pads=[0, 1, 0, 1]), (N, 4)),
        (node_model("Pad", [("x", F, ["N", 2]), ("p", i64(0, 1, 0, 1))], opset=11,
                    mode="edge"), (N, 4)),
        (node_model("DepthToSpace", [("x", F, ["N", 4, 2, 3])], opset=1, blocksize=2),
         (N, 1, 4, 6)),
        (node_model("SpaceToDepth", [("x", F, ["N", 1, 4, 6])], opset=1, blocksize=2),
         (N, 4, 2, 3)),
        (node_model("Shape", [("x", F, ["N", 2])], opset=1), (2,)),
        (node_model("Gather", [("x", F, ["N", 4]), ("i", i64(3, 1))], opset=1, axis=1),
         (N, 2)),
        (node_model("Slice", [("x", F, ["N", 8])], opset=1, starts=[-3], ends=[BIG],
                    axes=[1]), (N, 3)),
    ]
    for m, want in cases:
        assert out(m).shape == want, (m.graph.nodes[0].op_type, str(out(m)))
        assert sound(m) == 3
        onnx_agrees(m)


def test_identity_passes_a_sequence_through():
    seq = helper.make_tensor_sequence_value_info("s", F, ["N", 2])
    g = helper.make_graph([helper.make_node("Identity", ["s"], ["y"])], "g", [seq],
                          [helper.make_empty_tensor_value_info("y")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
    m.ir_version = 8
    v = out(onemodel.load(m.SerializeToString()))
    assert v.kind == "sequence" and v.inner.shape == (N, 2) and v.inner.elem == F


def test_symbolic_elements_are_the_run_elements_under_bindings_with_zero_extents():
    # Shape -> Slice (negative step, open ends) -> Concat with a constant -> Gather (negative
    # index) -> Size -> Unsqueeze -> Concat -> Expand -> Reshape(-1) -> Range
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "st", "en", "ax", "step"], ["rev"]),
             helper.make_node("Concat", ["rev", "c", "s"], ["cat"], axis=0),
             helper.make_node("Gather", ["cat", "idx"], ["g"]),
             helper.make_node("Size", ["x"], ["n"]),
             helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
             helper.make_node("Concat", ["g", "n1"], ["gn"], axis=0),
             helper.make_node("Unsqueeze", ["gn", "ax"], ["gn2"]),
             helper.make_node("Expand", ["gn2", "two"], ["ex"]),
             helper.make_node("Reshape", ["ex", "m1"], ["flat"]),
             helper.make_node("Gather", ["s", "zero"], ["first"]),
             helper.make_node("Range", ["zero", "first", "one"], ["r"]),
             helper.make_node("Identity", ["r"], ["y"])]
    m = graph_model(nodes, [("x", F, ["N", 3, "M"])], ("flat", "y"),
                    {"st": i64(-1), "en": i64(-BIG), "ax": i64(0), "step": i64(-2),
                     "c": i64(7), "idx": i64(-1, 0, 2), "two": i64(2, 1), "m1": i64(-1),
                     "zero": i64(0).reshape(()), "one": i64(1).reshape(())})
    v = inferred(m)
    assert v["rev"].data == (Expr.var("M"), N)
    assert v["cat"].data == (Expr.var("M"), N, 7, N, 3, Expr.var("M"))
    assert v["g"].data == (Expr.var("M"), Expr.var("M"), 7)
    assert v["flat"].data == (Expr.var("M"), Expr.var("M"), 7, 3 * N * Expr.var("M")) * 2
    assert v["y"].shape == (N,)
    # every element of every value but the Range (of N elements) and its Identity: 41 per
    # draw; the third draw of seed 3 in [0, 3] binds N and M to 0
    assert data_sound(m, draws=6, seed=3, low=0, high=3) == 6 * 41


WRONG_ATTRIBUTES = [
    ("Concat", [("a", F, [2])], dict(axis=1.5), "axis"),
    ("Gather", [("x", F, [3]), ("i", i64(0))], dict(axis="a"), "axis"),
    ("GatherElements", [("x", F, [3]), ("i", I64, [2])], dict(axis=[0]), "axis"),
    ("GatherND", [("x", F, [3]), ("i", I64, [2, 1])], dict(batch_dims=0.5), "batch_dims"),
    ("Transpose", [("x", F, [2, 3])], dict(perm=3), "perm"),
    ("Flatten", [("x", F, [2, 3])], dict(axis=[1]), "axis"),
    ("Reshape", [("x", F, [2, 3]), ("s", i64(6))], dict(allowzero="yes"), "allowzero"),
    ("Split", [("x", F, [4])], dict(axis="0", num_outputs=2), "axis"),
    ("Shape", [("x", F, [4])], dict(start=[1]), "start"),
    ("Unique", [("x", F, [4])], dict(axis=1.0), "axis"),
    ("Compress", [("x", F, [4]), ("c", T.BOOL, [4])], dict(axis="x"), "axis"),
    ("OneHot", [("i", I64, [4]), ("d", i64(3)), ("v", np.array([0, 1], np.float32))],
     dict(axis=[0]), "axis"),
    ("EyeLike", [("x", F, [2, 2])], dict(dtype=1.5), "dtype"),
    ("DepthToSpace", [("x", F, [1, 4, 2, 2])], dict(blocksize=[2]), "blocksize"),
    ("CenterCropPad", [("x", F, [4]), ("s", i64(2))], dict(axes=0), "axes"),
    ("ReverseSequence", [("x", F, [2, 3]), ("l", I64, [3])], dict(batch_axis="b"),
     "batch_axis"),
    ("ConstantOfShape", [("s", i64(2))], dict(value=1.5), "value"),
    ("Constant", [], dict(value_ints=["a"]), "value_ints"),
    ("Constant", [], dict(value_float="a"), "value_float"),
]


@pytest.mark.parametrize("case", WRONG_ATTRIBUTES, ids=[f"{c[0]}-{c[3]}"
                                                        for c in WRONG_ATTRIBUTES])
def test_an_attribute_of_another_type_is_a_contradiction_not_an_exception(case):
    op, ins, attrs, name = case
    m = node_model(op, ins, 4 if op == "Unique" else 2 if op == "Split" else 1, **attrs)
    res = infer_model(m)
    assert [c.path for c in res.contradictions] == ["graph.nodes[0]"], res.contradictions
    assert f"attribute {name} " in res.contradictions[0].message


def test_old_attribute_forms_of_another_type():
    for op, ins, attrs, opset in [
            ("Squeeze", [("x", F, [1, 2])], dict(axes=0), 11),
            ("Unsqueeze", [("x", F, [2])], dict(axes=1.5), 11),
            ("Slice", [("x", F, [4])], dict(starts=[0.5], ends=[2]), 9),
            ("Pad", [("x", F, [4])], dict(pads=2), 2),
            ("Pad", [("x", F, [4])], dict(paddings="p"), 1),
            ("Reshape", [("x", F, [4])], dict(shape=4), 1),
            ("Split", [("x", F, [4])], dict(split=2.0), 11)]:
        n = 2 if op == "Split" else 1
        res = infer_model(node_model(op, ins, n, opset=opset, **attrs))
        assert len(res.contradictions) == 1 and "attribute" in res.contradictions[0].message, \
            (op, res.contradictions)


def test_what_the_operators_need_of_the_input_extents_is_checked_at_the_input():
    from onemodel.errors import InputError
    from onemodel.evaluate import Session

    nodes = [helper.make_node("DepthToSpace", ["x"], ["r"], blocksize=2, name="d2s"),
             helper.make_node("Squeeze", ["z", "ax"], ["q"], name="sq"),
             helper.make_node("Split", ["w"], ["w0", "w1"], axis=0, name="sp")]
    m = graph_model(nodes, [("x", F, [1, "C", 1, 1]), ("z", F, ["N", None]), ("w", F, ["K"])],
                    ("r", "q", "w0", "w1"), {"ax": i64(1)}, opset=17)
    res = infer_model(m, fresh_inputs=True)
    assert sorted(str(c) for c in res.constraints) == sorted([
        "Constraint((C mod 4) == 0 at graph.nodes[0])",
        "Constraint(?z:1 == 1 at graph.nodes[1])",
        "Constraint((K mod 2) == 0 at graph.nodes[2])"])
    s = Session(m)
    ok = {"x": np.ones((1, 8, 1, 1), np.float32), "z": np.ones((3, 1), np.float32),
          "w": np.ones(4, np.float32)}
    assert s.run(ok)["r"].shape == (1, 2, 2, 2)
    for name, bad, axis in [("x", (1, 6, 1, 1), 1), ("z", (3, 2), 1), ("w", (5,), 0)]:
        with pytest.raises(InputError) as e:
            s.run(dict(ok, **{name: np.ones(bad, np.float32)}))
        assert e.value.path == f"graph.inputs[{'xzw'.index(name)}]", e.value
        assert f"input '{name}' has extent {bad[axis]} on axis {axis}" in e.value.message
