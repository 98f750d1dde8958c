"""Tree ensembles of the ``ai.onnx.ml`` domain (ONNX 1-2, ONNX-ML operator definitions
TreeEnsembleClassifier-1, 3 and 5, TreeEnsembleRegressor-1, 3 and 5, TreeEnsemble-5): the trees
flattened into arrays and walked for every row at once, leaf weights aggregated per target, then
``post_transform``.

Where the ONNX text leaves a case open (binary classifiers with one score column, ties), the
kernels do what onnxruntime does, since that is what converters such as skl2onnx are tested
against. Scores of float32 input are summed in float32, tree by tree, as onnxruntime does.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import EvaluationError, InvalidModelError, UnsupportedError
from ...operators import kernel
from ._ml import ML, binary_scores, class_labels, feature_rows, post_transform

_LEGACY_MODES = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3,
                 "BRANCH_EQ": 4, "BRANCH_NEQ": 5, "BRANCH_MEMBER": 6, "LEAF": -1}
#: TreeEnsemble's ``post_transform`` codes (0 to 4)
_TRANSFORM_CODES = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")


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
    s, _ = _aggregate(forest, feature_rows(x), ctx.attr("aggregate_function"), base,
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
    labels, strings = class_labels(ctx, "classlabels_int64s", "classlabels_strings")
    n_cls = labels.size
    if n_cls == 0:
        raise InvalidModelError("TreeEnsembleClassifier needs class labels")
    forest = _legacy_forest(ctx, "class", n_cls, "class id")
    base = ctx.attr("base_values_as_tensor", None)
    base = ctx.attr("base_values", None) if base is None else list(np.asarray(base).reshape(-1))
    transform = ctx.attr("post_transform")
    xf = feature_rows(x)
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
            z = binary_scores(s, transform, 0 if all_positive else 2)
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
    s, _ = _aggregate(forest, feature_rows(xin), agg, None, _acc_dtype(xin))
    transform = _TRANSFORM_CODES[int(a.get("post_transform", 0))]
    out_dtype = xin.dtype if xin.dtype.kind == "f" else np.float32
    return post_transform(s, transform).astype(out_dtype)

