"""Traditional machine-learning operators of the ``ai.onnx.ml`` domain.

Linear models (LinearClassifier, LinearRegressor), preprocessing (Normalizer, Scaler, Binarizer,
Imputer, OneHotEncoder, LabelEncoder, ArrayFeatureExtractor, FeatureVectorizer, CastMap,
DictVectorizer), ZipMap, tree ensembles (TreeEnsembleClassifier, TreeEnsembleRegressor,
TreeEnsemble) and support vector machines (SVMClassifier, SVMRegressor).

Where the ONNX text leaves a case open (binary classifiers with one score column, PROBIT,
ties), the kernels do what onnxruntime does, since that is what converters such as skl2onnx are
tested against. Maps are Python ``dict``; a ZipMap output is a list of dicts. Scores are
accumulated in float64 and returned as float32.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import EvaluationError, InvalidModelError, UnsupportedError
from ...operators import kernel

ML = "ai.onnx.ml"


# -- post transforms --------------------------------------------------------------------------

def _erfinv(x: np.ndarray) -> np.ndarray:
    """Inverse error function, the closed-form approximation onnxruntime uses for PROBIT."""
    x = np.asarray(x, dtype=np.float64)
    sgn = np.where(x < 0, -1.0, 1.0)
    w = np.log((1 - x) * (1 + x))
    v = 2 / (math.pi * 0.147) + 0.5 * w
    return sgn * np.sqrt(-v + np.sqrt(v * v - w / 0.147))


def probit(x: np.ndarray) -> np.ndarray:
    """``sqrt(2) * erfinv(2x - 1)``."""
    return math.sqrt(2) * _erfinv(2 * np.asarray(x, dtype=np.float64) - 1)


def _logistic(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def post_transform(scores: np.ndarray, name: str) -> np.ndarray:
    """Apply NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO or PROBIT row-wise to scores [N, C]."""
    s = np.asarray(scores, dtype=np.float64)
    if name in ("NONE", "", None):
        return s
    if name == "LOGISTIC":
        return _logistic(s)
    if name == "SOFTMAX":
        if s.shape[-1] == 0:
            return s
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    if name == "SOFTMAX_ZERO":
        nz = s != 0
        m = np.where(nz, s, -np.inf).max(axis=-1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0)
        e = np.where(nz, np.exp(s - m), 0.0)
        total = e.sum(axis=-1, keepdims=True)
        return np.where(total > 0, e / np.where(total > 0, total, 1), 0.0)
    if name == "PROBIT":
        return probit(s)
    raise UnsupportedError(f"post_transform {name!r} is not NONE, SOFTMAX, LOGISTIC, "
                           "SOFTMAX_ZERO or PROBIT")


_TRANSFORM_CODES = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")


def _binary_scores(score: np.ndarray, transform: str, kind: int) -> np.ndarray:
    """Two score columns from the one score of a binary classifier (onnxruntime's rules).

    ``kind``: 0/1 when every weight is positive (the score is a probability p: [1 - p, p],
    p = LOGISTIC(s) with that transform);
    2/3 otherwise ([-s, s], or [logistic(-s), logistic(s)] with LOGISTIC). PROBIT gives the one
    transformed column followed by 0.
    """
    s = np.asarray(score, dtype=np.float64)
    if transform == "PROBIT":
        return np.stack([probit(s), np.zeros_like(s)], axis=1)
    if kind in (0, 1):
        p = _logistic(s) if transform == "LOGISTIC" else s
        return np.stack([1 - p, p], axis=1)
    if transform == "LOGISTIC":
        return np.stack([_logistic(-s), _logistic(s)], axis=1)
    if kind == 2:
        return np.stack([-s, s], axis=1)
    return np.stack([s, -s], axis=1)


def _features(x) -> np.ndarray:
    """The input of an ml operator as float64 [N, F] (a 1-D input is one row)."""
    x = np.asarray(x)
    if x.dtype == object:
        raise EvaluationError("a numeric tensor is expected, not strings")
    x = x.astype(np.float64)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2:
        x = x.reshape(x.shape[0], -1)
    return x


def _labels(ctx, ints_name: str, strings_name: str):
    """The class labels (int64 array or object array of str) and whether they are strings."""
    strings = ctx.attr(strings_name, None)
    if strings:
        return np.array(strings, dtype=object), True
    ints = ctx.attr(ints_name, None)
    return np.array(ints if ints else [], dtype=np.int64), False


# -- linear models ----------------------------------------------------------------------------

@kernel("LinearClassifier", domain=ML)
def linear_classifier(ctx, x):
    """LinearClassifier: scores ``X @ coefficients.T + intercepts``, labels by the best score.

    X [N, F] (or [F]); ``coefficients`` C * F values; outputs Y labels [N] (int64 or string)
    and Z scores [N, C] after ``post_transform``. With one coefficient row (binary) the label is
    the second one when the raw score s is positive, and Z is ``[1 - p, p]`` with p = s (or
    LOGISTIC(s), PROBIT(s)), as onnxruntime writes it; without labels Z is the one column s.
    """
    xf = _features(x)
    coefs = np.asarray(ctx.attrs["coefficients"], dtype=np.float64)
    n_feat = xf.shape[1]
    if n_feat == 0 or coefs.size % n_feat:
        raise EvaluationError(f"{coefs.size} coefficients do not fit {n_feat} features")
    coefs = coefs.reshape(-1, n_feat)
    n_cls = coefs.shape[0]
    intercepts = np.asarray(ctx.attr("intercepts", None) or [0.0] * n_cls, dtype=np.float64)
    if intercepts.size != n_cls:
        raise InvalidModelError(f"{intercepts.size} intercepts for {n_cls} classes")
    labels, strings = _labels(ctx, "classlabels_ints", "classlabels_strings")
    transform = ctx.attr("post_transform")
    raw = xf @ coefs.T + intercepts
    if n_cls == 1:
        # one coefficient row: onnxruntime reads the score as the positive class's probability
        # (after LOGISTIC when asked; SOFTMAX and SOFTMAX_ZERO leave it as it is)
        s = raw[:, 0]
        y = (s > 0).astype(np.int64)
        if labels.size == 2:
            y = np.where(s > 0, labels[1], labels[0])
        elif labels.size:
            raise InvalidModelError("a binary LinearClassifier needs two class labels")
        p = _logistic(s) if transform == "LOGISTIC" else probit(s) if transform == "PROBIT" \
            else s
        if labels.size == 2:
            z = np.stack([1 - p, p], axis=1)
        else:  # no labels: the score column as it is (onnxruntime applies PROBIT only)
            z = (probit(s) if transform == "PROBIT" else s)[:, None]
    else:
        if labels.size != n_cls:
            raise InvalidModelError(f"{labels.size} class labels for {n_cls} coefficient rows")
        z = post_transform(raw, transform)
        y = labels[np.argmax(raw, axis=1)]
    y = np.asarray(y, dtype=object if strings else np.int64)
    return y, z.astype(np.float32)


@kernel("LinearRegressor", domain=ML)
def linear_regressor(ctx, x):
    """LinearRegressor: ``Y = X @ coefficients.T + intercepts``, [N, targets], float32, then
    ``post_transform``."""
    xf = _features(x)
    targets = int(ctx.attr("targets"))
    coefs = np.asarray(ctx.attr("coefficients", None) or [], dtype=np.float64)
    if coefs.size != targets * xf.shape[1]:
        raise EvaluationError(f"{coefs.size} coefficients do not fit {targets} targets and "
                              f"{xf.shape[1]} features")
    intercepts = np.asarray(ctx.attr("intercepts", None) or [0.0] * targets, dtype=np.float64)
    y = xf @ coefs.reshape(targets, -1).T + intercepts
    return post_transform(y, ctx.attr("post_transform")).astype(np.float32)


# -- preprocessing ----------------------------------------------------------------------------

@kernel("Normalizer", domain=ML)
def normalizer(ctx, x):
    """Normalizer: each row divided by its MAX, L1 norm or L2 norm (``norm``); float32 [N, F].

    A row whose norm is 0 is left as it is.
    """
    xf = _features(x)
    norm = ctx.attr("norm")
    if norm == "MAX":
        d = xf.max(axis=1, keepdims=True)
    elif norm == "L1":
        d = np.abs(xf).sum(axis=1, keepdims=True)
    elif norm == "L2":
        d = np.sqrt((xf * xf).sum(axis=1, keepdims=True))
    else:
        raise UnsupportedError(f"Normalizer norm {norm!r} is not MAX, L1 or L2")
    return (xf / np.where(d == 0, 1, d)).astype(np.float32)


@kernel("Scaler", domain=ML)
def scaler(ctx, x):
    """Scaler: ``(X - offset) * scale`` per feature (one value, or one per feature); float32."""
    xf = np.asarray(x).astype(np.float64)
    offset = np.asarray(ctx.attr("offset", None) or [0.0], dtype=np.float64)
    scale = np.asarray(ctx.attr("scale", None) or [1.0], dtype=np.float64)
    return ((xf - offset) * scale).astype(np.float32)


@kernel("Binarizer", domain=ML)
def binarizer(ctx, x):
    """Binarizer: 1 where ``X > threshold``, else 0, in X's dtype."""
    x = np.asarray(x)
    return (x > float(ctx.attr("threshold"))).astype(x.dtype)


@kernel("Imputer", domain=ML)
def imputer(ctx, x):
    """Imputer: replace ``replaced_value_float`` (NaN matches NaN) or ``replaced_value_int64``
    with the imputed values (one, or one per feature of the last axis)."""
    x = np.asarray(x)
    if x.dtype.kind == "f":
        values = np.asarray(ctx.attr("imputed_value_floats", None) or [], dtype=x.dtype)
        target = float(ctx.attr("replaced_value_float"))
        hit = np.isnan(x) if math.isnan(target) else x == target
    else:
        values = np.asarray(ctx.attr("imputed_value_int64s", None) or [], dtype=x.dtype)
        hit = x == int(ctx.attr("replaced_value_int64"))
    if values.size not in (1, x.shape[-1] if x.ndim else 1):
        raise EvaluationError(f"{values.size} imputed values for {x.shape[-1]} features")
    return np.where(hit, np.broadcast_to(values, x.shape) if values.size > 1 else values[0], x)


@kernel("OneHotEncoder", domain=ML)
def one_hot_encoder(ctx, x):
    """OneHotEncoder: X [...] of categories -> float32 [..., len(cats)] with a 1 at each match.

    An unknown category gives a row of zeros when ``zeros`` is 1 (the default), and is an
    InvalidModelError when it is 0.
    """
    x = np.asarray(x)
    cats = ctx.attr("cats_strings", None)
    if cats:
        table = {c: i for i, c in enumerate(cats)}
        keys = [str(v) if not isinstance(v, bytes) else v.decode() for v in x.reshape(-1)]
    else:
        cats = ctx.attr("cats_int64s", None) or []
        table = {int(c): i for i, c in enumerate(cats)}
        keys = [int(v) for v in x.reshape(-1)]
    out = np.zeros((len(keys), len(cats)), dtype=np.float32)
    allow = int(ctx.attr("zeros"))
    for row, k in enumerate(keys):
        i = table.get(k)
        if i is None:
            if not allow:
                raise EvaluationError(f"OneHotEncoder: category {k!r} is not in cats")
            continue
        out[row, i] = 1
    return out.reshape(x.shape + (len(cats),))


@kernel("ArrayFeatureExtractor", domain=ML)
def array_feature_extractor(ctx, x, y):
    """ArrayFeatureExtractor: the elements of X's last axis at indices Y (int64).

    Output shape: X's shape with the last axis replaced by ``len(Y)`` (a 1-D X gives [1, len]).
    """
    x = np.asarray(x)
    idx = np.asarray(y).astype(np.int64).reshape(-1)
    if x.ndim == 0:
        raise EvaluationError("ArrayFeatureExtractor needs a tensor of rank 1 or more")
    if idx.size and ((idx < 0).any() or (idx >= x.shape[-1]).any()):
        raise EvaluationError(f"ArrayFeatureExtractor indices {idx.tolist()} are outside "
                              f"[0, {x.shape[-1] - 1}]")
    out = np.take(x, idx, axis=-1)
    return out.reshape(1, -1) if x.ndim == 1 else out


@kernel("FeatureVectorizer", domain=ML)
def feature_vectorizer(ctx, *inputs):
    """FeatureVectorizer: the inputs, each as [N, C_i] truncated or zero-padded to
    ``inputdimensions[i]`` columns, concatenated into float32 [N, sum(inputdimensions)]."""
    dims = list(ctx.attr("inputdimensions", None) or [])
    if len(dims) != len(inputs):
        raise InvalidModelError(f"{len(dims)} inputdimensions for {len(inputs)} inputs")
    parts = []
    for x, d in zip(inputs, dims):
        a = np.asarray(x).astype(np.float32)
        a = a.reshape(1, -1) if a.ndim <= 1 else a.reshape(a.shape[0], -1)
        if a.shape[1] >= d:
            a = a[:, :d]
        else:
            a = np.concatenate([a, np.zeros((a.shape[0], d - a.shape[1]), np.float32)], axis=1)
        parts.append(a)
    rows = {p.shape[0] for p in parts}
    if len(rows) > 1:
        raise EvaluationError(f"FeatureVectorizer inputs have different batch sizes {rows}")
    return np.concatenate(parts, axis=1)


@kernel("ZipMap", domain=ML)
def zipmap(ctx, x):
    """ZipMap: scores [N, C] -> a sequence of N maps {class label: float score}.

    Returns a one-element tuple holding the list (labels from ``classlabels_strings`` or
    ``classlabels_int64s``, in order).
    """
    scores = np.asarray(x, dtype=np.float32)
    if scores.ndim == 1:
        scores = scores[None, :]
    labels, strings = _labels(ctx, "classlabels_int64s", "classlabels_strings")
    if scores.shape[-1] != labels.size:
        raise EvaluationError(f"ZipMap has {labels.size} labels for {scores.shape[-1]} "
                              "columns")
    keys = [str(k) for k in labels] if strings else [int(k) for k in labels]
    return ([dict(zip(keys, (float(v) for v in row))) for row in scores],)


@kernel("CastMap", domain=ML)
def cast_map(ctx, x):
    """CastMap: a map int64 -> string/float to a tensor [1, n], values ordered by key.

    ``cast_to``: TO_FLOAT, TO_STRING or TO_INT64. ``map_form`` DENSE gives one column per key;
    SPARSE gives ``max_map`` columns with each value at the column its key names (0 elsewhere).
    """
    if not isinstance(x, dict):
        raise EvaluationError("CastMap needs a map input")
    cast_to = ctx.attr("cast_to")
    form = ctx.attr("map_form")
    items = sorted((int(k), v) for k, v in x.items())
    if cast_to == "TO_STRING":  # floats written as C's "%f" (onnxruntime's std::to_string)
        dtype, conv, zero = object, lambda v: v if isinstance(v, str) else f"{float(v):f}", ""
    elif cast_to == "TO_INT64":
        dtype, conv, zero = np.int64, lambda v: int(float(v)), 0
    elif cast_to == "TO_FLOAT":
        dtype, conv, zero = np.float32, float, 0.0
    else:
        raise UnsupportedError(f"CastMap cast_to {cast_to!r} is not supported")
    if form == "DENSE":
        return np.array([[conv(v) for _, v in items]], dtype=dtype).reshape(1, len(items))
    if form != "SPARSE":
        raise UnsupportedError(f"CastMap map_form {form!r} is not DENSE or SPARSE")
    size = int(ctx.attr("max_map"))
    out = np.full((1, size), zero, dtype=dtype)
    for k, v in items:
        if 0 <= k < size:
            out[0, k] = conv(v)
    return out


def _value_dtype(v) -> np.dtype:
    """dtype of a map value: its own for numpy values; float32, int64 or str for Python ones."""
    if isinstance(v, (np.ndarray, np.generic)):
        return np.asarray(v).dtype
    if isinstance(v, str):
        return np.dtype(object)
    if isinstance(v, (bool, int)):
        return np.dtype(np.int64)
    return np.dtype(np.float32)


@kernel("DictVectorizer", domain=ML)
def dict_vectorizer(ctx, x):
    """DictVectorizer: a map (or a sequence of maps) to a tensor [N, len(vocabulary)] holding
    each map's value at its key's vocabulary position, 0 elsewhere."""
    maps = x if isinstance(x, list) else [x]
    vocab = ctx.attr("string_vocabulary", None) or ctx.attr("int64_vocabulary", None) or []
    index = {v: i for i, v in enumerate(vocab)}
    values = [v for m in maps for v in m.values()]
    dtype = _value_dtype(values[0]) if values else np.dtype(np.float32)
    out = np.zeros((len(maps), len(vocab)), dtype=dtype)
    if dtype.kind == "O":
        out[:] = ""
    for row, m in enumerate(maps):
        for k, v in m.items():
            i = index.get(k if isinstance(k, str) else int(k))
            if i is not None:
                out[row, i] = v
    return out


# -- LabelEncoder -----------------------------------------------------------------------------

def _float_key(v: float, nan_matches: bool = True):
    if math.isnan(v):
        return "nan" if nan_matches else object()
    return float(v)


@kernel("LabelEncoder", domain=ML)
def label_encoder1(ctx, x):
    """LabelEncoder, opset 1: strings -> int64 (their index in ``classes_strings``, else
    ``default_int64``) or int64 -> strings (``classes_strings[i]``, else ``default_string``)."""
    x = np.asarray(x)
    classes = list(ctx.attr("classes_strings", None) or [])
    if x.dtype == object or x.dtype.kind in "US":
        index = {c: i for i, c in enumerate(classes)}
        default = int(ctx.attr("default_int64"))
        return np.array([index.get(str(v), default) for v in x.reshape(-1)],
                        dtype=np.int64).reshape(x.shape)
    default = ctx.attr("default_string")
    flat = [classes[int(v)] if 0 <= int(v) < len(classes) else default for v in x.reshape(-1)]
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(x.shape)


def _encoder_table(ctx):
    """(keys, values, default) of LabelEncoder 2/4: lists of Python values and the default."""
    keys = values = None
    for name in ("keys_strings", "keys_int64s", "keys_floats", "keys_tensor"):
        v = ctx.attr(name, None)
        if v is not None:
            keys = list(np.asarray(v).reshape(-1)) if name == "keys_tensor" else list(v)
            break
    default = None
    for name in ("values_strings", "values_int64s", "values_floats", "values_tensor"):
        v = ctx.attr(name, None)
        if v is not None:
            if name == "values_tensor":
                arr = np.asarray(v)
                values, vdtype = list(arr.reshape(-1)), arr.dtype
            else:
                values = list(v)
                vdtype = {"values_strings": np.dtype(object), "values_int64s": np.dtype(np.int64),
                          "values_floats": np.dtype(np.float32)}[name]
            break
    if keys is None or values is None:
        raise InvalidModelError("LabelEncoder needs keys and values")
    if len(keys) != len(values):
        raise InvalidModelError(f"LabelEncoder has {len(keys)} keys and {len(values)} values")
    dt = ctx.attr("default_tensor", None)
    if dt is not None:
        default = np.asarray(dt).reshape(-1)[0]
    elif vdtype.kind == "O":
        default = ctx.attr("default_string")
    elif vdtype.kind == "i":
        default = ctx.attr("default_int64")
    else:
        default = ctx.attr("default_float")
    return keys, values, default, vdtype


@kernel("LabelEncoder", domain=ML, since=2)
def label_encoder(ctx, x):
    """LabelEncoder, opsets 2 and 4: map each element through ``keys_*`` -> ``values_*`` (or the
    tensor attributes of opset 4), ``default_*`` for a key not listed. From opset 4 a NaN key
    matches a NaN input (keys compare bit-wise there); before, NaN never matches (onnxruntime)."""
    x = np.asarray(x)
    keys, values, default, vdtype = _encoder_table(ctx)
    if x.dtype.kind == "f":
        nan_ok = ctx.opset >= 4
        table = {_float_key(float(k), nan_ok): v for k, v in zip(keys, values)}
        flat = [table.get(_float_key(float(v), nan_ok), default) for v in x.reshape(-1)]
    elif x.dtype == object or x.dtype.kind in "US":
        table = {str(k): v for k, v in zip(keys, values)}
        flat = [table.get(str(v), default) for v in x.reshape(-1)]
    else:
        table = {int(k): v for k, v in zip(keys, values)}
        flat = [table.get(int(v), default) for v in x.reshape(-1)]
    out = np.empty(len(flat), dtype=vdtype)
    out[:] = flat
    return out.reshape(x.shape)


# -- tree ensembles ---------------------------------------------------------------------------

_LEGACY_MODES = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3,
                 "BRANCH_EQ": 4, "BRANCH_NEQ": 5, "BRANCH_MEMBER": 6, "LEAF": -1}


class _Forest:
    """Trees flattened into arrays; children < 0 are leaves (``-1 - leaf index``)."""

    def __init__(self, feature, mode, threshold, true_next, false_next, missing_true, members,
                 roots, leaf_weights, leaf_has):
        self.feature = np.asarray(feature, dtype=np.int64)
        self.mode = np.asarray(mode, dtype=np.int64)
        self.threshold = np.asarray(threshold, dtype=np.float64)
        self.true_next = np.asarray(true_next, dtype=np.int64)
        self.false_next = np.asarray(false_next, dtype=np.int64)
        self.missing_true = np.asarray(missing_true, dtype=bool)
        self.members = members
        self.roots = np.asarray(roots, dtype=np.int64)
        self.leaf_weights = leaf_weights
        self.leaf_has = leaf_has
        self.leaf_min = np.where(leaf_has, leaf_weights, np.inf)
        self.leaf_max = np.where(leaf_has, leaf_weights, -np.inf)

    def leaves(self, x: np.ndarray) -> np.ndarray:
        """Leaf index reached in every tree for every row of x: [N, trees]."""
        n = x.shape[0]
        if self.feature.size and (self.feature.max() >= x.shape[1] or self.feature.min() < 0):
            raise EvaluationError(f"a tree reads feature {int(self.feature.max())} of an "
                                  f"input with {x.shape[1]} features")
        cur = np.broadcast_to(self.roots, (n, self.roots.size)).copy()
        rows = np.arange(n)[:, None]
        for _ in range(self.feature.size + 1):
            active = cur >= 0
            if not active.any():
                return -1 - cur
            node = np.where(active, cur, 0)
            v = x[np.broadcast_to(rows, node.shape), self.feature[node]]
            t = self.threshold[node]
            m = self.mode[node]
            cond = np.select([m == 0, m == 1, m == 2, m == 3, m == 4, m == 5],
                             [v <= t, v < t, v >= t, v > t, v == t, v != t], False)
            if self.members is not None and (m == 6).any():
                for idx in np.unique(node[(m == 6) & active]):
                    sel = (node == idx) & active
                    cond[sel] = np.isin(v[sel], self.members[int(idx)])
            cond = np.where(np.isnan(v), self.missing_true[node], cond)
            cur = np.where(active, np.where(cond, self.true_next[node], self.false_next[node]),
                           cur)
        raise InvalidModelError("the tree ensemble has a cycle")


def _legacy_forest(ctx, prefix: str, n_targets: int, target_name: str) -> _Forest:
    """A _Forest from the TreeEnsembleClassifier / Regressor attributes (opsets 1, 3, 5)."""
    a = ctx.attrs
    tree_ids = list(a.get("nodes_treeids", []))
    node_ids = list(a.get("nodes_nodeids", []))
    count = len(tree_ids)
    feats = list(a.get("nodes_featureids", []))
    modes = list(a.get("nodes_modes", []))
    values = a.get("nodes_values_as_tensor")
    values = list(np.asarray(values).reshape(-1)) if values is not None else \
        list(a.get("nodes_values", [0.0] * count))
    trues = list(a.get("nodes_truenodeids", []))
    falses = list(a.get("nodes_falsenodeids", []))
    missing = list(a.get("nodes_missing_value_tracks_true", None) or [0] * count)
    for name, arr in (("nodes_nodeids", node_ids), ("nodes_featureids", feats),
                      ("nodes_modes", modes), ("nodes_values", values),
                      ("nodes_truenodeids", trues), ("nodes_falsenodeids", falses),
                      ("nodes_missing_value_tracks_true", missing)):
        if len(arr) != count:
            raise InvalidModelError(f"{name} has {len(arr)} entries, nodes_treeids {count}")
    pos = {(t, nid): i for i, (t, nid) in enumerate(zip(tree_ids, node_ids))}
    if len(pos) != count:
        raise InvalidModelError("two tree nodes have the same (tree id, node id)")
    leaf_of = {}
    for i, m in enumerate(modes):
        code = _LEGACY_MODES.get(m)
        if code is None:
            raise UnsupportedError(f"tree node mode {m!r} is not supported")
        if code < 0:
            leaf_of[i] = len(leaf_of)
    inner = [i for i in range(count) if i not in leaf_of]
    inner_pos = {i: k for k, i in enumerate(inner)}

    def child(tree, nid):
        i = pos.get((tree, nid))
        if i is None:
            raise InvalidModelError(f"tree {tree} has no node {nid}")
        return -1 - leaf_of[i] if i in leaf_of else inner_pos[i]

    t_next = [child(tree_ids[i], trues[i]) for i in inner]
    f_next = [child(tree_ids[i], falses[i]) for i in inner]
    referenced = {(tree_ids[i], trues[i]) for i in inner} | {(tree_ids[i], falses[i])
                                                             for i in inner}
    roots, seen = [], set()
    for i, t in enumerate(tree_ids):
        if t not in seen and (t, node_ids[i]) not in referenced:
            seen.add(t)
            roots.append(child(t, node_ids[i]))
    if len(seen) != len(set(tree_ids)):
        raise InvalidModelError("a tree has no root: every one of its nodes is some node's child")
    w_tree = list(a.get(f"{prefix}_treeids", []))
    w_node = list(a.get(f"{prefix}_nodeids", []))
    w_ids = list(a.get(f"{prefix}_ids", []))
    weights = a.get(f"{prefix}_weights_as_tensor")
    weights = list(np.asarray(weights).reshape(-1)) if weights is not None else \
        list(a.get(f"{prefix}_weights", []))
    if not len(w_tree) == len(w_node) == len(w_ids) == len(weights):
        raise InvalidModelError(f"{prefix}_treeids/nodeids/ids/weights differ in length")
    lw = np.zeros((len(leaf_of), n_targets), dtype=np.float64)
    lmin = np.full((len(leaf_of), n_targets), np.inf)
    lmax = np.full((len(leaf_of), n_targets), -np.inf)
    has = np.zeros((len(leaf_of), n_targets), dtype=bool)
    for t, nid, k, w in zip(w_tree, w_node, w_ids, weights):
        i = pos.get((t, nid))
        if i is None or i not in leaf_of:
            raise InvalidModelError(f"{prefix} weight for tree {t} node {nid}, not a leaf")
        if not 0 <= k < n_targets:
            raise InvalidModelError(f"{target_name} {k} is outside [0, {n_targets})")
        j = leaf_of[i]
        lw[j, k] += w
        lmin[j, k] = min(lmin[j, k], w)
        lmax[j, k] = max(lmax[j, k], w)
        has[j, k] = True
    forest = _Forest([feats[i] for i in inner], [_LEGACY_MODES[modes[i]] for i in inner],
                   [values[i] for i in inner], t_next, f_next,
                   [bool(missing[i]) for i in inner], None, roots, lw, has)
    forest.leaf_min, forest.leaf_max = lmin, lmax
    return forest


def _tree_sum(values: np.ndarray, dtype) -> np.ndarray:
    """Sum over the tree axis (1) of values [N, T, targets], tree after tree, in ``dtype``
    (float32 for float32 input, as onnxruntime accumulates, so that ties break the same way)."""
    acc = np.zeros((values.shape[0], values.shape[2]), dtype=dtype)
    for t in range(values.shape[1]):
        acc += values[:, t].astype(dtype)
    return acc


def _aggregate(forest: _Forest, x: np.ndarray, how: str, base, dtype=np.float64):
    """Scores [N, targets] in ``dtype`` and, per row and target, whether a leaf reached it."""
    leaves = forest.leaves(x)  # [N, T]
    has = forest.leaf_has[leaves]
    any_has = has.any(axis=1)
    if how in ("SUM", "AVERAGE"):
        s = _tree_sum(forest.leaf_weights[leaves], dtype)
        if how == "AVERAGE" and forest.roots.size:
            s = s / dtype(forest.roots.size)
    elif how == "MIN":
        s = forest.leaf_min[leaves].min(axis=1)
    elif how == "MAX":
        s = forest.leaf_max[leaves].max(axis=1)
    else:
        raise UnsupportedError(f"aggregate_function {how!r} is not SUM, AVERAGE, MIN or MAX")
    s = np.where(any_has, s, 0).astype(dtype)
    if base is not None and len(base):
        # onnxruntime adds a base value only to the targets some leaf reached
        s = np.where(any_has, s + np.asarray(base, dtype=dtype), s)
    return s, any_has


def _acc_dtype(x) -> type:
    return np.float32 if np.asarray(x).dtype == np.float32 else np.float64


@kernel("TreeEnsembleRegressor", domain=ML)
def tree_ensemble_regressor(ctx, x):
    """TreeEnsembleRegressor: sum (or AVERAGE / MIN / MAX, ``aggregate_function``) of the leaf
    weights each target gets from every tree, plus ``base_values``, then ``post_transform``.
    X [N, F]; Y float32 [N, n_targets]. NaN features follow ``nodes_missing_value_tracks_true``.
    """
    n_targets = int(ctx.attr("n_targets", 1))
    forest = _legacy_forest(ctx, "target", n_targets, "target id")
    base = ctx.attr("base_values_as_tensor", None)
    base = ctx.attr("base_values", None) if base is None else list(np.asarray(base).reshape(-1))
    s, _ = _aggregate(forest, _features(x), ctx.attr("aggregate_function"), base,
                      _acc_dtype(x))
    return post_transform(s, ctx.attr("post_transform")).astype(np.float32)


@kernel("TreeEnsembleClassifier", domain=ML)
def tree_ensemble_classifier(ctx, x):
    """TreeEnsembleClassifier: class scores summed over trees (plus ``base_values``), the label
    of the best score, scores after ``post_transform``.

    Outputs: Y labels [N] (int64 or string), Z float32 [N, C]. Two classes follow onnxruntime:
    the label is the second class when the second score (or, when only one class id carries
    weights, that one score) exceeds 0.5 with all weights positive, 0 otherwise; a single score
    column is written as two. Scores of float32 input are summed in float32, tree by tree.
    """
    labels, strings = _labels(ctx, "classlabels_int64s", "classlabels_strings")
    n_cls = labels.size
    if n_cls == 0:
        raise InvalidModelError("TreeEnsembleClassifier needs class labels")
    forest = _legacy_forest(ctx, "class", n_cls, "class id")
    base = ctx.attr("base_values_as_tensor", None)
    base = ctx.attr("base_values", None) if base is None else list(np.asarray(base).reshape(-1))
    transform = ctx.attr("post_transform")
    xf = _features(x)
    dtype = _acc_dtype(x)
    leaves = forest.leaves(xf)
    w = _tree_sum(forest.leaf_weights[leaves], dtype)  # [N, C]
    has = forest.leaf_has[leaves].any(axis=1)
    used = forest.leaf_has.any(axis=0)
    all_positive = bool((forest.leaf_weights[forest.leaf_has] >= 0).all())
    if base is not None and len(base) and len(base) != n_cls and not (n_cls == 2
                                                                       and len(base) == 1):
        raise InvalidModelError(f"{len(base)} base_values for {n_cls} classes")
    if n_cls == 2 and used.sum() == 1:
        # one score column: it is the positive class's, whichever id carries it
        k = int(np.flatnonzero(used)[0])
        s = w[:, k]
        if base is not None and len(base):
            s = s + dtype(base[k] if len(base) > k else base[0])
        y = np.where(s > 0.5 if all_positive else s > 0, labels[1], labels[0])
        if k == 0:
            z = _binary_scores(s, transform, 0 if all_positive else 2)
        else:
            z = post_transform(np.stack([np.zeros_like(s), s], axis=1), transform)
        return np.asarray(y, dtype=object if strings else np.int64), z.astype(np.float32)
    if base is not None and len(base):
        w = w + np.asarray(base, dtype=dtype)
        has = np.ones_like(has)
    if n_cls == 2:
        # onnxruntime decides two classes on the second score alone
        pos = np.where(has[:, 1], w[:, 1], np.where(has[:, 0], w[:, 0], 0))
        y = np.where(pos > 0.5 if all_positive else pos > 0, labels[1], labels[0])
    else:
        y = labels[np.argmax(np.where(has, w, -np.inf), axis=1)]
    z = post_transform(w, transform)
    return np.asarray(y, dtype=object if strings else np.int64), z.astype(np.float32)


@kernel("TreeEnsemble", domain=ML)
def tree_ensemble(ctx, x):
    """TreeEnsemble (ai.onnx.ml opset 5): the unified tree operator.

    Nodes are addressed by position; ``nodes_true/falsenodeids`` index nodes, or leaves where
    ``nodes_true/falseleafs`` is 1; ``tree_roots`` index nodes. ``nodes_modes`` (uint8 tensor)
    0 LEQ, 1 LT, 2 GTE, 3 GT, 4 EQ, 5 NEQ, 6 MEMBER (sets from ``membership_values``, separated
    by NaN). Leaves add ``leaf_weights`` to ``leaf_targetids``; ``aggregate_function`` 0 AVERAGE,
    1 SUM, 2 MIN, 3 MAX; ``post_transform`` 0 NONE ... 4 PROBIT. Output: [N, n_targets] in X's
    float type.
    """
    a = ctx.attrs
    xin = np.asarray(x)
    modes = np.asarray(a["nodes_modes"]).reshape(-1).astype(np.int64)
    count = modes.size
    feats = list(a.get("nodes_featureids", []))
    splits = np.asarray(a.get("nodes_splits", np.zeros(count))).reshape(-1).astype(np.float64)
    tn = list(a.get("nodes_truenodeids", []))
    fn = list(a.get("nodes_falsenodeids", []))
    tl = list(a.get("nodes_trueleafs", []))
    fl = list(a.get("nodes_falseleafs", []))
    missing = list(a.get("nodes_missing_value_tracks_true", None) or [0] * count)
    for name, arr in (("nodes_featureids", feats), ("nodes_splits", splits),
                      ("nodes_truenodeids", tn), ("nodes_falsenodeids", fn),
                      ("nodes_trueleafs", tl), ("nodes_falseleafs", fl),
                      ("nodes_missing_value_tracks_true", missing)):
        if len(arr) != count:
            raise InvalidModelError(f"{name} has {len(arr)} entries for {count} nodes")
    leaf_t = list(a.get("leaf_targetids", []))
    leaf_w = np.asarray(a.get("leaf_weights", np.zeros(0))).reshape(-1).astype(np.float64)
    n_leaves = len(leaf_t)
    if leaf_w.size != n_leaves:
        raise InvalidModelError(f"{leaf_w.size} leaf_weights for {n_leaves} leaf_targetids")
    n_targets = int(a.get("n_targets", 1))

    def ref(i, leaf):
        if leaf:
            if not 0 <= i < n_leaves:
                raise InvalidModelError(f"leaf index {i} is outside [0, {n_leaves})")
            return -1 - i
        if not 0 <= i < count:
            raise InvalidModelError(f"node index {i} is outside [0, {count})")
        return i

    members = None
    if (modes == 6).any():
        vals = np.asarray(a.get("membership_values", np.zeros(0))).reshape(-1)
        sets, cur = [], []
        for v in vals:
            if math.isnan(v):
                sets.append(np.array(cur, dtype=np.float64))
                cur = []
            else:
                cur.append(v)
        if cur or not sets or len(sets) < int((modes == 6).sum()):
            sets.append(np.array(cur, dtype=np.float64))
        members = {}
        for k, i in enumerate(np.flatnonzero(modes == 6)):
            if k >= len(sets):
                raise InvalidModelError("membership_values has fewer sets than MEMBER nodes")
            members[int(i)] = sets[k]
    lw = np.zeros((n_leaves, n_targets), dtype=np.float64)
    has = np.zeros((n_leaves, n_targets), dtype=bool)
    for j, (t, w) in enumerate(zip(leaf_t, leaf_w)):
        if not 0 <= t < n_targets:
            raise InvalidModelError(f"leaf target id {t} is outside [0, {n_targets})")
        lw[j, t] = w
        has[j, t] = True
    roots = [ref(int(r), False) for r in a.get("tree_roots", [])]
    forest = _Forest(feats, modes, splits, [ref(i, l) for i, l in zip(tn, tl)],
                     [ref(i, l) for i, l in zip(fn, fl)], [bool(m) for m in missing], members,
                     roots, lw, has)
    agg = ("AVERAGE", "SUM", "MIN", "MAX")[int(a.get("aggregate_function", 1))]
    s, _ = _aggregate(forest, _features(xin), agg, None, _acc_dtype(xin))
    transform = _TRANSFORM_CODES[int(a.get("post_transform", 0))]
    out_dtype = xin.dtype if xin.dtype.kind == "f" else np.float32
    return post_transform(s, transform).astype(out_dtype)


# -- support vector machines ------------------------------------------------------------------

def _kernel(ctx, x: np.ndarray, sv: np.ndarray) -> np.ndarray:
    """Kernel matrix [N, n_sv] for ``kernel_type`` LINEAR, POLY, RBF or SIGMOID."""
    kind = ctx.attr("kernel_type")
    params = list(ctx.attr("kernel_params", None) or [0.0, 0.0, 0.0])
    gamma, coef0, degree = (params + [0.0, 0.0, 0.0])[:3]
    if kind == "LINEAR":
        return x @ sv.T
    if kind == "POLY":
        return (gamma * (x @ sv.T) + coef0) ** degree
    if kind == "RBF":
        d = (x * x).sum(1)[:, None] + (sv * sv).sum(1)[None, :] - 2 * x @ sv.T
        return np.exp(-gamma * np.maximum(d, 0))
    if kind == "SIGMOID":
        return np.tanh(gamma * (x @ sv.T) + coef0)
    raise UnsupportedError(f"SVM kernel_type {kind!r} is not supported")


@kernel("SVMRegressor", domain=ML)
def svm_regressor(ctx, x):
    """SVMRegressor: ``sum_i coef_i * K(x, sv_i) + rho`` (or a linear model without support
    vectors), float32 [N, 1]; ``one_class`` maps the sign to +1 / -1."""
    xf = _features(x)
    n_sv = int(ctx.attr("n_supports"))
    coefs = np.asarray(ctx.attr("coefficients", None) or [], dtype=np.float64)
    rho = np.asarray(ctx.attr("rho", None) or [0.0], dtype=np.float64)
    if n_sv > 0:
        sv = np.asarray(ctx.attr("support_vectors", None) or [], dtype=np.float64)
        sv = sv.reshape(n_sv, -1)
        y = _kernel(ctx, xf, sv) @ coefs[:n_sv] + rho[0]
    else:
        y = _kernel(ctx, xf, coefs.reshape(1, -1))[:, 0] + rho[0]
    if int(ctx.attr("one_class")):
        y = np.where(y > 0, 1.0, -1.0)
    return post_transform(y[:, None], ctx.attr("post_transform")).astype(np.float32)


@kernel("SVMClassifier", domain=ML)
def svm_classifier(ctx, x):
    """SVMClassifier: one-vs-one voting over support vectors (``vectors_per_class``), or a
    linear model per class without support vectors; with ``prob_a`` / ``prob_b`` pairwise
    Platt probabilities are coupled into class probabilities as libsvm does.

    Outputs: Y labels [N], Z float32 scores [N, C] (the decision values of the class pairs when
    there are no probabilities and more than two classes).
    """
    xf = _features(x)
    labels, strings = _labels(ctx, "classlabels_ints", "classlabels_strings")
    n_cls = labels.size
    coefs = np.asarray(ctx.attr("coefficients", None) or [], dtype=np.float64)
    rho = np.asarray(ctx.attr("rho", None) or [], dtype=np.float64)
    per_class = list(ctx.attr("vectors_per_class", None) or [])
    transform = ctx.attr("post_transform")
    prob_a = list(ctx.attr("prob_a", None) or [])
    prob_b = list(ctx.attr("prob_b", None) or [])
    if not per_class:  # linear: one coefficient row per class
        w = coefs.reshape(n_cls, -1)
        scores = _kernel(ctx, xf, w) + (rho if rho.size else 0)
        if n_cls == 2 and scores.shape[1] == 1:
            s = scores[:, 0]
            y = np.where(s > 0, labels[1], labels[0])
            z = _binary_scores(s, transform, 2)
        else:
            y = labels[np.argmax(scores, axis=1)]
            z = post_transform(scores, transform)
        return np.asarray(y, dtype=object if strings else np.int64), z.astype(np.float32)
    sv = np.asarray(ctx.attr("support_vectors", None) or [], dtype=np.float64)
    total = int(sum(per_class))
    sv = sv.reshape(total, -1)
    k = _kernel(ctx, xf, sv)  # [N, total]
    starts = np.concatenate([[0], np.cumsum(per_class)]).astype(int)
    coefs = coefs.reshape(n_cls - 1, total)
    n = xf.shape[0]
    votes = np.zeros((n, n_cls), dtype=np.int64)
    decisions = []
    pair = 0
    for i in range(n_cls):
        for j in range(i + 1, n_cls):
            si, sj = slice(starts[i], starts[i + 1]), slice(starts[j], starts[j + 1])
            d = k[:, si] @ coefs[j - 1, si] + k[:, sj] @ coefs[i, sj] + rho[pair]
            decisions.append(d)
            votes[:, i] += d > 0
            votes[:, j] += d <= 0
            pair += 1
    dec = np.stack(decisions, axis=1)  # [N, pairs]
    if prob_a:
        probs = _svm_probabilities(dec, n_cls, prob_a, prob_b)
        y = labels[np.argmax(probs, axis=1)]
        z = post_transform(probs, transform)
    else:
        y = labels[np.argmax(votes, axis=1)]
        if n_cls == 2:
            s = dec[:, 0]
            y = np.where(s > 0, labels[0], labels[1])
            z = _binary_scores(s, transform, 2)
        else:
            z = post_transform(dec, transform)
    return np.asarray(y, dtype=object if strings else np.int64), z.astype(np.float32)


def _svm_probabilities(dec: np.ndarray, n_cls: int, prob_a, prob_b) -> np.ndarray:
    """Pairwise Platt probabilities coupled by libsvm's iterative method (Wu, Lin, Weng 2004)."""
    n = dec.shape[0]
    out = np.zeros((n, n_cls))
    for row in range(n):
        r = np.zeros((n_cls, n_cls))
        pair = 0
        for i in range(n_cls):
            for j in range(i + 1, n_cls):
                v = dec[row, pair] * prob_a[pair] + prob_b[pair]
                p = 1 / (1 + math.exp(v)) if v < 0 else math.exp(-v) / (1 + math.exp(-v))
                p = min(max(p, 1e-7), 1 - 1e-7)
                r[i, j], r[j, i] = p, 1 - p
                pair += 1
        q = np.zeros((n_cls, n_cls))
        for t in range(n_cls):
            q[t, t] = sum(r[j, t] ** 2 for j in range(n_cls) if j != t)
            for j in range(n_cls):
                if j != t:
                    q[t, j] = -r[j, t] * r[t, j]
        p = np.full(n_cls, 1.0 / n_cls)
        for _ in range(max(100, n_cls)):
            qp = q @ p
            pqp = p @ qp
            if np.abs(qp - pqp).max() < 0.005 / n_cls:
                break
            for t in range(n_cls):
                diff = (-qp[t] + pqp) / q[t, t]
                p[t] += diff
                pqp = (pqp + diff * (diff * q[t, t] + 2 * qp[t])) / (1 + diff) / (1 + diff)
                qp = (qp + diff * q[t]) / (1 + diff)
                p /= 1 + diff
        out[row] = p
    return out
