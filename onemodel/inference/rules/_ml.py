"""Helpers shared by the inference rules of the ``ai.onnx.ml`` operators (:mod:`.ml_linear`,
:mod:`.ml_trees`, :mod:`.ml_features`): the row count and features of the kernels' [N, F] view
of an input, and the class labels' element type and count.

Not a rule family (it registers nothing).
"""

from __future__ import annotations

from .. import dims as D
from ._util import list_attr

#: the domain of the traditional machine-learning operators
ML = "ai.onnx.ml"
_STRING, _INT64 = 8, 7


def row_extents(ctx, x):
    """(N, features) of the kernels' [N, F] view of ``x``; (None, None) when unknown
    (a contradiction for a scalar)."""
    s = x.shape if x is not None else None
    if s is None:
        return None, None
    if len(s) == 0:
        ctx.contradiction("the input is a scalar; rows of features are needed")
        return None, None
    if len(s) == 1:
        return 1, s[0]
    f = s[1]
    for d in s[2:]:
        f = D.mul(f, d) if f is not None and d is not None else None
    return s[0], f


def label_elem(ctx, strings_name="classlabels_strings"):
    """The labels' element type: string when attribute ``strings_name`` is set, else int64."""
    return _STRING if list_attr(ctx, strings_name) else _INT64


def label_count(ctx, ints_name, strings_name="classlabels_strings"):
    """The number of class labels: attribute ``strings_name``'s when set, else ``ints_name``'s."""
    return len(list_attr(ctx, strings_name) or list_attr(ctx, ints_name, int))

