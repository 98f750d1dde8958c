"""Optimizer steps of the ``ai.onnx.preview.training`` domain, version 1 (ONNX 1-2): Adagrad,
Adam and Momentum.

Each takes the learning rate ``R`` (a float scalar), the update count ``T`` (an int64 scalar) and
then, for ``n`` optimized tensors, the groups of the definition in order -- ``X_1..X_n``,
``G_1..G_n`` and the state tensors -- and returns the new values group by group (``X_new_1..n``,
then the new states). The arithmetic is that of each operator's pseudo code, in the tensors' own
float type (float32 or float64), element-wise with numpy broadcasting.

``Gradient`` (the same domain) is not implemented: it needs automatic differentiation of a
graph, so a model that uses it is refused before any computation.
"""

from __future__ import annotations

import numpy as np

from ...errors import EvaluationError, InvalidModelError, UnsupportedError
from ...operators import kernel

DOMAIN = "ai.onnx.preview.training"


def _groups(name: str, tensors, count: int):
    if len(tensors) % count or not tensors:
        raise EvaluationError(f"{name} takes R, T and {count} groups of tensors; "
                              f"{len(tensors)} tensors do not split into {count}")
    n = len(tensors) // count
    return [tensors[i * n:(i + 1) * n] for i in range(count)]


def _scalar(v, what: str, name: str):
    a = np.asarray(v)
    if a.size != 1:
        raise EvaluationError(f"{name}: {what} must be a scalar, not shape {a.shape}")
    return a.reshape(())


@kernel("Adagrad", domain=DOMAIN)
def adagrad(ctx, r, t, *tensors):
    """Adagrad: inputs R, T, X..., G..., H...; outputs X_new..., H_new...."""
    xs, gs, hs = _groups("Adagrad", tensors, 3)
    norm = ctx.attr("norm_coefficient")
    decay = ctx.attr("decay_factor")
    eps = ctx.attr("epsilon")
    rate = _scalar(r, "R", "Adagrad") / (1 + _scalar(t, "T", "Adagrad") * decay)
    x_new, h_new = [], []
    for x, g, h in zip(xs, gs, hs):
        dt = x.dtype.type
        g_reg = dt(norm) * x + g
        h2 = h + g_reg * g_reg
        x_new.append((x - rate.astype(x.dtype) * g_reg / (np.sqrt(h2) + dt(eps))).astype(x.dtype))
        h_new.append(h2.astype(h.dtype))
    return tuple(x_new + h_new)


@kernel("Adam", domain=DOMAIN)
def adam(ctx, r, t, *tensors):
    """Adam: inputs R, T, X..., G..., V..., H...; outputs X_new..., V_new..., H_new...."""
    xs, gs, vs, hs = _groups("Adam", tensors, 4)
    alpha = ctx.attr("alpha")
    beta = ctx.attr("beta")
    eps = ctx.attr("epsilon")
    norm = ctx.attr("norm_coefficient")
    post = ctx.attr("norm_coefficient_post")
    rate = _scalar(r, "R", "Adam").astype(np.float64)
    step = int(_scalar(t, "T", "Adam"))
    if step > 0:
        rate = rate * np.sqrt(1 - beta ** step) / (1 - alpha ** step)
    x_new, v_new, h_new = [], [], []
    for x, g, v, h in zip(xs, gs, vs, hs):
        dt = x.dtype.type
        g_reg = dt(norm) * x + g
        v2 = dt(alpha) * v + dt(1 - alpha) * g_reg
        h2 = dt(beta) * h + dt(1 - beta) * g_reg * g_reg
        x2 = x - dt(rate) * v2 / (np.sqrt(h2) + dt(eps))
        x_new.append(((1 - dt(post)) * x2).astype(x.dtype))
        v_new.append(v2.astype(v.dtype))
        h_new.append(h2.astype(h.dtype))
    return tuple(x_new + v_new + h_new)


@kernel("Momentum", domain=DOMAIN)
def momentum(ctx, r, t, *tensors):
    """Momentum (``mode`` standard or nesterov): inputs R, T, X..., G..., V...; outputs
    X_new..., V_new...."""
    xs, gs, vs = _groups("Momentum", tensors, 3)
    mode = ctx.attr("mode")
    if mode not in ("standard", "nesterov"):
        raise UnsupportedError(f"Momentum mode {mode!r} is not standard or nesterov")
    for name in ("alpha", "beta", "norm_coefficient"):
        if ctx.attr(name) is None:
            raise InvalidModelError(f"Momentum needs the attribute {name}")
    alpha, beta, norm = ctx.attr("alpha"), ctx.attr("beta"), ctx.attr("norm_coefficient")
    rate = _scalar(r, "R", "Momentum")
    if int(_scalar(t, "T", "Momentum")) <= 0:
        beta = 1.0
    x_new, v_new = [], []
    for x, g, v in zip(xs, gs, vs):
        dt = x.dtype.type
        g_reg = dt(norm) * x + g
        v2 = dt(alpha) * v + dt(beta) * g_reg
        step = g_reg + dt(alpha) * v2 if mode == "nesterov" else v2
        x_new.append((x - rate.astype(x.dtype) * step).astype(x.dtype))
        v_new.append(v2.astype(v.dtype))
    return tuple(x_new + v_new)
