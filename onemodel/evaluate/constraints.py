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
    res = infer_model(model, fresh_inputs=True)
    names = set(_variables(model))
    out = []
    for c in res.constraints:
        used = set()
        for side in (c.a, c.b):
            if isinstance(side, Expr):
                used |= side.variables()
        if used and used <= names:
            out.append(c)
    return out


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
                f"({'unnamed' if v.startswith('?') else v})" for v in used)
            need = (f"{_text(c.a)} in {{{', '.join(map(str, c.allowed))}}}"
                    if c.allowed is not None else f"{_text(c.a)} == {_text(c.b)}")
            raise InputError(f"{given}; {c.message} at {c.path}: {need} does not hold",
                             path=f"graph.inputs[{i}]")


def _text(d) -> str:
    s = str(d)
    for v in (d.variables() if isinstance(d, Expr) else ()):
        if v.startswith("?"):
            name, _, axis = v[1:].rpartition(":")
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
