"""Helpers shared by the kernels of the ``ai.onnx.ml`` operators (:mod:`.ml_linear`,
:mod:`.ml_trees`, :mod:`.ml_features`): the ``post_transform`` of classifier and regressor
scores, the two score columns of a binary classifier, the [N, F] view of an input, and class
labels.

Not a kernel family (it registers nothing). Where the ONNX text leaves a case open (binary
classifiers with one score column, PROBIT), these follow onnxruntime, since that is what
converters such as skl2onnx are tested against.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import EvaluationError, UnsupportedError

#: the domain of the traditional machine-learning operators
ML = "ai.onnx.ml"


# -- post transforms --------------------------------------------------------------------------

def _erfinv(x: np.ndarray) -> np.ndarray:
    """Inverse error function, the closed-form approximation onnxruntime uses for PROBIT."""
    x = np.asarray(x, dtype=np.float64)
    sgn = np.where(x < 0, -1.0, 1.0)
    w = np.log((1 - x) * (1 + x))
    v = 2 / (math.pi * 0.147) + 0.5 * w
    return sgn * np.sqrt(-v + np.sqrt(v * v - w / 0.147))


def probit(x: np.ndarray) -> np.ndarray:
    """``sqrt(2) * erfinv(2x - 1)``."""
    return math.sqrt(2) * _erfinv(2 * np.asarray(x, dtype=np.float64) - 1)


def logistic(x):
    """``1 / (1 + exp(-x))`` in float64, computed without overflow."""
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def post_transform(scores: np.ndarray, name: str) -> np.ndarray:
    """Apply NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO or PROBIT row-wise to scores [N, C]."""
    s = np.asarray(scores, dtype=np.float64)
    if name in ("NONE", "", None):
        return s
    if name == "LOGISTIC":
        return logistic(s)
    if name == "SOFTMAX":
        if s.shape[-1] == 0:
            return s
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    if name == "SOFTMAX_ZERO":
        nz = s != 0
        m = np.where(nz, s, -np.inf).max(axis=-1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0)
        e = np.where(nz, np.exp(s - m), 0.0)
        total = e.sum(axis=-1, keepdims=True)
        return np.where(total > 0, e / np.where(total > 0, total, 1), 0.0)
    if name == "PROBIT":
        return probit(s)
    raise UnsupportedError(f"post_transform {name!r} is not NONE, SOFTMAX, LOGISTIC, "
                           "SOFTMAX_ZERO or PROBIT")


def binary_scores(score: np.ndarray, transform: str, kind: int) -> np.ndarray:
    """Two score columns from the one score of a binary classifier (onnxruntime's rules).

    ``kind``: 0/1 when every weight is positive (the score is a probability p: [1 - p, p],
    p = LOGISTIC(s) with that transform);
    2/3 otherwise ([-s, s], or [logistic(-s), logistic(s)] with LOGISTIC). PROBIT gives the one
    transformed column followed by 0.
    """
    s = np.asarray(score, dtype=np.float64)
    if transform == "PROBIT":
        return np.stack([probit(s), np.zeros_like(s)], axis=1)
    if kind in (0, 1):
        p = logistic(s) if transform == "LOGISTIC" else s
        return np.stack([1 - p, p], axis=1)
    if transform == "LOGISTIC":
        return np.stack([logistic(-s), logistic(s)], axis=1)
    if kind == 2:
        return np.stack([-s, s], axis=1)
    return np.stack([s, -s], axis=1)


def feature_rows(x) -> np.ndarray:
    """The input of an ml operator as float64 [N, F] (a 1-D input is one row)."""
    x = np.asarray(x)
    if x.dtype == object:
        raise EvaluationError("a numeric tensor is expected, not strings")
    x = x.astype(np.float64)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2:
        x = x.reshape(x.shape[0], -1)
    return x


def class_labels(ctx, ints_name: str, strings_name: str):
    """The class labels (int64 array or object array of str) and whether they are strings."""
    strings = ctx.attr(strings_name, None)
    if strings:
        return np.array(strings, dtype=object), True
    ints = ctx.attr(ints_name, None)
    return np.array(ints if ints else [], dtype=np.int64), False

