"""Version adapters of the attention family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...operators import adapter
from ..generic import AttributeAdded, InputAdded


class Attention24(InputAdded):
    """Attention at 24: the optional input 6 ``nonpad_kv_seqlen`` added."""

    index = 6


class Attention25(AttributeAdded):
    """Attention at 25: ``left_window_size`` and ``right_window_size`` (default -1: no
    window) added."""

    added = ("left_window_size", "right_window_size")


adapter("Attention", since=24)(Attention24)
adapter("Attention", since=25)(Attention25)
