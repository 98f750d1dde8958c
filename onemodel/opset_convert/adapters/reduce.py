"""Version adapters of the reduce family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...ir import Node
from ...lazy import np
from ...operators import adapter
from ..generic import AttributeAdded, AttributeToInput, NegativeAxis, _set_input

REDUCE = ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
          "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare")


class ReduceAxes(AttributeToInput):
    """Reduce* (ReduceSum at 13, the others at 18): the ``axes`` attribute became the optional
    input 1, and ``noop_with_empty_axes`` (default 0) was added. Up: the attribute becomes a
    constant input (absent stays absent: every axis reduced, as ``noop_with_empty_axes`` 0
    says). Down: a constant input becomes the attribute; no axes (or an empty constant) with
    ``noop_with_empty_axes=1`` is the identity, and the node becomes an Identity; a computed
    axes input is refused."""

    attribute = "axes"
    index = 1

    @classmethod
    def down(cls, step, node):
        noop = step.attr("noop_with_empty_axes", 0)
        step.remove_attr("noop_with_empty_axes")
        given = step.input(1)
        value = step.constant(given) if given is not None else None
        if given is None or (value is not None and np.asarray(value).size == 0):
            if noop:
                return [Node(op_type="Identity", inputs=[step.input(0)],
                             outputs=list(node.outputs), name=node.name)]
            _set_input(node, 1, "")
            return None
        return super().down(step, node)


class Axes11(NegativeAxis):
    """Reduce* at 11: negative axes admitted."""

    attribute = "axes"


class Axis11(NegativeAxis):
    """ArgMax, ArgMin at 11: a negative axis admitted."""


class ArgIndex12(AttributeAdded):
    """ArgMax, ArgMin at 12: ``select_last_index`` (default 0, the first index) added."""

    added = ("select_last_index",)


class TopK10(AttributeToInput):
    """TopK at 10: the attribute ``k`` became input 1 (a one-element int64 tensor)."""

    attribute = "k"
    index = 1
    scalar = True


class TopK11:
    """TopK at 11: ``largest`` and ``sorted`` added (defaults 1: the largest, sorted, as
    before) and a negative axis admitted. Down: both refused at another value, a negative axis
    made non-negative with the rank."""

    class _Added(AttributeAdded):
        added = ("largest", "sorted")

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        TopK11._Added.down(step, node)
        return Axis11.down(step, node)


for _op in REDUCE:
    adapter(_op, since=13 if _op == "ReduceSum" else 18)(ReduceAxes)
    adapter(_op, since=11)(Axes11)
for _op in ("ArgMax", "ArgMin"):
    adapter(_op, since=11)(Axis11)
    adapter(_op, since=12)(ArgIndex12)
adapter("TopK", since=10)(TopK10)
adapter("TopK", since=11)(TopK11)
