"""Inputs checked against what the model's operators entail of their extents, before anything
is computed (issue 12: a wrong input is reported at the input, with the dimension that does not
fit, not deep inside a Reshape), and extents for generated inputs that satisfy them.

The constraints come from shape inference (:mod:`onemodel.inference`, Clause 9) with a variable
for every unnamed input extent (``fresh_inputs``): ``K == 768`` where a MatMul needs the inner
extents equal, ``N in (1, 3)`` where a broadcast meets 3.
"""

from __future__ import annotations

from ..errors import InputError
from ..inference import infer_model
from ..inference.dims import Expr
from ..inference.engine import fresh_name


def model_constraints(model) -> list:
    """The constraints of ``model``'s main graph on its input extents (a list of
    :class:`onemodel.inference.engine.Constraint`), the ones that use input variables only."""
    return model_facts(model)[0]


def model_facts(model) -> tuple[list, dict[str, str], dict]:
    """``(constraints, contradictions, values)`` of ``model`` inferred with a variable for every
    open input extent: the constraints of :func:`model_constraints`; node path -> the message
    of the first contradiction there (found with every input extent a variable, it holds
    whatever extents the inputs are given: a Squeeze of an axis whose extent is the constant
    22, which no input can make run); value name -> its inferred
    :class:`onemodel.inference.value.Value`."""
    res = infer_model(model, fresh_inputs=True)
    names = set(_variables(model))
    out = []
    for c in res.constraints:
        if (used := _used(c)) and used <= names:
            out.append(c)
    contradictions: dict[str, str] = {}
    for c in res.contradictions:
        contradictions.setdefault(c.path, c.message)
    return out, contradictions, res.values


def _used(c) -> set:
    used = set()
    for side in (c.a, c.b):
        if isinstance(side, Expr):
            used |= side.variables()
    return used


#: Extents :func:`fitting_extents` tries, in order: the multiples of 32 up to 2048 (the sizes
#: image models are made for), then every extent up to 4096.
FIT_CANDIDATES = tuple(range(32, 2049, 32)) + tuple(range(1, 4097))


def fitting_extents(constraints: list, binding: dict) -> dict[str, int] | None:
    """New extents for the variables of the constraints that ``binding`` (variable -> extent)
    breaks, with which every constraint holds (unknown counts as holding): the first of
    :data:`FIT_CANDIDATES` for all of them together (a square image), else for each in turn,
    the others kept. None when ``binding`` breaks none, or no such extents are found. No model
    is run: the constraints are inference's (``height`` must be odd after four halvings, the
    inner extent of a MatMul 768)."""
    broken = [c for c in constraints if c.holds(binding) is False]
    if not broken:
        return None
    names = sorted({v for c in broken for v in _used(c) if v in binding})
    if not names:
        return None

    def holds(trial):
        return all(c.holds(trial) is not False for c in constraints)

    for v in FIT_CANDIDATES:
        if holds({**binding, **dict.fromkeys(names, v)}):
            return dict.fromkeys(names, v)
    trial = dict(binding)
    for name in names:
        mine = [c for c in constraints if name in _used(c)
                and _used(c) <= set(names[:names.index(name) + 1]) | (set(binding) - set(names))]
        found = next((v for v in FIT_CANDIDATES
                      if all(c.holds({**trial, name: v}) is not False for c in mine)), None)
        if found is None:
            return None
        trial[name] = found
    return {n: trial[n] for n in names} if holds(trial) else None


def _variables(model) -> dict[str, tuple[int, str, int]]:
    """Variable -> (input index, input name, axis) of its first occurrence in a main-graph
    input's declared shape (unnamed extents by their fresh names)."""
    out: dict = {}
    for i, vi in enumerate(model.graph.inputs if model.graph is not None else ()):
        t = vi.type
        shape = t.shape if t is not None else None
        if shape is None:
            continue
        for k, e in enumerate(shape.extents):
            if type(e) is int:
                continue
            out.setdefault(e or fresh_name(vi.name, k), (i, vi.name, k))
    return out


def bind_inputs(model, inputs: dict) -> tuple[dict, dict]:
    """``(binding, where)``: each input dimension variable (fresh names for unnamed extents)
    -> the extent the caller's value has, and -> ``(input index, name, axis)``. Raises
    InputError when one variable gets two extents (Clause 6.5.2). ``inputs``: name ->
    the caller's value (anything with a ``shape``; others are skipped)."""
    binding: dict[str, int] = {}
    where: dict[str, tuple] = {}
    for i, vi in enumerate(model.graph.inputs):
        value = inputs.get(vi.name)
        shape = getattr(value, "shape", None)
        t = vi.type
        declared = t.shape if t is not None else None
        if shape is None or declared is None or len(declared.dims) != len(shape):
            continue
        for k, e in enumerate(declared.extents):  # ('?' and -1 are unknown: fresh names)
            if type(e) is int:
                continue
            var = e or fresh_name(vi.name, k)
            got = int(shape[k])
            if var in binding and binding[var] != got:
                j, other, ax = where[var]
                raise InputError(
                    f"input '{vi.name}' has extent {got} on axis {k} ({var}), but input "
                    f"'{other}' has {binding[var]} on axis {ax} for the same dimension",
                    path=f"graph.inputs[{i}]")
            binding[var] = got
            where[var] = (i, vi.name, k)
    return binding, where


def check_inputs(constraints: list, binding: dict, where: dict) -> None:
    """Raise InputError at the first main-graph input whose extents (``binding``,
    ``where`` of :func:`bind_inputs`) break a constraint, naming every input extent the
    constraint uses (input, axis, variable), in input order, and the operator that needs it."""
    for c in constraints:
        if c.holds(binding) is False:
            used = sorted({v for side in (c.a, c.b) if isinstance(side, Expr)
                           for v in side.variables() if v in where},
                          key=lambda v: where[v])  # in input and axis order
            i, name, axis = where[used[0]]
            given = ", ".join(
                f"input '{where[v][1]}' has extent {binding[v]} on axis {where[v][2]} "
                f"({'unnamed' if is_fresh(v, where) else v})" for v in used)
            need = (f"{_text(c.a, where)} in {{{', '.join(map(str, c.allowed))}}}"
                    if c.allowed is not None else
                    f"{_text(c.a, where)} == {_text(c.b, where)}")
            error = InputError(f"{given}; {c.message} at {c.path}: {need} does not hold",
                               path=f"graph.inputs[{i}]")
            #: what the input hint needs (:func:`.inputs.add_inputs_hint`): the constraints
            #: and the extents that break one
            error.unmet = (constraints, dict(binding), dict(where))
            raise error


def is_fresh(v: str, where: dict) -> bool:
    """Whether variable ``v`` stands for an unnamed input extent (its fresh name, from
    ``where`` of :func:`bind_inputs`), not a dim_param: a PaddlePaddle export declares the
    dim_param ``?`` itself, which only looks like one."""
    w = where.get(v)
    return w is not None and v == fresh_name(w[1], w[2])


def _text(d, where: dict) -> str:
    s = str(d)
    for v in (d.variables() if isinstance(d, Expr) else ()):
        if is_fresh(v, where):
            _, name, axis = where[v]
            s = s.replace(v, f"{name}.shape[{axis}]")
    return s


def suggested_dims(model, constraints: list | None = None) -> dict[str, int]:
    """Values for input dimension variables (fresh names for unnamed extents included) that
    the constraints pin: ``v == 768`` gives 768. Others are left to the caller."""
    out: dict[str, int] = {}
    for c in (model_constraints(model) if constraints is None else constraints):
        if c.allowed is None:
            for x, y in ((c.a, c.b), (c.b, c.a)):
                if isinstance(x, Expr) and x.variable is not None and type(y) is int:
                    out.setdefault(x.variable, y)
    return out


def default_dims(model, given: dict | None = None) -> dict[str, int]:
    """Extents for the input dimension variables ``given`` leaves unset (fresh names for
    unnamed extents included), for generated inputs: those the constraints pin
    (:func:`suggested_dims`), and where the others at 1 (or pinned) break a constraint, the
    extents :func:`fitting_extents` finds for them (nudenet's height and width, which must
    stay odd through four halvings: 32), unless that would change a variable of ``given``.
    What ``given`` sets is not in the result."""
    given = given or {}
    constraints = model_constraints(model)
    out = {v: e for v, e in suggested_dims(model, constraints).items() if v not in given}
    binding = {v: given.get(v, out.get(v, 1)) for v in _variables(model)}
    found = fitting_extents(constraints, binding)
    if found and not any(v in given for v in found):
        out.update(found)
    return out
