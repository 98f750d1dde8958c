"""Version adapters of the ml family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...operators import adapter
from ..generic import AttributeAdded


class AsTensor3(AttributeAdded):
    """TreeEnsembleClassifier, TreeEnsembleRegressor at 3: the ``*_as_tensor`` attributes
    (the same values as double tensors; no default) added: refused going down when set."""

    added = ("base_values_as_tensor", "class_weights_as_tensor", "nodes_hitrates_as_tensor",
             "nodes_values_as_tensor", "target_weights_as_tensor")


class Tensors4(AttributeAdded):
    """LabelEncoder at 4: ``keys_tensor``, ``values_tensor``, ``default_tensor`` (no default)
    added: refused going down when set."""

    added = ("keys_tensor", "values_tensor", "default_tensor")


for _op in ("TreeEnsembleClassifier", "TreeEnsembleRegressor"):
    adapter(_op, since=3, domain="ai.onnx.ml")(AsTensor3)
adapter("LabelEncoder", since=4, domain="ai.onnx.ml")(Tensors4)
