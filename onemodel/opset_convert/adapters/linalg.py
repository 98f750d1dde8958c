"""Version adapters of the linalg family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...lazy import np
from ...operators import adapter
from ..generic import _set_input


class Gemm7:
    """Gemm at 7: C is broadcast to (M, N) unidirectionally (numpy rules) and the legacy
    ``broadcast`` attribute is dropped. Up: dropped (legacy broadcasting of C, a suffix of
    (M, N) or one element, is numpy's). Down: C of Y's shape needs nothing; C whose shape is a
    suffix of Y's, or of one element, gets ``broadcast=1``; anything else, or shapes not known,
    is refused."""

    @staticmethod
    def up(step, node):
        step.remove_attr("broadcast")
        return None

    @staticmethod
    def down(step, node):
        y, c = step.dims(node.outputs[0]), step.dims(step.input(2))
        if c is not None and None not in c and y is not None and None not in y:
            if tuple(c) == tuple(y):
                return None
            if all(d == 1 for d in c) or tuple(y[len(y) - len(c):]) == tuple(c):
                step.set_attr("broadcast", 1)
                return None
        step.refuse(f"C of shape {c} broadcast to Y of shape {y} has no legacy equivalent "
                    "(a suffix of Y's shape or one element)")


class Gemm11:
    """Gemm at 11: C became optional. Down: an omitted C is a constant 0 of the element type
    (which must be known)."""

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        if step.input(2) is not None:
            return None
        code = step.elem(step.input(0))
        if code is None:
            step.refuse(f"C is omitted and the element type of {step.input(0)!r} is not known")
        from ...ir.dtypes import info
        _set_input(node, 2, step.add_constant(np.zeros((), dtype=info(code).dtype), "C"))
        return None


adapter("Gemm", since=7)(Gemm7)
adapter("Gemm", since=11)(Gemm11)
