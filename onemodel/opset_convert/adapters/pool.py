"""Version adapters of the pool family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...operators import adapter
from ..generic import AttributeAdded, ExplicitWindow


class CountIncludePad7(AttributeAdded):
    """AveragePool at 7: ``count_include_pad`` (default 0, as before) added."""

    added = ("count_include_pad",)


class CeilMode10(AttributeAdded):
    """AveragePool at 10: ``ceil_mode`` (default 0: floor, as before) added."""

    added = ("ceil_mode",)


class Dilations(AttributeAdded):
    """MaxPool at 10, AveragePool at 19, LpPool at 18: ``dilations`` (default 1 along each
    axis) and, where new, ``ceil_mode`` (default 0) added. A node setting dilations of 1 goes
    down without them."""

    added = ("ceil_mode", "dilations")

    @classmethod
    def down(cls, step, node):
        if step.has_attr("dilations") and all(d == 1 for d in step.attr("dilations")):
            step.remove_attr("dilations")
        return super().down(step, node)


class MaxPool8:
    """MaxPool at 8: the optional output ``Indices`` and ``storage_order`` (default 0) added.
    Down: refused when the node gives Indices or sets storage_order to 1."""

    class _Added(AttributeAdded):
        added = ("storage_order",)

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        if len(node.outputs) > 1 and node.outputs[1]:
            step.refuse(f"the Indices output has no equivalent before opset {step.source}")
        node.outputs = node.outputs[:1]
        return MaxPool8._Added.down(step, node)


class Window11(ExplicitWindow):
    """AveragePool, LpPool, MaxPool, MaxUnpool at 11 (:class:`ExplicitWindow`)."""


for _op in ("AveragePool", "LpPool", "MaxPool", "MaxUnpool"):
    adapter(_op, since=11)(Window11)
class GlobalLpPool2:
    """GlobalLpPool at 2: ``p`` became an INT (before, a FLOAT). Up: an integral p is kept,
    another refused; down: the same value as a float."""

    @staticmethod
    def up(step, node):
        p = step.attr("p")
        if p != int(p):
            step.refuse(f"p={p} is not an integer, which opset 2 requires")
        step.set_attr("p", int(p))
        return None

    @staticmethod
    def down(step, node):
        step.set_attr("p", float(step.attr("p")))
        return None


class LpPool2(GlobalLpPool2):
    """LpPool at 2: ``p`` became an INT, and ``kernel_shape`` required (a node without it is
    refused going up)."""

    @staticmethod
    def up(step, node):
        if not step.has_attr("kernel_shape"):
            step.refuse(f"kernel_shape is absent, which LpPool-{step.target} requires")
        return GlobalLpPool2.up(step, node)


adapter("GlobalLpPool", since=2)(GlobalLpPool2)
adapter("LpPool", since=2)(LpPool2)
adapter("AveragePool", since=7)(CountIncludePad7)
adapter("AveragePool", since=10)(CeilMode10)
adapter("AveragePool", since=19)(Dilations)
adapter("MaxPool", since=8)(MaxPool8)
adapter("MaxPool", since=10)(Dilations)
adapter("LpPool", since=18)(Dilations)
