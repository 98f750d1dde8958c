"""Version adapters of the ml_trees family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...operators import adapter
from ..generic import AttributeAdded


class AsTensor3(AttributeAdded):
    """TreeEnsembleClassifier, TreeEnsembleRegressor at 3: the ``*_as_tensor`` attributes
    (the same values as double tensors; no default) added: refused going down when set."""

    added = ("base_values_as_tensor", "class_weights_as_tensor", "nodes_hitrates_as_tensor",
             "nodes_values_as_tensor", "target_weights_as_tensor")


for _op in ("TreeEnsembleClassifier", "TreeEnsembleRegressor"):
    adapter(_op, since=3, domain="ai.onnx.ml")(AsTensor3)
