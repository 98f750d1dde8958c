"""Float64 formulas of the ai.onnx.ml operators that test_ml.py covers: the exact oracle of
onemodel's ai.onnx.ml kernels, written from the operators' definitions (ONNX Part 2, ai.onnx.ml).

:func:`run` evaluates a model node by node in graph order (a one-node test model, or a
skl2onnx pipeline), each node by its formula here, in float64 on the float32 values the model
and the feeds hold. Next to each float value it carries a *magnitude*, the ``scale`` of
:func:`oracle.assert_close_to_exact`: an elementwise bound, to first order, on
``|error| / (rounding count * u)`` of a float32 evaluation of the same chain (a running error
bound: a sum's magnitude is the sum of its terms' magnitudes, a function's is its input's
magnitude times its slope, plus the result's own size for its own rounding). A caller states
``ulps`` as the number of float32 roundings on the longest path of one output.

Where the ONNX text leaves a case open (binary classifiers with one score column, the unreached
targets of a tree ensemble, PROBIT's formula) the formulas follow onnxruntime, which is what
converters such as skl2onnx define their models against; each such place says so.

Labels are decided on the scores as float32 values, each exact score rounded once to float32
(the scores are tensor(float) in the definition), the first class on a tie: two classes whose
exact scores differ by less than float32 resolves are tied by the definition itself (a
hand-built tree test has 0.5 + 0.1 against 0.4 + 0.2, tied in float32).

Tree comparisons (``x <= threshold``...) are made between float32 values (the feature as fed,
the threshold as stored), exactly as the definition makes them: so the routing is exact, and the
exact output is the float64 sum of the leaf weights selected.

Test helper only: it imports ``onnx`` (to read attributes), which nothing under ``onemodel/``
may.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import helper, numpy_helper

ML = "ai.onnx.ml"
SQRT2 = math.sqrt(2.0)


# -- post transforms (value, magnitude) -----------------------------------------------------

def logistic(s: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-s))`` in float64, without overflow."""
    s = np.asarray(s, np.float64)
    e = np.exp(-np.abs(s))
    return np.where(s >= 0, 1 / (1 + e), e / (1 + e))


def probit(p: np.ndarray) -> np.ndarray:
    """PROBIT as onnxruntime (and onnx.reference) define it: ``sqrt(2) * erfinv(2p - 1)`` with
    erfinv by Winitzki's closed form (a = 0.147); NaN outside [0, 1]. The ONNX text names the
    transform without a formula; this closed form is within 2e-3 (relative) of the true
    inverse normal CDF on [1e-6, 1 - 1e-6] (see :func:`probit_vs_normal_quantile`)."""
    x = 2 * np.asarray(p, np.float64) - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.log((1 - x) * (1 + x))
        v = 2 / (math.pi * 0.147) + 0.5 * w
        t = -v + np.sqrt(v * v - w / 0.147)
        return SQRT2 * np.where(x < 0, -1.0, 1.0) * np.sqrt(t)


def probit_vs_normal_quantile(p: np.ndarray) -> np.ndarray:
    """``|probit(p) - Phi^-1(p)| / |Phi^-1(p)|``: how far the closed form is from the true
    inverse normal CDF (scipy's ndtri)."""
    from scipy.special import ndtri

    q = ndtri(np.asarray(p, np.float64))
    return np.abs(probit(p) - q) / np.abs(q)


def _probit_mag(p, mag_p):
    """Magnitude of PROBIT(p): its slope ``dy/dp = sqrt(2 pi) exp(y^2 / 2)`` times p's
    magnitude and (halved: dy/dx) times ``|x|`` for the rounding of x = 2p - 1 (near p = 0 or 1
    that rounding is all of 1 + x's or 1 - x's precision), plus the closed form's own
    cancellation (``-v + sqrt(v^2 - w/a)``, terms of size 2v, under a square root:
    ``sqrt(2) * 2v / sqrt(t)``) and the result's size."""
    x = 2 * np.asarray(p, np.float64) - 1
    y = probit(p)
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.log((1 - x) * (1 + x))
        v = 2 / (math.pi * 0.147) + 0.5 * w
        t = -v + np.sqrt(v * v - w / 0.147)
        cancel = np.where(t > 0, SQRT2 * 2 * np.abs(v) / np.sqrt(t), 0.0)
    slope = math.sqrt(2 * math.pi) * np.exp(np.minimum(y * y / 2, 700))
    return np.nan_to_num(slope * (mag_p + np.abs(x) / 2) + cancel + np.abs(y), nan=0.0)


def post_transform(s: np.ndarray, mag: np.ndarray, name: str):
    """NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO or PROBIT of scores s [N, C] (row-wise), with the
    magnitude of the result.

    SOFTMAX: ``p_i = exp(s_i - max s) / sum_j exp(s_j - max s)``; dp_i = p_i (ds_i - sum_j p_j
    ds_j), so a score error moves p_i by at most p_i (mag_i + max mag); the subtraction, exp,
    sum and division round relative to p_i (times ``|s_i - max s|`` for the exp argument).
    SOFTMAX_ZERO: the softmax of the non-zero scores of a row, 0 where the score is 0 (and a
    row of zeros stays 0), as onnxruntime writes it.
    """
    s = np.asarray(s, np.float64)
    mag = np.asarray(mag, np.float64)
    if name in ("NONE", "", None):
        return s, mag
    if name == "LOGISTIC":
        p = logistic(s)
        return p, p * (1 - p) * mag + p
    if name in ("SOFTMAX", "SOFTMAX_ZERO"):
        keep = np.ones(s.shape, bool) if name == "SOFTMAX" else s != 0
        m = np.where(keep, s, -np.inf).max(axis=-1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        e = np.where(keep, np.exp(np.where(keep, s - m, 0.0)), 0.0)
        total = e.sum(axis=-1, keepdims=True)
        p = np.where(total > 0, e / np.where(total > 0, total, 1), 0.0)
        spread = np.where(keep, np.abs(s - m), 0).max(axis=-1, keepdims=True)
        big = np.where(keep, mag, 0).max(axis=-1, keepdims=True)
        return p, p * (2 * big + spread + 1)
    if name == "PROBIT":
        return probit(s), _probit_mag(s, mag)
    raise ValueError(f"post_transform {name!r}")


# -- graph walk -------------------------------------------------------------------------------

def _attrs(node) -> dict:
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [b.decode() for b in v]
        elif hasattr(v, "data_type"):  # TensorProto
            v = numpy_helper.to_array(v)
        out[a.name] = v
    return out


def _labels(a, ints="classlabels_ints", strings="classlabels_strings"):
    if a.get(strings):
        return np.array(a[strings], dtype=object)
    return np.array(a.get(ints, []), dtype=np.int64)


def _f32(a) -> np.ndarray:
    """Scores as the float32 tensor holds them: each exact value rounded once (labels are
    decided on these)."""
    return np.asarray(a, np.float64).astype(np.float32)


def _rows(x) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return x[None, :] if x.ndim == 1 else x.reshape(x.shape[0], -1)


def run(model, feeds: dict, *, magnitudes: bool = False):
    """The exact outputs of ``model`` (onnx.ModelProto) on ``feeds``, in graph order: float
    values as float64 arrays (ZipMap: a list of dicts of float64), integers and strings as the
    definition gives them. With ``magnitudes``, ``(outputs, scales)``: each float output's
    magnitude (see the module docstring), None for the others."""
    env = {}
    for name, v in feeds.items():
        if isinstance(v, np.ndarray) and v.dtype.kind == "f":
            env[name] = (v, np.abs(v.astype(np.float64)))
        else:
            env[name] = (v, None)
    for init in model.graph.initializer:
        v = numpy_helper.to_array(init)
        env[init.name] = (v, np.abs(v.astype(np.float64)) if v.dtype.kind == "f" else None)
    versions = {o.domain or "": o.version for o in model.opset_import}
    for node in model.graph.node:
        domain = node.domain or ""
        fn = _FORMULAS.get((domain, node.op_type))
        if fn is None:
            raise NotImplementedError(f"no float64 formula for {domain}:{node.op_type}")
        ins = [env[i] for i in node.input if i]
        outs = fn(_attrs(node), versions[domain], *ins)
        for name, value in zip(node.output, outs):
            env[name] = value
    vals = [env[o.name][0] for o in model.graph.output]
    if magnitudes:
        return vals, [env[o.name][1] for o in model.graph.output]
    return vals


# -- formulas: each takes (attributes, opset, *(value, magnitude)) and returns the outputs ---

def _linear_classifier(a, _v, x):
    """Scores ``X @ coefficients.T + intercepts`` [N, C]; label of the largest score. With one
    coefficient row (binary; onnxruntime's convention, the ONNX text leaves it open) the label
    is the second when the score s > 0, and Z is ``[1 - p, p]`` with p = s, LOGISTIC(s) or
    PROBIT(s) (SOFTMAX leaves s as it is); without labels Z is the column s (PROBIT(s))."""
    xv, xm = _rows(x[0]), _rows(x[1])
    c = np.asarray(a["coefficients"], np.float64).reshape(-1, xv.shape[1])
    b = np.asarray(a.get("intercepts", [0.0] * c.shape[0]), np.float64)
    raw, mag = xv @ c.T + b, xm @ np.abs(c).T + np.abs(b)
    labels = _labels(a)
    tr = a.get("post_transform", "NONE")
    if c.shape[0] == 1:
        s, ms = raw[:, 0], mag[:, 0]
        y = np.where(s > 0, labels[1], labels[0]) if labels.size else (s > 0).astype(np.int64)
        if labels.size:
            p, mp = (post_transform(s, ms, tr) if tr in ("LOGISTIC", "PROBIT") else (s, ms))
            z, mz = np.stack([1 - p, p], 1), np.stack([mp + np.abs(1 - p), mp], 1)
        else:  # the one score column; onnxruntime applies PROBIT alone there
            z, mz = post_transform(s[:, None], ms[:, None], "PROBIT" if tr == "PROBIT"
                                   else "NONE")
    else:
        y = labels[np.argmax(_f32(raw), axis=1)]
        z, mz = post_transform(raw, mag, tr)
    return (np.asarray(y, dtype=labels.dtype), None), (z, mz)


def _linear_regressor(a, _v, x):
    """``X @ coefficients.T + intercepts`` [N, targets], then post_transform."""
    xv, xm = _rows(x[0]), _rows(x[1])
    t = int(a.get("targets", 1))
    c = np.asarray(a["coefficients"], np.float64).reshape(t, -1)
    b = np.asarray(a.get("intercepts", [0.0] * t), np.float64)
    return (post_transform(xv @ c.T + b, xm @ np.abs(c).T + np.abs(b),
                           a.get("post_transform", "NONE")),)


def _normalizer(a, _v, x):
    """Each row divided by its MAX (largest value, signed), L1 or L2 norm; a row whose norm is
    0 is left as it is. Magnitude: y_i = x_i / d moves with x_i (mag_i / |d|) and with d
    (|y_i| times d's relative magnitude)."""
    xv, xm = _rows(x[0]), _rows(x[1])
    norm = a.get("norm", "MAX")
    if norm == "MAX":
        d = xv.max(axis=1, keepdims=True)
        dm = np.take_along_axis(xm, xv.argmax(axis=1)[:, None], axis=1)
    elif norm == "L1":
        d, dm = np.abs(xv).sum(axis=1, keepdims=True), xm.sum(axis=1, keepdims=True)
    else:
        d = np.sqrt((xv * xv).sum(axis=1, keepdims=True))
        dm = (np.abs(xv) * xm).sum(axis=1, keepdims=True) / np.where(d == 0, 1, d) + np.abs(d)
    zero = d == 0
    dd = np.where(zero, 1, np.abs(d))
    y = np.where(zero, xv, xv / np.where(zero, 1, d))
    return (y, np.where(zero, xm, xm / dd + np.abs(y) * (dm / dd + 1))),


def _scaler(a, _v, x):
    """``(X - offset) * scale``, one value or one per feature."""
    off = np.asarray(a.get("offset", [0.0]), np.float64)
    sc = np.asarray(a.get("scale", [1.0]), np.float64)
    xv = np.asarray(x[0], np.float64)
    return ((xv - off) * sc, (np.asarray(x[1]) + np.abs(off)) * np.abs(sc)),


def _binarizer(a, _v, x):
    """1 where ``X > threshold``, else 0, in X's dtype (a comparison: exact)."""
    xv = np.asarray(x[0])
    y = (xv > a.get("threshold", 0.0)).astype(xv.dtype)
    return (y, np.abs(y.astype(np.float64)) if y.dtype.kind == "f" else None),


def _imputer(a, _v, x):
    """Elements equal to the replaced value (NaN matches NaN) become the imputed value (one, or
    one per feature of the last axis)."""
    xv = np.asarray(x[0])
    if xv.dtype.kind == "f":
        vals = np.asarray(a.get("imputed_value_floats", []), np.float64)
        r = a.get("replaced_value_float", 0.0)
        hit = np.isnan(xv) if math.isnan(r) else xv == r
        y = np.where(hit, vals if vals.size > 1 else vals[0], xv.astype(np.float64))
        return (y, np.abs(y)),
    vals = np.asarray(a.get("imputed_value_int64s", []), np.int64)
    hit = xv == a.get("replaced_value_int64", 0)
    return (np.where(hit, vals if vals.size > 1 else vals[0], xv).astype(xv.dtype), None),


def _one_hot(a, _v, x):
    """X [...] -> [..., len(cats)]: 1.0 at the category's position, zeros for an unknown one."""
    xv = np.asarray(x[0])
    cats = a.get("cats_strings") or a.get("cats_int64s") or []
    flat = [str(v) if a.get("cats_strings") else int(v) for v in xv.reshape(-1)]
    y = np.array([[1.0 if k == c else 0.0 for c in cats] for k in flat]).reshape(
        xv.shape + (len(cats),))
    return (y, y),


def _array_feature_extractor(_a, _v, x, idx):
    """The elements of X's last axis at the indices (a 1-D X gives one row)."""
    xv = np.asarray(x[0])
    i = np.asarray(idx[0]).reshape(-1)
    y = xv[..., i]
    if xv.ndim == 1:
        y = y[None, :]
    return (y.astype(np.float64) if y.dtype.kind == "f" else y,
            np.abs(y.astype(np.float64)) if y.dtype.kind == "f" else None),


def _feature_vectorizer(a, _v, *xs):
    """Each input as [N, C_i], cut or zero-padded to inputdimensions[i], concatenated; float."""
    parts = []
    for (xv, _), d in zip(xs, a["inputdimensions"]):
        r = _rows(xv)[:, :d]
        parts.append(np.pad(r, ((0, 0), (0, d - r.shape[1]))))
    y = np.concatenate(parts, axis=1)
    return (y, np.abs(y)),


def _label_encoder(a, version, x):
    """Opset 1: strings -> their index in classes_strings (else default_int64), int64 ->
    classes_strings[i] (else default_string). Opsets 2 and 4: keys_* -> values_* (the
    *_tensor attributes from 4), default_* for a key not listed; a NaN key matches a NaN input
    from opset 4 on (keys compare as values there), never before (NaN != NaN)."""
    xv = np.asarray(x[0])
    flat = list(xv.reshape(-1))
    if version == 1:
        cls = list(a.get("classes_strings", []))
        if xv.dtype == object:
            out = np.array([cls.index(v) if v in cls else a.get("default_int64", -1)
                            for v in flat], np.int64)
        else:
            out = np.array([cls[int(v)] if 0 <= v < len(cls) else a.get("default_string",
                                                                        "_Unused")
                            for v in flat], object)
        return (out.reshape(xv.shape), None),
    keys = next(np.asarray(a[k]).reshape(-1) for k in ("keys_strings", "keys_int64s",
                                                        "keys_floats", "keys_tensor") if k in a)
    vname = next(k for k in ("values_strings", "values_int64s", "values_floats",
                             "values_tensor") if k in a)
    values = np.asarray(a[vname]).reshape(-1)
    if vname == "values_strings":
        values, default = values.astype(object), a.get("default_string", "_Unused")
    elif vname == "values_int64s":
        default = a.get("default_int64", -1)
    elif vname == "values_floats":
        values, default = values.astype(np.float32), a.get("default_float", -0.0)
    if "default_tensor" in a:
        default = np.asarray(a["default_tensor"]).reshape(-1)[0]

    def match(k, v):
        if isinstance(k, float | np.floating) and math.isnan(k):
            return version >= 4 and isinstance(v, float | np.floating) and math.isnan(v)
        return k == v

    out = []
    for v in flat:
        hits = [j for j, k in enumerate(keys) if match(k, v)]
        out.append(values[hits[0]] if hits else default)
    y = np.array(out, dtype=values.dtype).reshape(xv.shape)
    if y.dtype.kind == "f":
        y = y.astype(np.float64)
        return (y, np.abs(y)),
    return (y, None),


def _zipmap(a, _v, x):
    """Scores [N, C] -> N maps {label: score}."""
    labels = _labels(a, "classlabels_int64s", "classlabels_strings")
    keys = [str(k) for k in labels] if labels.dtype == object else [int(k) for k in labels]
    xv, xm = _rows(x[0]), _rows(x[1])
    return ([dict(zip(keys, r)) for r in xv], [dict(zip(keys, r)) for r in xm]),


def _cast(a, _v, x):
    """Cast: a float target keeps the float64 value (its rounding is what is measured); an
    int64 target truncates; a string target is not covered."""
    to = a["to"]
    xv = np.asarray(x[0])
    if to in (1, 10, 11, 16):
        return (xv.astype(np.float64), x[1] if x[1] is not None else np.abs(
            xv.astype(np.float64))),
    if to == 7:
        return (xv.astype(np.int64), None),
    raise NotImplementedError(f"Cast to {to}")


def _identity(_a, _v, x):
    return x,


# -- tree ensembles ---------------------------------------------------------------------------

_MODES = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3, "BRANCH_EQ": 4,
          "BRANCH_NEQ": 5, "BRANCH_MEMBER": 6}


def _goes_true(mode: int, v: np.float32, t: np.float32, members, missing_true: bool) -> bool:
    """One node's test, between float32 values; a NaN feature follows missing_true."""
    if math.isnan(v):
        return missing_true
    return bool([v <= t, v < t, v >= t, v > t, v == t, v != t, v in members][mode])


def _walk(x_row, root, node_of):
    """The leaf reached from ``root``; node_of(key) -> ("leaf", key) or (mode, feature,
    threshold, members, missing_true, true_key, false_key)."""
    key = root
    for _ in range(100000):
        n = node_of(key)
        if n[0] == "leaf":
            return n[1]
        mode, f, t, members, miss, tk, fk = n
        key = tk if _goes_true(mode, x_row[f], t, members, miss) else fk
    raise AssertionError("cycle")


def _legacy_leaves(a, prefix: str, x):
    """Per row, the list of (target, weight) entries of the leaves reached, one list per tree,
    from TreeEnsembleRegressor/Classifier attributes; and the number of trees."""
    tids, nids = a["nodes_treeids"], a["nodes_nodeids"]
    values = a.get("nodes_values_as_tensor", a.get("nodes_values"))
    values = np.asarray(values, np.float32).reshape(-1)
    miss = a.get("nodes_missing_value_tracks_true") or [0] * len(tids)
    nodes = {}
    for i, key in enumerate(zip(tids, nids)):
        mode = a["nodes_modes"][i]
        nodes[key] = ("leaf", key) if mode == "LEAF" else (
            _MODES[mode], a["nodes_featureids"][i], values[i], (), bool(miss[i]),
            (key[0], a["nodes_truenodeids"][i]), (key[0], a["nodes_falsenodeids"][i]))
    children = {n[5] for n in nodes.values() if n[0] != "leaf"} | {
        n[6] for n in nodes.values() if n[0] != "leaf"}
    roots = {}
    for key in zip(tids, nids):
        if key not in children and key[0] not in roots:
            roots[key[0]] = key
    weights = a.get(f"{prefix}_weights_as_tensor", a.get(f"{prefix}_weights"))
    weights = np.asarray(weights, np.float32).reshape(-1).astype(np.float64)
    entries = {}
    for t, n, k, w in zip(a[f"{prefix}_treeids"], a[f"{prefix}_nodeids"], a[f"{prefix}_ids"],
                          weights):
        entries.setdefault((t, n), []).append((k, w))
    x32 = np.asarray(x, np.float32)
    x32 = x32[None, :] if x32.ndim == 1 else x32
    per_row = [[entries.get(_walk(r, roots[t], nodes.__getitem__), []) for t in sorted(roots)]
               for r in x32]
    return per_row, len(roots)


def _aggregate(per_row, n_targets: int, how: str, n_trees: int, base=None):
    """Scores [N, targets] (float64 sums of the float32 leaf weights), their magnitudes (sum of
    |weights|, |base|), and whether a leaf reached each target. SUM / AVERAGE add every entry
    (AVERAGE divides by the number of trees); MIN / MAX take the smallest / largest entry.
    A target no leaf reached is 0, without its base value (onnxruntime; the ONNX text adds
    base_values to every prediction, which is the same wherever some leaf reaches every
    target, as in every converted model)."""
    n = len(per_row)
    s = np.zeros((n, n_targets))
    mag = np.zeros((n, n_targets))
    has = np.zeros((n, n_targets), bool)
    for i, trees in enumerate(per_row):
        got = [[] for _ in range(n_targets)]
        for leaf in trees:
            for k, w in leaf:
                got[k].append(w)
        for k, ws in enumerate(got):
            if not ws:
                continue
            has[i, k] = True
            if how in ("SUM", "AVERAGE"):
                s[i, k] = math.fsum(ws) / (n_trees if how == "AVERAGE" else 1)
                mag[i, k] = math.fsum(abs(w) for w in ws) / (n_trees if how == "AVERAGE"
                                                             else 1)
            else:
                s[i, k] = min(ws) if how == "MIN" else max(ws)
                mag[i, k] = abs(s[i, k])
    if base is not None and len(base):
        b = np.asarray(base, np.float32).astype(np.float64)
        s = np.where(has, s + b, s)
        mag = np.where(has, mag + np.abs(b), mag)
    return s, mag, has


def _base(a):
    b = a.get("base_values_as_tensor", a.get("base_values"))
    return None if b is None else list(np.asarray(b).reshape(-1))


def _tree_regressor(a, _v, x):
    """TreeEnsembleRegressor: aggregate_function of the leaf weights each target gets, plus
    base_values, then post_transform; [N, n_targets]."""
    per_row, trees = _legacy_leaves(a, "target", x[0])
    s, mag, _ = _aggregate(per_row, int(a.get("n_targets", 1)),
                           a.get("aggregate_function", "SUM"), trees, _base(a))
    return post_transform(s, mag, a.get("post_transform", "NONE")),


def _tree_classifier(a, _v, x):
    """TreeEnsembleClassifier: class scores summed over the trees, plus base_values; label of
    the best score; scores after post_transform.

    Two classes (onnxruntime's convention; the ONNX text leaves it open): when one class id
    alone carries weights, its score s is the positive class's: label = second class when
    s > 0.5 (every weight >= 0) or s > 0 (some weight < 0); Z = [1 - p, p] (p = s or
    LOGISTIC(s)) when that id is 0 and the weights are >= 0, [-s, s] (or [LOGISTIC(-s),
    LOGISTIC(s)]) when some is negative, [PROBIT(s), 0] with PROBIT; the transform of [0, s]
    when that id is 1. With both ids, the label follows the second score alone by the same
    thresholds, and Z is the transform of both scores.
    """
    labels = _labels(a, "classlabels_int64s", "classlabels_strings")
    c = labels.size
    per_row, trees = _legacy_leaves(a, "class", x[0])
    base = _base(a)
    w, mag, has = _aggregate(per_row, c, "SUM", trees)
    tr = a.get("post_transform", "NONE")
    weights = np.asarray(a.get("class_weights_as_tensor", a.get("class_weights")), np.float32)
    positive = bool((weights >= 0).all())
    used = sorted(set(a["class_ids"]))
    if c == 2 and len(used) == 1:
        k = used[0]
        s, ms = w[:, k], mag[:, k]
        if base:
            b = float(np.float32(base[k] if len(base) > k else base[0]))
            s, ms = s + b, ms + abs(b)
        y = np.where(_f32(s) > 0.5 if positive else s > 0, labels[1], labels[0])
        if k == 1:
            z, mz = post_transform(np.stack([0 * s, s], 1), np.stack([0 * s, ms], 1), tr)
        elif tr == "PROBIT":
            p, mp = post_transform(s, ms, tr)
            z, mz = np.stack([p, 0 * p], 1), np.stack([mp, 0 * p], 1)
        elif positive:
            p, mp = post_transform(s, ms, tr) if tr == "LOGISTIC" else (s, ms)
            z, mz = np.stack([1 - p, p], 1), np.stack([mp + np.abs(1 - p), mp], 1)
        elif tr == "LOGISTIC":
            p, mp = post_transform(np.stack([-s, s], 1), np.stack([ms, ms], 1), tr)
            z, mz = p, mp
        else:
            z, mz = np.stack([-s, s], 1), np.stack([ms, ms], 1)
        return (np.asarray(y, dtype=labels.dtype), None), (z, mz)
    if base:
        b = np.asarray(base, np.float32).astype(np.float64)
        w, mag, has = w + b, mag + np.abs(b), np.ones_like(has)
    if c == 2:
        pos = np.where(has[:, 1], w[:, 1], np.where(has[:, 0], w[:, 0], 0))
        y = np.where(_f32(pos) > 0.5 if positive else pos > 0, labels[1], labels[0])
    else:
        y = labels[np.argmax(np.where(has, _f32(w), -np.inf), axis=1)]
    z, mz = post_transform(w, mag, tr)
    return (np.asarray(y, dtype=labels.dtype), None), (z, mz)


def _tree_ensemble(a, _v, x):
    """TreeEnsemble (ai.onnx.ml 5): nodes by position, children by index into the nodes or,
    where nodes_true/falseleafs is 1, into the leaves; modes 0 LEQ 1 LT 2 GTE 3 GT 4 EQ 5 NEQ
    6 MEMBER (sets in membership_values, separated by NaN, one per MEMBER node in order);
    aggregate_function 0 AVERAGE 1 SUM 2 MIN 3 MAX; post_transform 0 NONE 1 SOFTMAX 2 LOGISTIC
    3 SOFTMAX_ZERO 4 PROBIT."""
    modes = np.asarray(a["nodes_modes"]).reshape(-1).astype(int)
    splits = np.asarray(a["nodes_splits"], np.float32).reshape(-1)
    miss = a.get("nodes_missing_value_tracks_true") or [0] * modes.size
    sets, cur = [], []
    for v in np.asarray(a.get("membership_values", []), np.float32).reshape(-1):
        if math.isnan(v):
            sets.append(tuple(cur))
            cur = []
        else:
            cur.append(v)
    sets.append(tuple(cur))
    member_of = dict(zip(np.flatnonzero(modes == 6), sets))

    def node_of(key):
        kind, i = key
        if kind == "leaf":
            return "leaf", i
        return (modes[i], a["nodes_featureids"][i], splits[i], member_of.get(i, ()),
                bool(miss[i]),
                ("leaf" if a["nodes_trueleafs"][i] else "node", a["nodes_truenodeids"][i]),
                ("leaf" if a["nodes_falseleafs"][i] else "node", a["nodes_falsenodeids"][i]))

    targets = a["leaf_targetids"]
    weights = np.asarray(a["leaf_weights"], np.float32).reshape(-1).astype(np.float64)
    roots = a["tree_roots"]
    x32 = np.asarray(x[0], np.float32)
    per_row = [[[(targets[j], weights[j])] for j in
                (_walk(r, ("node", t), node_of) for t in roots)] for r in x32]
    how = ("AVERAGE", "SUM", "MIN", "MAX")[a.get("aggregate_function", 1)]
    s, mag, _ = _aggregate(per_row, int(a.get("n_targets", 1)), how, len(roots))
    tr = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")[a.get("post_transform", 0)]
    return post_transform(s, mag, tr),


# -- support vector machines ------------------------------------------------------------------

def _svm_kernel(a, x, sv):
    """K [N, n_sv] and its magnitude: LINEAR x.sv, POLY (gamma x.sv + coef0)^degree,
    RBF exp(-gamma |x - sv|^2), SIGMOID tanh(gamma x.sv + coef0). The RBF argument's
    magnitude is its own size, gamma * |x - sv|^2 (differences, squares and sums of
    non-negative terms, each rounded relative to the result), and K moves by K times the
    argument's error. (A float32 kernel that expands |x|^2 + |sv|^2 - 2 x.sv cancels terms of
    size (|x| + |sv|)^2 and does not meet this bound; one in float64 does.)"""
    kind = a.get("kernel_type", "LINEAR")
    gamma, coef0, degree = (list(a.get("kernel_params", [])) + [0.0, 0.0, 0.0])[:3]
    dot, dmag = x @ sv.T, np.abs(x) @ np.abs(sv).T
    if kind == "LINEAR":
        return dot, dmag
    if kind == "POLY":
        base = gamma * dot + coef0
        return base ** degree, degree * np.abs(base) ** (degree - 1) * (
            abs(gamma) * dmag + abs(coef0)) + np.abs(base) ** degree
    if kind == "RBF":
        d2 = ((x[:, None, :] - sv[None, :, :]) ** 2).sum(-1)
        k = np.exp(-gamma * d2)
        return k, k * (abs(gamma) * d2 + 1)
    if kind == "SIGMOID":
        arg = gamma * dot + coef0
        t = np.tanh(arg)
        return t, (1 - t * t) * (abs(gamma) * dmag + abs(coef0)) + np.abs(t)
    raise NotImplementedError(kind)


def _svm_regressor(a, _v, x):
    """``sum_i coefficients_i K(x, sv_i) + rho`` [N, 1]; one_class maps it to +1 / -1."""
    xv = _rows(x[0])
    n_sv = a.get("n_supports", 0)
    coefs = np.asarray(a["coefficients"], np.float32).astype(np.float64)
    rho = float(np.float32(a.get("rho", [0.0])[0]))
    if n_sv:
        sv = np.asarray(a["support_vectors"], np.float32).astype(np.float64).reshape(n_sv, -1)
        k, km = _svm_kernel(a, xv, sv)
        y, m = k @ coefs[:n_sv] + rho, km @ np.abs(coefs[:n_sv]) + abs(rho)
    else:
        k, km = _svm_kernel(a, xv, coefs.reshape(1, -1))
        y, m = k[:, 0] + rho, km[:, 0] + abs(rho)
    if a.get("one_class", 0):
        y = np.where(y > 0, 1.0, -1.0)
        m = np.abs(y)
    return post_transform(y[:, None], m[:, None], a.get("post_transform", "NONE")),


def _couple(r: np.ndarray, k: int) -> np.ndarray:
    """libsvm's multiclass_probability (Wu, Lin and Weng 2004, method 2) on the pairwise
    probabilities r [k, k]: the iteration as libsvm and onnxruntime run it (stopped when the
    largest |Qp - pQp| is below 0.005 / k, at most max(100, k) passes)."""
    q = np.zeros((k, k))
    for t in range(k):
        q[t, t] = sum(r[j, t] ** 2 for j in range(k) if j != t)
        for j in range(k):
            if j != t:
                q[t, j] = -r[j, t] * r[t, j]
    p = np.full(k, 1.0 / k)
    for _ in range(max(100, k)):
        qp = q @ p
        pqp = p @ qp
        if np.abs(qp - pqp).max() < 0.005 / k:
            break
        for t in range(k):
            diff = (-qp[t] + pqp) / q[t, t]
            p[t] += diff
            pqp = (pqp + diff * (diff * q[t, t] + 2 * qp[t])) / (1 + diff) ** 2
            qp = (qp + diff * q[t]) / (1 + diff)
            p /= 1 + diff
    return p


def _svm_classifier(a, _v, x):
    """SVMClassifier. With support vectors (vectors_per_class): one-vs-one decision values
    ``d_ij = sum_{v in i} coef[j-1, v] K(x, v) + sum_{v in j} coef[i, v] K(x, v) + rho_ij``,
    a vote to i when d_ij > 0 (else to j), label of the most votes; with prob_a / prob_b,
    Platt probabilities ``1 / (1 + exp(d a + b))`` clipped to [1e-7, 1 - 1e-7], coupled by
    :func:`_couple`, label of the most probable class. Z: the probabilities, else the decision
    values; with two classes and no probabilities (onnxruntime's convention) label = first
    class when d > 0, Z = [-d, d]. Magnitudes: the decision values'; for the probabilities,
    1 + that times the largest Platt slope |a|/4 times 2, the coupling's amplification of a
    change in the pairwise probabilities (at most 1.6 measured over 2000 random 3-class
    tables), assuming a float32 run stops after the same pass (away from the 0.005 / k
    stopping threshold the rounding cannot move that decision).
    """
    xv = _rows(x[0])
    labels = _labels(a)
    c = labels.size
    coefs = np.asarray(a["coefficients"], np.float32).astype(np.float64)
    rho = np.asarray(a.get("rho", []), np.float32).astype(np.float64)
    per = list(a["vectors_per_class"])
    sv = np.asarray(a["support_vectors"], np.float32).astype(np.float64).reshape(sum(per), -1)
    k, km = _svm_kernel(a, xv, sv)
    starts = np.concatenate([[0], np.cumsum(per)]).astype(int)
    coefs = coefs.reshape(c - 1, -1)
    dec, dmag, votes = [], [], np.zeros((xv.shape[0], c), np.int64)
    for i in range(c):
        for j in range(i + 1, c):
            si, sj = slice(starts[i], starts[i + 1]), slice(starts[j], starts[j + 1])
            d = k[:, si] @ coefs[j - 1, si] + k[:, sj] @ coefs[i, sj] + rho[len(dec)]
            m = km[:, si] @ np.abs(coefs[j - 1, si]) + km[:, sj] @ np.abs(coefs[i, sj]) + abs(
                rho[len(dec)])
            votes[:, i] += d > 0
            votes[:, j] += d <= 0
            dec.append(d)
            dmag.append(m)
    dec, dmag = np.stack(dec, 1), np.stack(dmag, 1)
    tr = a.get("post_transform", "NONE")
    pa = np.asarray(a.get("prob_a", []), np.float32).astype(np.float64)
    pb = np.asarray(a.get("prob_b", []), np.float32).astype(np.float64)
    if pa.size:
        probs = []
        for row in dec:
            r = np.zeros((c, c))
            pair = 0
            for i in range(c):
                for j in range(i + 1, c):
                    p = 1 - logistic(row[pair] * pa[pair] + pb[pair])
                    p = min(max(float(p), 1e-7), 1 - 1e-7)
                    r[i, j], r[j, i] = p, 1 - p
                    pair += 1
            probs.append(_couple(r, c))
        probs = np.array(probs)
        pm = np.broadcast_to(1 + dmag.max(axis=1, keepdims=True) * np.abs(pa).max() / 2,
                             probs.shape)
        y = labels[np.argmax(_f32(probs), axis=1)]
        z, mz = post_transform(probs, pm, tr)
    elif c == 2:
        s = dec[:, 0]
        y = np.where(s > 0, labels[0], labels[1])
        z, mz = np.stack([-s, s], 1), np.stack([dmag[:, 0]] * 2, 1)
    else:
        y = labels[np.argmax(votes, axis=1)]
        z, mz = post_transform(dec, dmag, tr)
    return (np.asarray(y, dtype=labels.dtype), None), (z, mz)


_FORMULAS = {
    (ML, "LinearClassifier"): _linear_classifier,
    (ML, "LinearRegressor"): _linear_regressor,
    (ML, "Normalizer"): _normalizer,
    (ML, "Scaler"): _scaler,
    (ML, "Binarizer"): _binarizer,
    (ML, "Imputer"): _imputer,
    (ML, "OneHotEncoder"): _one_hot,
    (ML, "ArrayFeatureExtractor"): _array_feature_extractor,
    (ML, "FeatureVectorizer"): _feature_vectorizer,
    (ML, "LabelEncoder"): _label_encoder,
    (ML, "ZipMap"): _zipmap,
    (ML, "TreeEnsembleRegressor"): _tree_regressor,
    (ML, "TreeEnsembleClassifier"): _tree_classifier,
    (ML, "TreeEnsemble"): _tree_ensemble,
    (ML, "SVMRegressor"): _svm_regressor,
    (ML, "SVMClassifier"): _svm_classifier,
    ("", "Cast"): _cast,
    ("", "Identity"): _identity,
}
