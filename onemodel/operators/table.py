"""The operator table: definitions by ``(domain, op_type, since_version)``, and what attaches.

An operator's definitions (ONNX Part 1, Clause 14.3) come from the stored schema tables: ONNX's
domains from :mod:`onemodel.schemas`, onnxruntime's contrib domains from its contrib table, and
operators a user declares (:mod:`.custom`). Implementations attach to a definition by reference:
a kernel (``kind="kernel"``) or an inference rule (``kind="rule"``) registered for an operator
from ``since`` on serves that definition and every later one, until the next attachment of the
same kind (Clause 14.4: a definition stays in force until a later operator set redefines it).
``since`` must be one of the operator's ``since_version`` values: the versions are the table's,
never a second list.

Kernels and rules live in modules named for their family (:mod:`.families`); the table imports a
family's module on the first lookup of one of its operators.
"""

from __future__ import annotations

import bisect
import importlib
from typing import Callable, Iterator

from ..ir.entries import normalize_domain
from .families import FAMILIES

#: kind -> the package holding one module per family: kernels, inference rules, and the version
#: adapters of opset conversion (a family may have no adapter module: none of its operators
#: then has an adapter)
PACKAGES = {"kernel": "onemodel.evaluate.kernels", "rule": "onemodel.inference.rules",
            "adapter": "onemodel.opset_convert.adapters"}
#: the kinds every family has a module of
COMPLETE = ("kernel", "rule")

#: kind -> (domain, op_type) -> [(since, function)] sorted by since: the built-in attachments
_ATTACHED: dict[str, dict[tuple[str, str], list[tuple[int, Callable]]]] = {k: {} for k in PACKAGES}
#: kind -> attachments made and not yet checked: (domain, op_type, since or None, function)
_PENDING: dict[str, list] = {k: [] for k in PACKAGES}
#: kind -> families whose module was imported
_LOADED: dict[str, set[str]] = {k: set() for k in PACKAGES}
_FAMILY: dict[tuple[str, str], str] = {}


def family(domain: str | None, op_type: str) -> str | None:
    """The family (module name in both trees) of a built-in operator, or None."""
    if not _FAMILY:
        for fam, by_domain in FAMILIES.items():
            for d, names in by_domain.items():
                for name in names:
                    _FAMILY[(d, name)] = fam
    return _FAMILY.get((normalize_domain(domain), op_type))


def definitions(domain: str | None, op_type: str) -> tuple:
    """Every stored definition (:class:`~onemodel.schemas.Schema`) of an operator, by
    ``since_version`` ascending: ONNX's table for its domains, onnxruntime's contrib table for
    its domains, then operators declared by users (:func:`.custom.declared`); ``()`` when none."""
    from .. import schemas
    from .custom import declared

    d = normalize_domain(domain)
    return schemas.definitions(op_type, d) or declared(d, op_type)


def attribute_default(domain: str | None, op_type: str, version: int, name: str):
    """The default of attribute ``name`` in the definition in force at ``version``
    (:func:`onemodel.schemas.attribute_default` for ONNX's domains, the stored or declared
    definition otherwise); None when it gives none."""
    from .. import schemas

    d = normalize_domain(domain)
    if d in schemas.domains():
        return schemas.attribute_default(d, op_type, version, name)
    s = definition(d, op_type, version) if type(version) is int else None
    return s.default(name) if s is not None else None


def versions(domain: str | None, op_type: str) -> tuple[int, ...]:
    """The ``since_version`` of every definition of the operator, ascending."""
    return tuple(s.since_version for s in definitions(domain, op_type))


def definition(domain: str | None, op_type: str, version: int):
    """The definition in force at operator set ``version`` (greatest ``since_version <=
    version``), or None (Clause 14.3)."""
    found = definitions(domain, op_type)
    i = bisect.bisect_right(found, version, key=lambda s: s.since_version)
    return found[i - 1] if i else None


def attach(kind: str, op_type: str, fn: Callable, domain: str = "",
           since: int | None = None) -> Callable:
    """Attach built-in implementation ``fn`` of ``kind`` (``"kernel"`` or ``"rule"``) to the
    definition of ``(domain, op_type)`` introduced at ``since`` (None: its first definition).

    The reference is checked on the next lookup of ``kind`` (so that importing a kernel module
    does not read the schema tables): :func:`implementation` and :func:`attachments` then raise
    ValueError when the operator has no stored definition, when ``since`` is not one of its
    ``since_version`` values, when ``fn`` is not defined in the module of the operator's family
    (:mod:`.families`), or when that definition already has one of this kind. Raises TypeError
    at once when ``fn`` is not callable. Returns ``fn``.
    """
    if not callable(fn):
        raise TypeError(f"the {kind} of {op_type} is not callable: {fn!r}")
    _PENDING[kind].append((normalize_domain(domain), op_type, since, fn))
    return fn


def _settle(kind: str) -> None:
    """Check and enter the pending attachments of ``kind`` (:func:`attach`)."""
    pending = _PENDING[kind]
    while pending:
        d, op_type, since, fn = pending.pop(0)
        known = versions(d, op_type)
        name = f"{d or 'ai.onnx'}.{op_type}"
        if not known:
            raise ValueError(f"{name} has no stored definition: declare it first")
        if since is None:
            since = known[0]
        if since not in known:
            raise ValueError(f"{name}: {since} is not the since_version of a definition "
                             f"(they are {list(known)})")
        module = f"{PACKAGES[kind]}.{family(d, op_type)}"
        if fn.__module__ != module:
            raise ValueError(f"the {kind} of {name} must be defined in {module} (its family in "
                             f"onemodel/operators/families.py), not in {fn.__module__}")
        entries = _ATTACHED[kind].setdefault((d, op_type), [])
        if any(s == since for s, _ in entries):
            raise ValueError(f"{name}-{since} already has a {kind}")
        bisect.insort(entries, (since, fn), key=lambda e: e[0])


def _load(kind: str, fam: str) -> None:
    if fam not in _LOADED[kind]:
        _LOADED[kind].add(fam)
        name = f"{PACKAGES[kind]}.{fam}"
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:
            if kind in COMPLETE or e.name != name:
                raise


def load_all(kind: str) -> None:
    """Import every family's module of ``kind`` (for listings; lookups load what they need)."""
    for fam in FAMILIES:
        _load(kind, fam)


def implementation(kind: str, domain: str | None, op_type: str, version: int) -> Callable | None:
    """The built-in function of ``kind`` serving ``(domain, op_type)`` at operator set
    ``version``: the one attached with the greatest ``since <= version``; None when none is."""
    key = (normalize_domain(domain), op_type)
    if _PENDING[kind]:
        _settle(kind)
    entries = _ATTACHED[kind].get(key)
    if entries is None:
        fam = family(*key)
        if fam is None:
            return None
        _load(kind, fam)
        _settle(kind)
        entries = _ATTACHED[kind].get(key)
        if entries is None:
            return None
    i = bisect.bisect_right(entries, version, key=lambda e: e[0])
    return entries[i - 1][1] if i else None


def exact(kind: str, domain: str | None, op_type: str, since: int) -> Callable | None:
    """The function of ``kind`` attached to exactly the definition introduced at ``since``
    (an adapter converts between that definition and the one before it), or None."""
    key = (normalize_domain(domain), op_type)
    fam = family(*key)
    if fam is not None:
        _load(kind, fam)
    _settle(kind)
    for s, fn in _ATTACHED[kind].get(key, ()):
        if s == since:
            return fn
    return None


def attachments(kind: str) -> dict[tuple[str, str], list[tuple[int, Callable]]]:
    """Every built-in attachment of ``kind``: ``(domain, op_type) -> [(since, function)]``
    (every family loaded; a new dict of new lists)."""
    load_all(kind)
    _settle(kind)
    return {k: list(v) for k, v in _ATTACHED[kind].items()}


def served() -> Iterator[tuple[str, str, int, Callable | None, Callable | None]]:
    """``(domain, op_type, since_version, kernel, rule)`` for every definition of every
    operator of :mod:`.families` and of the ONNX schema table, by domain and name; kernel and
    rule are None where nothing serves that definition (:data:`.families.UNIMPLEMENTED`
    says why)."""
    from .. import schemas

    keys = {(d, o) for by_domain in FAMILIES.values() for d, names in by_domain.items()
            for o in names}
    keys |= {(d, o) for d in schemas.domains() for o in schemas.operators(d)}
    for d, o in sorted(keys):
        for v in versions(d, o):
            yield (d, o, v, implementation("kernel", d, o, v), implementation("rule", d, o, v))
