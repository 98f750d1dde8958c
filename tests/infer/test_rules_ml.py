"""Inference rules of the ai.onnx.ml operators (onemodel/inference/rules/ml_linear.py,
ml_trees.py, ml_features.py): output element
types from attributes (classifiers' labels int64 or string, LabelEncoder's values, CastMap's
cast_to, DictVectorizer's map values), ZipMap -> seq(map(...)), row counts of the kernels'
[N, F] view, score columns; contradictions; the evaluator agreeing (``sound``, and the
sequence/map outputs checked on a run) and onnx agreeing where it has an answer."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

import onemodel
from onemodel.evaluate import Session
from onemodel.inference import Expr
from tests.infer.harness import inferred, node_model, sound
from tests.infer.rules_check import (
    check_family_registered,
    check_unknown_inputs,
    contradicts,
    expect,
)

F, D64, I64, STR = T.FLOAT, T.DOUBLE, T.INT64, T.STRING
N = Expr.var("N")
ML = "ai.onnx.ml"


def ml(op, inputs, n_outputs=1, **attrs):
    return node_model(op, inputs, n_outputs, domain=ML, **attrs)


def expect2(m, want: dict, run=True):
    """Outputs y0, y1 have the given (elem, shape spec); the evaluator agrees."""
    from tests.infer.rules_check import dims
    got = inferred(m)
    for name, (elem, shape) in want.items():
        assert got[name].elem == elem and got[name].shape == dims(shape), (name, got[name])
    if run:
        assert sound(m) > 0


@pytest.mark.parametrize("family,operators", [("ml_linear", 4), ("ml_trees", 3),
                                               ("ml_features", 11)])
def test_every_kernel_has_a_rule_at_its_versions(family, operators):
    assert check_family_registered(family) == operators


@pytest.mark.parametrize("family,inferences", [("ml_linear", 12), ("ml_trees", 21),
                                                ("ml_features", 39)])
def test_unknown_inputs_never_raise(family, inferences):
    assert check_unknown_inputs(family) >= inferences


@pytest.mark.parametrize("labels,elem,cols", [
    ({"classlabels_ints": [3, 5, 7]}, I64, 3),
    ({"classlabels_strings": ["a", "b", "c"]}, STR, 3)])
def test_linear_classifier(labels, elem, cols):
    m = ml("LinearClassifier", [("x", F, ["N", 2])], 2, coefficients=[0.1] * 6,
           intercepts=[0.0] * 3, **labels)
    expect2(m, {"y0": (elem, ["N"]), "y1": (F, ["N", cols])}, run=elem != STR)


def test_linear_classifier_binary_and_1d():
    m = ml("LinearClassifier", [("x", F, [3])], 2, coefficients=[1.0, -1.0, 0.5],
           classlabels_ints=[0, 1])
    expect2(m, {"y0": (I64, [1]), "y1": (F, [1, 2])})
    m = ml("LinearClassifier", [("x", F, ["N", 3])], 2, coefficients=[1.0, -1.0, 0.5])
    expect2(m, {"y0": (I64, ["N"]), "y1": (F, ["N", 1])})
    contradicts(ml("LinearClassifier", [("x", F, ["N", 4])], 2, coefficients=[1.0] * 6,
                   classlabels_ints=[0, 1]), "6 coefficients", "4 features")
    contradicts(ml("LinearClassifier", [("x", F, ["N", 2])], 2, coefficients=[1.0] * 6,
                   classlabels_ints=[0, 1]), "2 class labels", "3 coefficient rows")


def test_regressors():
    expect(ml("LinearRegressor", [("x", F, ["N", 2])], coefficients=[1.0] * 6, targets=3),
           ["N", 3], F)
    expect(ml("SVMRegressor", [("x", D64, ["N", 2])], n_supports=2, kernel_type="LINEAR",
              support_vectors=[1.0, 0.0, 0.0, 1.0], coefficients=[0.5, -0.5], rho=[0.1]),
           ["N", 1], F)
    contradicts(ml("LinearRegressor", [("x", F, ["N", 2])], coefficients=[1.0] * 5, targets=3),
                "5 coefficients")


def test_preprocessing():
    expect(ml("Normalizer", [("x", D64, ["N", 3, 2])], norm="L2"), ["N", 6], F)
    expect(ml("Scaler", [("x", D64, ["N", 3])], offset=[1.0], scale=[2.0]), ["N", 3], F)
    expect(ml("Binarizer", [("x", D64, ["N", 3])], threshold=0.5), ["N", 3], D64)
    expect(ml("Imputer", [("x", F, ["N", 3])], imputed_value_floats=[0.0],
              replaced_value_float=1.0), ["N", 3], F)
    expect(ml("OneHotEncoder", [("x", I64, ["N", 2])], cats_int64s=[1, 2, 3]), ["N", 2, 3], F)
    expect(ml("ArrayFeatureExtractor", [("x", F, ["N", 5]), ("i", np.array([0, 3]))]),
           ["N", 2], F)
    expect(ml("ArrayFeatureExtractor", [("x", F, [5]), ("i", np.array([4]))]), [1, 1], F)
    expect(ml("FeatureVectorizer", [("a", F, ["N", 2]), ("b", D64, ["N", 4])],
              inputdimensions=[2, 3]), ["N", 5], F)
    contradicts(ml("ArrayFeatureExtractor", [("x", F, []), ("i", np.array([0]))]), "scalar")


@pytest.mark.parametrize("opset_attrs,elem", [
    ({"keys_int64s": [1, 2], "values_strings": ["a", "b"]}, STR),
    ({"keys_int64s": [1, 2], "values_floats": [0.5, 1.5]}, F),
    ({"keys_int64s": [1, 2], "values_int64s": [7, 8]}, I64)])
def test_label_encoder_2(opset_attrs, elem):
    m = ml("LabelEncoder", [("x", I64, ["N", 3])], **opset_attrs)
    expect2(m, {"y": (elem, ["N", 3])}, run=elem != STR)


def test_label_encoder_4_tensor_values_and_1():
    keys = onnx.numpy_helper.from_array(np.array([1, 2], np.int64), "k")
    vals = onnx.numpy_helper.from_array(np.array([0.5, 1.5], np.float64), "v")
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, keys_tensor=keys,
                            values_tensor=vals, default_tensor=onnx.numpy_helper.from_array(
                                np.array([0.0]), "d"))
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", I64, ["N"])],
                          [helper.make_empty_tensor_value_info("y")])
    mp = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21),
                                             helper.make_opsetid(ML, 4)])
    mp.ir_version = 10
    m = onemodel.load(mp.SerializeToString())
    expect2(m, {"y": (D64, ["N"])})
    # opset 1 (the harness imports ai.onnx.ml 5, so build the opset-1 model by hand)
    mp.opset_import[1].version = 1
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, classes_strings=["a", "b"])
    mp.graph.ClearField("node")
    mp.graph.node.append(node)
    m1 = onemodel.load(mp.SerializeToString())
    expect2(m1, {"y": (STR, ["N"])}, run=False)
    out = Session(m1).run({"x": np.array([0, 1, 5], np.int64)})["y"]
    assert list(out) == ["a", "b", "_Unused"]


def test_label_encoder_contradiction():
    contradicts(ml("LabelEncoder", [("x", I64, ["N"])], keys_int64s=[1, 2],
                   values_int64s=[1]), "2 keys", "1 values")


_TREE = dict(nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
             nodes_values=[0.5, 0.0, 0.0], nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"],
             nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0])


@pytest.mark.parametrize("opset", [1, 3])
def test_tree_ensembles(opset):
    m = ml("TreeEnsembleRegressor", [("x", F, ["N", 2])], n_targets=2, target_treeids=[0, 0],
           target_nodeids=[1, 2], target_ids=[0, 1], target_weights=[1.0, 2.0], **_TREE)
    expect(m, ["N", 2], F)
    m = ml("TreeEnsembleClassifier", [("x", F, ["N", 2])], 2, class_treeids=[0, 0, 0],
           class_nodeids=[1, 2, 2], class_ids=[0, 1, 2], class_weights=[1.0, 1.0, 0.5],
           classlabels_int64s=[4, 5, 6], **_TREE)
    expect2(m, {"y0": (I64, ["N"]), "y1": (F, ["N", 3])})


def test_tree_ensemble_5():
    node = helper.make_node(
        "TreeEnsemble", ["x"], ["y"], domain=ML, n_targets=1, aggregate_function=1,
        nodes_featureids=[0], nodes_splits=onnx.numpy_helper.from_array(np.array([0.5])),
        nodes_modes=onnx.numpy_helper.from_array(np.array([0], np.uint8)),
        nodes_truenodeids=[0], nodes_trueleafs=[1], nodes_falsenodeids=[1],
        nodes_falseleafs=[1], tree_roots=[0], leaf_targetids=[0, 0],
        leaf_weights=onnx.numpy_helper.from_array(np.array([1.0, 2.0])))
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", D64, ["N", 2])],
                          [helper.make_empty_tensor_value_info("y")])
    mp = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21),
                                             helper.make_opsetid(ML, 5)])
    mp.ir_version = 10
    expect(onemodel.load(mp.SerializeToString()), ["N", 1], D64)


def test_svm_classifier():
    base = dict(kernel_type="LINEAR", classlabels_strings=["a", "b", "c"])
    m = ml("SVMClassifier", [("x", F, ["N", 2])], 2, coefficients=[0.1] * 6, **base)
    v = inferred(m)
    assert v["y0"].elem == STR and v["y0"].shape == (N,)
    assert v["y1"].elem == F and v["y1"].shape == (N, 3)
    # support vectors, no probabilities: the 3 pair decisions; int labels
    m = ml("SVMClassifier", [("x", F, ["N", 2])], 2, kernel_type="LINEAR",
           classlabels_ints=[0, 1, 2, 3], vectors_per_class=[1, 1, 1, 1],
           support_vectors=[0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.5, 0.5], coefficients=[1.0] * 12,
           rho=[0.0] * 6)
    expect2(m, {"y0": (I64, ["N"]), "y1": (F, ["N", 6])})


def _map_model(op, value_type, **attrs):
    node = helper.make_node(op, ["x"], ["y"], domain=ML, **attrs)
    g = helper.make_graph([node], "g", [helper.make_value_info("x", value_type)],
                          [helper.make_empty_tensor_value_info("y")])
    mp = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21),
                                             helper.make_opsetid(ML, 1)])
    mp.ir_version = 10
    return onemodel.load(mp.SerializeToString())


def test_zipmap():
    for attrs, key, sample in (({"classlabels_strings": ["a", "b"]}, STR, "a"),
                               ({"classlabels_int64s": [3, 4]}, I64, 3)):
        m = ml("ZipMap", [("x", F, ["N", 2])], **attrs)
        v = inferred(m)["y"]
        assert v.kind == "sequence" and v.inner.kind == "map" and v.inner.elem == key
        assert v.inner.inner.kind == "tensor" and v.inner.inner.elem == F
        got = Session(m).run({"x": np.ones((3, 2), np.float32)})["y"]
        assert len(got) == 3 and sample in got[0]
    contradicts(ml("ZipMap", [("x", F, ["N", 3])], classlabels_int64s=[1, 2]), "2 labels")


def test_cast_map_and_dict_vectorizer():
    map_t = helper.make_map_type_proto(I64, helper.make_tensor_type_proto(F, None))
    m = _map_model("CastMap", map_t, cast_to="TO_INT64", map_form="SPARSE", max_map=4)
    v = inferred(m)["y"]
    assert v.elem == I64 and v.shape == (1, 4)
    assert Session(m).run({"x": {1: 2.0, 3: 4.0}})["y"].shape == (1, 4)
    m = _map_model("CastMap", map_t, cast_to="TO_FLOAT")
    v = inferred(m)["y"]
    assert v.elem == F and v.shape == (1, None)
    m = _map_model("DictVectorizer", map_t, int64_vocabulary=[1, 2, 3])
    v = inferred(m)["y"]
    assert v.elem == F and v.shape == (1, 3)
    out = Session(m).run({"x": {1: np.float32(2.0)}})["y"]
    assert out.shape == (1, 3) and out.dtype == np.float32
    seq_t = helper.make_sequence_type_proto(
        helper.make_map_type_proto(STR, helper.make_tensor_type_proto(D64, None)))
    v = inferred(_map_model("DictVectorizer", seq_t, string_vocabulary=["a", "b"]))["y"]
    assert v.elem == D64 and v.shape == (None, 2)
