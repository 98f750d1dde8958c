"""Version adapters of the rnn family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...operators import adapter
from ..generic import AttributeAdded


class Layout14(AttributeAdded):
    """GRU, LSTM, RNN at 14: ``layout`` (default 0: sequence first, as before) added."""

    added = ("layout",)


for _op in ("GRU", "LSTM", "RNN"):
    adapter(_op, since=14)(Layout14)
