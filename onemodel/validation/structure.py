"""Structure checks (ONNX Part 1, Clauses 5, 7, 8.4 and 10.2): codes ``OM101`` to ``OM122``.

The graph rules (one definition per name, every use defined, no cycle, every domain imported,
nesting) are :func:`onemodel.ir.graph_rules.model_problems`, the rules the readers, writers and
the evaluator apply, reported here all at once. Paths are in :mod:`onemodel.ir` field names;
:mod:`onemodel.validation.paths` puts them in the file's terms.
"""

from __future__ import annotations

from itertools import compress
from operator import attrgetter

from ..errors import quote
from ..ir import graph_rules
from ..ir.calls import cycle_text, function_key, recursive_functions
from ..ir.entries import normalize_domain
from ..ir.order import node_outer_names
from ..ir.walk import iter_graphs
from .codes import finding

_RULE_CODES = {"duplicate": "OM109", "undefined": "OM112", "cycle": "OM114",
               "domain": "OM105", "nesting": "OM119"}


def check_structure(model, *, prefix: str = "", graph_paths: dict | None = None,
                    sorted_required: bool = True, ctx: dict | None = None) -> list:
    """Every structure finding of ``model``, model fields first, then the graph rules.

    ``prefix``/``graph_paths`` are given to the graph rules (the OneModel reader's manifest
    paths); ``sorted_required``: report nodes out of topological order (``OM113``), which an
    ONNX file and a model in memory must not have and a OneModel file may (its reader sorts).
    ``ctx``: the framework's context dict, where the graph rules' producers of the sorted
    graphs are kept for the type checks (:func:`producers`).
    """
    out: list = []
    _model_fields(model, out)
    graphs = _graphs(model, out) if model.graph is not None else []
    for i, fn in enumerate(model.functions):
        _function(fn, f"functions[{i}]", out)
    _recursion(model, out)
    _training(model, out)
    made: dict = {}
    orders, problems = graph_rules.model_problems(model, prefix=prefix, paths=graph_paths,
                                                  function_bodies=True, producers=made)
    if isinstance(ctx, dict):
        ctx[_PRODUCERS] = (model, made)
    for rule, e in problems:
        out.append(finding(_RULE_CODES[rule], e.message, e.path, e.offset))
    if sorted_required:
        _order(model, graphs, orders, out)
    return out


_PRODUCERS = "structure.producers"


def producers(model, ctx) -> dict:
    """``{id(graph): {name: index of its producing node, -1 for a graph input or
    initializer}}`` of the graphs of ``model`` the graph rules found sorted, as
    :func:`check_structure` kept them in ``ctx`` (``{}`` when it did not run on ``model``
    with this ``ctx``)."""
    got = ctx.get(_PRODUCERS) if isinstance(ctx, dict) else None
    return got[1] if got is not None and got[0] is model else {}


def _model_fields(model, out: list) -> None:
    if model.ir_version is None or model.ir_version <= 0:
        what = ("has no ir_version" if model.ir_version is None
                else f"has ir_version {model.ir_version}, not a positive integer")
        out.append(finding("OM101", f"the model {what} (mandatory)", "ir_version"))
    if model.graph is None:
        out.append(finding("OM102", "the model has no graph (mandatory)", "graph"))
    if not model.opset_imports:
        out.append(finding("OM103", "the model imports no operator set (opset_import is "
                           "mandatory)", "opset_imports"))
    _distinct_domains(model.opset_imports, "opset_imports", out)
    seen: dict = {}
    for k, e in enumerate(model.metadata_props):
        if e.key in seen:
            out.append(finding("OM115", f"metadata key {quote(e.key)} appears twice (first at "
                               f"metadata_props[{seen[e.key]}])", f"metadata_props[{k}].key"))
        else:
            seen[e.key] = k
    fns: dict = {}
    for k, fn in enumerate(model.functions):
        key = (normalize_domain(fn.domain), fn.name or "", fn.overload or "")
        if key in fns:
            out.append(finding("OM116", f"function {key!r} is defined twice (first at "
                               f"functions[{fns[key]}])", f"functions[{k}]"))
        else:
            fns[key] = k


def _recursion(model, out: list) -> None:
    """OM122 for each function that recurs, at its definition (the first of its key)."""
    if not model.functions:
        return
    cycles = recursive_functions(model)
    for k, fn in enumerate(model.functions):
        cycle = cycles.pop(function_key(fn.domain, fn.name, fn.overload), None)
        if cycle is not None:
            out.append(finding("OM122", cycle_text(cycle), f"functions[{k}]"))


def _distinct_domains(opsets, path: str, out: list) -> None:
    """OM104 for a domain imported again at another version (which definition its operators
    bind to is ambiguous: Clauses 5.3.2, 14.3); OM120, a warning, for one imported again at the
    same version (redundant: skl2onnx writes ``('', 17)`` twice, onnx and onnxruntime take
    it); OM121 for a version that is not a positive integer (onnx.checker refuses 0 and
    negative versions; no operator set has one)."""
    seen: dict = {}
    for k, o in enumerate(opsets):
        v = o.version
        if type(v) is not int or v < 1:
            what = "without a version" if v is None else f"at version {v}"
            out.append(finding("OM121", f"domain {quote(o.domain or 'ai.onnx')} is imported "
                               f"{what}; a version is a positive integer",
                               f"{path}[{k}].version"))
        d = normalize_domain(o.domain)
        if d not in seen:
            seen[d] = (k, o.version)
            continue
        first, version = seen[d]
        where = f"(first at {path}[{first}].domain)"
        if o.version == version:
            out.append(finding("OM120", f"domain {quote(o.domain or '')} is imported twice at "
                               f"version {o.version} {where}: the repetition is redundant",
                               f"{path}[{k}].domain"))
        else:
            out.append(finding("OM104", f"domain {quote(o.domain or '')} is imported at "
                               f"version {o.version} and at version {version} {where}: which "
                               "definition its operators bind to is ambiguous",
                               f"{path}[{k}].domain"))


def _graphs(model, out: list) -> list:
    """The findings of the main graph and its subgraphs (depth first, a graph before its
    subgraphs, as :func:`onemodel.ir.walk.iter_graphs` walks them), then the names of the
    training graphs; returns the ``(path, graph)`` of the main graph and its subgraphs."""
    ir = model.ir_version or 0
    top = model.graph
    walked: list = []

    def graph(g, gpath: str) -> None:
        walked.append((gpath, g))
        refs: list = []
        subs: list = []
        _graph_names(g, gpath, out, top=g is top, refs=refs, subs=subs)
        inputs = {v.name for v in g.inputs}
        for k, t in enumerate(g.initializers):
            if not t.name:
                continue
            if 0 < ir < 4 and t.name not in inputs:
                out.append(finding("OM110", f"initializer {quote(t.name)} is not a graph input "
                                   f"(IR version {ir} requires it)",
                                   f"{gpath}.initializers[{k}].name"))
            elif ir >= 4 and g is not top and t.name in inputs:
                out.append(finding("OM111", f"name {quote(t.name)} is both an input and an "
                                   "initializer of a subgraph", f"{gpath}.initializers[{k}].name"))
        out.extend(refs)
        for spath, sub in subs:
            graph(sub, spath)

    try:
        graph(top, "graph")
    finally:  # (graph names itself: a reference cycle holding the model, broken)
        graph = None  # noqa: F841
    for gpath, g in _training_graphs(model):
        for sub_path, sub in iter_graphs(g, gpath):
            _graph_names(sub, sub_path, out, top=False)
    return walked


def _graph_names(g, gpath: str, out: list, *, top: bool, refs: list | None = None,
                 subs: list | None = None) -> None:
    if not g.name:
        out.append(finding("OM107", "the graph has no name", f"{gpath}.name"))
    for field in ("inputs", "outputs"):
        for k, v in enumerate(getattr(g, field)):
            kind = "input" if field == "inputs" else "output"
            if not v.name:
                out.append(finding("OM106", f"graph {kind} {k} has an empty name",
                                   f"{gpath}.{field}[{k}].name"))
            if top and v.type is None:
                out.append(finding("OM108", f"graph {kind} {quote(v.name or '')} declares no "
                                   "type", f"{gpath}.{field}[{k}].type"))
    for k, t in enumerate(g.initializers):
        if not t.name:
            out.append(finding("OM106", f"initializer {k} has an empty name",
                               f"{gpath}.initializers[{k}].name"))
    for k, v in enumerate(g.value_info):
        if not v.name:
            out.append(finding("OM106", f"value_info {k} has an empty name",
                               f"{gpath}.value_info[{k}].name"))
    _node_names(g.nodes, gpath, out, refs, subs)


_OP_TYPE, _ATTRIBUTES = attrgetter("op_type"), attrgetter("attributes")


def _node_names(nodes, gpath: str, out: list, refs: list | None = None,
                subs: list | None = None) -> None:
    """OM106 for a node's empty op_type or attribute name; with ``refs``, the OM117 findings
    (a ``ref_attr_name`` outside a function) go there and, with ``subs``, the ``(path,
    graph)`` of the subgraphs in the nodes' attributes. Only the nodes with attributes are
    visited one by one when every op_type is set (the common case)."""
    if all(map(_OP_TYPE, nodes)):
        which = compress(range(len(nodes)), map(_ATTRIBUTES, nodes))
    else:
        which = range(len(nodes))
    for i in which:
        node = nodes[i]
        if not node.op_type:
            out.append(finding("OM106", "the node has an empty op_type",
                               f"{gpath}.nodes[{i}].op_type"))
        for j, a in enumerate(node.attributes):
            if not a.name:
                out.append(finding("OM106", f"attribute {j} of node {quote(node.op_type or '')} "
                                   "has an empty name", f"{gpath}.nodes[{i}].attributes[{j}].name"))
            if refs is not None and a.ref_attr_name:
                refs.append(finding("OM117", f"attribute {quote(a.name)} refers to function "
                                    f"attribute {quote(a.ref_attr_name)} outside a function",
                                    f"{gpath}.nodes[{i}].attributes[{j}].ref_attr_name"))
            if subs is not None:
                for field, sub in a.subgraphs():
                    subs.append((f"{gpath}.nodes[{i}].attributes[{j}].{field}", sub))


def _function(fn, fpath: str, out: list) -> None:
    if not fn.name:
        out.append(finding("OM106", "the function has an empty name", f"{fpath}.name"))
    _distinct_domains(fn.opset_imports, f"{fpath}.opset_imports", out)
    _node_names(fn.nodes, fpath, out)


def _training_graphs(model):
    for k, ti in enumerate(model.training_info):
        for field in ("initialization", "algorithm"):
            g = getattr(ti, field)
            if g is not None:
                yield f"training_info[{k}].{field}", g


def _training(model, out: list) -> None:
    if not model.training_info:
        return
    main = model.graph
    inits = {t.name for t in main.initializers} if main is not None else set()
    for k, ti in enumerate(model.training_info):
        for field, graph in (("initialization_binding", ti.initialization),
                             ("update_binding", ti.algorithm)):
            outputs = {v.name for v in graph.outputs} if graph is not None else set()
            which = "initialization" if field == "initialization_binding" else "algorithm"
            for j, e in enumerate(getattr(ti, field)):
                where = f"training_info[{k}].{field}[{j}]"
                if e.key not in inits:
                    out.append(finding("OM118", f"{field} key {quote(e.key)} is not an "
                                       "initializer of the main graph", f"{where}.key"))
                if e.value not in outputs:
                    out.append(finding("OM118", f"{field} value {quote(e.value)} is not an "
                                       f"output of the {which} graph", f"{where}.value"))


def _order(model, graphs: list, orders: dict, out: list) -> None:
    """OM113 for each graph (``graphs``: ``(path, graph)`` of the main graph and its
    subgraphs) and function body (Clause 8.4: sorted as a graph is) whose nodes are not in the
    order the graph rules computed: the first node out of place."""
    scopes = graphs + [(f"functions[{k}]", fn) for k, fn in enumerate(model.functions)]
    for path, scope in scopes:
        order = orders.get(id(scope))
        if order is None or order == list(range(len(order))):
            continue
        first = next(k for k, i in enumerate(order) if i != k)
        node = scope.nodes[first]
        where = f"{path}.nodes[{first}]"
        later = {}
        for k in range(len(scope.nodes) - 1, first, -1):
            later.update((n, k) for n in scope.nodes[k].outputs if n)
        name = next((n for n in node.inputs if n in later), None)
        inside = None
        if name is None:  # (read by a subgraph of the node: the path names the inner use)
            name = min(node_outer_names(node) & later.keys(), default=None,
                       key=lambda n: later[n])
            inside = _inner_use(node, where, name) if name is not None else None
        if name is None:
            out.append(finding("OM113", f"node {quote(node.op_type)} at position {first} reads "
                               "a value produced by a later node (not topologically sorted)",
                               where))
            continue
        by = scope.nodes[later[name]]
        out.append(finding("OM113", f"node {quote(node.op_type)} at position {first} reads "
                           f"{quote(name)}{' in a subgraph' if inside else ''}, which node "
                           f"{quote(by.op_type)} at position {later[name]} produces later "
                           "(not topologically sorted)", inside or where))


def _inner_use(node, npath: str, name: str) -> str | None:
    """The path of the first use of outer value ``name`` in the subgraphs of ``node`` (a node
    input or graph output of a subgraph, at any depth, where no graph on the way defines
    ``name`` itself), or None."""
    for j, a in enumerate(node.attributes):
        for field, sub in a.subgraphs():
            gpath = f"{npath}.attributes[{j}].{field}"
            if name in {v.name for v in sub.inputs} or \
                    any(t.name == name for t in sub.initializers):
                continue
            for i, n in enumerate(sub.nodes):
                for k, x in enumerate(n.inputs):
                    if x == name:
                        return f"{gpath}.nodes[{i}].inputs[{k}]"
                got = _inner_use(n, f"{gpath}.nodes[{i}]", name)
                if got is not None:
                    return got
                if name in n.outputs:
                    break
            else:
                for k, v in enumerate(sub.outputs):
                    if v.name == name:
                        return f"{gpath}.outputs[{k}]"
    return None
