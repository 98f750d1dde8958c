"""Version adapters of the ml_trees family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...ir import Attribute, Node, Tensor
from ...lazy import np
from ...operators import adapter
from ..generic import AttributeAdded

#: the float lists opset 1 has for the ``*_as_tensor`` attributes added at 3
_AS_TENSOR = ("base_values", "class_weights", "nodes_hitrates", "nodes_values",
              "target_weights")
#: TreeEnsemble-5's codes of the legacy modes, aggregate functions and post transforms
_MODES = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3, "BRANCH_EQ": 4,
          "BRANCH_NEQ": 5}
_AGGREGATES = {"AVERAGE": 0, "SUM": 1, "MIN": 2, "MAX": 3}
_TRANSFORMS = {"NONE": 0, "SOFTMAX": 1, "LOGISTIC": 2, "SOFTMAX_ZERO": 3, "PROBIT": 4}


class AsTensor3(AttributeAdded):
    """TreeEnsembleClassifier, TreeEnsembleRegressor at 3: the ``*_as_tensor`` attributes
    (the same values as double tensors; no default) added. Up unchanged; down, a tensor whose
    every value is a float32 exactly is written as the float list of opset 1 (``nodes_values``
    for ``nodes_values_as_tensor``, ...); one holding a double that float32 cannot hold is
    refused."""

    added = tuple(f"{n}_as_tensor" for n in _AS_TENSOR)

    @staticmethod
    def down(step, node):
        for name in _AS_TENSOR:
            a = node.attribute(f"{name}_as_tensor")
            if a is None:
                continue
            t = step.attr(f"{name}_as_tensor")
            values = t.numpy().reshape(-1) if isinstance(t, Tensor) else np.asarray(t)
            narrow = values.astype(np.float32)
            same = narrow.astype(values.dtype) == values
            if not bool(np.all(same | (np.isnan(values) & np.isnan(narrow)))):
                k = int(np.flatnonzero(~same)[0])
                step.refuse(f"{name}_as_tensor holds {float(values[k])!r}, which float32 "
                            f"(the {name} of opset 1) cannot hold exactly")
            if step.has_attr(name):
                step.refuse(f"both {name} and {name}_as_tensor are set")
            step.remove_attr(f"{name}_as_tensor")
            step.set_attr(name, [float(v) for v in narrow], 6)
        return None


for _op in ("TreeEnsembleClassifier", "TreeEnsembleRegressor"):
    adapter(_op, since=3, domain="ai.onnx.ml")(AsTensor3)


def _strings(v) -> list:
    return [s.decode("utf-8") if isinstance(s, bytes) else str(s) for s in (v or [])]


def _floats(step, name: str) -> list:
    """The float values of legacy attribute ``name`` or its ``_as_tensor`` form."""
    t = step.attr(f"{name}_as_tensor") if step.has_attr(f"{name}_as_tensor") else None
    if t is not None:
        return [float(v) for v in t.numpy().reshape(-1)]
    return [float(v) for v in (step.attr(name) or [])]


class Deprecated5:
    """TreeEnsembleClassifier, TreeEnsembleRegressor at 5: deprecated (the same signature),
    TreeEnsemble their successor. Down unchanged. Up: a regressor TreeEnsemble expresses
    exactly becomes TreeEnsemble (:meth:`regressor`), followed by an Add of its base values
    when it has any (:func:`_base_added` says when that is exact); any other node is kept,
    deprecated, with a note saying why (Part 1, Clause 14.5: a consumer still evaluates
    it)."""

    @staticmethod
    def down(step, node):
        return None

    @staticmethod
    def up(step, node):
        if node.op_type == "TreeEnsembleRegressor":
            attrs, base, why = Deprecated5.regressor(step, node)
            if attrs is not None and base is not None and (step.scope.versions.get("") or 0) < 7:
                attrs, why = None, "base_values, added by an Add, which broadcasts from opset 7"
            if attrs is not None:
                y = node.outputs[0]
                out = step.fresh(f"{node.name or 'TreeEnsemble'}_scores") if base else y
                nodes = [Node(op_type="TreeEnsemble", domain=node.domain, name=node.name,
                              inputs=list(node.inputs), outputs=[out], attributes=attrs)]
                if base is not None:
                    step.declare(out, 1)
                    b = step.add_constant(np.asarray(base, np.float32), "base_values")
                    nodes.append(Node(op_type="Add", inputs=[out, b], outputs=[y]))
                return nodes
        else:
            why = "TreeEnsemble has no class labels"
        step.note(f"{node.op_type} kept at ai.onnx.ml {step.target}, where it is deprecated: "
                  f"{why}")
        return None

    @staticmethod
    def regressor(step, node):
        """``(attributes, base, None)``: those of the TreeEnsemble-5 that computes what the
        regressor does, and the base values to add to its output (None when all are 0); or
        ``(None, None, reason)`` when there is none (a phrase)."""
        x = step.input(0)
        if step.elem(x) != 1:
            return None, None, (f"the input {x!r} is not known to be float (TreeEnsemble's output "
                          "has the input's type, the regressor's is float)")
        base = _floats(step, "base_values")
        base = base if any(b != 0 for b in base) else None
        trees = [int(v) for v in step.attr("nodes_treeids") or []]
        ids = [int(v) for v in step.attr("nodes_nodeids") or []]
        feats = [int(v) for v in step.attr("nodes_featureids") or []]
        modes = _strings(step.attr("nodes_modes"))
        values = _floats(step, "nodes_values") or [0.0] * len(trees)
        trues = [int(v) for v in step.attr("nodes_truenodeids") or []]
        falses = [int(v) for v in step.attr("nodes_falsenodeids") or []]
        missing = [int(v) for v in step.attr("nodes_missing_value_tracks_true") or []] \
            or [0] * len(trees)
        n = len(trees)
        if any(len(a) != n for a in (ids, feats, modes, values, trues, falses, missing)):
            return None, None, "the nodes_* attributes differ in length"
        pos = {(t, i): k for k, (t, i) in enumerate(zip(trees, ids))}
        if len(pos) != n:
            return None, None, "two nodes have the same tree and node id"
        w_tree = [int(v) for v in step.attr("target_treeids") or []]
        w_node = [int(v) for v in step.attr("target_nodeids") or []]
        w_ids = [int(v) for v in step.attr("target_ids") or []]
        weights = _floats(step, "target_weights")
        if not len(w_tree) == len(w_node) == len(w_ids) == len(weights):
            return None, None, "the target_* attributes differ in length"
        leaf_weight = {}
        for t, i, k, w in zip(w_tree, w_node, w_ids, weights):
            if (t, i) in leaf_weight:
                return None, None, (f"leaf {i} of tree {t} has more than one weight (a "
                              "TreeEnsemble leaf has one)")
            leaf_weight[(t, i)] = (k, w)
        how = _strings([step.attr("aggregate_function")])[0]
        post = _strings([step.attr("post_transform")])[0]
        if how not in _AGGREGATES or post not in _TRANSFORMS:
            return None, None, (f"aggregate_function {how!r} or post_transform {post!r} is not "
                          "known")
        why = _base_added(base, post, int(step.attr("n_targets") or 1), trees, ids, modes,
                          leaf_weight)
        if why is not None:
            return None, None, why
        inner = [k for k in range(n) if modes[k] != "LEAF"]
        if any(modes[k] not in _MODES for k in inner):
            return None, None, "a node mode is not one of the BRANCH_* modes"
        index = {k: j for j, k in enumerate(inner)}
        leaves: dict = {}
        leaf_t, leaf_w = [], []

        def leaf(k):
            if k not in leaves:
                got = leaf_weight.get((trees[k], ids[k]))
                if got is None and how in ("MIN", "MAX"):
                    raise _Inexpressible(f"leaf {ids[k]} of tree {trees[k]} has no weight, "
                                         f"which {how} would skip")
                leaves[k] = len(leaf_t)
                leaf_t.append(got[0] if got else 0)
                leaf_w.append(got[1] if got else 0.0)
            return leaves[k]

        def child(k, nid):
            c = pos.get((trees[k], nid))
            if c is None:
                raise _Inexpressible(f"tree {trees[k]} has no node {nid}")
            return (leaf(c), 1) if modes[c] == "LEAF" else (index[c], 0)

        split, feat, mode, miss, tn, tl, fn, fl = ([] for _ in range(8))
        try:
            for k in inner:
                split.append(values[k])
                feat.append(feats[k])
                mode.append(_MODES[modes[k]])
                miss.append(missing[k])
                (a, b), (c, d) = child(k, trues[k]), child(k, falses[k])
                tn.append(a)
                tl.append(b)
                fn.append(c)
                fl.append(d)
            referenced = {(trees[k], v) for k in inner for v in (trues[k], falses[k])}
            roots, seen = [], set()
            for k in range(n):
                if trees[k] in seen or (trees[k], ids[k]) in referenced:
                    continue
                seen.add(trees[k])
                if modes[k] == "LEAF":  # a tree of one leaf: a node whose both ways lead to it
                    j = leaf(k)
                    roots.append(len(split))
                    split.append(0.0)
                    feat.append(0)
                    mode.append(0)
                    miss.append(0)
                    tn.append(j)
                    fn.append(j)
                    tl.append(1)
                    fl.append(1)
                else:
                    roots.append(index[k])
            if len(seen) != len(set(trees)):
                return None, None, "a tree has no root"
        except _Inexpressible as e:
            return None, None, e.reason
        f32 = np.float32
        if any(f32(v) != v for v in split + leaf_w):
            return None, None, ("a split or weight is not a float32 (TreeEnsemble's are the "
                          "input's type)")
        return [
            Attribute.make("aggregate_function", _AGGREGATES[how]),
            Attribute.make("post_transform", _TRANSFORMS[post]),
            Attribute.make("n_targets", int(step.attr("n_targets") or 1)),
            Attribute.make("tree_roots", roots, 7),
            Attribute.make("nodes_featureids", feat, 7),
            Attribute.make("nodes_modes", Tensor.from_numpy(np.asarray(mode, np.uint8))),
            Attribute.make("nodes_splits", Tensor.from_numpy(np.asarray(split, f32))),
            Attribute.make("nodes_truenodeids", tn, 7),
            Attribute.make("nodes_trueleafs", tl, 7),
            Attribute.make("nodes_falsenodeids", fn, 7),
            Attribute.make("nodes_falseleafs", fl, 7),
            Attribute.make("nodes_missing_value_tracks_true", miss, 7),
            Attribute.make("leaf_targetids", leaf_t, 7),
            Attribute.make("leaf_weights", Tensor.from_numpy(np.asarray(leaf_w, f32)))], base, None


def _base_added(base, post: str, n_targets: int, trees, ids, modes, leaf_weight):
    """Why TreeEnsemble followed by an Add of ``base`` does not compute what the regressor
    does (a phrase), or None when it does: the regressor adds a base value after aggregating
    (as an Add after TreeEnsemble does) and before post_transform, and only to a target some
    leaf gave a weight (onnxruntime; :mod:`onemodel.evaluate.kernels.ml_trees`), so every row
    must reach a weight of every target: some tree whose every leaf weighs that target."""
    if base is None:
        return None
    if post != "NONE":
        return f"base_values with post_transform {post} (applied after them)"
    if len(base) != n_targets:
        return f"{len(base)} base_values for {n_targets} targets"
    if any(np.float32(b) != b for b in base):
        return "a base value is not a float32"
    leaves: dict = {}
    for t, i, m in zip(trees, ids, modes):
        if m == "LEAF":
            leaves.setdefault(t, []).append(leaf_weight.get((t, i), (None,))[0])
    reached = {ks[0] for ks in leaves.values() if ks and len(set(ks)) == 1}
    missing = sorted(set(range(n_targets)) - reached)
    if missing:
        return (f"target {missing[0]} is not weighed by every leaf of some tree, so a row may "
                "get no base value")
    return None


class _Inexpressible(Exception):
    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


for _op in ("TreeEnsembleClassifier", "TreeEnsembleRegressor"):
    adapter(_op, since=5, domain="ai.onnx.ml")(Deprecated5)


class TreeEnsemble5:
    """TreeEnsemble, introduced at ai.onnx.ml 5: below it, the TreeEnsembleRegressor that
    computes the same: each tree (from ``tree_roots``) written out as nodes of one tree id, a
    leaf as a LEAF node with its one target weight. Refused when the input is not float (the
    regressor's output is float, TreeEnsemble's the input's type), or a node uses the MEMBER
    mode (6), which the regressor does not have."""

    #: attached to the first definition: converts below it
    decomposition = True

    @staticmethod
    def up(step, node):
        return None  # a first definition: nothing comes before it to go up from

    @staticmethod
    def down(step, node):
        x = step.input(0)
        if step.elem(x) != 1:
            step.refuse(f"the input {x!r} is not known to be float (the regressor's output is "
                        "float, TreeEnsemble's the input's type)")

        def tensor(name):
            v = step.attr(name)
            return [] if v is None else (v.numpy() if isinstance(v, Tensor)
                                         else np.asarray(v)).reshape(-1).tolist()

        modes = [int(m) for m in tensor("nodes_modes")]
        if 6 in modes:
            step.refuse("a node uses the MEMBER mode, which TreeEnsembleRegressor does not have")
        feats = [int(v) for v in step.attr("nodes_featureids") or []]
        splits = [float(v) for v in tensor("nodes_splits")]
        tn = [int(v) for v in step.attr("nodes_truenodeids") or []]
        fn = [int(v) for v in step.attr("nodes_falsenodeids") or []]
        tl = [int(v) for v in step.attr("nodes_trueleafs") or []]
        fl = [int(v) for v in step.attr("nodes_falseleafs") or []]
        miss = [int(v) for v in step.attr("nodes_missing_value_tracks_true") or []] \
            or [0] * len(modes)
        leaf_t = [int(v) for v in step.attr("leaf_targetids") or []]
        leaf_w = [float(v) for v in tensor("leaf_weights")]
        n = len(modes)
        if any(len(a) != n for a in (feats, splits, tn, fn, tl, fl, miss)) \
                or len(leaf_t) != len(leaf_w):
            step.refuse("the nodes_* or leaf_* attributes differ in length")
        names = {v: k for k, v in _MODES.items()}
        out = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids",
                               "nodes_modes", "nodes_values", "nodes_truenodeids",
                               "nodes_falsenodeids", "nodes_missing_value_tracks_true",
                               "target_treeids", "target_nodeids", "target_ids",
                               "target_weights")}
        for t, root in enumerate(int(r) for r in step.attr("tree_roots") or []):
            ids: dict = {}

            def node_id(i, leaf, tree=t, ids=ids):
                """The node id of node (or leaf) ``i`` in this tree, made on first use."""
                key = (leaf, i)
                if key in ids:
                    return ids[key], False
                if not 0 <= i < (len(leaf_t) if leaf else n):
                    step.refuse(f"tree {tree} refers to {'leaf' if leaf else 'node'} {i}, "
                                "which does not exist")
                ids[key] = len(ids)
                return ids[key], True

            todo = [(root, 0)]
            node_id(root, 0)
            while todo:
                i, leaf = todo.pop()
                nid = ids[(leaf, i)]
                out["nodes_treeids"].append(t)
                out["nodes_nodeids"].append(nid)
                if leaf:
                    for k, v in (("nodes_featureids", 0), ("nodes_modes", "LEAF"),
                                 ("nodes_values", 0.0), ("nodes_truenodeids", 0),
                                 ("nodes_falsenodeids", 0),
                                 ("nodes_missing_value_tracks_true", 0),
                                 ("target_treeids", t), ("target_nodeids", nid),
                                 ("target_ids", leaf_t[i]), ("target_weights", leaf_w[i])):
                        out[k].append(v)
                    continue
                if modes[i] not in names:
                    step.refuse(f"node {i} has mode {modes[i]}, which is not known")
                a, new_a = node_id(tn[i], tl[i])
                b, new_b = node_id(fn[i], fl[i])
                for k, v in (("nodes_featureids", feats[i]), ("nodes_modes", names[modes[i]]),
                             ("nodes_values", splits[i]), ("nodes_truenodeids", a),
                             ("nodes_falsenodeids", b),
                             ("nodes_missing_value_tracks_true", miss[i])):
                    out[k].append(v)
                todo.extend(c for c, new in (((fn[i], fl[i]), new_b), ((tn[i], tl[i]), new_a))
                            if new)
        transform = {v: k for k, v in _TRANSFORMS.items()}.get(int(step.attr("post_transform")))
        how = {v: k for k, v in _AGGREGATES.items()}.get(int(step.attr("aggregate_function")))
        if transform is None or how is None:
            step.refuse("aggregate_function or post_transform is not one of the known codes")
        attrs = [Attribute.make("n_targets", int(step.attr("n_targets") or 1)),
                 Attribute.make("aggregate_function", how),
                 Attribute.make("post_transform", transform)]
        types = {"nodes_modes": 8, "nodes_values": 6, "target_weights": 6}
        attrs += [Attribute.make(k, v, types.get(k, 7)) for k, v in out.items()]
        return [Node(op_type="TreeEnsembleRegressor", domain=node.domain, name=node.name,
                     inputs=list(node.inputs), outputs=list(node.outputs), attributes=attrs)]


adapter("TreeEnsemble", since=5, domain="ai.onnx.ml")(TreeEnsemble5)
