"""Dependency order of a graph's nodes, and the names subgraphs read from enclosing graphs.

ONNX requires a graph's nodes to be in topological order (Part 1, Clause 7.5). The graph rules
(:mod:`onemodel.ir.graph_rules`, rule 3: the stable sort of OneModel format section 3) compute
that order with :func:`stable_topological_order` for all their callers: the OneModel reader puts
the nodes in it, the OneModel writer writes them in it, and the evaluator runs a graph that is
not sorted in it.

A subgraph (a node attribute of type GRAPH or GRAPHS) may read values of the graphs around it
(Clause 7.5.1): :func:`outer_names` gives the names it reads that it does not define itself, at
every nesting level, so a node holding it depends on their producers.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Sequence

from ..errors import InvalidModelError
from .model import Graph, Node


def stable_topological_order(deps: Sequence[Collection[int]], path: str, *,
                             cycle: Callable[[int], str] | None = None) -> list[int]:
    """Node indices in dependency order by a stable sort.

    ``deps[i]`` holds the indices of the nodes node ``i`` reads from (each in
    ``range(len(deps))``). Kahn's algorithm takes the ready node of the lowest index first, so
    nodes already in order keep their positions; time O((nodes + dependencies) log nodes).

    Raises InvalidModelError when the nodes form a cycle, with path ``{path}.nodes[i]`` for the
    lowest index ``i`` of a node that cannot be ordered (on a cycle or after one) and the message
    ``cycle(i)`` (default: "the nodes form a cycle (no dependency order exists)").
    """
    n = len(deps)
    indegree = [len(d) for d in deps]
    users: list[list[int]] = [[] for _ in range(n)]
    for i, d in enumerate(deps):
        for p in d:
            users[p].append(i)
    ready = [i for i in range(n) if indegree[i] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            indegree[u] -= 1
            if indegree[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != n:
        stuck = min(set(range(n)) - set(order))
        message = (cycle(stuck) if cycle is not None
                   else "the nodes form a cycle (no dependency order exists)")
        raise InvalidModelError(message, path=f"{path}.nodes[{stuck}]")
    return order


def node_outer_names(node: Node) -> set[str]:
    """Names the subgraphs of ``node`` (attributes ``g`` and ``graphs``) read from the graphs
    around them: :func:`outer_names` of each, united; empty for a node without subgraphs."""
    out: set[str] = set()
    for g in node.subgraphs():
        out |= outer_names(g)
    return out


def outer_names(g: Graph) -> set[str]:
    """Names ``g`` reads (non-empty node inputs, graph outputs, and what its own subgraphs read
    from around them) that it does not define (graph inputs, initializers, sparse initializers,
    node outputs): the values it takes from enclosing graphs. Nothing is checked: a name no
    enclosing graph defines is returned as well."""
    defined = {v.name for v in g.inputs}
    defined |= {t.name for t in g.initializers}
    defined |= {s.name for s in g.sparse_initializers}
    used: set[str] = set()
    for node in g.nodes:
        used.update(n for n in node.inputs if n)
        used |= node_outer_names(node)
        defined.update(n for n in node.outputs if n)
    used.update(v.name for v in g.outputs if v.name)
    return used - defined
