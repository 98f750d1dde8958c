"""Version adapters of the attention family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...operators import adapter
from ..function_body import FunctionBody
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


class SwiGLU28(FunctionBody):
    """SwiGLU, introduced at 28: below it, its function body (Swish of one input times the
    other, Swish written out in turn below 24)."""


adapter("SwiGLU", since=28)(SwiGLU28)
