"""Version adapters of the conv family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...operators import adapter
from ..generic import ExplicitWindow


class Window11(ExplicitWindow):
    """Conv, ConvTranspose at 11 (:class:`~onemodel.opset_convert.generic.ExplicitWindow`)."""


for _op in ("Conv", "ConvTranspose"):
    adapter(_op, since=11)(Window11)
