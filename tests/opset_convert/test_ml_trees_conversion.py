"""Tree ensembles across ai.onnx.ml versions: the ``*_as_tensor`` attributes of 3 narrowed to
opset 1's floats only when exact; TreeEnsembleRegressor-3 rewritten as TreeEnsemble-5 (which
deprecates it) and TreeEnsemble written out as a regressor below 5. Each proved by running
original and converted in onemodel's evaluator (and onnxruntime): the weights are sums of
powers of two, so the scores are exact and compared bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from opset_models import F64, F, clean, model, run, value

from onemodel.formats.onnx import encode_model
from onemodel.opset_convert import ConversionRefused, convert

ML = "ai.onnx.ml"
X = np.array([[-1, 0], [0.5, 1], [2, 3], [-3, 1], [np.nan, 0.7], [0, 0.5]], np.float32)
#: tree 0: x0 <= 0 ? (x1 > 0.5 ? leaf 2 : leaf 3) : leaf 4; tree 1: one leaf; two targets
TREE = dict(n_targets=2,
            nodes_treeids=[0, 0, 0, 0, 0, 1], nodes_nodeids=[0, 1, 2, 3, 4, 0],
            nodes_featureids=[0, 1, 0, 0, 0, 0],
            nodes_modes=["BRANCH_LEQ", "BRANCH_GT", "LEAF", "LEAF", "LEAF", "LEAF"],
            nodes_values=[0.0, 0.5, 0, 0, 0, 0], nodes_truenodeids=[1, 2, 0, 0, 0, 0],
            nodes_falsenodeids=[4, 3, 0, 0, 0, 0],
            nodes_missing_value_tracks_true=[1, 0, 0, 0, 0, 0],
            target_treeids=[0, 0, 0, 1], target_nodeids=[2, 3, 4, 0], target_ids=[0, 1, 0, 1],
            target_weights=[-1.0, 1.5, 2.25, 0.125])


def _regressor(ml=3, elem=F, **over):
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain=ML,
                            **{**TREE, **over})
    return model([node], [value("x", elem, [6, 2])], [value("y", F, [6, 2])], 13, ml=ml)


def _want(x):
    """Tree 0 by hand (NaN goes the true way at the root), plus tree 1's 0.125 to target 1."""
    out = np.zeros((len(x), 2), np.float32)
    for r, (a, b) in enumerate(x):
        if np.isnan(a) or a <= 0:
            out[r] += [-1.0, 0] if b > 0.5 else [0, 1.5]
        else:
            out[r, 0] += 2.25
    out[:, 1] += 0.125
    return out


def _ort(m, feeds):
    ort = pytest.importorskip("onnxruntime")
    s = ort.InferenceSession(encode_model(m), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)[0]


@pytest.mark.parametrize("how", ["SUM", "AVERAGE", "MAX"])
def test_regressor_3_becomes_tree_ensemble_5_and_back(how):
    m = _regressor(aggregate_function=how)
    want = run(m, {"x": X})[0]
    if how == "SUM":
        np.testing.assert_array_equal(want, _want(X))
    up = convert(m, {ML: 5}).model
    clean(up)
    assert [n.op_type for n in up.graph.nodes] == ["TreeEnsemble"]
    np.testing.assert_array_equal(run(up, {"x": X})[0], want)
    np.testing.assert_array_equal(_ort(up, {"x": X}), want)
    for ml in (4, 3, 1):
        low = convert(up, {ML: ml}).model
        clean(low)
        assert [n.op_type for n in low.graph.nodes] == ["TreeEnsembleRegressor"]
        np.testing.assert_array_equal(run(low, {"x": X})[0], want)
    np.testing.assert_array_equal(_ort(low, {"x": X}), want)


def test_a_regressor_tree_ensemble_cannot_express_is_kept_deprecated_with_a_note():
    m = _regressor(base_values=[1.0, 2.0])
    conv = convert(m, {ML: 5})
    assert [n.op_type for n in conv.model.graph.nodes] == ["TreeEnsembleRegressor"]
    # tree 0 weighs target 0 at two leaves of three: a row reaching the third gets no base
    assert any("TreeEnsembleRegressor kept at ai.onnx.ml 5, where it is deprecated: target 0 "
               "is not weighed by every leaf of some tree" in n for n in conv.notes)
    np.testing.assert_array_equal(run(conv.model, {"x": X})[0], run(m, {"x": X})[0])
    d = convert(_regressor(elem=F64), {ML: 5})
    assert any("is not known to be float" in n for n in d.notes)


def test_tree_ensemble_below_5_refuses_member_and_double():
    node = helper.make_node(
        "TreeEnsemble", ["x"], ["y"], domain=ML, n_targets=1, tree_roots=[0],
        nodes_featureids=[0], nodes_splits=helper.make_tensor("s", TensorProto.FLOAT, [1], [0]),
        nodes_modes=helper.make_tensor("m", TensorProto.UINT8, [1], [6]),
        membership_values=helper.make_tensor("v", TensorProto.FLOAT, [2], [1, 2]),
        nodes_truenodeids=[0], nodes_trueleafs=[1], nodes_falsenodeids=[1],
        nodes_falseleafs=[1], leaf_targetids=[0, 0],
        leaf_weights=helper.make_tensor("w", TensorProto.FLOAT, [2], [1, 2]))
    m = model([node], [value("x", F, [6, 2])], [value("y", F, [6, 1])], 13, ml=5)
    assert run(m, {"x": X})[0][:, 0].tolist() == [2, 2, 1, 2, 2, 2]
    with pytest.raises(ConversionRefused, match="MEMBER mode"):
        convert(m, {ML: 4})


def test_as_tensor_goes_down_as_floats_only_when_exact():
    exact = {k: v for k, v in TREE.items() if k != "target_weights"}
    w = helper.make_tensor("w", TensorProto.DOUBLE, [4], [-1.0, 1.5, 2.25, 0.125])
    m = _regressor(**{**exact, "target_weights_as_tensor": w}, target_weights=None)
    want = run(m, {"x": X})[0]
    low = convert(m, {ML: 1}).model
    clean(low)
    node = low.graph.nodes[0]
    assert node.attribute("target_weights_as_tensor") is None
    assert node.attribute("target_weights").floats.tolist() == [-1.0, 1.5, 2.25, 0.125]
    np.testing.assert_array_equal(run(low, {"x": X})[0], want)
    inexact = helper.make_tensor("w", TensorProto.DOUBLE, [4], [0.1, 1.5, 2.25, 0.125])
    m = _regressor(**{**exact, "target_weights_as_tensor": inexact}, target_weights=None)
    with pytest.raises(ConversionRefused, match=r"target_weights_as_tensor holds 0\.1, which "
                                                "float32"):
        convert(m, {ML: 1})


def test_a_classifier_is_kept_at_5_with_a_note():
    node = helper.make_node(
        "TreeEnsembleClassifier", ["x"], ["label", "scores"], domain=ML,
        classlabels_int64s=[0, 1, 2],
        **{k: v for k, v in TREE.items() if k.startswith("nodes_")},
        class_treeids=[0, 0, 0, 1], class_nodeids=[2, 3, 4, 0], class_ids=[0, 1, 2, 1],
        class_weights=[1.0, 1.5, 2.25, 0.125])
    m = model([node], [value("x", F, [6, 2])],
              [value("label", TensorProto.INT64, [6]), value("scores", F, [6, 3])], 13, ml=3)
    conv = convert(m, {ML: 5})
    assert [n.op_type for n in conv.model.graph.nodes] == ["TreeEnsembleClassifier"]
    assert any("TreeEnsemble has no class labels" in n for n in conv.notes)
    for got, want in zip(run(conv.model, {"x": X}), run(m, {"x": X})):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind", ["RandomForestRegressor", "GradientBoostingRegressor"])
def test_a_scikit_learn_forest_goes_to_tree_ensemble_and_back_in_onnxruntime(kind):
    """Real exports (skl2onnx, ai.onnx.ml 3): onnxruntime gives the original's outputs bit for
    bit at ml 5 (TreeEnsemble; gradient boosting's initial value, base_values, added by an Add
    after it) and back at ml 1."""
    pytest.importorskip("sklearn")
    skl2onnx = pytest.importorskip("skl2onnx")
    from sklearn import ensemble

    from onemodel.formats.onnx import decode_model

    rng = np.random.default_rng(5)
    x = rng.standard_normal((40, 3)).astype(np.float32)
    rf = getattr(ensemble, kind)(n_estimators=3, max_depth=3, random_state=0)
    rf.fit(x, x[:, 0] * 2 + x[:, 1] ** 2 + 3)
    onx = skl2onnx.to_onnx(rf, x[:1], target_opset={"": 13, ML: 3})
    m = decode_model(onx.SerializeToString())
    want = _ort(m, {"X": x})
    np.testing.assert_array_equal(run(m, {"X": x})[0], want)
    up = convert(m, {ML: 5}).model
    clean(up)
    assert [n.op_type for n in up.graph.nodes] == \
        ["TreeEnsemble"] + ["Add"] * (kind == "GradientBoostingRegressor")
    np.testing.assert_array_equal(_ort(up, {"X": x}), want)
    np.testing.assert_array_equal(run(up, {"X": x})[0], want)
    low = convert(up, {ML: 1}).model
    assert [n.op_type for n in low.graph.nodes] == \
        ["TreeEnsembleRegressor"] + ["Add"] * (kind == "GradientBoostingRegressor")
    np.testing.assert_array_equal(_ort(low, {"X": x}), want)


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC"])
def test_base_values_become_an_add_unless_a_post_transform_follows_them(post):
    one = dict(n_targets=1, nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2],
               nodes_featureids=[0, 0, 0], nodes_modes=["BRANCH_LT", "LEAF", "LEAF"],
               nodes_values=[0.25, 0, 0], nodes_truenodeids=[1, 0, 0],
               nodes_falsenodeids=[2, 0, 0], target_treeids=[0, 0], target_nodeids=[1, 2],
               target_ids=[0, 0], target_weights=[-0.5, 4.0])
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain=ML, **one,
                            base_values=[0.75], post_transform=post)
    m = model([node], [value("x", F, [6, 2])], [value("y", F, [6, 1])], 13, ml=3)
    want = run(m, {"x": X})[0]
    if post == "NONE":
        np.testing.assert_array_equal(
            want[:, 0], np.where(~(X[:, 0] < 0.25), 4.75, 0.25).astype(np.float32))
    conv = convert(m, {ML: 5})
    if post == "NONE":
        assert [n.op_type for n in conv.model.graph.nodes] == ["TreeEnsemble", "Add"]
        np.testing.assert_array_equal(run(conv.model, {"x": X})[0], want)
        np.testing.assert_array_equal(_ort(conv.model, {"x": X}), want)
    else:
        assert any("base_values with post_transform LOGISTIC" in n for n in conv.notes)
