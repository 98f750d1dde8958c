"""The operator table: one entry per operator version ``(domain, op_type, since_version)``.

An entry owns the operator's signature (ONNX Part 1, Clause 14.3: formal inputs and outputs,
attributes with their defaults, type constraints), read from the stored schema tables; the
evaluator's kernel and the inference rule attach to it by reference (:func:`kernel`,
:func:`rule`), never by a second list of versions. Kernels and rules live in one module per
family in ``onemodel/evaluate/kernels/`` and ``onemodel/inference/rules/``
(:mod:`.families`), imported on first use. This package imports neither numpy nor the
evaluator.

    from onemodel.operators import kernel

    @kernel("Softmax", since=13)        # the definition of opset 13, and later ones
    def softmax(ctx, x): ...

``since`` is omitted when the function serves the operator's first definition.

Users add operators of their own domains with :class:`Operator` (signature, kernel, rule) and
:func:`register`, per call with ``operators=`` or :func:`using`, or by an entry point of group
``onemodel.operators`` (:mod:`.custom`; docs/operators.md has a worked example).
"""

from __future__ import annotations

from .custom import Operator, register, unregister, using
from .table import (
    attach,
    attachments,
    definition,
    definitions,
    family,
    implementation,
    served,
    versions,
)

__all__ = ["Operator", "register", "unregister", "using", "kernel", "rule", "adapter",
           "definition", "definitions", "versions", "family", "implementation", "exact",
           "attachments", "served"]


def kernel(op_type: str, domain: str = "", *, since: int | None = None):
    """Decorator attaching a built-in evaluator kernel (the convention of
    :mod:`onemodel.evaluate.registry`) to the definition of ``(domain, op_type)`` introduced at
    ``since`` (default: the first one); it serves later definitions until the next kernel
    attached. Raises ValueError as :func:`.table.attach` does."""
    return lambda fn: attach("kernel", op_type, fn, domain, since)


def adapter(op_type: str, domain: str = "", *, since: int):
    """Decorator attaching the version adapter of ``(domain, op_type)`` between the definition
    introduced at ``since`` and the one before it (opset conversion; used by
    :mod:`onemodel.opset_convert`). Unlike a kernel, it serves that one change only
    (:func:`.table.exact`)."""
    return lambda fn: attach("adapter", op_type, fn, domain, since)


def rule(op_type: str, domain: str = "", *, since: int | None = None):
    """Decorator attaching a built-in inference rule (the convention of
    :mod:`onemodel.inference.registry`), as :func:`kernel` attaches a kernel."""
    return lambda fn: attach("rule", op_type, fn, domain, since)
