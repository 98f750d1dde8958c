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

from .. import schemas
from ..errors import quote
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


def iter_nodes(nodes, path: str):
    """``(path, node)`` for every node of ``nodes`` and of the subgraphs in their attributes,
    depth first, each node before its subgraphs' nodes."""
    for i, node in enumerate(nodes):
        npath = f"{path}.nodes[{i}]"
        yield npath, node
        if node.attributes:
            for j, a in enumerate(node.attributes):
                for field, g in a.subgraphs():
                    yield from iter_nodes(g.nodes, f"{npath}.attributes[{j}].{field}")


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


def resolve(model):
    """``(path, node, schema)`` for every node that has a schema at its imported version
    (deprecated ones included): the nodes the type checks look at."""
    local = local_functions(model)
    held = set(schemas.domains())
    for top, nodes, versions in node_scopes(model):
        for npath, node in iter_nodes(nodes, top):
            domain = normalize_domain(node.domain)
            version = versions.get(domain)
            if (domain not in held or not node.op_type or (domain, node.op_type) in local
                    or type(version) is not int or version < 1):
                continue
            s = schemas.get(node.op_type, domain, version)
            if s is not None:
                yield npath, node, s


def check_operators(model, ctx=None) -> list:
    """Every operator finding of ``model`` (codes ``OM301``-``OM311``), in node order.

    ``ctx`` (the framework's context) is not used. Paths are in IR field names."""
    out: list = []
    local = local_functions(model)
    held = set(schemas.domains())
    custom: set = set()
    ir_version = model.ir_version or 0
    for top, nodes, versions in node_scopes(model):
        for npath, node in iter_nodes(nodes, top):
            op = node.op_type
            if not op:
                continue   # OM106
            domain = normalize_domain(node.domain)
            if (domain, op) in local:
                continue
            if domain not in held:
                if (domain, op) not in custom:
                    custom.add((domain, op))
                    out.append(finding(
                        "OM304", f"operator {quote(op)} of domain {quote(domain)} has no "
                        "schema: not checked", npath))
                continue
            version = versions.get(domain)
            if type(version) is not int or version < 1:
                continue   # OM105: the domain is not imported
            s = schemas.get(op, domain, version)
            if s is None:
                _undefined(node, npath, domain, version, out)
                continue
            if s.deprecated:
                out.append(finding(
                    "OM303", f"operator {quote(op)} is deprecated in {domain_name(domain)} "
                    f"version {version} (definition of version {s.since_version})", npath))
            _arity(node, npath, s, "inputs", out)
            _arity(node, npath, s, "outputs", out)
            _attributes(node, npath, s, ir_version, out)
    return out


def _undefined(node, npath, domain, version, out) -> None:
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
    what = f"{label(node)} ({s.name}-{s.since_version})"
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


def _attributes(node, npath, s, ir_version, out) -> None:
    seen: dict = {}
    what = f"{label(node)} ({s.name}-{s.since_version})"
    for j, a in enumerate(node.attributes):
        apath = f"{npath}.attributes[{j}]"
        name = a.name
        if not name:
            continue   # OM106
        if name in seen:
            out.append(finding("OM311", f"attribute {quote(name)} of {what} is given twice "
                               f"(first at attributes[{seen[name]}])", f"{apath}.name"))
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
    for name, spec in s.attributes.items():
        if spec.required and name not in seen:
            out.append(finding("OM310", f"{what} lacks required attribute {quote(name)}",
                               npath))
