"""Version adapters of the norm family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...operators import adapter
from ..generic import LegacyAttribute


def _outputs(node) -> int:
    """How many outputs a node gives (named ones)."""
    return sum(1 for o in node.outputs if o)


class Consumed6(LegacyAttribute):
    """BatchNormalization, InstanceNormalization at 6: consumed_inputs dropped."""


class BatchNormalization7:
    """BatchNormalization at 7: ``is_test`` (default 0: training, batch statistics) dropped;
    from 7 a node of one output is inference. Up: a node with ``is_test`` set and one output
    drops it; training (``is_test`` 0) is refused. Down: a node of one output gets
    ``is_test=1``; one with the training outputs is refused."""

    @staticmethod
    def up(step, node):
        if not step.attr("is_test", 0) or _outputs(node) > 1:
            step.refuse("is_test=0 is training mode (batch statistics), which "
                        f"BatchNormalization-{step.target} writes with its training outputs")
        step.remove_attr("is_test")
        return None

    @staticmethod
    def down(step, node):
        if _outputs(node) > 1:
            step.refuse("the training outputs (mean, var, saved_mean, saved_var)")
        step.set_attr("is_test", 1)
        return None


class BatchNormalization9:
    """BatchNormalization at 9: ``spatial`` (default 1: one mean per channel) dropped. Up:
    ``spatial=0`` is refused; down unchanged."""

    @staticmethod
    def up(step, node):
        if not step.attr("spatial", 1):
            step.refuse("spatial=0 (statistics per element, not per channel) has no "
                        f"equivalent from opset {step.target}")
        step.remove_attr("spatial")
        return None

    @staticmethod
    def down(step, node):
        return None


class BatchNormalization14:
    """BatchNormalization at 14: ``training_mode`` added and the training outputs changed
    (running_mean, running_var instead of mean, var, saved_mean, saved_var). A node of one
    output (inference) is the same in both; one with more outputs, or with training_mode=1,
    is refused."""

    @staticmethod
    def up(step, node):
        if _outputs(node) > 1:
            step.refuse("the training outputs of opset 9 (mean, var, saved_mean, saved_var) "
                        f"differ from those of opset {step.target}")
        return None

    @staticmethod
    def down(step, node):
        if step.attr("training_mode", 0) or _outputs(node) > 1:
            step.refuse("training mode (training_mode=1 or the running_mean/running_var "
                        "outputs)")
        step.remove_attr("training_mode")
        return None


for _op in ("BatchNormalization", "InstanceNormalization"):
    adapter(_op, since=6)(Consumed6)
adapter("BatchNormalization", since=7)(BatchNormalization7)
adapter("BatchNormalization", since=9)(BatchNormalization9)
adapter("BatchNormalization", since=14)(BatchNormalization14)
