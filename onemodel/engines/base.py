"""The engine interface: what ``verify --run``, ``verify --engines`` and ``verify --bisect`` need
of something that runs a model.

An engine is an object with

* ``name``: the short name ``--engine``/``--engines`` and ``engines=`` select it by;
* ``check()``: raise :class:`~onemodel.errors.UnsupportedError` when it cannot run here (its
  package is not installed), before any model is read, so that a missing engine is an error and
  not a difference;
* ``run(model, feeds) -> dict``: the graph outputs of ``model`` (an :class:`onemodel.ir.Model`)
  on ``feeds`` (graph input name -> value: ndarrays, lists for sequences, dicts for maps), by
  name, in the graph's output order;
* ``observe(model, feeds, observer) -> dict``: call ``observer(name, value)`` for every value of
  the main graph's nodes the engine computes on ``feeds``; return ``{name: reason}`` of node
  outputs it could not expose (what :mod:`onemodel.bisect` compares node by node).

Errors, the same for every engine (the callers tell them apart): ``run`` and ``observe`` raise
:class:`~onemodel.errors.EvaluationError` when the model fails on these inputs (a Reshape
whose target does not hold for these extents: the generated-inputs hint then looks for the
extents that fit), with the node's path when it is known; UnsupportedError when the engine
cannot run the model at all (an operator it lacks); InvalidModelError for a broken graph rule.

:class:`Engine` is a base class with the default ``check`` (nothing to check) and ``observe``
(the engine's ``run`` of :func:`exposed_copy`: a temporary copy of the model whose every typed
node output is a graph output, for engines that give graph outputs only); a subclass sets
``name`` and implements ``run``. Polygraphy's runners (``BaseRunner.infer`` -> ``infer_impl``)
are the model of this interface.
"""

from __future__ import annotations

from typing import Any, Callable

from ..ir import Model, ValueInfo
from ..ir.types import Type


class Engine:
    """Runs models; subclass it, set ``name`` and implement :meth:`run` (the module's
    documentation says what each member does and which errors it raises)."""

    name: str = ""

    def check(self) -> None:
        """UnsupportedError when the engine cannot run here (not installed); nothing by
        default."""

    def run(self, model: Model, feeds: dict[str, Any]) -> dict[str, Any]:
        """The graph outputs of ``model`` on ``feeds``, by name, in the graph's order."""
        raise NotImplementedError

    def observe(self, model: Model, feeds: dict[str, Any],
                observer: Callable[[str, Any], None]) -> dict[str, str]:
        """Give ``observer(name, value)`` every main-graph node output (and graph output) this
        engine computes on ``feeds``: by default the outputs of :meth:`run` of
        :func:`exposed_copy` (so they are in memory together until given). Returns ``{name:
        reason}`` of the node outputs not exposed (no type known for them)."""
        copy, _, skipped = exposed_copy(model)
        values = self.run(copy, feeds)
        while values:  # (each dropped once seen)
            observer(*values.popitem())
        return skipped

    def __repr__(self) -> str:
        return f"<engine {self.name}>"


def node_output_names(model: Model) -> list[str]:
    """Every non-empty output name of the main graph's nodes, in node order, each once."""
    seen: dict[str, None] = {}
    for node in model.graph.nodes:
        for name in node.outputs:
            if name:
                seen.setdefault(name, None)
    return list(seen)


def _typed(t: Type | None) -> Type | None:
    """The type to declare for an added graph output: a tensor type with its element type only
    (the shape is left to the engine, so an inferred extent cannot contradict it); other kinds
    as they are when complete; None when nothing usable is known."""
    if t is None or t.kind is None:
        return None
    if t.kind == "tensor":
        elem = t.elem_type
        return Type.tensor(elem) if elem else None
    return t


def exposed_copy(model: Model) -> tuple[Model, list[str], dict[str, str]]:
    """A copy of ``model`` whose main graph also outputs every node output that can be typed.

    Each node output of the main graph that is not already a graph output is appended to the
    copy's graph outputs, with its type from the graph's ``value_info`` or, failing that, from
    :func:`onemodel.inference.infer_model` (Clause 9), reduced to the element type for tensors
    (an engine such as onnxruntime needs the element type of an output). ``model`` is not
    changed; the copy shares its weight bytes.

    Returns:
        (the copy, the names of the copy's graph outputs, ``{name: reason}`` of the node outputs
        that could not be typed and so are not exposed).
    Raises:
        InternalError: an inference rule's bug.
    """
    from ..inference import infer_model

    copy = model.copy()
    g = copy.graph
    declared = {vi.name: vi.type for vi in g.value_info}
    have = {vi.name for vi in g.outputs}
    inferred = None
    skipped: dict[str, str] = {}
    for name in node_output_names(copy):
        if name in have:
            continue
        t = _typed(declared.get(name))
        if t is None:
            if inferred is None:
                inferred = infer_model(copy).values
            v = inferred.get(name)
            t = _typed(v.to_type() if v is not None else None)
        if t is None:
            skipped[name] = "no type in value_info and none inferred"
            continue
        g.outputs.append(ValueInfo(name=name, type=t))
        have.add(name)
    return copy, [vi.name for vi in g.outputs], skipped
