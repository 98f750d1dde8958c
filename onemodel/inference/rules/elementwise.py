"""Inference rules of the element-wise operators (the kernels of
``onemodel/evaluate/kernels/elementwise.py``): the output has the multidirectional broadcast of
the inputs' shapes (Clause 6.6; opset < 7 binary operators: the first input's shape) and the
element type the definition's constraints give."""

from __future__ import annotations

from ..registry import rule


def _binary(ctx, a, b):
    if ctx.opset < 7:
        return list(a.shape) if a.shape is not None else None
    return ctx.broadcast(a, b)


for _name in ("Add", "Sub", "Mul"):
    rule(_name, since=(1, 6, 7, 13, 14))(_binary)
