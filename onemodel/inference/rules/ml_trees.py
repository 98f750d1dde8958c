"""Inference rules of the tree ensembles of the ``ai.onnx.ml`` domain (the kernels of
``onemodel/evaluate/kernels/ml_trees.py``, same keys and versions).

The kernels read an input of rank 1 as one row and one of rank above 2 as ``[X[0], rest]``: the
row count ``N`` below is 1 for a 1-D input, else X's first extent. Element types that the type
constraints leave open are decided by attributes (ONNX-ML operator definitions
TreeEnsembleClassifier-1, 3 and 5, TreeEnsembleRegressor-1, 3 and 5, TreeEnsemble-5):

* TreeEnsembleClassifier: labels Y ``[N]``, string when ``classlabels_strings`` is set, else
  int64; scores Z float ``[N, C]`` with C the number of labels.
* TreeEnsembleRegressor ``[N, n_targets]`` float; TreeEnsemble ``[N, n_targets]`` in X's float
  type.

Contradictions (Clause 9.4): a rank-0 input where rows are needed, a classifier without labels.
"""

from __future__ import annotations

from ...operators import rule
from ._ml import ML, label_count, label_elem, row_extents
from ._util import int_attr

_FLOAT, _DOUBLE = 1, 11


@rule("TreeEnsembleRegressor", domain=ML)
def tree_ensemble_regressor(ctx, x):
    """TreeEnsembleRegressor: [N, n_targets] float."""
    n, _ = row_extents(ctx, x)
    return ctx.tensor([n, int_attr(ctx, "n_targets", 1)], elem=_FLOAT)


@rule("TreeEnsembleClassifier", domain=ML)
def tree_ensemble_classifier(ctx, x):
    """TreeEnsembleClassifier: Y [N] labels, Z [N, C] float, C the number of labels."""
    n, _ = row_extents(ctx, x)
    c = label_count(ctx, "classlabels_int64s")
    if not c:
        ctx.contradiction("no class labels")
    return (ctx.tensor([n], elem=label_elem(ctx)),
            ctx.tensor([n, c or None], elem=_FLOAT, i=1))


@rule("TreeEnsemble", domain=ML)
def tree_ensemble(ctx, x):
    """TreeEnsemble: [N, n_targets] in X's float type (float for others)."""
    n, _ = row_extents(ctx, x)
    elem = x.elem if x is not None and x.elem in (_FLOAT, _DOUBLE, 10) else (
        _FLOAT if x is not None and x.elem is not None else None)
    return ctx.tensor([n, int_attr(ctx, "n_targets")], elem=elem)

