"""ai.onnx.ml kernels (onemodel/evaluate/kernels/ml_linear.py, ml_trees.py, ml_features.py):
scikit-learn models converted with skl2onnx and small hand-built models, compared with the exact
float64 result of the operators' definitions (exact_ml.py, node by node over the graph) within a
stated bound of float32 roundings; labels, integers and strings exactly."""

from __future__ import annotations

import warnings

import exact_ml
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper
from onnx import numpy_helper as nh
from oracle import assert_close_to_exact, assert_outputs, node_model, ort, ours

ML = "ai.onnx.ml"


@pytest.fixture(scope="module")
def iris():
    from sklearn.datasets import load_iris

    x, y = load_iris(return_X_y=True)
    return x.astype(np.float32), y


def _sklearn_models():
    from sklearn.ensemble import (
        GradientBoostingClassifier,
        RandomForestClassifier,
        RandomForestRegressor,
    )
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import Normalizer, StandardScaler
    from sklearn.svm import SVC, SVR
    from sklearn.tree import DecisionTreeClassifier

    # name -> (estimator, target, ulps): ulps counts the float32 roundings on an output's longest
    # path through the converted graph, node by node:
    #   scaler+logreg: Scaler 2, 4 products and 4 sums 8, SOFTMAX 5, L1 Normalizer 3
    #   logreg-binary: 8 for the scores, LOGISTIC 3
    #   logreg-strings: 8 for the scores, SOFTMAX 5, L1 Normalizer 3
    #   normalizer+logreg: L2 Normalizer 9, scores 8, SOFTMAX 5, L1 Normalizer 3
    #   random-forest: 5 trees: 4 sums
    #   random-forest-binary: 4 sums, 1 - p
    #   tree-strings: one tree: a stored weight, selected
    #   gradient-boosting: 5 trees and the base value: 5 sums, SOFTMAX 5
    #   gradient-boosting-binary: 5 sums, LOGISTIC 3, 1 - p
    #   forest-regressor: 4 trees: 3 sums, a division
    #   linear-regression: 4 products, 4 sums
    #   svc-probability: RBF 13 (4 differences, 4 squares, 3 sums, gamma, exp), decisions over
    #     60 vectors 121, Platt 5, the coupling's passes 40
    #   svc-binary: RBF 13, the decision over 61 vectors 123
    #   svr: RBF 13, the sum over 51 vectors 103
    return {
        "scaler+logreg": (lambda: Pipeline([("s", StandardScaler()),
                                            ("lr", LogisticRegression(max_iter=500))]), "y", 18),
        "logreg-binary": (lambda: LogisticRegression(max_iter=500), "binary", 11),
        "logreg-strings": (lambda: LogisticRegression(max_iter=500), "strings", 16),
        "normalizer+logreg": (lambda: Pipeline([("n", Normalizer("l2")),
                                                ("lr", LogisticRegression())]), "y", 25),
        "random-forest": (lambda: RandomForestClassifier(n_estimators=5, max_depth=4,
                                                         random_state=0), "y", 4),
        "random-forest-binary": (lambda: RandomForestClassifier(n_estimators=5, max_depth=4,
                                                                random_state=0), "binary", 5),
        "tree-strings": (lambda: DecisionTreeClassifier(max_depth=3, random_state=0), "strings",
                         0),
        "gradient-boosting": (lambda: GradientBoostingClassifier(n_estimators=5,
                                                                 random_state=0), "y", 10),
        "gradient-boosting-binary": (lambda: GradientBoostingClassifier(n_estimators=5,
                                                                        random_state=0),
                                     "binary", 9),
        "forest-regressor": (lambda: RandomForestRegressor(n_estimators=4, max_depth=4,
                                                           random_state=0), "regression", 4),
        "linear-regression": (lambda: LinearRegression(), "regression", 8),
        "svc-probability": (lambda: SVC(probability=True, random_state=0), "y", 180),
        "svc-binary": (lambda: SVC(), "binary", 136),
        "svr": (lambda: SVR(), "regression", 116),
    }


@pytest.mark.parametrize("name", list(_sklearn_models()))
def test_skl2onnx_model_matches_the_exact_chain(iris, name):
    from skl2onnx import to_onnx

    x, y = iris
    make, target, ulps = _sklearn_models()[name]
    t = {"y": y, "binary": y == 1, "strings": np.array(["setosa", "versicolor", "virginica"])[y],
         "regression": x[:, 0] * 2 + x[:, 1]}[target]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make().fit(x, t)
        onx = to_onnx(model, x[:1], target_opset={"": 17, ML: 3})
    feeds = {onx.graph.input[0].name: x[::5]}
    got = ours(onx, feeds)
    _assert_exact(got, onx, feeds, ulps)
    if len(got) == 2 and isinstance(got[1], list):  # ZipMap: one dict per row
        assert len(got[1]) == len(x[::5]) and isinstance(got[1][0], dict)
        if name != "svc-binary":  # decision values there, probabilities elsewhere
            assert np.allclose(sum(got[1][0].values()), 1.0, atol=1e-5)


def test_pipeline_labels_equal_sklearn_predict(iris):
    from skl2onnx import to_onnx
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = iris
    pipe = Pipeline([("s", StandardScaler()), ("lr", LogisticRegression(max_iter=500))]).fit(x, y)
    onx = to_onnx(pipe, x[:1], target_opset={"": 17, ML: 3})
    label, probs = ours(onx, {"X": x})
    np.testing.assert_array_equal(label, pipe.predict(x))
    np.testing.assert_allclose([[p[k] for k in (0, 1, 2)] for p in probs],
                               pipe.predict_proba(x), rtol=1e-4, atol=1e-5)


X3 = np.array([[1, -2, 0.5], [0.5, 0.3, -1], [-1, -1, 2], [0, np.nan, 1]], np.float32)


def _float32_maps(rows):
    """A ZipMap output (one dict per row) with its float values as np.float32, after checking
    that each is a float32 value (ZipMap's values are tensor(float) scores)."""
    out = []
    for row in rows:
        assert all(float(np.float32(v)) == v for v in row.values()), row
        out.append({k: np.float32(v) for k, v in row.items()})
    return out


def _assert_exact(got, model, feeds, ulps):
    """Every output of ``got`` (onemodel's) is within ``ulps * EPS32 * magnitude`` of the exact
    float64 chain of exact_ml (its running error magnitude as ``scale``); labels, integers and
    strings exactly. ``ulps``: the float32 roundings on an output's longest path."""
    exact, scales = exact_ml.run(model, feeds, magnitudes=True)
    assert len(got) == len(exact)
    for i, (g, e, m) in enumerate(zip(got, exact, scales)):
        if isinstance(e, list):  # ZipMap: one dict per row
            assert isinstance(g, list) and len(g) == len(e), f"output {i}"
            for r, (gr, er, mr) in enumerate(zip(_float32_maps(g), e, m)):
                assert set(gr) == set(er), f"output {i}[{r}] keys"
                for k in er:
                    assert_close_to_exact(gr[k], er[k], ulps=ulps, scale=mr[k],
                                          path=f"output {i}[{r}][{k!r}]")
        else:
            assert_close_to_exact(g, e, ulps=ulps, scale=m, path=f"output {i}")
    return exact


def _check(op, feeds, ins, outs, opset=1, *, ulps=0, **attrs):
    """One ``op`` node on ``feeds``: onemodel's outputs against exact_ml's (see _assert_exact;
    ``ulps`` 0 where every float output is data movement or a comparison: exact)."""
    model = node_model(op, feeds, ins, outs, opset=opset, domain=ML, **attrs)
    got = ours(model, feeds)
    _assert_exact(got, model, feeds, ulps)
    return got


#: float32 roundings of a linear model's outputs on 2 features: 2 products and 2 sums (with the
#: intercept), then the transform's own: LOGISTIC exp, add, divide (3); SOFTMAX over 3 scores
#: subtract, exp, 2 sums, divide (5); PROBIT's closed form 14 (2p - 1, 1 -+ x, product, log,
#: v, w / a, v * v, difference, sqrt, -v +, sqrt, sign, sqrt(2)); one more for 1 - p.
LINEAR_ULPS = {"NONE": 5, "LOGISTIC": 8, "SOFTMAX": 9, "SOFTMAX_ZERO": 9, "PROBIT": 19}


@pytest.mark.parametrize("transform", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
@pytest.mark.parametrize("labels", [{"classlabels_ints": [3, 7]},
                                    {"classlabels_strings": ["no", "yes"]}, {}])
def test_linear_classifier_binary_one_coefficient_row(transform, labels):
    x = X3[:3, :2]
    y, z = _check("LinearClassifier", {"X": x}, ["X"], ["Y", "Z"], coefficients=[0.4, 0.2],
                  intercepts=[0.1], post_transform=transform, ulps=LINEAR_ULPS[transform],
                  **labels)
    assert z.shape == (3, 2 if labels else 1)


@pytest.mark.parametrize("transform", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"])
def test_linear_classifier_and_regressor_post_transforms(transform):
    x = X3[:3, :2]
    _check("LinearClassifier", {"X": x}, ["X"], ["Y", "Z"],
           coefficients=[0.4, 0.2, -1, 0, 0.3, 0.3], intercepts=[0.1, 0, 0.2],
           classlabels_ints=[4, 5, 6], post_transform=transform, ulps=LINEAR_ULPS[transform])
    _check("LinearRegressor", {"X": x}, ["X"], ["Y"], coefficients=[0.4, 0.2, -1, 0],
           intercepts=[0.1, 0.3], targets=2, post_transform=transform,
           ulps=LINEAR_ULPS[transform])


def test_probit_is_the_normal_quantile_to_its_closed_form():
    """PROBIT (Winitzki's closed form for erfinv, as onnxruntime computes it) is within 2e-3,
    relative, of the true inverse normal CDF on [1e-6, 1 - 1e-6] (scipy's ndtri), and equal to
    the exact closed form within its roundings (a product and a sum, then 14)."""
    from scipy.special import ndtri

    p = np.array([[1e-6], [1e-3], [0.1], [0.3], [0.49], [0.51], [0.8], [0.999], [1 - 1e-6]],
                 np.float32)
    (y,) = _check("LinearRegressor", {"X": p}, ["X"], ["Y"], coefficients=[1.0],
                  post_transform="PROBIT", ulps=16)
    q = ndtri(p.astype(np.float64))
    assert (np.abs(y - q) <= 2e-3 * np.abs(q)).all()
    assert exact_ml.probit_vs_normal_quantile(p.astype(np.float64)).max() <= 2e-3


def test_preprocessing_operators():
    x = np.array([[1, -2, 3], [0, 0, 0], [-1, -1, -4]], np.float32)
    for norm in ("MAX", "L1", "L2"):
        # L2 on 3 features: 3 squares, 2 sums, sqrt, divide (7); L1 3, MAX 1
        _check("Normalizer", {"X": x}, ["X"], ["Y"], norm=norm, ulps=7)
    (y,) = _check("Scaler", {"X": x}, ["X"], ["Y"], offset=[1.0, 2.0, 0.0], scale=[0.5, 3.0, 1.0],
                  ulps=2)  # subtract, multiply
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
    # two trees: one sum, the base value, AVERAGE's division (MIN / MAX: the base value only)
    _check("TreeEnsembleRegressor", {"X": XT}, ["X"], ["Y"], opset=3, ulps=3, **attrs)


@pytest.mark.parametrize("transform", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
def test_tree_classifiers_multiclass_and_binary(transform):
    # two trees: one sum and the base value, then LOGISTIC (3) and 1 - p, or SOFTMAX (5)
    ulps = {"NONE": 3, "LOGISTIC": 6, "SOFTMAX": 7, "SOFTMAX_ZERO": 7}[transform]
    attrs = _two_trees()
    attrs.update(class_treeids=[t for t, _ in LEAVES] + [1],
                 class_nodeids=[n for _, n in LEAVES] + [1], class_ids=[0, 1, 2, 1, 0, 2],
                 class_weights=[0.5, 0.2, 0.9, 0.4, 0.1, 0.3], classlabels_int64s=[10, 20, 30],
                 post_transform=transform, base_values=[0.1, 0.2, -0.3])
    _check("TreeEnsembleClassifier", {"X": XT}, ["X"], ["Y", "Z"], opset=3, ulps=ulps, **attrs)
    for weights in ([0.5, 0.2, 0.9, 0.4, 0.1], [0.5, -0.2, 0.9, -0.4, 0.1]):
        attrs = _two_trees()
        attrs.update(class_treeids=[t for t, _ in LEAVES], class_nodeids=[n for _, n in LEAVES],
                     class_ids=[0] * 5, class_weights=weights, classlabels_strings=["n", "y"],
                     post_transform=transform)
        _check("TreeEnsembleClassifier", {"X": XT}, ["X"], ["Y", "Z"], opset=3, ulps=ulps,
               **attrs)
    attrs = _two_trees()
    attrs.update(class_treeids=[t for t, _ in LEAVES] * 2, class_nodeids=[n for _, n in LEAVES] * 2,
                 class_ids=[0] * 5 + [1] * 5,
                 class_weights=[0.5, 0.2, 0.9, 0.4, 0.1, 0.5, 0.8, 0.1, 0.6, 0.9],
                 classlabels_int64s=[0, 1], post_transform=transform)
    _check("TreeEnsembleClassifier", {"X": XT}, ["X"], ["Y", "Z"], opset=3, ulps=ulps, **attrs)


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
    # two trees: one sum, AVERAGE's division
    _check("TreeEnsemble", {"X": x}, ["X"], ["Y"], opset=5, ulps=2, **attrs)


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
