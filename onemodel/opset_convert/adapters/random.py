"""Version adapters of the random family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...lazy import np
from ...operators import adapter
from ..generic import LegacyAttribute, _set_input


class Dropout6(LegacyAttribute):
    """Dropout at 6: consumed_inputs dropped."""


class Dropout7:
    """Dropout at 7: ``is_test`` (default 0: training, elements dropped at random) dropped;
    from 7 Dropout is the identity at inference. Up: ``is_test`` set is dropped, training
    refused. Down: ``is_test=1``."""

    @staticmethod
    def up(step, node):
        if not step.attr("is_test", 0):
            step.refuse("is_test=0 drops elements at random (training), which Dropout-7 "
                        "does not")
        step.remove_attr("is_test")
        return None

    @staticmethod
    def down(step, node):
        step.set_attr("is_test", 1)
        return None


class Dropout12:
    """Dropout at 12: the ``ratio`` attribute became the optional input 1 (a float scalar),
    the optional input 2 ``training_mode`` (default false: the identity) and ``seed`` were
    added. Up: ``ratio`` a float32 constant. Down: ``ratio`` a constant, ``training_mode``
    absent or a constant false, ``seed`` dropped (no randomness at inference)."""

    @staticmethod
    def up(step, node):
        if step.has_attr("ratio"):
            r = step.attr("ratio")
            step.remove_attr("ratio")
            _set_input(node, 1, step.add_constant(np.asarray(r, dtype=np.float32), "ratio"))
        return None

    @staticmethod
    def down(step, node):
        training = step.input(2)
        if training is not None:
            t = step.constant(training)
            if t is None or bool(np.asarray(t).reshape(-1)[0]):
                step.refuse(f"training_mode {training!r} is not a constant false")
        ratio = step.input(1)
        if ratio is not None:
            r = step.constant(ratio)
            if r is None:
                step.refuse(f"input 1 {ratio!r} (ratio) is computed, not a constant: "
                            f"Dropout-{step.target} needs it as an attribute")
            step.set_attr("ratio", float(np.asarray(r).reshape(-1)[0]))
        step.remove_attr("seed")
        node.inputs = node.inputs[:1]
        return None


adapter("Dropout", since=6)(Dropout6)
adapter("Dropout", since=7)(Dropout7)
adapter("Dropout", since=12)(Dropout12)
