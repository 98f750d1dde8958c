"""The inference rules: one function per operator and definition version, by the keys of the
evaluator's kernels (``(domain, op_type, since_version)``, ONNX Part 1, Clause 14.3).

Rule convention (every rule of :mod:`onemodel.inference.rules` follows it)::

    from onemodel.inference.registry import rule

    @rule("Add", since=(7, 13, 14))
    def add(ctx, a, b):
        return ctx.broadcast(a, b)          # the output's shape

* called as ``fn(ctx, *inputs)``: each input a :class:`~.value.Value` (``UNKNOWN`` when nothing
  is known of it), ``None`` for an optional input the node does not supply (an empty name or a
  trailing input it omits, up to the rule's positional parameters; a rule taking ``*inputs``
  gets those the node lists).
* ``ctx`` is an :class:`~.context.InferContext`: attributes with the definition's defaults
  (``ctx.attr``), the opset, ``ctx.const(i)`` / ``ctx.ints(i)`` for inputs whose elements are
  known, ``ctx.broadcast``, ``ctx.unify``, ``ctx.axis``, ``ctx.contradiction``,
  ``ctx.infer_graph`` for subgraphs, ``ctx.elem(i)`` for output ``i``'s element type bound from
  the definition's type constraints.
* returns the outputs: a **tuple** with one entry per output, or the single output's entry.
  An entry is a :class:`Value`, a **list** of extents (the output is a tensor of that shape
  whose element type is the one the type constraints give, ``ctx.elem(i)``), or ``None`` (only
  the element type is known, from the constraints). Extents are ints, :class:`~.dims.Expr` or
  None (:mod:`.dims`).
* a rule never guesses: an extent it cannot determine is None, a rank it cannot determine an
  entry of None (Clause 9.4). A contradiction (two extents that must be equal and are not, an
  axis out of range) is reported with ``ctx.contradiction(message)``, and the rule returns what
  it can still say.
"""

from __future__ import annotations

import importlib
from typing import Callable

from ..ir.entries import normalize_domain
from ..ir.versioned import add as _add
from ..ir.versioned import pick as _pick

Rule = Callable[..., object]

#: (domain, op_type) -> sorted list of (since, rule)
RULES: dict[tuple[str, str], list[tuple[int, Rule]]] = {}
_loaded = False


def rule(op_type: str, since: int | tuple[int, ...], domain: str = ""):
    """Decorator registering an inference rule for ``(domain, op_type)`` from opset ``since``
    on (one version or a tuple of them, as :func:`onemodel.evaluate.registry.op` takes).
    Raises ValueError for a version below 1. Returns the function unchanged."""
    versions = since if isinstance(since, (tuple, list)) else (since,)

    def decorate(fn: Rule) -> Rule:
        for v in versions:
            _add(RULES, domain, op_type, v, fn)
        return fn

    return decorate


def load_rules() -> None:
    """Import every rule module of :mod:`onemodel.inference.rules` (once)."""
    global _loaded
    if not _loaded:
        _loaded = True
        importlib.import_module("onemodel.inference.rules")


def lookup(domain: str, op_type: str, version: int) -> Rule | None:
    """The rule for ``(domain, op_type)`` at opset ``version`` (greatest ``since <= version``),
    or None."""
    load_rules()
    entries = RULES.get((normalize_domain(domain), op_type))
    return _pick(entries, version) if entries else None


def claimed() -> dict[tuple[str, str], tuple[int, ...]]:
    """(domain, op_type) -> the versions rules are registered for, ascending."""
    load_rules()
    return {k: tuple(v for v, _ in e) for k, e in RULES.items()}
