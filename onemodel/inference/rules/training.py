"""Inference rules of the optimizers of ``ai.onnx.preview.training`` version 1 (the kernels of
``onemodel/evaluate/kernels/training.py``): Adagrad, Adam and Momentum.

Inputs are ``R`` and ``T`` (scalars) and then, for ``n`` optimized tensors, the groups of the
definition in order (Adagrad ``X G H``, Adam ``X G V H``, Momentum ``X G V``); the outputs are
the new values group by group without ``G`` (``X_new``, then the new states). The definitions'
pseudo code is element-wise with multidirectional broadcasting (Clause 6.6.2), so each output
has the broadcast shape of the tensors it is computed from: ``X_new`` of all the tensor's
group members, a new state of ``X``, ``G`` and that state. ``T3`` (float or double) is
heterogeneous: each output has the element type of its optimized tensor ``X``. A variadic input
count that does not split into the groups, or an ``R``/``T`` of more than one element, is a
contradiction (Clause 9.4).
"""

from __future__ import annotations

from ...operators import rule
from ..value import Value
from ._util import count

DOMAIN = "ai.onnx.preview.training"


def _optimizer(name: str, groups: int):
    def infer(ctx, *inputs):
        for k, what in ((0, "R"), (1, "T")):
            v = inputs[k] if k < len(inputs) else None
            n = count(v.shape) if v is not None else None
            if n is not None and n != 1:
                ctx.contradiction(f"{what} must be a scalar, not shape {list(v.shape)}")
        tensors = list(inputs[2:])
        if not tensors or len(tensors) % groups:
            ctx.contradiction(f"takes R, T and {groups} groups of tensors; {len(tensors)} "
                              f"tensors do not split into {groups}")
            return None
        n = len(tensors) // groups
        if any(t is None for t in tensors):
            return None
        members = [tensors[k::n] for k in range(n)]  # per optimized tensor: X, G, states
        x_new = [Value.tensor(m[0].elem, ctx.broadcast(*m, what=f"{name} group {k}"))
                 for k, m in enumerate(members)]
        states = []
        for s in range(2, groups):
            states += [Value.tensor(m[0].elem, ctx.broadcast(m[0], m[1], m[s]))
                       for m in members]
        return tuple(x_new + states)

    infer.__name__ = infer.__qualname__ = name.lower()
    return infer


rule("Adagrad", domain=DOMAIN)(_optimizer("Adagrad", 3))
rule("Adam", domain=DOMAIN)(_optimizer("Adam", 4))
rule("Momentum", domain=DOMAIN)(_optimizer("Momentum", 3))
