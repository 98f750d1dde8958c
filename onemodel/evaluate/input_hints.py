"""The hint added to an error of a run on generated inputs (:func:`add_inputs_hint`): which
generated input and axis did not fit, and which ``dims`` / ``shapes`` make the model run (as
:class:`~onemodel.errors.Setting` parts of the message, which the command line writes as its
``--dim`` / ``--shape`` flags),
found from what inference knows and, failing that, by a few trial runs (:func:`_probe`).

It runs the model (:mod:`.runner`), so it stands above the runner; :mod:`.inputs` (checking
the caller's values, generating random ones), which the runner uses, stays below it.
"""

from __future__ import annotations

import re
import warnings

from ..errors import NAME_ONLY, EvaluationError, InputError, Placeholder, Setting, literal
from ..inference.engine import fresh_name
from ..ir.model import Model
from .inputs import (
    entailed_dims,
    generated_axes,
    needed_inputs,
    random_inputs,
    tensor_dims,
)
from .runner import RunExpired, Session

#: Runs :func:`add_inputs_hint` may make to find the open axis that did not fit, and the wall
#: clock they may take together (seconds, a onemodel run stopped between two nodes when it is
#: spent): a hint, not a search.
PROBE_RUNS = 12
PROBE_SECONDS = 5.0
#: Candidate extents tried per open axis: the first numbers of the failure's own message.
PROBE_VALUES = 6

_NODE_PATH = re.compile(r"^graph\.nodes\[(\d+)\]")
_NUMBER = re.compile(r"(?<![\w.])\d{1,6}(?![\w.])")


def _names_used(node) -> set[str]:
    """Every value name ``node`` reads, those its subgraphs read from outside included (all
    names read inside them: a superset, enough to follow the data back)."""
    used = {n for n in node.inputs if n}
    for g in node.subgraphs():
        for inner in g.nodes:
            used |= _names_used(inner)
    return used


def _inputs_reaching(model: Model, index: int | None) -> set[str] | None:
    """The main-graph input names node ``index`` depends on (through the nodes before it), or
    None when the failing node is not known (every input may matter)."""
    g = model.graph
    if g is None or index is None or not 0 <= index < len(g.nodes):
        return None
    producer = {}
    for i, node in enumerate(g.nodes):
        for out in node.outputs:
            if out:
                producer.setdefault(out, i)
    inputs = {vi.name for vi in g.inputs}
    seen_nodes, reached, todo = {index}, set(), list(_names_used(g.nodes[index]))
    while todo:
        name = todo.pop()
        if name in inputs:
            reached.add(name)
        i = producer.get(name)
        if i is not None and i not in seen_nodes:
            seen_nodes.add(i)
            todo.extend(_names_used(g.nodes[i]))
    return reached


def _extent(dims: dict, name: str, k: int, d) -> int:
    """The extent :func:`random_inputs` gives axis ``k`` (declared ``d``) of input ``name``
    with ``dims``: a fixed extent itself, a dim_param or an unnamed extent (by its fresh name)
    from ``dims``, else 1."""
    if isinstance(d, int) and d >= 0:
        return d
    return int(dims.get(d if isinstance(d, str) else fresh_name(name, k), 1))


def _open_axes(model: Model, dims: dict, shapes: dict, names: set[str] | None) -> list:
    """``(input, axis, dim_param or None, extent, declared rank)`` of each open axis of the
    generated tensor inputs in ``names`` (all when None), as :func:`random_inputs` chose it."""
    axes = []
    for _, vi in needed_inputs(model):
        declared = tensor_dims(vi.type)
        if vi.name in shapes or not declared or (names is not None and vi.name not in names):
            continue
        for k, d in enumerate(declared):
            if isinstance(d, int) and d >= 0:
                continue
            value = _extent(dims, vi.name, k, d)
            axes.append((vi.name, k, d if isinstance(d, str) else None, value, len(declared)))
    return axes


def _probe(model: Model, error, axes: list, dims: dict, shapes: dict, seed: int, runner=None):
    """The first ``(axis, extent)`` of ``axes`` with which the whole model runs, trying for
    each open axis (a dim_param once, for every input that has it) the numbers of the failure's
    message (the extents and sizes of the failing node: a traced ``Reshape`` target, a
    broadcast partner), within :data:`PROBE_RUNS` runs and :data:`PROBE_SECONDS` of wall
    clock; or None. ``runner(model, feeds)`` makes the runs (default: one onemodel Session,
    whose ``deadline`` stops a run between two nodes when the budget is spent; another
    runner is stopped between runs only, no run started that the longest one so far says
    would end past the budget)."""
    import time

    started = time.monotonic()
    deadline = started + PROBE_SECONDS
    if runner is None:
        try:
            session = Session(model)
        except Exception:  # noqa: BLE001 - (it ran before the failure): no hint, not an error
            return None
        session.deadline = deadline

        def runner(_, feeds):
            return session.run(feeds)

    detail = error.message.split(" failed: ", 1)[-1]  # not the node's index
    numbers = list(dict.fromkeys(int(n) for n in _NUMBER.findall(detail)))
    runs, longest = 0, 0.0
    tried_params = set()
    for axis in axes:
        name, k, param, value = axis[:4]
        if param is not None:
            if param in tried_params:
                continue
            tried_params.add(param)
        for extent in [n for n in numbers if n != value][:PROBE_VALUES]:
            # (stop before a run that would likely end past the budget: a large model)
            if runs >= PROBE_RUNS or time.monotonic() + longest > deadline:
                return None
            runs += 1
            began = time.monotonic()
            if param is not None:
                trial_dims, trial_shapes = {**dims, param: extent}, shapes
            else:
                shape = [_extent(dims, name, j, d)
                         for j, d in enumerate(tensor_dims(_needed(model, name).type))]
                shape[k] = extent
                trial_dims, trial_shapes = dims, {**shapes, name: tuple(shape)}
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    runner(model, random_inputs(model, seed=seed, dims=trial_dims,
                                                shapes=trial_shapes))
            except RunExpired:  # the budget is spent inside a run
                return None
            except Exception:  # still does not fit (or too large): the next candidate
                longest = max(longest, time.monotonic() - began)
                continue
            return axis, extent, trial_dims, trial_shapes
    return None


def _facts(model: Model):
    """:func:`.constraints.model_facts` of ``model``, or nothing known when the inference
    cannot be made (Clause 9.4: it never prevents evaluation, nor the hint)."""
    from .constraints import model_facts
    try:
        return model_facts(model)
    except Exception:  # noqa: BLE001
        return [], {}, {}


def _node_variables(model: Model, index: int | None, values: dict,
                    compound: set | None = None) -> set[str] | None:
    """The input variables the inferred shapes of node ``index``'s inputs use (its
    subgraphs' outer names included), or None when one of them is not known (any input
    extent may matter then). ``compound`` (a set) receives those used inside an expression
    (``floor((w - 1)/2)``), not as an extent of their own (a batch passed through)."""
    g = model.graph
    if index is None or g is None or not 0 <= index < len(g.nodes):
        return None
    from ..inference.dims import Expr
    used: set[str] = set()
    for name in _names_used(g.nodes[index]):
        v = values.get(name)
        shape = getattr(v, "shape", None)
        if shape is None:
            if v is None and name not in {vi.name for vi in g.inputs}:
                continue  # (a subgraph's own value: not seen from the main graph)
            return None
        for d in shape:
            if d is None:
                return None
            if isinstance(d, Expr):
                used |= d.variables()
                if compound is not None and d.variable is None:
                    compound |= d.variables()
    return used


def _axis_variable(axis) -> str:
    """The inference variable of an open axis of :func:`_open_axes`."""
    name, k, param = axis[:3]
    return param if param is not None else fresh_name(name, k)


#: ``dims=`` / ``shapes=`` named without a value (``--dim`` / ``--shape`` on the command line)
_ANY_SETTING = (Setting("dims", NAME_ONLY), Setting("shapes", NAME_ONLY))


def _failure_note(error, model: Model, dims: dict, shapes: dict, seed: int, probe: bool,
                  runner) -> tuple | None:
    """What :func:`add_inputs_hint` says of an EvaluationError (see there): ``(template,
    settings)`` (:meth:`~onemodel.errors.OneModelError.advise`), or None."""
    m = _NODE_PATH.match(error.path or "")
    index = int(m.group(1)) if m else None
    where = f"node {index}" if index is not None else "the failing node"
    constraints, contradictions, values = _facts(model)
    own = contradictions.get(error.path.split(" ", 1)[0]) if error.path else None
    if own is not None:  # inference finds it with every input extent a variable
        return (literal(f"{where} fails whatever the input extents (inference, with every open "
                        f"extent a variable: {own})") + ": no {0} or {1} can help",
                _ANY_SETTING)
    reaching = _inputs_reaching(model, index)
    axes = _open_axes(model, dims, shapes, reaching) or _open_axes(model, dims, shapes, None)
    compound: set = set()
    used = _node_variables(model, index, values, compound)
    if used is not None:  # only the axes the failing node's input extents depend on
        axes = [a for a in axes if _axis_variable(a) in used]
        if not axes:
            return (literal(f"the extents of {where}'s inputs do not depend on the open input "
                            f"extents (inference)") + ": no {0} or {1} can help", _ANY_SETTING)
        # those computed into an extent first (a width halved by the layers), those passed
        # through as they are (a batch) after
        axes.sort(key=lambda a: _axis_variable(a) not in compound)
    found = _probe(model, error, axes, dims, shapes, seed, runner) if probe else None
    if found is not None:
        axis, extent, _, _ = found
        return (literal(f"{_axis_words(axis)} does not fit {where}") +
                ": with {0} the model runs", (_setting(model, axis, dims, extent),))
    ways = [w for w in _unique(_setting(model, a, dims) for a in axes) if w.name == "dims"] + \
        _unique(Setting("shapes", {a[0]: tuple(Placeholder(f"D{j}") for j in range(a[4]))})
                for a in axes)
    places = [f"{{{k}}}" for k in range(len(ways))]
    return (literal(f"{where} depends on {', '.join(_axis_words(a) for a in axes)}") + ": set "
            + (", ".join(places[:-1]) + " or " if len(places) > 1 else "") + places[-1],
            tuple(ways))


def _unique(settings) -> list:
    """``settings`` without repeats (Settings are compared by name and value), in order."""
    out: list = []
    for x in settings:
        if x not in out:
            out.append(x)
    return out


def _constraint_note(model: Model, unmet, dims: dict, shapes: dict) -> tuple | None:
    """What :func:`add_inputs_hint` says of generated inputs that break what the operators
    entail (``unmet``: the constraints, the binding and where each variable is, from
    :func:`.constraints.check_inputs`): ``(template, settings)`` of the extents with which
    every constraint holds (:func:`.constraints.fitting_extents`, no run), or None when none
    are found."""
    from .constraints import fitting_extents, is_fresh

    constraints, binding, where = unmet
    open_vars = {_axis_variable(a) for a in _open_axes(model, dims, shapes, None)}
    fixed = {v: e for v, e in binding.items() if v not in open_vars}
    found = fitting_extents(constraints, binding)
    if not found or any(v in fixed for v in found):
        return None
    new_dims, new_shapes = {}, {}
    for var, extent in found.items():
        _, name, axis = where[var]
        if not is_fresh(var, where):
            new_dims[var] = extent
            continue
        declared = tensor_dims(_needed(model, name).type)
        shape = new_shapes.setdefault(name, [
            binding.get(fresh_name(name, j), int(dims.get(d, 1)) if isinstance(d, str) else d)
            if not (isinstance(d, int) and d >= 0) else d for j, d in enumerate(declared)])
        shape[axis] = extent
    settings = ([Setting("dims", new_dims)] if new_dims else []) + \
        ([Setting("shapes", {n: tuple(v) for n, v in new_shapes.items()})] if new_shapes else [])
    places = " ".join(f"{{{k}}}" for k in range(len(settings)))
    return f"with {places} the extents the operators need hold (inference)", tuple(settings)


def _needed(model: Model, name: str):
    return next(vi for _, vi in needed_inputs(model) if vi.name == name)


def _setting(model: Model, axis, dims: dict, extent=None) -> Setting:
    """The setting that sets ``axis`` to ``extent`` (a placeholder ``N`` or ``D<k>`` when
    None): ``dims`` for a dim_param, else the input's whole ``shapes``."""
    name, k, param = axis[:3]
    if param is not None:
        return Setting("dims", {param: Placeholder("N") if extent is None else extent})
    declared = tensor_dims(_needed(model, name).type)
    parts = []
    for j, d in enumerate(declared):
        if j == k:
            parts.append(Placeholder(f"D{j}") if extent is None else extent)
        elif isinstance(d, int) and d >= 0:
            parts.append(d)
        else:
            parts.append(_extent(dims, name, j, d))
    return Setting("shapes", {name: tuple(parts)})


def _axis_words(axis) -> str:
    name, k, param, value, _ = axis
    return f"input '{name}' axis {k}" + (f" ({param})" if param is not None else "") + \
        f" = {value}"


def add_inputs_hint(error, model: Model, dims: dict[str, int] | None,
                    shapes: dict[str, tuple] | None = None, *, seed: int = 0,
                    probe: bool = True, runner=None):
    """``error`` (raised while running on :func:`random_inputs` with ``dims``, ``shapes`` and
    ``seed``) with a note naming the generated inputs and their open axes, then what would
    make the model run, taken from what inference knows before any trial run:

    * generated extents that break what the operators entail (an InvalidModelError of
      :func:`.constraints.check_inputs`: ``height`` must stay odd through four halvings for a
      Concat): extents with which every such constraint holds, found without running the
      model (:func:`.constraints.fitting_extents`), ``with dims={'height': 32, 'width': 32}
      the extents the operators need hold (inference)``; nothing when none are found;
    * an EvaluationError at a node that inference finds contradicting itself with every open
      input extent a variable (a Squeeze of an axis of constant extent 22), or whose inputs'
      inferred extents depend on no open input extent: that no ``dims=`` or ``shapes=`` can
      help, and no trial run;
    * otherwise the open axes the failing node's inputs depend on are tried (``probe``; at
      most :data:`PROBE_RUNS` runs and :data:`PROBE_SECONDS` of wall clock, a onemodel run
      stopped between two nodes when the time is spent) with the extents the failure itself
      quotes, and the first with which the whole model runs is named with its setting::

        (inputs were generated: tokens [1, 1] with batch = 1, seq = 1; input 'tokens' axis 1
        (seq) = 1 does not fit node 75: with dims={'seq': 16} the model runs)

      When none is found, those axes are named with the settings that set them (``node 75
      depends on input 'tokens' axis 1 (seq) = 1: set dims={'seq': N}``).

    The settings are :class:`~onemodel.errors.Setting` parts of the message
    (:attr:`~onemodel.errors.OneModelError.settings`): the command line writes them as its
    flags (``with --dim seq=16 the model runs``).

    ``runner(model, feeds)`` makes the trial runs: the engine that failed (default: onemodel's
    evaluator; :mod:`onemodel.verify` passes the ``run`` of the engine it ran with, an
    :class:`onemodel.engines.Engine`). Other errors only get the model's
    source. Returns ``error``."""
    unmet = getattr(error, "unmet", None) if isinstance(error, InputError) else None
    if isinstance(error, EvaluationError) or unmet is not None:
        dims, shapes = dims or {}, shapes or {}
        generated = generated_axes(model, dims, shapes)
        dims = entailed_dims(model, dims)  # (the extents the inputs were generated with)
        if generated:
            described = "; ".join(f"{name} {shape} with {', '.join(axes)}"
                                  for name, shape, axes in generated)
            note = _constraint_note(model, unmet, dims, shapes) if unmet is not None else \
                _failure_note(error, model, dims, shapes, seed, probe, runner)
            template, settings = note if note is not None else ("", ())
            error.advise(literal(f" (inputs were generated: {described}") +
                         (f"; {template}" if note is not None else "") + ")", *settings)
    return error.at(source=getattr(model, "source", None))


def add_dims_hint(error, model: Model, dims: dict[str, int]):
    """The former name of :func:`add_inputs_hint` (without ``shapes``), kept for callers that
    still use it."""
    return add_inputs_hint(error, model, dims, None)
