"""Linear models and support vector machines of the ``ai.onnx.ml`` domain (ONNX 1-2, ONNX-ML
operator definitions LinearClassifier-1, LinearRegressor-1, SVMClassifier-1, SVMRegressor-1):
scores that are linear in the features, or in a kernel of them, then ``post_transform``.

Where the ONNX text leaves a case open (binary classifiers with one score column, PROBIT,
ties), the kernels do what onnxruntime does, since that is what converters such as skl2onnx are
tested against. Scores are accumulated in float64 and returned as float32.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import EvaluationError, InvalidModelError, UnsupportedError
from ...operators import kernel
from ._ml import ML, binary_scores, class_labels, feature_rows, logistic, post_transform, probit

# -- linear models ----------------------------------------------------------------------------

@kernel("LinearClassifier", domain=ML)
def linear_classifier(ctx, x):
    """LinearClassifier: scores ``X @ coefficients.T + intercepts``, labels by the best score.

    X [N, F] (or [F]); ``coefficients`` C * F values; outputs Y labels [N] (int64 or string)
    and Z scores [N, C] after ``post_transform``. With one coefficient row (binary) the label is
    the second one when the raw score s is positive, and Z is ``[1 - p, p]`` with p = s (or
    LOGISTIC(s), PROBIT(s)), as onnxruntime writes it; without labels Z is the one column s.
    """
    xf = feature_rows(x)
    coefs = np.asarray(ctx.attrs["coefficients"], dtype=np.float64)
    n_feat = xf.shape[1]
    if n_feat == 0 or coefs.size % n_feat:
        raise EvaluationError(f"{coefs.size} coefficients do not fit {n_feat} features")
    coefs = coefs.reshape(-1, n_feat)
    n_cls = coefs.shape[0]
    intercepts = np.asarray(ctx.attr("intercepts", None) or [0.0] * n_cls, dtype=np.float64)
    if intercepts.size != n_cls:
        raise InvalidModelError(f"{intercepts.size} intercepts for {n_cls} classes")
    labels, strings = class_labels(ctx, "classlabels_ints", "classlabels_strings")
    transform = ctx.attr("post_transform")
    raw = xf @ coefs.T + intercepts
    if n_cls == 1:
        # one coefficient row: onnxruntime reads the score as the positive class's probability
        # (after LOGISTIC when asked; SOFTMAX and SOFTMAX_ZERO leave it as it is)
        s = raw[:, 0]
        y = (s > 0).astype(np.int64)
        if labels.size == 2:
            y = np.where(s > 0, labels[1], labels[0])
        elif labels.size:
            raise InvalidModelError("a binary LinearClassifier needs two class labels")
        p = logistic(s) if transform == "LOGISTIC" else probit(s) if transform == "PROBIT" \
            else s
        if labels.size == 2:
            z = np.stack([1 - p, p], axis=1)
        else:  # no labels: the score column as it is (onnxruntime applies PROBIT only)
            z = (probit(s) if transform == "PROBIT" else s)[:, None]
    else:
        if labels.size != n_cls:
            raise InvalidModelError(f"{labels.size} class labels for {n_cls} coefficient rows")
        z = post_transform(raw, transform)
        y = labels[np.argmax(raw, axis=1)]
    y = np.asarray(y, dtype=object if strings else np.int64)
    return y, z.astype(np.float32)


@kernel("LinearRegressor", domain=ML)
def linear_regressor(ctx, x):
    """LinearRegressor: ``Y = X @ coefficients.T + intercepts``, [N, targets], float32, then
    ``post_transform``."""
    xf = feature_rows(x)
    targets = int(ctx.attr("targets"))
    coefs = np.asarray(ctx.attr("coefficients", None) or [], dtype=np.float64)
    if coefs.size != targets * xf.shape[1]:
        raise EvaluationError(f"{coefs.size} coefficients do not fit {targets} targets and "
                              f"{xf.shape[1]} features")
    intercepts = np.asarray(ctx.attr("intercepts", None) or [0.0] * targets, dtype=np.float64)
    y = xf @ coefs.reshape(targets, -1).T + intercepts
    return post_transform(y, ctx.attr("post_transform")).astype(np.float32)

# -- support vector machines ------------------------------------------------------------------

def _kernel(ctx, x: np.ndarray, sv: np.ndarray) -> np.ndarray:
    """Kernel matrix [N, n_sv] for ``kernel_type`` LINEAR, POLY, RBF or SIGMOID."""
    kind = ctx.attr("kernel_type")
    params = list(ctx.attr("kernel_params", None) or [0.0, 0.0, 0.0])
    gamma, coef0, degree = (params + [0.0, 0.0, 0.0])[:3]
    if kind == "LINEAR":
        return x @ sv.T
    if kind == "POLY":
        return (gamma * (x @ sv.T) + coef0) ** degree
    if kind == "RBF":
        d = (x * x).sum(1)[:, None] + (sv * sv).sum(1)[None, :] - 2 * x @ sv.T
        return np.exp(-gamma * np.maximum(d, 0))
    if kind == "SIGMOID":
        return np.tanh(gamma * (x @ sv.T) + coef0)
    raise UnsupportedError(f"SVM kernel_type {kind!r} is not supported")


@kernel("SVMRegressor", domain=ML)
def svm_regressor(ctx, x):
    """SVMRegressor: ``sum_i coef_i * K(x, sv_i) + rho`` (or a linear model without support
    vectors), float32 [N, 1]; ``one_class`` maps the sign to +1 / -1."""
    xf = feature_rows(x)
    n_sv = int(ctx.attr("n_supports"))
    coefs = np.asarray(ctx.attr("coefficients", None) or [], dtype=np.float64)
    rho = np.asarray(ctx.attr("rho", None) or [0.0], dtype=np.float64)
    if n_sv > 0:
        sv = np.asarray(ctx.attr("support_vectors", None) or [], dtype=np.float64)
        sv = sv.reshape(n_sv, -1)
        y = _kernel(ctx, xf, sv) @ coefs[:n_sv] + rho[0]
    else:
        y = _kernel(ctx, xf, coefs.reshape(1, -1))[:, 0] + rho[0]
    if int(ctx.attr("one_class")):
        y = np.where(y > 0, 1.0, -1.0)
    return post_transform(y[:, None], ctx.attr("post_transform")).astype(np.float32)


@kernel("SVMClassifier", domain=ML)
def svm_classifier(ctx, x):
    """SVMClassifier: one-vs-one voting over support vectors (``vectors_per_class``), or a
    linear model per class without support vectors; with ``prob_a`` / ``prob_b`` pairwise
    Platt probabilities are coupled into class probabilities as libsvm does.

    Outputs: Y labels [N], Z float32 scores [N, C] (the decision values of the class pairs when
    there are no probabilities and more than two classes).
    """
    xf = feature_rows(x)
    labels, strings = class_labels(ctx, "classlabels_ints", "classlabels_strings")
    n_cls = labels.size
    coefs = np.asarray(ctx.attr("coefficients", None) or [], dtype=np.float64)
    rho = np.asarray(ctx.attr("rho", None) or [], dtype=np.float64)
    per_class = list(ctx.attr("vectors_per_class", None) or [])
    transform = ctx.attr("post_transform")
    prob_a = list(ctx.attr("prob_a", None) or [])
    prob_b = list(ctx.attr("prob_b", None) or [])
    if not per_class:  # linear: one coefficient row per class
        w = coefs.reshape(n_cls, -1)
        scores = _kernel(ctx, xf, w) + (rho if rho.size else 0)
        if n_cls == 2 and scores.shape[1] == 1:
            s = scores[:, 0]
            y = np.where(s > 0, labels[1], labels[0])
            z = binary_scores(s, transform, 2)
        else:
            y = labels[np.argmax(scores, axis=1)]
            z = post_transform(scores, transform)
        return np.asarray(y, dtype=object if strings else np.int64), z.astype(np.float32)
    sv = np.asarray(ctx.attr("support_vectors", None) or [], dtype=np.float64)
    total = int(sum(per_class))
    sv = sv.reshape(total, -1)
    k = _kernel(ctx, xf, sv)  # [N, total]
    starts = np.concatenate([[0], np.cumsum(per_class)]).astype(int)
    coefs = coefs.reshape(n_cls - 1, total)
    n = xf.shape[0]
    votes = np.zeros((n, n_cls), dtype=np.int64)
    decisions = []
    pair = 0
    for i in range(n_cls):
        for j in range(i + 1, n_cls):
            si, sj = slice(starts[i], starts[i + 1]), slice(starts[j], starts[j + 1])
            d = k[:, si] @ coefs[j - 1, si] + k[:, sj] @ coefs[i, sj] + rho[pair]
            decisions.append(d)
            votes[:, i] += d > 0
            votes[:, j] += d <= 0
            pair += 1
    dec = np.stack(decisions, axis=1)  # [N, pairs]
    if prob_a:
        probs = _svm_probabilities(dec, n_cls, prob_a, prob_b)
        y = labels[np.argmax(probs, axis=1)]
        z = post_transform(probs, transform)
    else:
        y = labels[np.argmax(votes, axis=1)]
        if n_cls == 2:
            s = dec[:, 0]
            y = np.where(s > 0, labels[0], labels[1])
            z = binary_scores(s, transform, 2)
        else:
            z = post_transform(dec, transform)
    return np.asarray(y, dtype=object if strings else np.int64), z.astype(np.float32)


def _svm_probabilities(dec: np.ndarray, n_cls: int, prob_a, prob_b) -> np.ndarray:
    """Pairwise Platt probabilities coupled by libsvm's iterative method (Wu, Lin, Weng 2004)."""
    n = dec.shape[0]
    out = np.zeros((n, n_cls))
    for row in range(n):
        r = np.zeros((n_cls, n_cls))
        pair = 0
        for i in range(n_cls):
            for j in range(i + 1, n_cls):
                v = dec[row, pair] * prob_a[pair] + prob_b[pair]
                p = 1 / (1 + math.exp(v)) if v < 0 else math.exp(-v) / (1 + math.exp(-v))
                p = min(max(p, 1e-7), 1 - 1e-7)
                r[i, j], r[j, i] = p, 1 - p
                pair += 1
        q = np.zeros((n_cls, n_cls))
        for t in range(n_cls):
            q[t, t] = sum(r[j, t] ** 2 for j in range(n_cls) if j != t)
            for j in range(n_cls):
                if j != t:
                    q[t, j] = -r[j, t] * r[t, j]
        p = np.full(n_cls, 1.0 / n_cls)
        for _ in range(max(100, n_cls)):
            qp = q @ p
            pqp = p @ qp
            if np.abs(qp - pqp).max() < 0.005 / n_cls:
                break
            for t in range(n_cls):
                diff = (-qp[t] + pqp) / q[t, t]
                p[t] += diff
                pqp = (pqp + diff * (diff * q[t, t] + 2 * qp[t])) / (1 + diff) / (1 + diff)
                qp = (qp + diff * q[t]) / (1 + diff)
                p /= 1 + diff
        out[row] = p
    return out
