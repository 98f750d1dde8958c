"""Operator set checks (ONNX Part 1, Clauses 7.3, 7.4, 10.4, 14.3, 14.5): codes ``OM301`` to
``OM311``, every node of every graph (subgraphs, training graphs and function bodies too)
against the operator signatures of :mod:`onemodel.schemas`.

A node is bound to the definition in force at the version its graph imports for its domain
(a function's own import first, then the model's). A node whose (domain, op_type) is a
model-local function is defined by it and not checked here; a node of a domain the schema
table does not hold gets one warning per (domain, op_type) (``OM304``, an error under
``--strict``). A node of a domain that is not imported is left to ``OM105``.
Paths are in :mod:`onemodel.ir` field names (``graph.nodes[3].attributes[1]``).
"""

from __future__ import annotations

from ..errors import quote
from ..ir.accelerator import passes
from ..ir.entries import normalize_domain
from ..ir.model import AttributeType
from .codes import finding


def label(node) -> str:
    """``node 'Relu'`` or ``node 'Relu' named 'r1'`` for a message."""
    name = f" named {quote(node.name)}" if node.name else ""
    return f"node {quote(node.op_type or '')}{name}"


def domain_name(domain: str) -> str:
    """A normalized domain as messages show it (``ai.onnx`` for ``""``)."""
    return domain or "ai.onnx"


def imports(opsets) -> dict:
    """``{normalized domain: version}`` of opset imports (the first import of a domain)."""
    out: dict = {}
    for o in opsets:
        out.setdefault(normalize_domain(o.domain), o.version)
    return out


def node_scopes(model):
    """``(path, nodes, imported versions)`` of every node list that is the body of a graph or
    function at top level: the main graph, the training graphs, each function (whose imports
    are its own over the model's)."""
    versions = imports(model.opset_imports)
    if model.graph is not None:
        yield "graph", model.graph.nodes, versions
    for k, ti in enumerate(model.training_info):
        for field in ("initialization", "algorithm"):
            g = getattr(ti, field)
            if g is not None:
                yield f"training_info[{k}].{field}", g.nodes, versions
    for k, fn in enumerate(model.functions):
        yield f"functions[{k}]", fn.nodes, {**versions, **imports(fn.opset_imports)}


def local_functions(model) -> set:
    """``{(normalized domain, name)}`` of the model-local functions (Clause 8.4)."""
    return {(normalize_domain(fn.domain), fn.name or "") for fn in model.functions}


#: What :func:`bind` gives for a node with no schema to check against.
LOCAL, CUSTOM, UNIMPORTED, UNDEFINED = "local", "custom", "unimported", "undefined"


def bound_nodes(model, ctx=None) -> list:
    """``(graph path, index, node, domain, version, schema or reason)`` for every node with
    an op_type, in walk order: the node lists of :func:`node_scopes`, each node before the
    nodes of the subgraphs in its attributes (depth first; the node's path is
    ``f"{graph path}.nodes[{index}]"``, one path object per node list). The definition each is
    bound to (Clause 14.3), or the reason it has none: :data:`LOCAL` (a model-local function
    defines it), :data:`CUSTOM` (a domain the schema table does not hold, and no
    operator a user declared, :mod:`onemodel.operators.custom`), :data:`UNIMPORTED`
    (no usable import: OM105's) or :data:`UNDEFINED` (no definition at that version).
    Computed once per check: kept in the framework's ``ctx`` dict when given, for the
    operator and the type checks both."""
    from .. import schemas  # read on first use, not at import (tests/test_schemas.py)
    from ..operators.custom import declared_definition

    key = "operators.bound_nodes"
    if isinstance(ctx, dict) and ctx.get(key, (None,))[0] is model:
        return ctx[key][1]
    local = local_functions(model)
    held = set(schemas.domains())
    out: list = []
    add = out.append

    def bind(op, spelled, versions: dict, cache: dict) -> tuple:
        domain = normalize_domain(spelled) if spelled else ""
        version = versions.get(domain)
        if (domain, op) in local:
            got = LOCAL
        elif domain not in held:
            got = (declared_definition(domain, op, version) if type(version) is int else None) \
                or CUSTOM
        elif type(version) is not int or version < 1:
            got = UNIMPORTED
        else:
            got = schemas.get(op, domain, version) or UNDEFINED
        cache[op if spelled is None else (spelled, op)] = bound = (domain, version, got)
        return bound

    def walk(nodes, path: str, versions: dict, cache: dict) -> None:
        if fast is not None and type(nodes) is list:
            def subs(i, node):
                for j, a in enumerate(node.attributes):
                    for field, g in a.subgraphs():
                        walk(g.nodes, f"{path}.nodes[{i}].attributes[{j}].{field}", versions,
                             cache)

            fast.bound(nodes, path, cache, lambda op, spelled: bind(op, spelled, versions, cache),
                       out, subs)
            return
        get = cache.get
        for i, node in enumerate(nodes):
            op = node.op_type
            if op:   # (else OM106)
                spelled = node.domain
                got = get(op if spelled is None else (spelled, op))
                add((path, i, node) + (got or bind(op, spelled, versions, cache)))
            if node.attributes:
                for j, a in enumerate(node.attributes):
                    for field, g in a.subgraphs():
                        walk(g.nodes, f"{path}.nodes[{i}].attributes[{j}].{field}", versions,
                             cache)

    fast = passes()  # the walk of one node list in C (onemodel/ir/_cpass.c)
    try:
        for top, nodes, versions in node_scopes(model):
            walk(nodes, top, versions, {})  # (a cache per import table)
    finally:  # (walk names itself: a reference cycle holding the model, broken)
        walk = None  # noqa: F841
    if isinstance(ctx, dict):
        ctx[key] = (model, out)
    return out


def check_operators(model, ctx=None) -> list:
    """Every operator finding of ``model`` (codes ``OM301``-``OM311``), in node order.

    ``ctx``: the framework's context dict (or None), where :func:`bound_nodes` keeps its
    result. Paths are in IR field names. A node whose definition, counts, unsupplied positions
    and attribute names and types equal those of a node found clean is clean too, and is not
    checked again."""
    out: list = []
    custom: set = set()
    clean: set = set()
    ir_version = model.ir_version or 0
    for gpath, i, node, domain, version, s in bound_nodes(model, ctx):
        op = node.op_type
        if type(s) is str:
            if s == CUSTOM and (domain, op) not in custom:
                custom.add((domain, op))
                out.append(finding(
                    "OM304", f"operator {quote(op)} of domain {quote(domain)} has no "
                    "schema: not checked", f"{gpath}.nodes[{i}]"))
            elif s == UNDEFINED:
                _undefined(node, f"{gpath}.nodes[{i}]", domain, version, out)
            continue
        ins, outs = node.inputs, node.outputs
        key = (id(s), len(ins), len(outs),
               "" in ins and tuple(k for k, n in enumerate(ins) if not n),
               "" in outs and tuple(k for k, n in enumerate(outs) if not n),
               tuple((a.name, a.type or (ir_version < 2 and _inferred_type(a)))
                     for a in node.attributes) if node.attributes else ())
        if key in clean:
            continue
        npath = f"{gpath}.nodes[{i}]"
        n = len(out)
        if s.deprecated:
            out.append(finding(
                "OM303", f"operator {quote(op)} is deprecated in {domain_name(domain)} "
                f"version {version} (definition of version {s.since_version})", npath))
        _arity(node, npath, s, "inputs", out)
        _arity(node, npath, s, "outputs", out)
        _attributes(node, npath, s, ir_version, out)
        if len(out) == n:
            clean.add(key)
    return out


class _What:
    """``node 'Add' (Add-14)`` for a message, made only when a message is."""

    __slots__ = ("node", "schema")

    def __init__(self, node, schema):
        self.node, self.schema = node, schema

    def __format__(self, spec) -> str:
        return f"{label(self.node)} ({self.schema.name}-{self.schema.since_version})"


def _undefined(node, npath, domain, version, out) -> None:
    from .. import schemas

    first = schemas.introduced(node.op_type, domain)
    where = f"{domain_name(domain)} version {version}"
    if first is None:
        out.append(finding("OM301", f"operator {quote(node.op_type)} is not defined in "
                           f"{domain_name(domain)} (no version defines it)", f"{npath}.op_type"))
    else:
        out.append(finding("OM302", f"operator {quote(node.op_type)} is not defined in {where}"
                           f" (introduced in version {first})", f"{npath}.op_type"))


def _arity(node, npath, s, field, out) -> None:
    code = "OM305" if field == "inputs" else "OM306"
    kind = field[:-1]
    actual = getattr(node, field)
    formals = s.inputs if field == "inputs" else s.outputs
    lo, hi = (s.min_input, s.max_input) if field == "inputs" else (s.min_output, s.max_output)
    n = len(actual)
    what = _What(node, s)
    if n < lo or n > hi:
        bound = f"at least {lo}" if n < lo else f"at most {hi}"
        if lo == hi:
            bound = f"exactly {lo}"
        out.append(finding(code, f"{what} has {n} {field}; the definition takes {bound}",
                           f"{npath}.{field}"))
        return
    last = formals[-1] if formals else None
    if last is not None and last.variadic and n >= len(formals) - 1:
        supplied = n - (len(formals) - 1)
        if supplied < (last.min_arity or 0):
            out.append(finding(code, f"{what} supplies {supplied} {kind}s to variadic "
                               f"{quote(last.name)}, which takes at least {last.min_arity}",
                               f"{npath}.{field}"))
    for k, name in enumerate(actual):
        if k >= len(formals):
            if last is None or not last.variadic:
                out.append(finding(code, f"{what} has {n} {field}; the definition declares "
                                   f"{len(formals)}", f"{npath}.{field}[{k}]"))
                break
            formal = last
        else:
            formal = formals[k]
        if name == "" and not formal.optional:
            out.append(finding("OM307", f"{kind} {k} ({quote(formal.name)}) of {what} is "
                               "empty, but only an optional one may be left unsupplied",
                               f"{npath}.{field}[{k}]"))


def _type_name(t) -> str:
    try:
        return AttributeType(t).name
    except ValueError:
        return f"type {t}"


def _inferred_type(a):
    """The attribute type the set value field implies (attributes of IR version 1 carry none)."""
    from ..ir.model import VALUE_FIELD

    for t, field in VALUE_FIELD.items():
        v = getattr(a, field, None)
        if v is not None and (not isinstance(v, list) or v) and (
                field != "floats" or len(v)):
            return t
    return None


#: attribute types whose one value must be present (a list type may hold no element)
_SCALAR = frozenset((AttributeType.FLOAT, AttributeType.INT, AttributeType.STRING,
                     AttributeType.TENSOR, AttributeType.GRAPH, AttributeType.SPARSE_TENSOR,
                     AttributeType.TYPE_PROTO))


def _value_field(a, t, name, what, apath, out) -> None:
    """OM309 when the value field ``type`` selects is not set while another is (Clause 7.4:
    the type says which field holds the value; a reader takes that field's, here nothing)."""
    from ..ir.model import VALUE_FIELD

    field = VALUE_FIELD.get(t)
    if field is None or t not in _SCALAR or getattr(a, field, None) is not None:
        return
    held = _inferred_type(a)
    where = f" (its value is in {VALUE_FIELD[held]})" if held is not None else ""
    out.append(finding("OM309", f"attribute {quote(name)} of {what} is {_type_name(t)} but "
                       f"has no {field} value{where}", f"{apath}.{field}"))


def _attributes(node, npath, s, ir_version, out) -> None:
    seen: dict = {}
    what = _What(node, s)
    for j, a in enumerate(node.attributes):
        apath = f"{npath}.attributes[{j}]"
        name = a.name
        if not name:
            continue   # OM106
        if name in seen:
            out.append(finding("OM311", f"attribute {quote(name)} of {what} is given twice "
                               f"(first as attribute {seen[name]})", f"{apath}.name"))
            continue
        seen[name] = j
        spec = s.attributes.get(name)
        if spec is None:
            if not name.startswith("__"):   # internal symbols, as onnx allows
                out.append(finding("OM308", f"{what} has no attribute {quote(name)}",
                                   f"{apath}.name"))
            continue
        t = a.type
        if not t and ir_version < 2 and not a.ref_attr_name:
            t = _inferred_type(a)
        if not t:
            out.append(finding("OM309", f"attribute {quote(name)} of {what} declares no type "
                               f"(the definition's is {spec.type})", f"{apath}.type"))
        elif _type_name(t) != spec.type:
            out.append(finding("OM309", f"attribute {quote(name)} of {what} is "
                               f"{_type_name(t)}; the definition's type is {spec.type}",
                               f"{apath}.type"))
        elif not a.ref_attr_name:
            _value_field(a, t, name, what, apath, out)
    for name, spec in s.attributes.items():
        if spec.required and name not in seen:
            out.append(finding("OM310", f"{what} lacks required attribute {quote(name)}",
                               npath))
