"""Graph rules (OneModel format section 3; ONNX Part 1, Clauses 7.1, 7.5, 7.9): names, scopes,
dependency order, domains.

One function, :func:`check_model`, one message and one path per rule. The OneModel reader applies
it to the model it decoded; the container writer to the model it is given, so it never writes a
file that cannot be read back; :func:`onemodel.api.convert` to every model it converts, whatever
the input and output formats (the ONNX reader itself accepts what ONNX files contain); the
evaluator's planner before it plans a session.

1. Within one graph every name defines at most one value: graph inputs, initializers, sparse
   initializers (by their values' name) and non-empty node outputs. An initializer whose name
   matches a graph input attaches to it. Empty names define nothing.
2. A node input (non-empty) or a graph output names a value of the same graph or of an
   enclosing graph (a subgraph in a node attribute reads the values around it).
3. Nodes are put in dependency order by a stable sort: Kahn's algorithm taking the ready node of
   the lowest original index first, so nodes already in order keep their positions
   (:func:`onemodel.ir.order.stable_topological_order`). A node depends on the producers of its
   inputs and of the names its subgraphs read from its graph.
4. A node's domain (``""`` and ``"ai.onnx"`` are the default domain) must be imported by the
   model's ``opsets``; in a function body, by the function's or the model's.

Function bodies are checked for rule 4 only (their names are the function's parameters), and the
graphs of ``training_info`` (which the extension carries) are not checked.
"""

from __future__ import annotations

from ..errors import InvalidModelError, UnsupportedError, quote
from ..limits import MAX_MODEL_NESTING
from .entries import normalize_domain
from .model import Graph, Model
from .order import stable_topological_order


def _domains(opsets) -> set[str]:
    return {normalize_domain(o.domain) for o in opsets}


def check_model(model: Model, *, prefix: str = "", paths: dict | None = None) -> dict[int, list]:
    """Check rules 1 to 4 and return ``{id(graph): node order}`` for every checked graph.

    ``prefix`` starts every path (``"manifest."`` for the reader); ``paths`` maps ``id(graph)``
    to that graph's path when it differs from its place in the model (the reader's manifest
    paths). Raises InvalidModelError: a duplicate definition, an undefined name, a cycle, an
    undeclared domain; UnsupportedError: graphs nested deeper than MAX_MODEL_NESTING.
    """
    paths = paths or {}
    orders: dict[int, list] = {}
    domains = _domains(model.opset_imports)
    if model.graph is not None:
        _graph(model.graph, paths.get(id(model.graph), prefix + "graph"), [], domains, orders,
               paths, 1)
    for fi, fn in enumerate(model.functions):
        fdomains = domains | _domains(fn.opset_imports)
        _function_domains(fn.nodes, f"{prefix}functions[{fi}]", fdomains, paths, 1)
    return orders


def _undeclared(node, npath: str) -> InvalidModelError:
    return InvalidModelError(f"domain {quote(node.domain or '')} of node {quote(node.op_type)} "
                             "is not imported by opsets", path=f"{npath}.domain")


def _subgraphs(node, npath: str, paths: dict):
    for j, a in enumerate(node.attributes):
        for field, g in a.subgraphs():
            yield g, paths.get(id(g), f"{npath}.attributes[{j}].{field}")


def _function_domains(nodes, path: str, domains: set, paths: dict, depth: int) -> None:
    if depth > MAX_MODEL_NESTING:
        raise UnsupportedError("graphs nested too deep", path=path)
    for i, node in enumerate(nodes):
        npath = f"{path}.nodes[{i}]"
        if normalize_domain(node.domain) not in domains:
            raise _undeclared(node, npath)
        for g, gpath in _subgraphs(node, npath, paths):
            _function_domains(g.nodes, gpath, domains, paths, depth + 1)


def _graph(g: Graph, gpath: str, outer: list, domains: set, orders: dict, paths: dict,
           depth: int) -> set:
    """Check one graph; return the names it reads from enclosing graphs."""
    if depth > MAX_MODEL_NESTING:
        raise UnsupportedError("graphs nested too deep", path=gpath)
    defs: dict[str, int | None] = {}  # name -> index of the producing node (None: not a node)

    def define(n: str, producer, where: str):
        if n in defs:
            raise InvalidModelError(f"name {quote(n)} is defined twice in one graph", path=where)
        defs[n] = producer

    inputs = set()
    for k, vi in enumerate(g.inputs):
        if vi.name:
            define(vi.name, None, f"{gpath}.inputs[{k}].name")
            inputs.add(vi.name)
    attached = set()
    named = [(t.name, f"{gpath}.initializers[{k}].name") for k, t in enumerate(g.initializers)]
    named += [(st.values.name if st.values is not None else None,
               f"{gpath}.sparse_initializers[{k}].values.name")
              for k, st in enumerate(g.sparse_initializers)]
    for n, where in named:
        if not n:
            continue
        if n in inputs and n not in attached:
            attached.add(n)
            continue
        define(n, None, where)
    for i, node in enumerate(g.nodes):
        for k, o in enumerate(node.outputs):
            if o:
                define(o, i, f"{gpath}.nodes[{i}].outputs[{k}]")

    chain = [defs] + outer
    free: set[str] = set()
    deps: list[set] = []

    def use(n: str, mine: set, where: str):
        if n in defs:
            p = defs[n]
            if p is not None:
                mine.add(p)
        elif any(n in scope for scope in outer):
            free.add(n)
        else:
            raise InvalidModelError(f"name {quote(n)} is not defined in this graph or an enclosing "
                                    "one", path=where)

    for i, node in enumerate(g.nodes):
        npath = f"{gpath}.nodes[{i}]"
        if normalize_domain(node.domain) not in domains:
            raise _undeclared(node, npath)
        mine: set = set()
        for k, n in enumerate(node.inputs):
            if n:
                use(n, mine, f"{npath}.inputs[{k}]")
        for sub, spath in _subgraphs(node, npath, paths):
            for n in sorted(_graph(sub, spath, chain, domains, orders, paths, depth + 1)):
                use(n, mine, spath)
        deps.append(mine)
    for k, vi in enumerate(g.outputs):
        use(vi.name or "", set(), f"{gpath}.outputs[{k}]")
    orders[id(g)] = stable_topological_order(deps, gpath)
    return free
