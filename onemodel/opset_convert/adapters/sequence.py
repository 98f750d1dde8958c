"""Version adapters of the sequence family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...operators import adapter


class OptionalHasElement18:
    """OptionalHasElement at 18: the input became optional (and may be a tensor or a
    sequence). Down: refused without the input (the type check refuses a tensor)."""

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        if step.input(0) is None:
            step.refuse(f"no input, which OptionalHasElement-{step.target} requires")
        return None


adapter("OptionalHasElement", since=18)(OptionalHasElement18)
