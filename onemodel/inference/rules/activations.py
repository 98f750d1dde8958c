"""Inference rules of the activation functions and the softmax family (the kernels of
``onemodel/evaluate/kernels/activations.py``, same keys and versions).

Every output has its input's shape and element type (ONNX 1-2; Clause 9.2: the output extents
are the input's, so symbolic dimensions propagate). ``PRelu``'s slope is unidirectionally
broadcastable to ``X`` from opset 7 (Clause 6.6.3): a slope of higher rank, or an extent other
than 1 that cannot equal ``X``'s, is a contradiction (Clause 9.4). ``Softmax``, ``LogSoftmax``
and ``Hardmax`` from opset 11 need an input of rank >= 1 and ``axis`` in ``[-rank, rank)``; at
opset 1 any axis is taken (the input is coerced to 2-D at it).
"""

from __future__ import annotations

from ...operators import rule
from .. import dims as D
from ._util import int_attr, same_shape


def _same(ctx, x):
    return same_shape(ctx, x)


for _name in ("Relu", "LeakyRelu", "Elu", "Selu", "Celu", "Sigmoid", "HardSigmoid", "HardSwish",
              "Softplus", "Softsign", "Gelu", "Mish", "ThresholdedRelu", "Swish", "Shrink"):
    rule(_name)(_same)


def unidirectional(ctx, a, b, what: str = "inputs") -> list | None:
    """The shape of ``a`` with ``b`` unidirectionally broadcast to it (Clause 6.6.3): ``a``'s
    shape, an extent of ``a`` made known where ``b`` has an int other than 1 (which ``a``'s
    must equal); a contradiction where ``b`` has the greater rank or an int extent other than
    1 that differs from ``a``'s."""
    if a.shape is None:
        return None
    out = list(a.shape)
    if b is None or b.shape is None:
        return out
    shift = len(out) - len(b.shape)
    if shift < 0:
        ctx.contradiction(f"{what}: {D.shape_text(b.shape)} does not broadcast to "
                          f"{D.shape_text(a.shape)} (higher rank)")
        return out
    for k, d in enumerate(b.shape):
        if type(d) is int and d != 1:
            out[shift + k] = ctx.unify(out[shift + k], d, f"{what} extents")
    return out


@rule("PRelu")
def prelu(ctx, x, slope):
    """PRelu: ``X``'s shape; from opset 7 the slope broadcasts to it (Clause 6.6.3); before,
    a rank-1 slope is one value per channel (axis 1)."""
    if ctx.opset < 7:
        return same_shape(ctx, x)
    return unidirectional(ctx, x, slope, "slope")


def _softmax(ctx, x):
    if x.shape is None or ctx.opset < 11:
        return same_shape(ctx, x)
    rank = len(x.shape)
    if rank == 0:
        ctx.contradiction("the input has rank 0; rank >= 1 is needed")
    else:
        ctx.axis(int_attr(ctx, "axis"), rank)
    return same_shape(ctx, x)


for _name in ("Softmax", "LogSoftmax", "Hardmax"):
    rule(_name)(_softmax)
