"""Preprocessing and encoding of the ``ai.onnx.ml`` domain (ONNX 1-2, ONNX-ML operator
definitions Normalizer-1, Scaler-1, Binarizer-1, Imputer-1, OneHotEncoder-1,
ArrayFeatureExtractor-1, FeatureVectorizer-1, ZipMap-1, CastMap-1, DictVectorizer-1,
LabelEncoder-1, 2 and 4): features scaled, replaced, selected, concatenated and encoded, and the
conversions between maps and tensors.

Maps are Python ``dict``; a ZipMap output is a list of dicts.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import EvaluationError, InvalidModelError, UnsupportedError
from ...operators import kernel
from ._ml import ML, class_labels, feature_rows

# -- preprocessing ----------------------------------------------------------------------------

@kernel("Normalizer", domain=ML)
def normalizer(ctx, x):
    """Normalizer: each row divided by its MAX, L1 norm or L2 norm (``norm``); float32 [N, F].

    A row whose norm is 0 is left as it is.
    """
    xf = feature_rows(x)
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
    labels, strings = class_labels(ctx, "classlabels_int64s", "classlabels_strings")
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
