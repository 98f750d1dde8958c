"""Inference rules of the linear models and support vector machines of the ``ai.onnx.ml``
domain (the kernels of ``onemodel/evaluate/kernels/ml_linear.py``, same keys and versions).

The kernels read an input of rank 1 as one row and one of rank above 2 as ``[X[0], rest]``: the
row count ``N`` below is 1 for a 1-D input, else X's first extent. Element types that the type
constraints leave open are decided by attributes (ONNX-ML operator definitions
LinearClassifier-1, LinearRegressor-1, SVMClassifier-1, SVMRegressor-1):

* classifiers (LinearClassifier, SVMClassifier): labels Y ``[N]``, string when
  ``classlabels_strings`` is set, else int64; scores Z float ``[N, C]`` with C the number of
  labels (LinearClassifier: 1 without labels; SVMClassifier with support vectors, more than two
  classes and no probabilities: the ``C * (C - 1) / 2`` pair decisions).
* regressors: LinearRegressor ``[N, targets]``, SVMRegressor ``[N, 1]``, float.

Contradictions (Clause 9.4): a rank-0 input where rows are needed, numbers of labels or
coefficients that do not fit the features.
"""

from __future__ import annotations

from ...operators import rule
from ._ml import ML, label_count, label_elem, row_extents
from ._util import int_attr, list_attr

_FLOAT = 1


def _classified(ctx, n, c):
    return (ctx.tensor([n], elem=label_elem(ctx)), ctx.tensor([n, c], elem=_FLOAT, i=1))


@rule("LinearClassifier", domain=ML)
def linear_classifier(ctx, x):
    """LinearClassifier: Y [N] labels, Z [N, C] float (module doc)."""
    n, f = row_extents(ctx, x)
    labels = label_count(ctx, "classlabels_ints")
    coefs = list_attr(ctx, "coefficients")
    if type(f) is int and f > 0 and len(coefs) % f:
        ctx.contradiction(f"{len(coefs)} coefficients do not fit {f} features")
    elif type(f) is int and f > 0:
        rows = len(coefs) // f
        if rows > 1 and labels != rows:
            ctx.contradiction(f"{labels} class labels for {rows} coefficient rows")
        elif rows == 1 and labels not in (0, 2):
            ctx.contradiction(f"a binary classifier has {labels} class labels; 2 are needed")
    return _classified(ctx, n, labels or 1)


@rule("LinearRegressor", domain=ML)
def linear_regressor(ctx, x):
    """LinearRegressor: [N, targets] float."""
    n, f = row_extents(ctx, x)
    t = int_attr(ctx, "targets", 1)
    coefs = list_attr(ctx, "coefficients")
    if type(f) is int and t is not None and len(coefs) != t * f:
        ctx.contradiction(f"{len(coefs)} coefficients do not fit {t} targets and {f} features")
    return ctx.tensor([n, t], elem=_FLOAT)


@rule("SVMRegressor", domain=ML)
def svm_regressor(ctx, x):
    """SVMRegressor: [N, 1] float."""
    n, _ = row_extents(ctx, x)
    return ctx.tensor([n, 1], elem=_FLOAT)


@rule("SVMClassifier", domain=ML)
def svm_classifier(ctx, x):
    """SVMClassifier: Y [N] labels, Z [N, C] float (module doc)."""
    n, _ = row_extents(ctx, x)
    c = label_count(ctx, "classlabels_ints")
    cols = c
    if list_attr(ctx, "vectors_per_class") and not list_attr(ctx, "prob_a") and c > 2:
        cols = c * (c - 1) // 2
    return _classified(ctx, n, cols or None)
