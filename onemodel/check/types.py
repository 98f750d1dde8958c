"""Type checks without shape inference (ONNX Part 1, Clauses 7.1, 7.2 and 10.3): codes
``OM401`` to ``OM404``.

Where a value's type is known from the model itself -- an initializer (or sparse initializer),
a graph input, output or value_info, of its graph or an enclosing one; a function's value_info
-- it is checked against the type constraint of each formal parameter of the node it feeds
(``OM401``) or comes from (``OM402``), and each type parameter of a node must be bound to one
type (``OM403``; not across a heterogeneous variadic parameter such as Loop's ``V``). A
declared type that contradicts the initializer of the same name (element type, rank or a fixed
extent) is ``OM404``. Types of intermediate values that only inference would give are not
checked (that is ``--full``). Paths are in :mod:`onemodel.ir` field names.
"""

from __future__ import annotations

from ..errors import quote
from ..ir.dtypes import DataType, name_of
from .codes import finding
from .operators import label, resolve


def type_string(t) -> str | None:
    """The ONNX type string of an :class:`onemodel.ir.Type` (``tensor(float)``,
    ``seq(tensor(int64))``, ``map(string,tensor(float))``, ``optional(...)``), or ``None`` when
    it is not fully known (no element type, a sparse or opaque type, a tag not in Table 5)."""
    if t is None:
        return None
    k = t.kind
    if k == "tensor":
        return _elem(t.tensor_type.elem_type, "tensor({})")
    if k in ("sequence", "optional"):
        inner = type_string(t.value.elem_type)
        return None if inner is None else f"{'seq' if k == 'sequence' else k}({inner})"
    if k == "map":
        key = _elem(t.map_type.key_type, "{}")
        value = type_string(t.map_type.value_type)
        return None if key is None or value is None else f"map({key},{value})"
    return None


def _elem(code, form: str) -> str | None:
    if not code:
        return None
    try:
        DataType(code)
    except ValueError:
        return None
    return form.format(name_of(code))


def normalize(s: str) -> str:
    """A schema's type string in the form :func:`type_string` gives: no spaces, and a bare
    element type inside ``map(...)`` (ai.onnx.ml writes ``map(string, float)``) a tensor."""
    s = s.replace(" ", "")
    if s.endswith(")"):
        for head in ("seq(", "optional("):
            if s.startswith(head):
                return f"{head}{normalize(s[len(head):-1])})"
        if s.startswith("map(") and "," in s:
            key, value = s[4:-1].split(",", 1)
            return f"map({key},{normalize(value)})"
        if s.startswith(("tensor(", "sparse_tensor(")):
            return s
    return f"tensor({s})"


_ALLOWED: dict = {}


def allowed(schema, type_str: str) -> frozenset:
    """The normalized type strings a formal typed ``type_str`` admits (cached per schema)."""
    key = (id(schema), type_str)
    got = _ALLOWED.get(key)
    if got is None:
        got = _ALLOWED[key] = frozenset(normalize(x) for x in schema.allowed_types(type_str))
    return got


def _declared(g) -> tuple[dict, dict]:
    """``({name: (type string, by what)}, {name: (type string, by what)})``: what a graph states of
    the values it defines or sees (initializers first, then inputs and value_info) and of the
    values its nodes produce (value_info, then outputs)."""
    seen: dict = {}
    for t in g.initializers:
        if t.name:
            seen.setdefault(t.name, (_elem(t.data_type, "tensor({})"), "its initializer"))
    for st in g.sparse_initializers:
        v = st.values
        if v is not None and v.name:
            seen.setdefault(v.name, (_elem(v.data_type, "tensor({})"),
                                     "its sparse initializer"))
    produced: dict = {}
    for field in ("inputs", "value_info", "outputs"):
        for v in getattr(g, field):
            if not v.name:
                continue
            entry = (type_string(v.type), _BY[field])
            if field != "outputs":
                seen.setdefault(v.name, entry)
            if field != "inputs":
                produced.setdefault(v.name, entry)
    return seen, produced


_BY = {"inputs": "a graph input", "value_info": "value_info", "outputs": "a graph output"}



def _graph_scopes(model):
    """``(graph path, graph, {name: known}, {name: declared for outputs})`` of every graph,
    the known types of enclosing graphs included (a subgraph may use outer names, Clause
    5.4.3)."""

    def walk(g, gpath, outer):
        seen, produced = _declared(g)
        known = {**outer, **seen, **{n: e for n, e in produced.items() if n not in seen}}
        yield gpath, g, known, produced
        for i, node in enumerate(g.nodes):
            for j, a in enumerate(node.attributes):
                for field, sub in a.subgraphs():
                    yield from walk(sub, f"{gpath}.nodes[{i}].attributes[{j}].{field}", known)

    if model.graph is not None:
        yield from walk(model.graph, "graph", {})
    for k, ti in enumerate(model.training_info):
        for field in ("initialization", "algorithm"):
            g = getattr(ti, field)
            if g is not None:
                yield from walk(g, f"training_info[{k}].{field}", {})


def check_types(model, ctx=None) -> list:
    """Every type finding of ``model`` (codes ``OM401``-``OM404``): declared types against the
    type constraints of the nodes they feed and come from, and against their initializers.

    ``ctx`` (the framework's context) is not used. Paths are in IR field names."""
    out: list = []
    knowledge: dict = {}   # node list path -> (known, produced)
    for gpath, g, known, produced in _graph_scopes(model):
        knowledge[gpath] = (known, produced)
        _initializers(g, gpath, out)
    for k, fn in enumerate(model.functions):
        declared = {v.name: (type_string(v.type), "value_info")
                    for v in fn.value_info if v.name}
        knowledge[f"functions[{k}]"] = (declared, declared)
    for npath, node, s in resolve(model):
        gpath = npath[:npath.rindex(".nodes[")]
        known, produced = knowledge.get(gpath, ({}, {}))
        _node(node, npath, s, known, produced, out)
    return out


def _formal(formals, k):
    if k < len(formals):
        return formals[k]
    if formals and formals[-1].variadic:
        return formals[-1]
    return None


def _node(node, npath, s, known, produced, out) -> None:
    bound: dict = {}    # type parameter -> (type string, what)
    free = {f.type_str for f in s.inputs + s.outputs if f.variadic and not f.is_homogeneous}
    for field, formals, table, code in (("inputs", s.inputs, known, "OM401"),
                                         ("outputs", s.outputs, produced, "OM402")):
        kind = field[:-1]
        for k, name in enumerate(getattr(node, field)):
            formal = _formal(formals, k)
            if not name or formal is None:
                continue
            entry = table.get(name)
            if entry is None or entry[0] is None:
                continue
            ts, where = entry
            ok = allowed(s, formal.type_str)
            if ts not in ok:
                shown = ", ".join(sorted(ok)[:6]) + (", ..." if len(ok) > 6 else "")
                out.append(finding(
                    code, f"{kind} {quote(name)} of {label(node)} ({s.name}-{s.since_version}) "
                    f"is declared {ts} (by {where}), which {formal.type_str} of "
                    f"{quote(formal.name)} does not allow ({shown})", f"{npath}.{field}[{k}]"))
                continue
            param = formal.type_str
            if param not in s.constraints or param in free:
                continue
            first = bound.get(param)
            if first is None:
                bound[param] = (ts, f"{kind} {quote(name)}")
            elif first[0] != ts:
                out.append(finding(
                    "OM403", f"type parameter {param} of {label(node)} ({s.name}-"
                    f"{s.since_version}) is {first[0]} for {first[1]} but {ts} for {kind} "
                    f"{quote(name)} (declared by {where})", f"{npath}.{field}[{k}]"))


def _initializers(g, gpath, out) -> None:
    inits: dict = {}
    for t in g.initializers:
        if t.name:
            inits.setdefault(t.name, (t.data_type, list(t.dims or ()), "tensor", "initializer"))
    for st in g.sparse_initializers:
        v = st.values
        if v is not None and v.name:
            inits.setdefault(v.name, (v.data_type, list(st.dims or ()), "sparse_tensor",
                                      "sparse initializer"))
    if not inits:
        return
    for field in ("inputs", "value_info", "outputs"):
        for k, v in enumerate(getattr(g, field)):
            init = inits.get(v.name) if v.name else None
            if init is None or v.type is None:
                continue
            problem = _contradiction(v.type, *init[:3])
            if problem:
                out.append(finding("OM404", f"{_BY[field]} {quote(v.name)} is declared "
                                   f"{problem}; its {init[3]} is "
                                   f"{_elem(init[0], '{}') or init[0]} {init[1]}",
                                   f"{gpath}.{field}[{k}].type"))


def _contradiction(t, elem, dims, kind) -> str | None:
    """What in type ``t`` contradicts an initializer of ``elem`` and ``dims``, or None."""
    k = t.kind
    if k is None:
        return None
    if k not in ("tensor", kind):
        return f"a {k} type"
    v = t.value
    if v.elem_type and elem and v.elem_type != elem:
        return f"of element type {name_of(v.elem_type)}"
    shape = v.shape
    if shape is None:
        return None
    if len(shape.dims) != len(dims):
        return f"of rank {len(shape.dims)} {shape}"
    for d, n in zip(shape.dims, dims):
        if d.dim_value is not None and d.dim_value != n:
            return f"of shape {shape}"
    return None
