"""Version adapters of the signal family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...lazy import np
from ...operators import adapter
from ..function_body import FunctionBody
from ..generic import _set_input


def _non_negative(step, axis: int) -> int:
    """``axis`` counted from the front of the input (its last, real/imaginary axis included,
    as both definitions count a negative axis): written so, no reader can take a negative
    one another way."""
    if axis >= 0:
        return axis
    r = step.rank(step.input(0))
    if r is None:
        step.refuse(f"axis {axis} is negative and the rank of {step.input(0)!r} is not known")
    return axis + r


class DFT20:
    """DFT at 20: the attribute ``axis`` (default 1) became the optional input 2, a scalar
    (default -2). Up: the attribute's value, or 1, becomes a constant scalar input. Down: a
    constant axis input (or its absence: -2) becomes the attribute; a computed one is
    refused. A negative axis is written non-negative (the input's rank must be known)."""

    @staticmethod
    def up(step, node):
        axis = _non_negative(step, int(step.attr("axis", 1)))
        step.remove_attr("axis")
        _set_input(node, 2, step.add_constant(np.asarray(axis, np.int64), "axis"))
        return None

    @staticmethod
    def down(step, node):
        given = step.input(2)
        if given is None:
            axis = -2
        else:
            v = step.constant(given)
            if v is None or np.asarray(v).size != 1:
                step.refuse(f"input 2 {given!r} (axis) is not a constant scalar: DFT-"
                            f"{step.target} needs it as an attribute")
            axis = int(np.asarray(v).reshape(-1)[0])
        step.set_attr("axis", _non_negative(step, axis))
        _set_input(node, 2, "")
        return None


adapter("DFT", since=20)(DFT20)


class Window17(FunctionBody):
    """HannWindow, HammingWindow, BlackmanWindow, introduced at 17: below it, their function
    bodies (cosines of a Range, itself introduced at 11)."""


for _op in ("HannWindow", "HammingWindow", "BlackmanWindow"):
    adapter(_op, since=17)(Window17)
