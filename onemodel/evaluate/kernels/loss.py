"""Loss functions (ONNX 1-2): NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.

Both take scores or log-probabilities ``input`` [N, C, d1, ..., dk] and class indices
``target`` [N, d1, ..., dk] (int32 or int64), with an optional per-class ``weight`` [C]:

* ``loss[n, d...] = -input[n, target[n, d...], d...] * weight[target[n, d...]]``, and 0 where
  ``target`` equals ``ignore_index`` (which need not be a valid class; no element is read there);
* ``reduction`` ``none`` returns that [N, d1, ..., dk] tensor; ``sum`` its sum; ``mean`` (the
  default) its sum divided by the sum of the weights of the elements not ignored (their count
  without ``weight``).

A target outside ``[0, C)`` that is not ``ignore_index`` is refused (InvalidModelError). float16
and bfloat16 are computed in float32 and rounded back once.
"""

from __future__ import annotations

import numpy as np

from ...errors import EvaluationError, UnsupportedError
from ...operators import kernel
from ._util import back, wide_all
from .activations import _log_softmax


def _nll(ctx, x, target, weight, name: str):
    if x.ndim < 2:
        raise EvaluationError(f"{name} input has rank {x.ndim}; at least 2 expected")
    if target.shape != (x.shape[0],) + x.shape[2:]:
        raise EvaluationError(f"{name}: target shape {target.shape} does not match input "
                              f"{x.shape} without its class axis")
    if target.dtype.kind not in "iu":
        raise EvaluationError(f"{name}: target must be an integer tensor, not {target.dtype}")
    reduction = ctx.attr("reduction")
    if reduction not in ("none", "sum", "mean"):
        raise UnsupportedError(f"{name} reduction {reduction!r} is not none, sum or mean")
    C = x.shape[1]
    ignore = ctx.attr("ignore_index")
    t = target.astype(np.int64)
    keep = np.ones(t.shape, bool) if ignore is None else t != ignore
    if ((t < 0) | (t >= C))[keep].any():
        raise EvaluationError(f"{name}: a target is outside [0, {C}) and is not ignore_index")
    safe = np.where(keep, t, 0)
    picked = np.take_along_axis(x, safe[:, None], axis=1)[:, 0]
    if weight is not None:
        if weight.shape != (C,):
            raise EvaluationError(f"{name}: weight shape {weight.shape} is not ({C},)")
        w = np.where(keep, weight[safe], 0).astype(x.dtype)
    else:
        w = keep.astype(x.dtype)
    loss = -picked * w
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.sum(loss, dtype=x.dtype)
    return np.asarray(np.sum(loss, dtype=x.dtype) / np.sum(w, dtype=x.dtype), x.dtype)


@kernel("NegativeLogLikelihoodLoss")
def negative_log_likelihood_loss(ctx, x, target, weight=None):
    """NegativeLogLikelihoodLoss: ``input`` holds log-probabilities; see the module doc."""
    args, dt = wide_all(x) if weight is None else wide_all(x, weight)
    return back(_nll(ctx, args[0], target, None if weight is None else args[1],
                      "NegativeLogLikelihoodLoss"), dt)


@kernel("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy_loss(ctx, scores, labels, weights=None):
    """SoftmaxCrossEntropyLoss: ``log_prob = LogSoftmax(scores, axis=1)`` then the negative
    log-likelihood loss of the module doc; outputs ``(loss, log_prob)``."""
    args, dt = wide_all(scores) if weights is None else wide_all(scores, weights)
    if args[0].ndim < 2:
        raise EvaluationError(f"SoftmaxCrossEntropyLoss scores have rank {args[0].ndim}; at "
                              f"least 2 expected")
    log_prob = _log_softmax(args[0], 1)
    loss = _nll(ctx, log_prob, labels, None if weights is None else args[1],
                "SoftmaxCrossEntropyLoss")
    return back(loss, dt), (back(log_prob, dt) if ctx.output_used(1) else None)
