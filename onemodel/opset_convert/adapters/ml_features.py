"""Version adapters of the ml_features family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...operators import adapter
from ..generic import AttributeAdded


class Tensors4(AttributeAdded):
    """LabelEncoder at 4: ``keys_tensor``, ``values_tensor``, ``default_tensor`` (no default)
    added: refused going down when set."""

    added = ("keys_tensor", "values_tensor", "default_tensor")


adapter("LabelEncoder", since=4, domain="ai.onnx.ml")(Tensors4)
