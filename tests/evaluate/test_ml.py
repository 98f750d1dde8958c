"""ai.onnx.ml kernels (onemodel/evaluate/kernels/ml.py): scikit-learn models converted with
skl2onnx and small hand-built models, compared with onnxruntime."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper
from onnx import numpy_helper as nh

from oracle import F32_ORACLE as F32
from oracle import assert_outputs, node_model, ort, ours

ML = "ai.onnx.ml"


@pytest.fixture(scope="module")
def iris():
    from sklearn.datasets import load_iris

    x, y = load_iris(return_X_y=True)
    return x.astype(np.float32), y


def _sklearn_models():
    from sklearn.ensemble import (GradientBoostingClassifier, RandomForestClassifier,
                                  RandomForestRegressor)
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import Normalizer, StandardScaler
    from sklearn.svm import SVC, SVR
    from sklearn.tree import DecisionTreeClassifier

    return {
        "scaler+logreg": (lambda: Pipeline([("s", StandardScaler()),
                                            ("lr", LogisticRegression(max_iter=500))]), "y"),
        "logreg-binary": (lambda: LogisticRegression(max_iter=500), "binary"),
        "logreg-strings": (lambda: LogisticRegression(max_iter=500), "strings"),
        "normalizer+logreg": (lambda: Pipeline([("n", Normalizer("l2")),
                                                ("lr", LogisticRegression())]), "y"),
        "random-forest": (lambda: RandomForestClassifier(n_estimators=5, max_depth=4,
                                                         random_state=0), "y"),
        "random-forest-binary": (lambda: RandomForestClassifier(n_estimators=5, max_depth=4,
                                                                random_state=0), "binary"),
        "tree-strings": (lambda: DecisionTreeClassifier(max_depth=3, random_state=0), "strings"),
        "gradient-boosting": (lambda: GradientBoostingClassifier(n_estimators=5,
                                                                 random_state=0), "y"),
        "gradient-boosting-binary": (lambda: GradientBoostingClassifier(n_estimators=5,
                                                                        random_state=0),
                                     "binary"),
        "forest-regressor": (lambda: RandomForestRegressor(n_estimators=4, max_depth=4,
                                                           random_state=0), "regression"),
        "linear-regression": (lambda: LinearRegression(), "regression"),
        "svc-probability": (lambda: SVC(probability=True, random_state=0), "y"),
        "svc-binary": (lambda: SVC(), "binary"),
        "svr": (lambda: SVR(), "regression"),
    }


@pytest.mark.parametrize("name", list(_sklearn_models()))
def test_skl2onnx_model_matches_onnxruntime(iris, name):
    from skl2onnx import to_onnx

    x, y = iris
    make, target = _sklearn_models()[name]
    t = {"y": y, "binary": y == 1, "strings": np.array(["setosa", "versicolor", "virginica"])[y],
         "regression": x[:, 0] * 2 + x[:, 1]}[target]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make().fit(x, t)
        onx = to_onnx(model, x[:1], target_opset={"": 17, ML: 3})
    feeds = {onx.graph.input[0].name: x[::5]}
    got = ours(onx, feeds)
    assert_outputs(got, ort(onx, feeds,
        relies_on=F32.format(what="tree thresholds are comparisons; linear and probability outputs "
                                  "are short float32 sums")), rtol=1e-4, atol=1e-5)
    if len(got) == 2 and isinstance(got[1], list):  # ZipMap: one dict per row
        assert len(got[1]) == len(x[::5]) and isinstance(got[1][0], dict)
        if name != "svc-binary":  # decision values there, probabilities elsewhere
            assert np.allclose(sum(got[1][0].values()), 1.0, atol=1e-5)


def test_pipeline_labels_equal_sklearn_predict(iris):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler
    from skl2onnx import to_onnx

    x, y = iris
    pipe = Pipeline([("s", StandardScaler()), ("lr", LogisticRegression(max_iter=500))]).fit(x, y)
    onx = to_onnx(pipe, x[:1], target_opset={"": 17, ML: 3})
    label, probs = ours(onx, {"X": x})
    np.testing.assert_array_equal(label, pipe.predict(x))
    np.testing.assert_allclose([[p[k] for k in (0, 1, 2)] for p in probs],
                               pipe.predict_proba(x), rtol=1e-4, atol=1e-5)


X3 = np.array([[1, -2, 0.5], [0.5, 0.3, -1], [-1, -1, 2], [0, np.nan, 1]], np.float32)


def _check(op, feeds, ins, outs, opset=1, **attrs):
    model = node_model(op, feeds, ins, outs, opset=opset, domain=ML, **attrs)
    got = ours(model, feeds)
    assert_outputs(got, ort(model, feeds,
        relies_on=F32.format(what="ai.onnx.ml scalers, normalizers, linear "
                                  "models on 3 features")), rtol=1e-4, atol=1e-5)
    return got


@pytest.mark.parametrize("transform", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
@pytest.mark.parametrize("labels", [{"classlabels_ints": [3, 7]},
                                    {"classlabels_strings": ["no", "yes"]}, {}])
def test_linear_classifier_binary_one_coefficient_row(transform, labels):
    x = X3[:3, :2]
    y, z = _check("LinearClassifier", {"X": x}, ["X"], ["Y", "Z"], coefficients=[0.4, 0.2],
                  intercepts=[0.1], post_transform=transform, **labels)
    assert z.shape == (3, 2 if labels else 1)


@pytest.mark.parametrize("transform", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"])
def test_linear_classifier_and_regressor_post_transforms(transform):
    x = X3[:3, :2]
    _check("LinearClassifier", {"X": x}, ["X"], ["Y", "Z"],
           coefficients=[0.4, 0.2, -1, 0, 0.3, 0.3], intercepts=[0.1, 0, 0.2],
           classlabels_ints=[4, 5, 6], post_transform=transform)
    _check("LinearRegressor", {"X": x}, ["X"], ["Y"], coefficients=[0.4, 0.2, -1, 0],
           intercepts=[0.1, 0.3], targets=2, post_transform=transform)


def test_preprocessing_operators():
    x = np.array([[1, -2, 3], [0, 0, 0], [-1, -1, -4]], np.float32)
    for norm in ("MAX", "L1", "L2"):
        _check("Normalizer", {"X": x}, ["X"], ["Y"], norm=norm)
    (y,) = _check("Scaler", {"X": x}, ["X"], ["Y"], offset=[1.0, 2.0, 0.0], scale=[0.5, 3.0, 1.0])
    np.testing.assert_allclose(y[0], [0.0, -12.0, 3.0])
    (y,) = _check("Binarizer", {"X": x}, ["X"], ["Y"], threshold=0.5)
    np.testing.assert_array_equal(y[0], [1, 0, 1])
    _check("Imputer", {"X": np.array([[1, np.nan], [np.nan, 3]], np.float32)}, ["X"], ["Y"],
           imputed_value_floats=[7.0, 8.0], replaced_value_float=float("nan"))
    _check("Imputer", {"X": np.array([[1, -1], [-1, 3]], np.int64)}, ["X"], ["Y"],
           imputed_value_int64s=[9], replaced_value_int64=-1)
    (y,) = _check("OneHotEncoder", {"X": np.array([[1, 3], [2, 8]], np.int64)}, ["X"], ["Y"],
                  cats_int64s=[1, 2, 3])
    assert y.shape == (2, 2, 3) and y[1, 1].tolist() == [0, 0, 0]
    _check("OneHotEncoder", {"X": np.array(["a", "z", "c"], object)}, ["X"], ["Y"],
           cats_strings=["a", "b", "c"])
    _check("ArrayFeatureExtractor", {"X": np.arange(12, dtype=np.float32).reshape(3, 4),
                                     "I": np.array([3, 0], np.int64)}, ["X", "I"], ["Y"])
    _check("ArrayFeatureExtractor", {"X": np.array([["a", "b"], ["c", "d"]], object),
                                     "I": np.array([1], np.int64)}, ["X", "I"], ["Y"])
    (y,) = _check("FeatureVectorizer", {"A": np.array([[1, 2, 9], [3, 4, 9]], np.int64),
                                        "B": np.array([[5], [6]], np.int64)}, ["A", "B"], ["Y"],
                  inputdimensions=[2, 3])
    np.testing.assert_array_equal(y, [[1, 2, 5, 0, 0], [3, 4, 6, 0, 0]])


def test_label_encoder_versions():
    _check("LabelEncoder", {"X": np.array(["a", "b", "zz"], object)}, ["X"], ["Y"],
           classes_strings=["b", "a"], default_int64=42)
    _check("LabelEncoder", {"X": np.array([1, 0, 5], np.int64)}, ["X"], ["Y"],
           classes_strings=["b", "a"], default_string="?")
    _check("LabelEncoder", {"X": np.array(["a", "b", "zz"], object)}, ["X"], ["Y"], opset=2,
           keys_strings=["a", "b"], values_floats=[0.5, 1.5], default_float=-1.0)
    nan_in = {"X": np.array([1.0, np.nan, 3.0], np.float32)}
    (y2,) = _check("LabelEncoder", nan_in, ["X"], ["Y"], opset=2, keys_floats=[1.0, float("nan")],
                   values_strings=["one", "nan"], default_string="d")
    (y4,) = _check("LabelEncoder", nan_in, ["X"], ["Y"], opset=4,
                   keys_tensor=nh.from_array(np.array([1.0, np.nan], np.float32)),
                   values_tensor=nh.from_array(np.array(["one", "nan"], object)),
                   default_tensor=nh.from_array(np.array(["d"], object)))
    assert y2.tolist() == ["one", "d", "d"] and y4.tolist() == ["one", "nan", "d"]


def test_zipmap_castmap_dictvectorizer():
    (z,) = _check("ZipMap", {"X": np.array([[0.1, 0.9], [0.3, 0.7]], np.float32)}, ["X"], ["Z"],
                  classlabels_int64s=[3, 1])
    assert list(z[0]) == [3, 1] and abs(z[1][1] - 0.7) < 1e-6

    def map_info(key, value):
        return helper.make_value_info("M", helper.make_map_type_proto(
            key, helper.make_tensor_type_proto(value, None)))

    cases = [
        ("CastMap", map_info(TP.INT64, TP.FLOAT), {3: 1.5, 1: 2.5}, {"cast_to": "TO_FLOAT"}),
        ("CastMap", map_info(TP.INT64, TP.FLOAT), {3: 1.5, 1: 2.5}, {"cast_to": "TO_STRING"}),
        ("CastMap", map_info(TP.INT64, TP.FLOAT), {3: 1.5, 1: 2.5}, {"cast_to": "TO_INT64"}),
        ("CastMap", map_info(TP.INT64, TP.FLOAT), {3: 1.5, 1: 2.5},
         {"cast_to": "TO_FLOAT", "map_form": "SPARSE", "max_map": 5}),
        ("DictVectorizer", map_info(TP.STRING, TP.FLOAT), {"b": 1.5, "zz": 2.5, "a": 3.0},
         {"string_vocabulary": ["a", "b", "c"]}),
        ("DictVectorizer", map_info(TP.INT64, TP.FLOAT), {4: 1.5, 2: 2.5},
         {"int64_vocabulary": [2, 3, 4]}),
    ]
    for op_type, info, value, attrs in cases:
        model = node_model(op_type, {}, ["M"], ["Y"], domain=ML, opset=1, infos={"M": info},
                           **attrs)
        assert_outputs(ours(model, {"M": value}), ort(model, {"M": value},
            relies_on="CastMap and DictVectorizer move map values into a tensor (data movement)"))


def _two_trees(modes=("BRANCH_LEQ", "BRANCH_LT", "LEAF", "LEAF", "LEAF", "BRANCH_GT", "LEAF",
                      "LEAF")):
    """Tree 0: x0 <= .25 ? (x1 < 0 ? leaf 3 : leaf 4) : leaf 2; tree 1: x2 > .1 ? 1 : 2.
    NaN in x1 goes to the true branch."""
    return dict(
        nodes_treeids=[0, 0, 0, 0, 0, 1, 1, 1], nodes_nodeids=[0, 1, 2, 3, 4, 0, 1, 2],
        nodes_featureids=[0, 1, 0, 0, 0, 2, 0, 0], nodes_modes=list(modes),
        nodes_values=[0.25, 0.0, 0, 0, 0, 0.1, 0, 0], nodes_truenodeids=[1, 3, 0, 0, 0, 1, 0, 0],
        nodes_falsenodeids=[2, 4, 0, 0, 0, 2, 0, 0],
        nodes_missing_value_tracks_true=[0, 1, 0, 0, 0, 1, 0, 0])


LEAVES = [(0, 2), (0, 3), (0, 4), (1, 1), (1, 2)]
XT = np.random.default_rng(0).standard_normal((30, 3)).astype(np.float32)
XT[::5, 1] = np.nan
XT[3, 0] = 0.25


@pytest.mark.parametrize("agg", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize("modes", [
    ("BRANCH_LEQ", "BRANCH_LT", "LEAF", "LEAF", "LEAF", "BRANCH_GT", "LEAF", "LEAF"),
    ("BRANCH_GTE", "BRANCH_EQ", "LEAF", "LEAF", "LEAF", "BRANCH_NEQ", "LEAF", "LEAF")])
def test_tree_regressor_aggregates_modes_and_missing_values(agg, modes):
    attrs = _two_trees(modes)
    attrs.update(target_treeids=[t for t, _ in LEAVES] + [0],
                 target_nodeids=[n for _, n in LEAVES] + [3], target_ids=[0, 1, 0, 1, 0, 1],
                 target_weights=[1.5, -2.0, 3.0, 0.5, -1.0, 4.0], n_targets=2,
                 aggregate_function=agg, base_values=[0.1, -0.2])
    _check("TreeEnsembleRegressor", {"X": XT}, ["X"], ["Y"], opset=3, **attrs)


@pytest.mark.parametrize("transform", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
def test_tree_classifiers_multiclass_and_binary(transform):
    attrs = _two_trees()
    attrs.update(class_treeids=[t for t, _ in LEAVES] + [1],
                 class_nodeids=[n for _, n in LEAVES] + [1], class_ids=[0, 1, 2, 1, 0, 2],
                 class_weights=[0.5, 0.2, 0.9, 0.4, 0.1, 0.3], classlabels_int64s=[10, 20, 30],
                 post_transform=transform, base_values=[0.1, 0.2, -0.3])
    _check("TreeEnsembleClassifier", {"X": XT}, ["X"], ["Y", "Z"], opset=3, **attrs)
    for weights in ([0.5, 0.2, 0.9, 0.4, 0.1], [0.5, -0.2, 0.9, -0.4, 0.1]):
        attrs = _two_trees()
        attrs.update(class_treeids=[t for t, _ in LEAVES], class_nodeids=[n for _, n in LEAVES],
                     class_ids=[0] * 5, class_weights=weights, classlabels_strings=["n", "y"],
                     post_transform=transform)
        _check("TreeEnsembleClassifier", {"X": XT}, ["X"], ["Y", "Z"], opset=3, **attrs)
    attrs = _two_trees()
    attrs.update(class_treeids=[t for t, _ in LEAVES] * 2, class_nodeids=[n for _, n in LEAVES] * 2,
                 class_ids=[0] * 5 + [1] * 5,
                 class_weights=[0.5, 0.2, 0.9, 0.4, 0.1, 0.5, 0.8, 0.1, 0.6, 0.9],
                 classlabels_int64s=[0, 1], post_transform=transform)
    _check("TreeEnsembleClassifier", {"X": XT}, ["X"], ["Y", "Z"], opset=3, **attrs)


@pytest.mark.parametrize("agg", [0, 1, 2, 3])
def test_tree_ensemble_5_with_membership_and_leaf_roots(agg):
    x = XT.copy()
    x[1, 1], x[2, 1] = 2.0, 3.0
    attrs = dict(nodes_featureids=[0, 1, 2], nodes_modes=nh.from_array(np.array([0, 6, 3],
                                                                                np.uint8)),
                 nodes_splits=nh.from_array(np.array([0.0, 0.0, 0.5], np.float32)),
                 nodes_truenodeids=[1, 1, 3], nodes_trueleafs=[0, 1, 1],
                 nodes_falsenodeids=[0, 2, 3], nodes_falseleafs=[1, 1, 1],
                 nodes_missing_value_tracks_true=[1, 0, 0],
                 membership_values=nh.from_array(np.array([2.0, 3.0, np.nan], np.float32)),
                 leaf_targetids=[0, 1, 0, 1],
                 leaf_weights=nh.from_array(np.array([1.0, 2.0, -3.0, 0.5], np.float32)),
                 n_targets=2, tree_roots=[0, 2], aggregate_function=agg)
    _check("TreeEnsemble", {"X": x}, ["X"], ["Y"], opset=5, **attrs)


def test_tree_with_a_cycle_is_invalid_model():
    from onemodel.errors import InvalidModelError

    attrs = dict(nodes_treeids=[0, 0], nodes_nodeids=[0, 1], nodes_featureids=[0, 0],
                 nodes_modes=["BRANCH_LEQ", "BRANCH_LEQ"], nodes_values=[0.0, 0.0],
                 nodes_truenodeids=[1, 0], nodes_falsenodeids=[1, 0], target_treeids=[0],
                 target_nodeids=[1], target_ids=[0], target_weights=[1.0], n_targets=1)
    model = node_model("TreeEnsembleRegressor", {"X": XT}, ["X"], ["Y"], opset=3, domain=ML,
                       **attrs)
    with pytest.raises(InvalidModelError):
        ours(model, {"X": XT})
