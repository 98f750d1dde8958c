"""Operators users add: a signature, a kernel and an inference rule, known to ``run``, ``infer``
and ``check`` alike.

An :class:`Operator` declares one definition of an operator of a custom domain (ONNX Part 1,
Clause 14.3: domain, name, ``since_version``, formal inputs and outputs, attributes with their
defaults, type constraints) with the functions that implement it: a kernel (the convention of
:mod:`onemodel.evaluate.registry`) and a rule (that of :mod:`onemodel.inference.registry`).
It is made known

* for the whole process, by :func:`register`;
* for one call, by ``Session(model, operators=[...])``, ``onemodel.infer(model,
  operators=[...])``, ``onemodel.check(model, operators=[...])`` (or :func:`using`);
* to every process, the command line included, by an entry point of group ``onemodel.operators``
  in the package that defines it, naming an :class:`Operator` or a list of them; these are read
  the first time a node of a domain the stored tables do not hold is looked up.

An operator given for one call comes before a registered one of the same ``(domain, op_type,
since_version)``, which comes before one of an entry point. Domains of the stored tables (ONNX's
and onnxruntime's contrib domains) cannot be declared: their signatures are the standard's.
"""

from __future__ import annotations

import bisect
import contextlib
import contextvars
from typing import Callable, Iterable, Iterator

from ..errors import UsageError
from ..ir.entries import normalize_domain

GROUP = "onemodel.operators"
_OPTIONS = ("single", "optional", "variadic")
_ATTRIBUTE_TYPES = ("FLOAT", "INT", "STRING", "TENSOR", "GRAPH", "SPARSE_TENSOR", "TYPE_PROTO",
                    "FLOATS", "INTS", "STRINGS", "TENSORS", "GRAPHS", "SPARSE_TENSORS",
                    "TYPE_PROTOS")


class Operator:
    """One definition of a user's operator, with its kernel and rule.

    Args:
        op_type: the operator's name, as nodes spell it.
        domain: its domain (not one of the stored tables' domains: ``""``/``ai.onnx``,
            ``ai.onnx.ml``, ``ai.onnx.preview``, ``ai.onnx.preview.training``, onnxruntime's
            ``com.microsoft``...).
        since_version: the version of ``domain`` that introduced this definition (>= 1); a node
            of a model importing ``domain`` at version ``v`` is bound to the definition with
            the greatest ``since_version <= v``.
        inputs, outputs: the formal parameters, in order: ``(name, type_str)`` or ``(name,
            type_str, option)``, ``option`` one of ``"single"`` (the default), ``"optional"``,
            ``"variadic"`` (the last one only); ``type_str`` a type parameter of
            ``constraints`` (``"T"``) or a type written out (``"tensor(float)"``).
        attributes: name -> type (``"FLOAT"``, ``"INT"``, ``"INTS"``, ...: a required
            attribute) or ``(type, default)`` (an optional one with its default).
        constraints: type parameter -> the type strings it admits (``{"T": ["tensor(float)",
            "tensor(double)"]}``).
        kernel: ``fn(ctx, *inputs)`` computing the outputs with numpy, or None.
        rule: ``fn(ctx, *inputs)`` inferring the outputs' types and shapes, or None (then
            inference gives the element types the constraints determine).

    Raises :class:`~onemodel.errors.UsageError` for a stored domain, an empty name, a version
    below 1, a malformed formal parameter or attribute, a type parameter without a constraint,
    or a kernel or rule that is not callable.
    """

    __slots__ = ("schema", "kernel", "rule")

    def __init__(self, op_type: str, domain: str, since_version: int = 1, *,
                 inputs: Iterable = (), outputs: Iterable = (), attributes: dict | None = None,
                 constraints: dict | None = None, kernel: Callable | None = None,
                 rule: Callable | None = None):
        from ..schemas.types import UNBOUNDED, Schema, frozen_mapping

        domain = normalize_domain(domain)
        if not isinstance(op_type, str) or not op_type:
            raise UsageError(f"an operator's name is a non-empty string, not {op_type!r}")
        if domain in _standard():
            raise UsageError(f"domain {domain or 'ai.onnx'!r} is a standard domain: its "
                             "operators are declared by its schema table, not by users")
        if type(since_version) is not int or since_version < 1:
            raise UsageError(f"since_version is an int >= 1, not {since_version!r}")
        for fn, what in ((kernel, "kernel"), (rule, "rule")):
            if fn is not None and not callable(fn):
                raise UsageError(f"the {what} of {op_type} is not callable: {fn!r}")
        constraints = {str(k): tuple(sorted(v)) for k, v in (constraints or {}).items()}
        ins = _formals(op_type, "inputs", inputs, constraints)
        outs = _formals(op_type, "outputs", outputs, constraints)
        object.__setattr__(self, "schema", Schema(
            name=op_type, domain=domain, since_version=since_version, deprecated=False,
            inputs=ins, outputs=outs, attributes=frozen_mapping(_attributes(op_type, attributes)),
            constraints=frozen_mapping(constraints),
            min_input=_least(ins), max_input=UNBOUNDED if _variadic(ins) else len(ins),
            min_output=_least(outs), max_output=UNBOUNDED if _variadic(outs) else len(outs)))
        object.__setattr__(self, "kernel", kernel)
        object.__setattr__(self, "rule", rule)

    def __setattr__(self, name, value):
        raise AttributeError("Operator is read-only")

    @property
    def key(self) -> tuple[str, str, int]:
        """``(domain, op_type, since_version)``."""
        s = self.schema
        return s.domain, s.name, s.since_version

    def __repr__(self) -> str:
        d, o, v = self.key
        return f"Operator({o!r}, {d!r}, {v})"


def _formals(op_type: str, field: str, params: Iterable, constraints: dict) -> tuple:
    from ..schemas.types import Formal

    out = []
    params = list(params)
    for i, p in enumerate(params):
        if isinstance(p, str) or not isinstance(p, (tuple, list)) or len(p) not in (2, 3) \
                or not all(isinstance(x, str) for x in p):
            raise UsageError(f"{op_type} {field}[{i}]: {p!r} is not (name, type_str[, option])")
        name, type_str, option = (tuple(p) + ("single",))[:3]
        if option not in _OPTIONS:
            raise UsageError(f"{op_type} {field}[{i}]: option {option!r} is not one of "
                             f"{', '.join(_OPTIONS)}")
        if option == "variadic" and i != len(params) - 1:
            raise UsageError(f"{op_type} {field}[{i}]: only the last parameter may be variadic")
        if "(" not in type_str and type_str not in constraints:
            raise UsageError(f"{op_type} {field}[{i}]: type parameter {type_str!r} has no "
                             "constraint")
        out.append(Formal(name, type_str, option, True, 1))
    return tuple(out)


def _attributes(op_type: str, attributes: dict | None) -> dict:
    from ..schemas.types import AttributeSpec

    out = {}
    for name, spec in sorted((attributes or {}).items()):
        typ, default = (spec, None) if isinstance(spec, str) else (tuple(spec) + (None,))[:2]
        if typ not in _ATTRIBUTE_TYPES or not (isinstance(spec, str) or len(spec) == 2):
            raise UsageError(f"{op_type} attribute {name!r}: {spec!r} is not a type "
                             f"({', '.join(_ATTRIBUTE_TYPES[:3])}, ...) or (type, default)")
        has = not isinstance(spec, str)
        out[name] = AttributeSpec(name, typ, not has, has, default)
    return out


def _least(formals) -> int:
    n = 0
    for f in formals:
        if f.option != "single":
            break
        n += 1
    return n


def _variadic(formals) -> bool:
    return bool(formals) and formals[-1].option == "variadic"


# -- where operators are known -------------------------------------------------------------------
#: (domain, op_type) -> operators registered for the process, by since_version
_REGISTERED: dict[tuple[str, str], list[Operator]] = {}
#: the same from entry points, read on the first lookup of a domain no stored table holds
_PLUGGED: dict[tuple[str, str], list[Operator]] = {}
_plugged_loaded = False
#: operators given for the current call (Session, infer, check)
_SCOPED: contextvars.ContextVar[tuple] = contextvars.ContextVar("onemodel_operators", default=())


def _insert(table: dict, op: Operator, replace: bool) -> None:
    d, o, v = op.key
    entries = table.setdefault((d, o), [])
    for i, e in enumerate(entries):
        if e.schema.since_version == v:
            if not replace:
                raise UsageError(f"{d}.{o}-{v} is already registered (replace=True replaces it)")
            entries[i] = op
            return
    bisect.insort(entries, op, key=lambda e: e.schema.since_version)


def register(operator: Operator, *, replace: bool = False) -> None:
    """Make ``operator`` known to every later lookup of this process. Raises UsageError when
    one of the same ``(domain, op_type, since_version)`` is registered, unless ``replace``."""
    if not isinstance(operator, Operator):
        raise UsageError(f"register takes an onemodel.operators.Operator, not {operator!r}")
    _insert(_REGISTERED, operator, replace)


def unregister(domain: str, op_type: str, since_version: int | None = None) -> None:
    """Forget the registered operator of that ``since_version`` (all of them when None)."""
    key = (normalize_domain(domain), op_type)
    kept = [e for e in _REGISTERED.get(key, ())
            if since_version is not None and e.schema.since_version != since_version]
    if kept:
        _REGISTERED[key] = kept
    else:
        _REGISTERED.pop(key, None)


@contextlib.contextmanager
def using(operators: Iterable[Operator] | None) -> Iterator[None]:
    """Within the block, ``operators`` are known before registered ones (in this thread or
    task only: a context variable). Raises UsageError for an item that is not an Operator, or
    two of the same key."""
    ops = tuple(operators or ())
    table: dict = {}
    for op in ops:
        if not isinstance(op, Operator):
            raise UsageError(f"operators: {op!r} is not an onemodel.operators.Operator")
        _insert(table, op, False)
    token = _SCOPED.set(_SCOPED.get() + ops)
    try:
        yield
    finally:
        _SCOPED.reset(token)


_STANDARD: frozenset | None = None


def _standard() -> frozenset:
    """The domains of the stored tables (no user declares an operator in them)."""
    global _STANDARD
    if _STANDARD is None:
        from .. import schemas

        _STANDARD = frozenset(schemas.domains()) | frozenset(schemas.contrib_domains())
    return _STANDARD


def _load_entry_points() -> None:
    """Read the operators of group :data:`GROUP` (once). An entry point that fails to load, or
    names something else than an Operator or a list of them, is left out with a warning."""
    global _plugged_loaded
    if _plugged_loaded:
        return
    _plugged_loaded = True
    import warnings
    from importlib import metadata

    for ep in metadata.entry_points(group=GROUP):
        try:
            got = ep.load()
            ops = [got] if isinstance(got, Operator) else list(got)
            if not all(isinstance(o, Operator) for o in ops):
                raise TypeError("it names no onemodel.operators.Operator")
            for op in ops:
                _insert(_PLUGGED, op, False)
        except Exception as e:  # noqa: BLE001 - another package's fault: its operators only
            warnings.warn(f"entry point {ep.name!r} of {GROUP} could not be loaded: "
                          f"{type(e).__name__}: {e}", stacklevel=3)


def operators(domain: str, op_type: str) -> tuple[Operator, ...]:
    """Every known definition of ``(domain, op_type)`` (domain normalized), by since_version,
    the one given for the call first where two have the same version."""
    key = (domain, op_type)
    found: dict[int, Operator] = {}
    _load_entry_points()
    for table in (_PLUGGED, _REGISTERED):
        for op in table.get(key, ()):
            found[op.schema.since_version] = op
    for op in _SCOPED.get():
        if (op.schema.domain, op.schema.name) == key:
            found[op.schema.since_version] = op
    return tuple(found[v] for v in sorted(found))


def declared(domain: str, op_type: str) -> tuple:
    """The signatures (:class:`~onemodel.schemas.Schema`) users declared for ``(domain,
    op_type)`` (domain normalized), by since_version."""
    return tuple(op.schema for op in operators(domain, op_type))


def _in_force(domain: str, op_type: str, version) -> Operator | None:
    domain = normalize_domain(domain)
    if domain in _standard():
        return None
    ops = operators(domain, op_type)
    if not ops or type(version) is not int:
        return None
    i = bisect.bisect_right(ops, version, key=lambda e: e.schema.since_version)
    return ops[i - 1] if i else None


def declared_definition(domain: str, op_type: str, version: int):
    """The signature (:class:`~onemodel.schemas.Schema`) of the declared definition in force at
    ``version``, or None."""
    op = _in_force(domain, op_type, version)
    return op.schema if op is not None else None


def user_kernel(domain: str, op_type: str, version: int) -> Callable | None:
    """The kernel of the declared definition in force at ``version``, or None."""
    op = _in_force(domain, op_type, version)
    return op.kernel if op is not None else None


def user_rule(domain: str, op_type: str, version: int) -> Callable | None:
    """The rule of the declared definition in force at ``version``, or None."""
    op = _in_force(domain, op_type, version)
    return op.rule if op is not None else None
