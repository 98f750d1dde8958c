"""Inference rules of the ``ai.onnx.ml`` operators (the kernels of
``onemodel/evaluate/kernels/ml.py``, same keys and versions).

The kernels read an input of rank 1 as one row and one of rank above 2 as ``[X[0], rest]``: the
row count ``N`` below is 1 for a 1-D input, else X's first extent. Element types that the
type constraints leave open are decided by attributes (ONNX-ML operator definitions):

* classifiers (LinearClassifier, SVMClassifier, TreeEnsembleClassifier): labels Y ``[N]``,
  string when ``classlabels_strings`` is set, else int64; scores Z float ``[N, C]`` with C the
  number of labels (LinearClassifier: 1 without labels; SVMClassifier with support vectors,
  more than two classes and no probabilities: the ``C * (C - 1) / 2`` pair decisions).
* regressors: LinearRegressor ``[N, targets]``, SVMRegressor ``[N, 1]``, TreeEnsembleRegressor
  ``[N, n_targets]``, float; TreeEnsemble ``[N, n_targets]`` in X's float type.
* LabelEncoder 1: strings to int64, integers to strings; 2 and 4: the type of the ``values_*``
  attribute (``values_tensor``'s element type); X's shape.
* ZipMap: ``seq(map(string or int64, float))`` by ``classlabels_strings`` / ``_int64s``.
* CastMap: ``[1, n]`` (DENSE: n the map's size, unknown; SPARSE: ``max_map``), float, string
  or int64 by ``cast_to``. DictVectorizer: ``[1 or ?, len(vocabulary)]`` in the map's value
  type.
* Normalizer ``[N, F]`` float; Scaler X's shape, float; Binarizer and Imputer X's shape and
  type; OneHotEncoder ``[..., len(cats)]`` float; ArrayFeatureExtractor X's shape with the last
  extent the number of indices (``[1, n]`` for a 1-D X); FeatureVectorizer
  ``[N, sum(inputdimensions)]`` float.

Contradictions (Clause 9.4): a rank-0 input where rows are needed, numbers of labels,
coefficients or features that do not fit.
"""

from __future__ import annotations

from ...operators import rule
from .. import dims as D
from ..value import Value
from ._util import int_attr, list_attr

ML = "ai.onnx.ml"
_FLOAT, _STRING, _INT64, _DOUBLE = 1, 8, 7, 11


def _rows(ctx, x):
    """(N, features) of the kernels' [N, F] view of ``x``; (None, None) when unknown."""
    s = x.shape if x is not None else None
    if s is None:
        return None, None
    if len(s) == 0:
        ctx.contradiction("the input is a scalar; rows of features are needed")
        return None, None
    if len(s) == 1:
        return 1, s[0]
    f = s[1]
    for d in s[2:]:
        f = D.mul(f, d) if f is not None and d is not None else None
    return s[0], f


def _label_elem(ctx, strings_name="classlabels_strings"):
    return _STRING if list_attr(ctx, strings_name) else _INT64


def _n_labels(ctx, ints_name, strings_name="classlabels_strings"):
    return len(list_attr(ctx, strings_name) or list_attr(ctx, ints_name, int))


def _classified(ctx, n, c):
    return (ctx.tensor([n], elem=_label_elem(ctx)), ctx.tensor([n, c], elem=_FLOAT, i=1))


@rule("LinearClassifier", domain=ML)
def linear_classifier(ctx, x):
    """LinearClassifier: Y [N] labels, Z [N, C] float (module doc)."""
    n, f = _rows(ctx, x)
    labels = _n_labels(ctx, "classlabels_ints")
    coefs = list_attr(ctx, "coefficients")
    if type(f) is int and f > 0 and len(coefs) % f:
        ctx.contradiction(f"{len(coefs)} coefficients do not fit {f} features")
    elif type(f) is int and f > 0:
        rows = len(coefs) // f
        if rows > 1 and labels != rows:
            ctx.contradiction(f"{labels} class labels for {rows} coefficient rows")
        elif rows == 1 and labels not in (0, 2):
            ctx.contradiction(f"a binary classifier has {labels} class labels; 2 are needed")
    return _classified(ctx, n, labels or 1)


@rule("LinearRegressor", domain=ML)
def linear_regressor(ctx, x):
    """LinearRegressor: [N, targets] float."""
    n, f = _rows(ctx, x)
    t = int_attr(ctx, "targets", 1)
    coefs = list_attr(ctx, "coefficients")
    if type(f) is int and t is not None and len(coefs) != t * f:
        ctx.contradiction(f"{len(coefs)} coefficients do not fit {t} targets and {f} features")
    return ctx.tensor([n, t], elem=_FLOAT)


@rule("Normalizer", domain=ML)
def normalizer(ctx, x):
    """Normalizer: [N, F] float."""
    n, f = _rows(ctx, x)
    return ctx.tensor(None if x is None or x.shape is None else [n, f], elem=_FLOAT)


def _same(x):
    return None if x is None or x.shape is None else list(x.shape)


@rule("Scaler", domain=ML)
def scaler(ctx, x):
    """Scaler: X's shape, float."""
    return ctx.tensor(_same(x), elem=_FLOAT)


@rule("Binarizer", domain=ML)
def binarizer(ctx, x):
    """Binarizer: X's shape and type."""
    return _same(x)


@rule("Imputer", domain=ML)
def imputer(ctx, x):
    """Imputer: X's shape and type."""
    return _same(x)


@rule("OneHotEncoder", domain=ML)
def one_hot_encoder(ctx, x):
    """OneHotEncoder: [..., len(cats)] float."""
    cats = list_attr(ctx, "cats_strings") or list_attr(ctx, "cats_int64s")
    s = _same(x)
    return ctx.tensor(None if s is None else s + [len(cats)], elem=_FLOAT)


@rule("ArrayFeatureExtractor", domain=ML)
def array_feature_extractor(ctx, x, y):
    """ArrayFeatureExtractor: X's shape, last extent the number of indices ([1, n] for 1-D)."""
    s = _same(x)
    if s is None:
        return None
    if not s:
        ctx.contradiction("X is a scalar; rank 1 or more is needed")
        return None
    k = None
    ys = y.shape if y is not None else None
    if ys is not None:
        k = 1
        for d in ys:
            k = D.mul(k, d) if k is not None and d is not None else None
    return [1, k] if len(s) == 1 else s[:-1] + [k]


@rule("FeatureVectorizer", domain=ML)
def feature_vectorizer(ctx, *inputs):
    """FeatureVectorizer: [N, sum(inputdimensions)] float."""
    dims = list_attr(ctx, "inputdimensions", int)
    if len(dims) != len(inputs):
        ctx.contradiction(f"{len(dims)} inputdimensions for {len(inputs)} inputs")
    n = None
    for x in inputs:
        if x is None or x.shape is None:
            continue
        r = 1 if len(x.shape) <= 1 else x.shape[0]
        n = ctx.unify(n, r, "batch sizes") if n is not None else r
    return ctx.tensor([n, sum(dims)], elem=_FLOAT)


@rule("ZipMap", domain=ML)
def zipmap(ctx, x):
    """ZipMap: seq(map(label type, float))."""
    n_labels = _n_labels(ctx, "classlabels_int64s")
    s = _same(x)
    if s is not None and s and type(s[-1]) is int and s[-1] != n_labels:
        ctx.contradiction(f"{n_labels} labels for {s[-1]} score columns")
    return Value.sequence(Value.map(_label_elem(ctx), Value.tensor(_FLOAT)))


_CAST_TO = {"TO_FLOAT": _FLOAT, "TO_STRING": _STRING, "TO_INT64": _INT64}


@rule("CastMap", domain=ML)
def cast_map(ctx, x):
    """CastMap: [1, n] of the ``cast_to`` type."""
    to = ctx.attr("cast_to")
    elem = _CAST_TO.get(to) if isinstance(to, str) else None
    width = int_attr(ctx, "max_map", 1) if ctx.attr("map_form") == "SPARSE" else None
    return ctx.tensor([1, width], elem=elem)


@rule("DictVectorizer", domain=ML)
def dict_vectorizer(ctx, x):
    """DictVectorizer: [1 (a map) or ? (a sequence of maps), len(vocabulary)], value type."""
    vocab = list_attr(ctx, "string_vocabulary") or list_attr(ctx, "int64_vocabulary")
    rows, inner = None, None
    if x is not None and x.kind == "map":
        rows, inner = 1, x.inner
    elif x is not None and x.kind == "sequence" and x.inner is not None \
            and x.inner.kind == "map":
        inner = x.inner.inner
    elem = inner.elem if inner is not None and inner.kind == "tensor" else None
    return ctx.tensor([rows, len(vocab)], elem=elem)


@rule("LabelEncoder", domain=ML)
def label_encoder1(ctx, x):
    """LabelEncoder 1: strings -> int64, int64 -> strings; X's shape."""
    elem = None
    if x is not None and x.elem is not None:
        elem = _INT64 if x.elem == _STRING else _STRING
    return ctx.tensor(_same(x), elem=elem)


def _tensor_attr_elem(ctx, name):
    """The element type of TENSOR attribute ``name`` (read from the record, not decoded)."""
    for a in ctx.node.attributes:
        if a.name == name and a.t is not None:
            return a.t.data_type or None
    return None


@rule("LabelEncoder", domain=ML, since=2)
def label_encoder(ctx, x):
    """LabelEncoder 2 and 4: X's shape, the ``values_*`` attribute's type."""
    elem = None
    if ctx.has_attr("values_strings"):
        elem = _STRING
    elif ctx.has_attr("values_int64s"):
        elem = _INT64
    elif ctx.has_attr("values_floats"):
        elem = _FLOAT
    elif ctx.has_attr("values_tensor"):
        elem = _tensor_attr_elem(ctx, "values_tensor")
    keys = next((list_attr(ctx, n) for n in ("keys_strings", "keys_int64s", "keys_floats")
                 if ctx.has_attr(n)), None)
    values = next((list_attr(ctx, n) for n in ("values_strings", "values_int64s",
                                               "values_floats") if ctx.has_attr(n)), None)
    if keys is not None and values is not None and len(keys) != len(values):
        ctx.contradiction(f"{len(keys)} keys and {len(values)} values")
    return ctx.tensor(_same(x), elem=elem)


@rule("TreeEnsembleRegressor", domain=ML)
def tree_ensemble_regressor(ctx, x):
    """TreeEnsembleRegressor: [N, n_targets] float."""
    n, _ = _rows(ctx, x)
    return ctx.tensor([n, int_attr(ctx, "n_targets", 1)], elem=_FLOAT)


@rule("TreeEnsembleClassifier", domain=ML)
def tree_ensemble_classifier(ctx, x):
    """TreeEnsembleClassifier: Y [N] labels, Z [N, C] float, C the number of labels."""
    n, _ = _rows(ctx, x)
    c = _n_labels(ctx, "classlabels_int64s")
    if not c:
        ctx.contradiction("no class labels")
    return (ctx.tensor([n], elem=_label_elem(ctx)),
            ctx.tensor([n, c or None], elem=_FLOAT, i=1))


@rule("TreeEnsemble", domain=ML)
def tree_ensemble(ctx, x):
    """TreeEnsemble: [N, n_targets] in X's float type (float for others)."""
    n, _ = _rows(ctx, x)
    elem = x.elem if x is not None and x.elem in (_FLOAT, _DOUBLE, 10) else (
        _FLOAT if x is not None and x.elem is not None else None)
    return ctx.tensor([n, int_attr(ctx, "n_targets")], elem=elem)


@rule("SVMRegressor", domain=ML)
def svm_regressor(ctx, x):
    """SVMRegressor: [N, 1] float."""
    n, _ = _rows(ctx, x)
    return ctx.tensor([n, 1], elem=_FLOAT)


@rule("SVMClassifier", domain=ML)
def svm_classifier(ctx, x):
    """SVMClassifier: Y [N] labels, Z [N, C] float (module doc)."""
    n, _ = _rows(ctx, x)
    c = _n_labels(ctx, "classlabels_ints")
    cols = c
    if list_attr(ctx, "vectors_per_class") and not list_attr(ctx, "prob_a") and c > 2:
        cols = c * (c - 1) // 2
    return _classified(ctx, n, cols or None)
