"""The inference rules: one function per operator definition, attached to the operator table
(:mod:`onemodel.operators`, keys ``(domain, op_type, since_version)``, ONNX Part 1, Clause 14.3)
beside the evaluator's kernel, and the rules of operators users declare.

Rule convention (every rule of :mod:`onemodel.inference.rules` follows it)::

    from onemodel.operators import rule

    @rule("Add", since=7)
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

from typing import Callable

from ..ir.entries import normalize_domain
from ..operators import table

Rule = Callable[..., object]


def load_rules() -> None:
    """Import every rule module (lookups import only the family they need)."""
    table.load_all("rule")


def lookup(domain: str, op_type: str, version: int) -> Rule | None:
    """The rule for ``(domain, op_type)`` at opset ``version``: a declared operator's
    (:func:`onemodel.operators.register`) first, else the built-in one attached with the greatest
    ``since <= version``; None when there is none."""
    from ..operators.custom import user_rule

    fn = user_rule(domain, op_type, version)
    if fn is not None:
        return fn
    return table.implementation("rule", normalize_domain(domain), op_type, version)


def claimed() -> dict[tuple[str, str], tuple[int, ...]]:
    """(domain, op_type) -> the versions built-in rules are attached at, ascending."""
    return {k: tuple(v for v, _ in e) for k, e in table.attachments("rule").items()}
