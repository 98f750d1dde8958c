"""The calls between a model's local functions (ONNX Part 1, Clause 8.4), and which of them
recur.

A node calls a function when its ``(domain, op_type, overload)`` is the function's (the domain
normalized: ``""`` and ``"ai.onnx"`` are one). A function's calls are those of its body's nodes
and of the nodes of every graph in their attributes. A function recurs when a chain of calls
leads from it back to itself (a self call, or through others): expanding its body at a call
would not end, so inference does not expand it and the evaluator refuses it (Clause 15.4,
unbounded recursion); ``onemodel check`` reports it (OM122).
"""

from __future__ import annotations

from .entries import normalize_domain


def function_key(domain: str | None, name: str | None, overload: str | None) -> tuple:
    """The identity of a function or of the function a node calls: ``(domain normalized,
    name, overload)``, absent strings as ``""``."""
    return (normalize_domain(domain), name or "", overload or "")


def _callees(function, keys: set) -> list:
    """The keys in ``keys`` that ``function``'s body calls, in the order first called (nodes
    of subgraphs in attributes included), without a Python recursion per nesting level."""
    out: list = []
    seen: set = set()
    stack = [function.nodes]
    while stack:
        for node in stack.pop():
            k = function_key(node.domain, node.op_type, node.overload)
            if k in keys and k not in seen:
                seen.add(k)
                out.append(k)
            for a in node.attributes:
                for _, g in a.subgraphs():
                    stack.append(g.nodes)
    return out


def recursive_functions(model) -> dict:
    """``{key: cycle}`` for every function of ``model`` that recurs (see the module docstring):
    ``key`` as :func:`function_key` gives it, ``cycle`` the keys of a shortest chain of calls
    from it back to it (``[key]`` for a function that calls itself). Functions defined twice
    count once (the first definition). Linear in the size of the functions' bodies plus, for
    each recurring function, a search of the call graph."""
    functions: dict = {}
    for f in model.functions:
        functions.setdefault(function_key(f.domain, f.name, f.overload), f)
    keys = set(functions)
    calls = {k: _callees(f, keys) for k, f in functions.items()}
    out: dict = {}
    for k in _in_cycles(calls):
        out[k] = _shortest_cycle(k, calls)
    return out


def _in_cycles(calls: dict) -> list:
    """The keys of ``calls`` (key -> keys called) on a cycle, in the order of ``calls``: in a
    strongly connected component of more than one key, or calling themselves."""
    found = {k for c in strongly_connected(calls) if len(c) > 1 or c[0] in calls[c[0]]
             for k in c}
    return [k for k in calls if k in found]


def strongly_connected(graph: dict) -> list[list]:
    """The strongly connected components of ``graph`` (node -> the nodes it has edges to; a
    node reached but not a key has no edges), by Tarjan's algorithm, iteratively (no recursion
    however long a path): a list of components, each a list of nodes, in the order Tarjan's
    algorithm closes them (roots taken in the order of ``graph``)."""
    index: dict = {}
    low: dict = {}
    on_stack: set = set()
    stack: list = []
    components: list[list] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(graph.get(w, ()))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                components.append(component)
    return components


def _shortest_cycle(key, calls: dict) -> list:
    """The keys of a shortest chain of calls from ``key`` back to ``key`` (breadth first)."""
    parent: dict = {}
    frontier = [key]
    while frontier:
        nxt = []
        for v in frontier:
            for w in calls[v]:
                if w == key:
                    chain = [v]
                    while chain[-1] != key:
                        chain.append(parent[chain[-1]])
                    return chain[::-1]
                if w not in parent:
                    parent[w] = v
                    nxt.append(w)
        frontier = nxt
    return [key]


def cycle_text(cycle: list) -> str:
    """How a cycle of :func:`recursive_functions` reads in a message: ``local.F calls
    itself`` or ``local.A calls itself through local.B, local.C``."""
    def name(k):
        d, n, o = k
        return f"{d or 'ai.onnx'}.{n}" + (f" (overload {o!r})" if o else "")
    head = f"function {name(cycle[0])} calls itself"
    return head if len(cycle) == 1 else f"{head} through {', '.join(name(k) for k in cycle[1:])}"
