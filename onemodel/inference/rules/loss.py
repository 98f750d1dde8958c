"""Inference rules of the loss functions (the kernels of ``onemodel/evaluate/kernels/loss.py``):
NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (ONNX 1-2).

The scores (or log-probabilities) are ``[N, C, d1, ..., dk]``, the target ``[N, d1, ..., dk]``
and the optional per-class weight ``[C]``; the loss is that ``[N, d1, ..., dk]`` tensor for
``reduction="none"`` and a scalar ``[]`` for ``sum`` and ``mean`` (the default).
SoftmaxCrossEntropyLoss's second output ``log_prob`` has the scores' shape. Element types: the
scores' (constraint ``T``). A score of rank < 2, a target whose rank or extents do not match,
a weight not ``[C]``, or a reduction other than the three is a contradiction (Clause 9.4).
"""

from __future__ import annotations

from ...operators import rule
from .. import dims as D

_REDUCTIONS = ("none", "sum", "mean")


def _shapes(ctx, x, target, weight) -> tuple:
    """(the loss output's shape, the scores' shape with what target and weight tell of it),
    see the module doc; contradictions reported."""
    reduction = ctx.attr("reduction")
    if reduction not in _REDUCTIONS:
        ctx.contradiction(f"reduction {reduction!r} is not one of none, sum, mean")
    xs, ts = x.shape, target.shape
    if xs is not None and len(xs) < 2:
        ctx.contradiction(f"the input has rank {len(xs)}; at least 2 is needed")
        xs = None
    scores = list(xs) if xs is not None else None
    if weight is not None and weight.shape is not None:
        if len(weight.shape) != 1:
            ctx.contradiction(f"the weight has shape {D.shape_text(weight.shape)}; [C] is "
                              f"needed")
        elif scores is not None:
            scores[1] = ctx.unify(scores[1], weight.shape[0], "class counts")
    if scores is None:
        per_item = list(ts) if ts is not None else None
    elif ts is None:
        per_item = [scores[0]] + scores[2:]
    elif len(ts) != len(scores) - 1:
        ctx.contradiction(f"the target {D.shape_text(ts)} does not match the input "
                          f"{D.shape_text(xs)} without its class axis")
        per_item = [scores[0]] + scores[2:]
    else:
        per_item = [ctx.unify(a, b, "input and target extents")
                    for a, b in zip([scores[0]] + scores[2:], ts)]
        scores = per_item[:1] + scores[1:2] + per_item[1:]
    if reduction not in _REDUCTIONS:
        return None, scores
    return (per_item if reduction == "none" else []), scores


@rule("NegativeLogLikelihoodLoss")
def negative_log_likelihood_loss(ctx, x, target, weight=None):
    """NegativeLogLikelihoodLoss: the loss's shape by ``reduction`` (module doc)."""
    return _shapes(ctx, x, target, weight)[0]


@rule("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy_loss(ctx, scores, labels, weights=None):
    """SoftmaxCrossEntropyLoss: ``(loss, log_prob)``: the loss by ``reduction``, log_prob of
    the scores' shape."""
    return _shapes(ctx, scores, labels, weights)
