"""Version adapters of the rnn family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...operators import adapter
from ..generic import AttributeAdded, _plain


class Layout14(AttributeAdded):
    """GRU, LSTM, RNN at 14: ``layout`` (default 0: sequence first, as before) added."""

    added = ("layout",)


class OutputSequence7:
    """GRU, LSTM, RNN at 7: ``output_sequence`` dropped. Before 7 it said whether the node
    gives the sequence output Y (1) or may leave it out (0, the default); from 7 Y is given
    exactly when the node names it, and the values computed are the same. Up: the attribute
    removed. Down: ``output_sequence=1`` set when the node names Y, so that the earlier
    definition is told to give it."""

    @staticmethod
    def up(step, node):
        step.remove_attr("output_sequence")
        return None

    @staticmethod
    def down(step, node):
        if node.outputs and node.outputs[0]:
            step.set_attr("output_sequence", 1)
        return None


class GRU3:
    """GRU at 3: the default of ``direction`` corrected from the misspelt 'foward' (GRU-1's
    default, meaning forward) to 'forward'; ``linear_before_reset`` added (default 0: GRU-1's
    equation of the hidden gate); Y_h, required by GRU-1, made optional.

    Up: a direction spelt 'foward' is written 'forward'. Down: the direction is written out
    ('forward' when unset, so that the node does not rest on the misspelt default);
    ``linear_before_reset=1`` (the linear transformation before the reset gate) is refused;
    an omitted Y_h is given a name no other value has (GRU-1 always gives it)."""

    class _Added(AttributeAdded):
        added = ("linear_before_reset",)

    @staticmethod
    def up(step, node):
        if step.has_attr("direction") and _plain(step.attr("direction")) == "foward":
            step.set_attr("direction", "forward")
        return None

    @staticmethod
    def down(step, node):
        GRU3._Added.down(step, node)
        if not step.has_attr("direction"):
            step.set_attr("direction", "forward")
        outs = list(node.outputs)
        if len(outs) < 2 or not outs[1]:
            outs = (outs + [""])[:1] + [step.fresh(f"{node.name or 'GRU'}_Y_h")] + outs[2:]
            node.outputs = outs
        return None


for _op in ("GRU", "LSTM", "RNN"):
    adapter(_op, since=14)(Layout14)
    adapter(_op, since=7)(OutputSequence7)
adapter("GRU", since=3)(GRU3)
