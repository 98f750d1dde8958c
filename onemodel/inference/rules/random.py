"""Inference rules of the random generators and Dropout (the kernels of
``onemodel/evaluate/kernels/random.py``, same keys and versions).

Shapes and element types (ONNX Part 1, operator definitions of Clause 14.3: Bernoulli-15 and 22,
RandomUniform, RandomUniformLike, RandomNormal and RandomNormalLike 1 and 22, Multinomial-7 and
22, Dropout-1 to 22):

* ``Dropout``: output and mask of X's shape; the mask is bool from opset 10 (X's type before).
* ``RandomNormal``/``RandomUniform``: the ``shape`` attribute, element type ``dtype`` (default
  float); the ``*Like`` forms and ``Bernoulli``: the input's shape, ``dtype`` or the input's
  type. ``Multinomial``: ``[batch, sample_size]``, ``dtype`` (default int32).

Contradictions (Clause 9.4): a ``shape`` attribute with a negative extent, a Multinomial input
that is not ``[batch, class]``.
"""

from __future__ import annotations

from ...operators import rule
from ._util import int_attr, list_attr, shape_list

_FLOAT, _BOOL, _INT32 = 1, 9, 6


# -- Dropout --------------------------------------------------------------------------------
@rule("Dropout")
def dropout_old(ctx, x):
    """Dropout before opset 12: output and mask of X's shape (mask bool from opset 10)."""
    s = shape_list(x)
    mask_elem = _BOOL if ctx.opset >= 10 else x.elem
    return s, ctx.tensor(list(s) if s is not None else None, elem=mask_elem, i=1)


@rule("Dropout", since=12)
def dropout(ctx, x, ratio=None, training_mode=None):
    """Dropout: output of X's shape, bool mask of X's shape."""
    s = shape_list(x)
    return s, ctx.tensor(list(s) if s is not None else None, elem=_BOOL, i=1)


# -- random generators ------------------------------------------------------------------------
def _dtype(ctx, default):
    code = int_attr(ctx, "dtype", 0)
    return code or default


@rule("Bernoulli")
def bernoulli(ctx, p):
    """Bernoulli: p's shape, ``dtype`` or p's type."""
    return ctx.tensor(shape_list(p), elem=_dtype(ctx, p.elem))


@rule("RandomUniform")
def random_uniform(ctx):
    """RandomUniform: the ``shape`` attribute, ``dtype`` (default float)."""
    return _random(ctx)


@rule("RandomNormal")
def random_normal(ctx):
    """RandomNormal: the ``shape`` attribute, ``dtype`` (default float)."""
    return _random(ctx)


def _random(ctx):
    shape = list_attr(ctx, "shape", int) if ctx.has_attr("shape") else None
    out = None
    if shape is not None and any(d < 0 for d in shape):
        ctx.contradiction(f"shape {shape} has a negative extent")
    elif shape is not None and (shape or type(ctx.attr("shape")) is list):
        out = shape
    return ctx.tensor(out, elem=_dtype(ctx, _FLOAT))


@rule("RandomUniformLike")
def random_uniform_like(ctx, x):
    """RandomUniformLike: X's shape, ``dtype`` or X's type."""
    return ctx.tensor(shape_list(x), elem=_dtype(ctx, x.elem))


@rule("RandomNormalLike")
def random_normal_like(ctx, x):
    """RandomNormalLike: X's shape, ``dtype`` or X's type."""
    return ctx.tensor(shape_list(x), elem=_dtype(ctx, x.elem))


@rule("Multinomial")
def multinomial(ctx, x):
    """Multinomial: [batch, sample_size], ``dtype`` (default int32)."""
    s = shape_list(x)
    batch = None
    if s is not None:
        if len(s) != 2:
            ctx.contradiction(f"the input has rank {len(s)}; [batch, class] is needed")
        else:
            batch = s[0]
    n = int_attr(ctx, "sample_size", 1)
    return ctx.tensor([batch, n if n is not None and n >= 0 else None],
                      elem=_dtype(ctx, _INT32))

