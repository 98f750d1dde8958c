"""Type checks without shape inference (ONNX Part 1, Clauses 6.5, 7.1, 7.2 and 10.3): codes
``OM401`` to ``OM405``.

Where a value's type is known from the model itself -- an initializer (or sparse initializer),
a graph input, output or value_info, of its graph or an enclosing one; a function's value_info
-- it is checked against the type constraint of each formal parameter of the node it feeds
(``OM401``) or comes from (``OM402``), and each type parameter of a node must be bound to one
type (``OM403``; not across a heterogeneous variadic parameter such as Loop's ``V``). A
declared type that contradicts the initializer of the same name (element type, rank or a fixed
extent) is ``OM404``. A declared extent read as unknown, a negative ``dim_value`` or a
``dim_param`` that names no variable (``?``), is ``OM405``, a warning. Types of intermediate
values that only inference would give are not checked (that is ``--full``). Paths are in
:mod:`onemodel.ir` field names.
"""

from __future__ import annotations

from ..errors import quote
from ..ir.dtypes import DataType, name_of
from .codes import finding
from .operators import bound_nodes, label
from .structure import producers


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


_ELEM: dict = {}


def _elem(code, form: str) -> str | None:
    """``form`` with the Table 5 name of ``code`` (cached), None for no or an unknown tag."""
    key = (code, form)
    got = _ELEM.get(key, False)
    if got is False:
        try:
            got = form.format(name_of(DataType(code))) if code else None
        except ValueError:
            got = None
        _ELEM[key] = got
    return got


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


_TENSOR = {int(c): f"tensor({name_of(c)})" for c in DataType if c}


def _declared(g) -> tuple[dict, dict]:
    """``(known, produced)`` of graph ``g``: ``{name: type string or None}`` of the values it
    defines or sees (initializers first, then inputs and value_info, then outputs) and the
    same of the values its nodes produce (value_info, then outputs); the first statement of a
    name wins."""
    tensor = _TENSOR.get
    known = {t.name: tensor(t.data_type) for t in reversed(g.initializers)}
    for st in reversed(g.sparse_initializers):
        v = st.values
        if v is not None:
            known.setdefault(v.name, tensor(v.data_type))
    produced: dict = {}
    for field in ("inputs", "value_info", "outputs"):
        for v in getattr(g, field):
            name = v.name
            if name and (name not in known or (field != "inputs" and name not in produced)):
                ts = type_string(v.type)
                known.setdefault(name, ts)
                if field != "inputs":
                    produced.setdefault(name, ts)
    return known, produced


_BY = {"inputs": "a graph input", "value_info": "value_info", "outputs": "a graph output"}


def _by(chain, name: str, output: bool) -> str:
    """What states the type of ``name`` in the graphs of ``chain`` (innermost first), for a
    message (made only when there is one)."""
    for g in chain:
        if not hasattr(g, "initializers"):
            return "value_info"    # a function body
        if not output:
            if any(t.name == name for t in g.initializers):
                return "its initializer"
            if any(st.values is not None and st.values.name == name
                   for st in g.sparse_initializers):
                return "its sparse initializer"
        for field in (("value_info", "outputs") if output else ("inputs", "value_info",
                                                                 "outputs")):
            if any(v.name == name for v in getattr(g, field)):
                return _BY[field]
        if output:
            break
    return "the model"


def _scopes(model):
    """``(graph path, graph or None, known, produced, chain)`` of every graph and function
    body: the known types of enclosing graphs included (a subgraph may use outer names,
    Clause 5.4.3), a function's from its value_info; ``chain`` the graphs (or the function)
    that state them, innermost first."""

    def walk(g, gpath, outer, chain):
        known, produced = _declared(g)
        if outer:
            known = {**outer, **known}
        chain = (g,) + chain
        yield gpath, g, known, produced, chain
        for i, node in enumerate(g.nodes):
            if node.attributes:
                for j, a in enumerate(node.attributes):
                    for field, sub in a.subgraphs():
                        yield from walk(sub, f"{gpath}.nodes[{i}].attributes[{j}].{field}",
                                        known, chain)

    try:
        if model.graph is not None:
            yield from walk(model.graph, "graph", {}, ())
        for k, ti in enumerate(model.training_info):
            for field in ("initialization", "algorithm"):
                g = getattr(ti, field)
                if g is not None:
                    yield from walk(g, f"training_info[{k}].{field}", {}, ())
    finally:  # (walk names itself: a reference cycle holding the model, broken)
        walk = None  # noqa: F841
    for k, fn in enumerate(model.functions):
        known = {v.name: type_string(v.type) for v in reversed(fn.value_info) if v.name}
        yield f"functions[{k}]", None, known, known, (fn,)


def check_types(model, ctx=None) -> list:
    """Every type finding of ``model`` (codes ``OM401``-``OM404``): declared types against the
    type constraints of the nodes they feed and come from, and against their initializers.

    ``ctx``: the framework's context dict (or None), shared with the operator checks
    (:func:`onemodel.validation.operators.bound_nodes`) and with the structure checks (the
    producers of values, :func:`onemodel.validation.structure.producers`, so that only the
    nodes with an output of stated type look their outputs up). Paths are in IR field names.
    A node whose definition and stated input and output types equal those of a node found
    clean is clean too, and is not checked again."""
    out: list = []
    scopes: dict = {}
    made = producers(model, ctx)
    for gpath, g, known, produced, chain in _scopes(model):
        if g is not None:
            _initializers(g, gpath, out)
            _unknown_extents(g, gpath, out)
        if known or produced:
            defs = made.get(id(g)) if g is not None else None
            # the nodes with an output of stated type, where the graph rules know them
            makers = None if defs is None else {
                p for n in produced if (p := defs.get(n, -1)) >= 0}
            scopes[gpath] = (known, produced, chain, makers)
    clean: set = set()
    last = scope = None
    for gpath, i, node, _, _, s in bound_nodes(model, ctx):
        if gpath is not last:   # one path object per node list (bound_nodes)
            last, scope = gpath, scopes.get(gpath)
            if scope is not None:
                kget, produced, chain, makers = scope[0].get, scope[1], scope[2], scope[3]
                pget = produced.get
        if scope is None or type(s) is str:
            continue
        ins = node.inputs   # (one or two inputs, most nodes: no map object for them)
        k = len(ins)
        tin = (kget(ins[0]), kget(ins[1])) if k == 2 else (kget(ins[0]),) if k == 1 \
            else tuple(map(kget, ins))
        # () when no output has a stated type: nothing to check there either way
        typed = produced if makers is None else i in makers
        tout = tuple(map(pget, node.outputs)) if typed else ()
        key = (id(s), tin, tout)
        if key in clean:
            continue
        n = len(out)
        _node(node, f"{gpath}.nodes[{i}]", s, tin, tout, chain, out)
        if len(out) == n:
            clean.add(key)
    return out


_PLANS: dict = {}


def _plan(s):
    """``(inputs, outputs)`` of schema ``s``: per formal ``(formal, allowed types, the type
    parameter it binds or None)`` (None for a heterogeneous variadic one, Loop's ``V``)."""
    got = _PLANS.get(id(s))
    if got is None or got[0] is not s:
        free = {f.type_str for f in s.inputs + s.outputs if f.variadic and not f.is_homogeneous}

        def side(formals):
            return tuple((f, allowed(s, f.type_str),
                          f.type_str if f.type_str in s.constraints and f.type_str not in free
                          else None) for f in formals)

        got = _PLANS[id(s)] = (s, side(s.inputs), side(s.outputs))
    return got[1], got[2]


def _node(node, npath, s, tin, tout, chain, out) -> None:
    bound: dict = {}    # type parameter -> (type string, kind, name)
    ins, outs = _plan(s)
    for field, plan, types, code in (("inputs", ins, tin, "OM401"),
                                     ("outputs", outs, tout, "OM402")):
        if not plan:
            continue
        last = plan[-1] if plan[-1][0].variadic else None
        names = getattr(node, field)
        for k, ts in enumerate(types):
            name = names[k]
            if ts is None or not name:
                continue
            p = plan[k] if k < len(plan) else last
            if p is None:
                continue
            formal, ok, param = p
            kind = field[:-1]
            if ts not in ok:
                shown = ", ".join(sorted(ok)[:6]) + (", ..." if len(ok) > 6 else "")
                out.append(finding(
                    code, f"{kind} {quote(name)} of {label(node)} ({s.name}-{s.since_version}) "
                    f"is declared {ts} (by {_by(chain, name, code == 'OM402')}), which "
                    f"{formal.type_str} of {quote(formal.name)} does not allow ({shown})",
                    f"{npath}.{field}[{k}]"))
                continue
            if param is None:
                continue
            first = bound.get(param)
            if first is None:
                bound[param] = (ts, kind, name)
            elif first[0] != ts:
                out.append(finding(
                    "OM403", f"type parameter {param} of {label(node)} ({s.name}-"
                    f"{s.since_version}) is {first[0]} for {first[1]} {quote(first[2])} but "
                    f"{ts} for {kind} {quote(name)} (declared by "
                    f"{_by(chain, name, field == 'outputs')})",
                    f"{npath}.{field}[{k}]"))


def _initializers(g, gpath, out) -> None:
    """OM404 for each graph input, value_info or output of ``g`` whose type contradicts the
    initializer (or sparse initializer) of its name."""
    declared = {v.name for f in (g.inputs, g.value_info, g.outputs) for v in f if v.name}
    if not declared:
        return
    inits: dict = {}
    for t in g.initializers:
        if t.name in declared:
            inits.setdefault(t.name, (t.data_type, list(t.dims or ()), "tensor", "initializer"))
    for st in g.sparse_initializers:
        v = st.values
        if v is not None and v.name in declared:
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


def _unknown_extents(g, gpath, out) -> None:
    """OM405 for each graph input, value_info or output of ``g`` whose declared tensor shape
    has a negative ``dim_value`` (PaddlePaddle's -1) or a ``dim_param`` that names no variable
    (``?``: :func:`onemodel.ir.types.names_variable`): inference and the evaluator read them
    as unknown (:attr:`onemodel.ir.Dimension.extent`). One finding per value, naming each such
    extent and its axes; the path is the first one's ``dims`` entry."""
    from ..ir.types import names_variable

    for field in ("inputs", "value_info", "outputs"):
        for k, v in enumerate(getattr(g, field)):
            t = v.type
            if t is None or t.kind not in ("tensor", "sparse_tensor") or t.value.shape is None:
                continue
            axes: dict = {}
            for j, d in enumerate(t.value.shape.dims):
                if d.dim_value is not None and d.dim_value < 0:
                    axes.setdefault(("extent", str(d.dim_value)), []).append(j)
                elif d.dim_value is None and d.dim_param and not names_variable(d.dim_param):
                    axes.setdefault(("dim_param", d.dim_param), []).append(j)
            if not axes:
                continue
            parts = [f"the {kind} {value if kind == 'extent' else quote(value)} (ax"
                     f"{'is' if len(js) == 1 else 'es'} {_and(js)})"
                     for (kind, value), js in axes.items()]
            params = [quote(value) for kind, value in axes if kind == "dim_param"]
            why = f"{_and(parts)} {'is' if len(parts) == 1 else 'are'} read as unknown"
            if params:
                why += f", each {' or '.join(params)} its own extent"
            first = min(j for js in axes.values() for j in js)
            out.append(finding("OM405", f"{_BY[field]} {quote(v.name)} declares "
                               f"{t.value.shape}: {why}",
                               f"{gpath}.{field}[{k}].type.{t.kind}_type.shape.dims[{first}]"))


def _and(items) -> str:
    items = [str(i) for i in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


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
