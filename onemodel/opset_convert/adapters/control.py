"""Version adapters of the control family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...operators import adapter


class Loop11:
    """Loop at 11: loop-carried values became optional (none at all admitted). Down: a Loop
    without one is refused."""

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        if len(node.inputs) < 3:
            step.refuse(f"no loop-carried value, which Loop-{step.target} requires one of")
        return None


adapter("Loop", since=11)(Loop11)
