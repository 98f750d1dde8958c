"""Graph rules (OneModel format section 3; ONNX Part 1, Clauses 7.1, 7.5, 7.9, 8.4): names,
scopes, dependency order, domains.

One module, one message and one path per rule. :func:`check_model` applies the rules to a model:
the OneModel reader to the model it decoded; the container writer to the model it is given, so it
never writes a file that cannot be read back; :func:`onemodel.api.convert` to every model it
converts, whatever the input and output formats (the ONNX reader itself accepts what ONNX files
contain); the evaluator's planner (:class:`onemodel.evaluate.Session`) before it plans a session,
with ``function_bodies=True`` since it runs them. :func:`check_graph` applies them to one graph
read with the names of its enclosing scopes. :func:`model_problems` finds every problem instead of
raising the first (``onemodel check``); the rules are written once, for both.

1. Within one graph every name defines at most one value: graph inputs, initializers, sparse
   initializers (by their values' name) and non-empty node outputs. An initializer whose name
   matches a graph input attaches to it. Empty names define nothing.
2. A node input (non-empty) or a graph output names a value of the same graph or of an
   enclosing graph (a subgraph in a node attribute -- an If branch, a Loop or Scan body -- reads
   the values around it).
3. Nodes are put in dependency order by a stable sort: Kahn's algorithm taking the ready node of
   the lowest original index first, so nodes already in order keep their positions
   (:func:`onemodel.ir.order.stable_topological_order`). A node depends on the producers of its
   inputs and of the names its subgraphs read from its graph. A cycle is an error. When every
   node reads only values defined before it (Clause 7.5's order), that order is the identity and
   the sort is not run.
4. A node's domain (``""`` and ``"ai.onnx"`` are the default domain) must be imported by the
   model's ``opsets``; in a function body, by the function's or the model's.

Function bodies are checked for rule 4; with ``function_bodies=True`` for rules 1 to 3 as well,
as a graph whose inputs are the function's input parameters and whose outputs are its output
parameters, enclosed by no graph (a body reads only its parameters and its own values; its
subgraphs read the body's values). The graphs of ``training_info`` (which the extension carries)
are not checked.
"""

from __future__ import annotations

from ..errors import InvalidModelError, UnsupportedError, quote
from ..limits import MAX_MODEL_NESTING
from .accelerator import passes
from .entries import normalize_domain
from .model import Graph, Model
from .order import stable_topological_order
from .walk import NESTING_MESSAGE


def _domains(opsets) -> set[str]:
    return {normalize_domain(o.domain) for o in opsets}


def _raise(rule: str, error) -> None:
    raise error


def check_model(model: Model, *, prefix: str = "", paths: dict | None = None,
                function_bodies: bool = False) -> dict[int, list]:
    """Check rules 1 to 4 and return ``{id(graph): node order}`` for every checked graph.

    ``prefix`` starts every path (``"manifest."`` for the reader); ``paths`` maps ``id(graph)``
    to that graph's path when it differs from its place in the model (the reader's manifest
    paths). With ``function_bodies`` the bodies of ``model.functions`` are checked for rules 1
    to 3 too (paths ``functions[i].nodes[j]...``) and the result also holds ``{id(function):
    node order}`` and the orders of the subgraphs in them. Raises the first problem
    :func:`model_problems` finds: InvalidModelError (a duplicate definition, an undefined name,
    a cycle, an undeclared domain) or UnsupportedError (graphs nested deeper than
    MAX_MODEL_NESTING).
    """
    return _model(model, prefix, paths or {}, function_bodies, _raise)


def model_problems(model: Model, *, prefix: str = "", paths: dict | None = None,
                   function_bodies: bool = False,
                   producers: dict | None = None) -> tuple[dict[int, list], list]:
    """Every problem :func:`check_model` would raise the first of, in the same order.

    Returns ``(orders, problems)``: ``orders`` as :func:`check_model` returns them (a graph
    whose nodes form a cycle has none); ``problems`` is a list of ``(rule, error)`` where
    ``rule`` is one of :data:`RULES` and ``error`` the InvalidModelError or UnsupportedError
    (message and path as :func:`check_model` raises them). A duplicate definition keeps the
    first; an undefined name or undeclared domain is reported at each use; a graph nested too
    deep is not entered.

    ``producers``, when given, gets ``{id(graph or function): {name: index of the producing
    node, or -1 for a graph input or initializer}}`` for each graph (and checked function
    body) found sorted and without problem in its own nodes: every node output is a key, so a
    name's producer is found without walking the nodes (the type checks use it).
    """
    problems: list = []
    orders = _model(model, prefix, paths or {}, function_bodies,
                    lambda rule, e: problems.append((rule, e)), producers)
    return orders, problems


#: The rule names of :func:`model_problems`: rule 1, rule 2, rule 3 (a cycle), rule 4, nesting.
RULES = ("duplicate", "undefined", "cycle", "domain", "nesting")


def _model(model: Model, prefix: str, paths: dict, function_bodies: bool, fail,
           producers: dict | None = None) -> dict:
    orders: dict[int, list] = {}
    domains = _domains(model.opset_imports)
    if model.graph is not None:
        _graph(model.graph, paths.get(id(model.graph), prefix + "graph"), [], domains, orders,
               paths, 1, fail, producers)
    for fi, fn in enumerate(model.functions):
        fdomains = domains | _domains(fn.opset_imports)
        fpath = f"{prefix}functions[{fi}]"
        if function_bodies:
            _scope(id(fn), fn.nodes, (fn.inputs, "{}.inputs[{}]"), (),
                   (fn.outputs, "{}.outputs[{}]"), fpath, [], fdomains, orders, paths, 1, fail,
                   producers)
        else:
            _function_domains(fn.nodes, fpath, fdomains, paths, 1, fail)
    return orders


def check_graph(graph: Graph, path: str, domains, *, outer=()) -> dict[int, list]:
    """Check rules 1 to 4 on one graph at ``path`` (and its subgraphs), which may read the names
    in ``outer`` from enclosing scopes; ``domains`` are the imported domains (any spelling).
    Returns ``{id(graph): node order}`` as :func:`check_model` does; raises as it does."""
    orders: dict[int, list] = {}
    scope = {n: None for n in outer}
    _graph(graph, path, [scope] if scope else [], {normalize_domain(d) for d in domains}, orders,
           {}, 1, _raise)
    return orders


def _undeclared(node, npath: str) -> InvalidModelError:
    return InvalidModelError(f"domain {quote(node.domain or '')} of node {quote(node.op_type)} "
                             "is not imported by opsets", path=f"{npath}.domain")


def _label(node) -> str:
    name = f" named {quote(node.name)}" if node.name else ""
    return f"node {quote(node.op_type)}{name}"


def _on_cycle(deps, start: int) -> int:
    """A node on a cycle that node ``start`` (one that cannot be ordered) is on or reads from:
    the first node a depth-first walk of its dependencies meets twice on its path."""
    state = {start: 1}  # 1: on the walk's path, 2: done
    stack = [(start, iter(sorted(deps[start])))]
    while stack:
        i, it = stack[-1]
        for d in it:
            s = state.get(d)
            if s == 1:
                return d
            if s is None:
                state[d] = 1
                stack.append((d, iter(sorted(deps[d]))))
                break
        else:
            state[i] = 2
            stack.pop()
    return start


def _cycle_message(nodes, deps):
    def message(i: int) -> str:
        j = _on_cycle(deps, i)
        if j == i:
            return f"the nodes form a cycle through {_label(nodes[i])} (no dependency order exists)"
        return (f"{_label(nodes[i])} reads from a cycle through {_label(nodes[j])} (no "
                "dependency order exists)")
    return message


def _subgraphs(node, npath: str, paths: dict):
    for j, a in enumerate(node.attributes):
        for field, g in a.subgraphs():
            yield g, paths.get(id(g), f"{npath}.attributes[{j}].{field}")


def _function_domains(nodes, path: str, domains: set, paths: dict, depth: int, fail) -> None:
    if depth > MAX_MODEL_NESTING:
        fail("nesting", UnsupportedError(NESTING_MESSAGE, path=path))
        return
    for i, node in enumerate(nodes):
        npath = f"{path}.nodes[{i}]"
        if normalize_domain(node.domain) not in domains:
            fail("domain", _undeclared(node, npath))
        for g, gpath in _subgraphs(node, npath, paths):
            _function_domains(g.nodes, gpath, domains, paths, depth + 1, fail)


def _graph(g: Graph, gpath: str, outer: list, domains: set, orders: dict, paths: dict,
           depth: int, fail, producers: dict | None = None) -> set:
    """Check one graph; return the names it reads from enclosing graphs."""
    sparse = [st.values.name if st.values is not None else None for st in g.sparse_initializers]
    return _scope(id(g), g.nodes, ([vi.name for vi in g.inputs], "{}.inputs[{}].name"),
                  (([t.name for t in g.initializers], "{}.initializers[{}].name"),
                   (sparse, "{}.sparse_initializers[{}].values.name")),
                  ([vi.name or "" for vi in g.outputs], "{}.outputs[{}]"),
                  gpath, outer, domains, orders, paths, depth, fail, producers)


def _in_order(nodes, defs: dict, outer: list, domains: set):
    """:func:`_in_order_python`, by the C pass (``_cpass.c``: the same result and changes to
    ``defs``) when it is built."""
    c = passes()
    if c is not None and type(nodes) is list and type(defs) is dict and type(outer) is list:
        return c.in_order(nodes, defs, outer, lambda d: normalize_domain(d) in domains)
    return _in_order_python(nodes, defs, outer, domains)


def _in_order_python(nodes, defs: dict, outer: list, domains: set):
    """One pass over ``nodes`` for the common case, reporting nothing: every domain imported,
    every node output a new name, every node input (non-empty) defined before the node, in
    this scope (``defs``: its graph inputs and initializers, ``-1``; the outputs of earlier
    nodes) or in an enclosing one (``outer``). Then the node outputs are in ``defs`` and the
    result is ``(names read from outer, indices of the nodes with attributes)``. Otherwise
    ``defs`` is left as it was and the result is ``None``: the caller walks the nodes again,
    rule by rule, for the problems and their paths (and an input defined later, to sort)."""
    imported: set = set()
    read: list = []
    held: list = []
    ok = True
    i = -1
    for i, node in enumerate(nodes):
        d = node.domain
        if d not in imported:
            if normalize_domain(d) not in domains:
                ok = False
                break
            imported.add(d)
        ins = node.inputs  # (one or two inputs defined here, most nodes: tested inline)
        if not (len(ins) == 2 and ins[0] in defs and ins[1] in defs
                or len(ins) == 1 and ins[0] in defs):   # ("" is never in defs)
            for n in ins:
                if n and n not in defs:
                    if outer and any(n in scope for scope in outer):
                        read.append(n)
                    else:
                        ok = False
                        break
            if not ok:
                break
        outs = node.outputs
        if len(outs) == 1 and outs[0] and outs[0] not in defs:
            defs[outs[0]] = i
        else:
            for o in outs:
                if o:
                    if o in defs:
                        ok = False
                        break
                    defs[o] = i
            if not ok:
                break
        if node.attributes:
            held.append(i)
    if ok and not any(n in defs for n in read):  # (read: not defined later here either)
        return read, held
    for node in nodes[:i + 1]:
        for o in node.outputs:
            if o and defs.get(o, -1) >= 0:
                del defs[o]
    return None


def _scope(key: int, nodes, inputs: tuple, initializers: tuple, outputs: tuple, gpath: str,
           outer: list, domains: set, orders: dict, paths: dict, depth: int, fail,
           producers: dict | None = None) -> set:
    """Rules 1 to 4 for one scope (a graph or a function body): ``inputs`` and ``outputs`` are
    ``(names, path form)`` and ``initializers`` a tuple of them, the form giving the path of
    name ``k`` as ``form.format(gpath, k)`` (made only for a problem); ``orders[key]`` gets
    the node order. Returns the names it reads from ``outer`` (the enclosing scopes'
    definitions, innermost first). Each problem goes to ``fail(rule, error)``, which raises it
    or records it. ``producers[key]`` gets ``defs`` when the one pass holds (``producers``
    given).

    Problems come in the order of the rules: the definitions (rule 1), then the uses in node
    order (rules 4 and 2, a node's subgraphs after its inputs), then the graph outputs, then a
    cycle. One pass over the nodes (:func:`_in_order`) first asks whether the scope is the
    common one: sorted (Clause 7.5), every input defined before its use, every output new,
    every domain imported. Then only the subgraphs and graph outputs are left to check, and
    the stable order of rule 3 is the identity (every dependency points back), not computed.
    Otherwise the nodes are walked rule by rule for every problem and its path, and when a
    node reads a value of its own or of a later node, the dependencies are sorted.
    """
    if depth > MAX_MODEL_NESTING:
        fail("nesting", UnsupportedError(NESTING_MESSAGE, path=gpath))
        return set()
    defs: dict[str, int] = {}  # name -> index of the producing node (-1: not a node)

    def twice(n: str, where: str) -> None:
        fail("duplicate", InvalidModelError(f"name {quote(n)} is defined twice in one graph",
                                            path=where))

    names, form = inputs
    for k, n in enumerate(names):
        if n:
            if n in defs:
                twice(n, form.format(gpath, k))
            else:
                defs[n] = -1
    given = set(defs)
    attached = set()
    for names, form in initializers:
        for k, n in enumerate(names):
            if not n:
                continue
            if n in given and n not in attached:
                attached.add(n)
            elif n in defs:
                twice(n, form.format(gpath, k))
            else:
                defs[n] = -1
    count = len(nodes)
    chain = [defs] + outer
    free: set[str] = set()
    get = defs.get

    def undefined(n: str, where: str, node=None) -> None:
        if any(n in scope for scope in outer):
            free.add(n)
        else:  # a node's input names the node, as OM309 does; a graph output has none
            what = f"input {quote(n)} of {_label(node)}" if node is not None \
                else f"name {quote(n)}"
            fail("undefined", InvalidModelError(f"{what} is not defined in this graph "
                                                "or an enclosing one", path=where))

    reads: dict[int, set] = {}  # node index -> the names of this graph its subgraphs read

    def subgraphs(node, i: int) -> bool:
        """Check the subgraphs of node ``i``; whether they read a value of node ``i`` or of
        a later node."""
        later = False
        mine: set = set()
        for sub, spath in _subgraphs(node, f"{gpath}.nodes[{i}]", paths):
            for n in sorted(_graph(sub, spath, chain, domains, orders, paths, depth + 1,
                                   fail, producers)):
                p = get(n)
                if p is None:
                    undefined(n, spath)
                elif p >= 0:
                    mine.add(n)
                    later = later or p >= i
        if mine:
            reads[i] = mine
        return later

    later = False  # a node reads a value of its own or of a later node: sort
    held = _in_order(nodes, defs, outer, domains)
    if held is not None:  # the common case: no problem in this scope but in subgraphs
        free.update(held[0])
        if producers is not None:
            producers[key] = defs
        for i in held[1]:
            later = subgraphs(nodes[i], i) or later
    else:
        for i, node in enumerate(nodes):
            for k, o in enumerate(node.outputs):
                if o:
                    if o in defs:
                        twice(o, f"{gpath}.nodes[{i}].outputs[{k}]")
                    else:
                        defs[o] = i
        imported: set = set()  # domains as spelled in nodes, known imported
        for i, node in enumerate(nodes):
            d = node.domain
            if d not in imported:
                if normalize_domain(d) in domains:
                    imported.add(d)
                else:
                    fail("domain", _undeclared(node, f"{gpath}.nodes[{i}]"))
            for k, n in enumerate(node.inputs):
                if n:
                    p = get(n)
                    if p is None:
                        undefined(n, f"{gpath}.nodes[{i}].inputs[{k}]", node)
                    elif p >= i:
                        later = True
            if node.attributes:
                later = subgraphs(node, i) or later
    names, form = outputs
    for k, n in enumerate(names):
        if n not in defs:
            undefined(n, form.format(gpath, k))
    if not later:  # every dependency points back: the stable order is the identity
        orders[key] = list(range(count))
        return free
    deps = [{p for n in node.inputs if (p := get(n, -1)) >= 0} for node in nodes]
    for i, mine in reads.items():
        deps[i].update(defs[n] for n in mine)
    try:
        orders[key] = stable_topological_order(deps, gpath, cycle=_cycle_message(nodes, deps))
    except InvalidModelError as e:
        fail("cycle", e)
    return free
