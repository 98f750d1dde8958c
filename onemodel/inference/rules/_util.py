"""Helpers shared by the rule modules."""

from __future__ import annotations

from ..value import Value


def same_shape(ctx, x: Value, i: int = 0) -> Value:
    """Output ``i`` with ``x``'s shape and the constrained element type (unary operators)."""
    return ctx.tensor(x.shape, i=i)
