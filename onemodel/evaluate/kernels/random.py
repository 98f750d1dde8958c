"""Random generators and Dropout (ONNX 1-2, operator definitions Bernoulli-15 and 22,
RandomUniform, RandomUniformLike, RandomNormal and RandomNormalLike 1 and 22, Multinomial-7 and 22,
Dropout-1 to 22): the operators that draw random values.

They are not deterministic across implementations: ONNX does not define the generator. With a
``seed`` attribute this evaluator draws from ``numpy.random.default_rng(seed)`` (so the same seed
gives the same values here, not the values onnxruntime draws); without one, from a fresh unseeded
generator. Dropout draws only in training mode (opset 12 on); otherwise it is the identity.
"""

from __future__ import annotations

import numpy as np

from ...errors import EvaluationError
from ...operators import kernel
from ..memory import check_array
from ._util import dtype_of, scalar_of


def _rng(ctx) -> np.random.Generator:
    seed = ctx.attr("seed", None)
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng(np.frombuffer(np.float32(seed).tobytes(), np.uint32)[0])


# -- Dropout ----------------------------------------------------------------------------------

@kernel("Dropout")
def dropout_old(ctx, x):
    """Dropout before opset 12: inference only, the output is the input and the mask all ones
    (bool from opset 10, the input's type before)."""
    x = np.asarray(x)
    mask = np.ones(x.shape, dtype=np.bool_ if ctx.opset >= 10 else x.dtype)
    return x, mask


@kernel("Dropout", since=12)
def dropout(ctx, x, ratio=None, training_mode=None):
    """Dropout (opset 12+): identity with an all-true mask unless ``training_mode`` is true;
    then each element is kept with probability ``1 - ratio`` (default 0.5) and scaled by
    ``1 / (1 - ratio)``; the mask (bool) marks kept elements. Random: see the module doc."""
    x = np.asarray(x)
    training = training_mode is not None and bool(np.asarray(training_mode).reshape(-1)[0])
    r = 0.5 if ratio is None else scalar_of(ratio, "Dropout ratio")
    if not training or r == 0:
        return x, np.ones(x.shape, dtype=np.bool_)
    if not 0 <= r < 1:
        raise EvaluationError(f"Dropout ratio {r} is outside [0, 1)")
    mask = _rng(ctx).random(x.shape) >= r
    return (x * mask / (1 - r)).astype(x.dtype), mask

# -- random generators ------------------------------------------------------------------------

@kernel("Bernoulli")
def bernoulli(ctx, p):
    """Bernoulli: 1 with probability ``p`` per element (``dtype``, default p's type)."""
    p = np.asarray(p)
    out = _rng(ctx).random(p.shape) < p
    return out.astype(dtype_of(ctx.attr("dtype", 0), p.dtype))


@kernel("RandomUniform")
def random_uniform(ctx):
    """RandomUniform: values in [low, high) of shape ``shape``, type ``dtype`` (float)."""
    shape = check_array(ctx.attrs["shape"], 16, "the RandomUniform output")  # (float64, cast)
    low, high = float(ctx.attr("low")), float(ctx.attr("high"))
    return _rng(ctx).uniform(low, high, shape).astype(dtype_of(ctx.attr("dtype"), np.float32))


@kernel("RandomUniformLike")
def random_uniform_like(ctx, x):
    """RandomUniformLike: RandomUniform with X's shape (and type unless ``dtype``)."""
    x = np.asarray(x)
    low, high = float(ctx.attr("low")), float(ctx.attr("high"))
    return _rng(ctx).uniform(low, high, x.shape).astype(dtype_of(ctx.attr("dtype", 0), x.dtype))


@kernel("RandomNormal")
def random_normal(ctx):
    """RandomNormal: normal values (``mean``, ``scale``) of shape ``shape``, type ``dtype``."""
    shape = check_array(ctx.attrs["shape"], 16, "the RandomNormal output")  # (float64, cast)
    mean, scale = float(ctx.attr("mean")), float(ctx.attr("scale"))
    return _rng(ctx).normal(mean, scale, shape).astype(dtype_of(ctx.attr("dtype"), np.float32))


@kernel("RandomNormalLike")
def random_normal_like(ctx, x):
    """RandomNormalLike: RandomNormal with X's shape (and type unless ``dtype``)."""
    x = np.asarray(x)
    mean, scale = float(ctx.attr("mean")), float(ctx.attr("scale"))
    return _rng(ctx).normal(mean, scale, x.shape).astype(dtype_of(ctx.attr("dtype", 0), x.dtype))


@kernel("Multinomial")
def multinomial(ctx, x):
    """Multinomial: ``sample_size`` class indices per batch row drawn from the distribution
    whose unnormalized log-probabilities are the row. Output [batch, sample_size], ``dtype``
    int32 (default) or int64."""
    logits = np.asarray(x, dtype=np.float64)
    if logits.ndim != 2:
        raise EvaluationError("Multinomial input must be [batch_size, class_size]")
    n = int(ctx.attr("sample_size"))
    # (uniform draws in float64, then a comparison of each with every class's bound)
    check_array((logits.shape[0], n, logits.shape[1]), 1, "the Multinomial comparisons")
    check_array((logits.shape[0], n), 8, "the Multinomial draws")
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    cdf = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)
    u = _rng(ctx).random((logits.shape[0], n))
    idx = np.minimum((u[:, :, None] > cdf[:, None, :]).sum(axis=2), logits.shape[1] - 1)
    return idx.astype(dtype_of(ctx.attr("dtype"), np.int32))
