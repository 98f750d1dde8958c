"""Inference rules of the preprocessing and encoding operators of the ``ai.onnx.ml`` domain (the
kernels of ``onemodel/evaluate/kernels/ml_features.py``, same keys and versions).

The kernels read an input of rank 1 as one row and one of rank above 2 as ``[X[0], rest]``: the
row count ``N`` below is 1 for a 1-D input, else X's first extent. Element types that the type
constraints leave open are decided by attributes (ONNX-ML operator definitions Normalizer-1,
Scaler-1, Binarizer-1, Imputer-1, OneHotEncoder-1, ArrayFeatureExtractor-1, FeatureVectorizer-1,
ZipMap-1, CastMap-1, DictVectorizer-1, LabelEncoder-1, 2 and 4):

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

Contradictions (Clause 9.4): a rank-0 input where rows are needed, numbers of labels, keys and
values, or inputs and ``inputdimensions`` that do not fit.
"""

from __future__ import annotations

from ...operators import rule
from .. import dims as D
from ..value import Value
from ._ml import ML, label_count, label_elem, row_extents
from ._util import int_attr, list_attr, shape_list

_FLOAT, _STRING, _INT64 = 1, 8, 7


@rule("Normalizer", domain=ML)
def normalizer(ctx, x):
    """Normalizer: [N, F] float."""
    n, f = row_extents(ctx, x)
    return ctx.tensor(None if x is None or x.shape is None else [n, f], elem=_FLOAT)


@rule("Scaler", domain=ML)
def scaler(ctx, x):
    """Scaler: X's shape, float."""
    return ctx.tensor(shape_list(x), elem=_FLOAT)


@rule("Binarizer", domain=ML)
def binarizer(ctx, x):
    """Binarizer: X's shape and type."""
    return shape_list(x)


@rule("Imputer", domain=ML)
def imputer(ctx, x):
    """Imputer: X's shape and type."""
    return shape_list(x)


@rule("OneHotEncoder", domain=ML)
def one_hot_encoder(ctx, x):
    """OneHotEncoder: [..., len(cats)] float."""
    cats = list_attr(ctx, "cats_strings") or list_attr(ctx, "cats_int64s")
    s = shape_list(x)
    return ctx.tensor(None if s is None else s + [len(cats)], elem=_FLOAT)


@rule("ArrayFeatureExtractor", domain=ML)
def array_feature_extractor(ctx, x, y):
    """ArrayFeatureExtractor: X's shape, last extent the number of indices ([1, n] for 1-D)."""
    s = shape_list(x)
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
    n_labels = label_count(ctx, "classlabels_int64s")
    s = shape_list(x)
    if s is not None and s and type(s[-1]) is int and s[-1] != n_labels:
        ctx.contradiction(f"{n_labels} labels for {s[-1]} score columns")
    return Value.sequence(Value.map(label_elem(ctx), Value.tensor(_FLOAT)))


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
    return ctx.tensor(shape_list(x), elem=elem)


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
    return ctx.tensor(shape_list(x), elem=elem)

