"""Traversals of a model: every graph and every tensor, wherever it sits.

Paths use the field names of :mod:`onemodel.ir` (``graph.nodes[3].attributes[0].t``).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import compress
from operator import attrgetter
from types import GeneratorType

from ..errors import UnsupportedError
from ..limits import MAX_MODEL_NESTING
from .model import Attribute, Graph, Model, Node
from .tensor import SparseTensor, Tensor


def _descend(top: Iterator) -> Iterator:
    """The items of ``top`` with every nested part expanded in place, without recursion.

    ``top`` and the parts it yields are generators of ``(path, item)``, where ``item`` is a
    generator itself for a part to descend into (a subgraph), else a value to give out. An
    explicit stack stands in for the call stack, so graphs nested any depth deep (a model built
    through the Python API) are walked without a RecursionError, in the same order.
    """
    stack = [top]
    while stack:
        for path, item in stack[-1]:
            if type(item) is GeneratorType:
                stack.append(item)
                break
            yield path, item
        else:
            stack.pop()


def _graph_parts(graph: Graph, path: str) -> Iterator:
    yield path, graph
    nodes = graph.nodes
    for i, node in compress(enumerate(nodes), map(_ATTRIBUTES, nodes)):
        for j, attr in enumerate(node.attributes):
            for field, g in attr.subgraphs():
                p = f"{path}.nodes[{i}].attributes[{j}].{field}"
                yield p, _graph_parts(g, p)


def iter_graphs(graph: Graph, path: str = "graph") -> Iterator[tuple[str, Graph]]:
    """The graph and every subgraph in its nodes' attributes, depth first, with their paths
    (iteratively: any depth of nesting)."""
    return _descend(_graph_parts(graph, path))


def graph_depths(model: Model) -> Iterator[tuple[str, Graph, int]]:
    """``(path, graph, depth)`` of every graph of ``model``: the main graph, each function
    body's subgraphs and the training graphs at depth 1, a graph in a node attribute of a graph
    at depth ``d`` at ``d + 1`` (a list field holding None, which the writers refuse by name, is
    taken as empty). Iterative; the main graph's walk first, depth first and a
    graph before its subgraphs (the order of :func:`iter_graphs`), then the training graphs and
    the function bodies' subgraphs."""
    stack: list = []
    if model.graph is not None:
        stack.append(("graph", model.graph, 1))
    for k, ti in enumerate(model.training_info or ()):
        for name in ("initialization", "algorithm"):
            g = getattr(ti, name)
            if g is not None:
                stack.append((f"training_info[{k}].{name}", g, 1))
    for f, fn in enumerate(model.functions or ()):
        for i, node in enumerate(fn.nodes or ()):
            for j, attr in enumerate(node.attributes or ()):
                for field, g in attr.subgraphs():
                    stack.append((f"functions[{f}].nodes[{i}].attributes[{j}].{field}", g, 2))
    stack.reverse()
    while stack:
        path, g, depth = stack.pop()
        yield path, g, depth
        nodes = g.nodes or ()
        # (only the nodes with attributes are visited one by one: C-level passes pick them)
        subs = [(f"{path}.nodes[{i}].attributes[{j}].{field}", sub, depth + 1)
                for i, node in compress(enumerate(nodes), map(_ATTRIBUTES, nodes))
                for j, attr in enumerate(node.attributes) for field, sub in attr.subgraphs()]
        stack.extend(reversed(subs))


_ATTRIBUTES = attrgetter("attributes")

#: The message of a graph nested past MAX_MODEL_NESTING (here and in the graph rules).
NESTING_MESSAGE = f"graphs nested more than {MAX_MODEL_NESTING} deep (MAX_MODEL_NESTING)"


def nesting_error(model: Model) -> UnsupportedError | None:
    """The UnsupportedError of a model whose graphs nest deeper than
    :data:`~onemodel.limits.MAX_MODEL_NESTING` (a graph in a node attribute of a graph counts
    one level, the main graph and a function body the first), with the path of the first graph
    found past it; None when they do not. Every recursive walk of the model (checking, writing,
    digests, inference) is bounded by this check, made first; the walk itself is iterative.
    """
    for path, _, depth in graph_depths(model):
        if depth > MAX_MODEL_NESTING:
            return UnsupportedError(NESTING_MESSAGE, path=path)
    return None


def check_nesting(model: Model) -> None:
    """Raise :func:`nesting_error`'s UnsupportedError, if any (ONNX Part 1, Clause 15.4)."""
    e = nesting_error(model)
    if e is not None:
        raise e


def _sparse(st: SparseTensor, path: str):
    if st.values is not None:
        yield path + ".values", st.values
    if st.indices is not None:
        yield path + ".indices", st.indices


def _attribute_tensors(attr: Attribute, path: str):
    if attr.t is not None:
        yield path + ".t", attr.t
    for k, t in enumerate(attr.tensors):
        yield f"{path}.tensors[{k}]", t
    if attr.sparse_tensor is not None:
        yield from _sparse(attr.sparse_tensor, path + ".sparse_tensor")
    for k, st in enumerate(attr.sparse_tensors):
        yield from _sparse(st, f"{path}.sparse_tensors[{k}]")
    for field, g in attr.subgraphs():
        p = f"{path}.{field}"
        yield p, _graph_tensor_parts(g, p)


def _node_tensors(nodes: list[Node], path: str):
    for i, node in enumerate(nodes):
        for j, attr in enumerate(node.attributes):
            yield from _attribute_tensors(attr, f"{path}.nodes[{i}].attributes[{j}]")


def _graph_tensor_parts(graph: Graph, path: str):
    for i, t in enumerate(graph.initializers):
        yield f"{path}.initializers[{i}]", t
    for i, st in enumerate(graph.sparse_initializers):
        yield from _sparse(st, f"{path}.sparse_initializers[{i}]")
    yield from _node_tensors(graph.nodes, path)


def graph_tensors(graph: Graph, path: str = "graph") -> Iterator[tuple[str, Tensor]]:
    """Every tensor of a graph in the order of OneModel format section 1.3.

    Initializers, then each sparse initializer's values and indices, then, for each node in order,
    the tensors in its attributes, descending into subgraphs in place (iteratively: any depth of
    nesting).
    """
    return _descend(_graph_tensor_parts(graph, path))


def iter_tensors(model: Model) -> Iterator[tuple[str, Tensor]]:
    """Every tensor of a model, with its path, in the order of OneModel format section 1.3.

    The main graph (:func:`graph_tensors`), then for each function its nodes' attribute tensors
    and its attribute defaults, then the graphs of ``training_info``.
    """
    if model.graph is not None:
        yield from graph_tensors(model.graph, "graph")
    for f, fn in enumerate(model.functions):
        yield from _descend(_node_tensors(fn.nodes, f"functions[{f}]"))
        for j, attr in enumerate(fn.attribute_defaults):
            yield from _descend(_attribute_tensors(attr,
                                                   f"functions[{f}].attribute_defaults[{j}]"))
    for k, ti in enumerate(model.training_info):
        if ti.initialization is not None:
            yield from graph_tensors(ti.initialization, f"training_info[{k}].initialization")
        if ti.algorithm is not None:
            yield from graph_tensors(ti.algorithm, f"training_info[{k}].algorithm")


def all_tensors(model: Model) -> list[Tensor]:
    """The tensors :func:`iter_tensors` yields, in the same order, as a list without paths.

    One pass of plain loops (iterative: any depth of nesting) that builds no path strings: for
    walks that visit every tensor of a large model (``onemodel info``, :meth:`Model.close`),
    where the paths of 20,000 tensors cost more than the visit.
    """
    out: list = []
    add = out.append

    def sparse(st) -> None:
        if st.values is not None:
            add(st.values)
        if st.indices is not None:
            add(st.indices)

    def attribute(attr):
        if attr.t is not None:
            add(attr.t)
        out.extend(attr.tensors)
        if attr.sparse_tensor is not None:
            sparse(attr.sparse_tensor)
        for st in attr.sparse_tensors:
            sparse(st)
        for _, g in attr.subgraphs():
            yield graph(g)

    def nodes(ns):
        for node in ns:
            if node.attributes:
                for attr in node.attributes:
                    yield from attribute(attr)

    def graph(g):
        out.extend(g.initializers)
        for st in g.sparse_initializers:
            sparse(st)
        yield from nodes(g.nodes)

    def walk(top) -> None:  # each generator yields the generators of its subgraphs
        stack = [top]
        while stack:
            for sub in stack[-1]:
                stack.append(sub)
                break
            else:
                stack.pop()

    try:
        if model.graph is not None:
            walk(graph(model.graph))
        for fn in model.functions:
            walk(nodes(fn.nodes))
            for attr in fn.attribute_defaults:
                walk(attribute(attr))
        for ti in model.training_info:
            if ti.initialization is not None:
                walk(graph(ti.initialization))
            if ti.algorithm is not None:
                walk(graph(ti.algorithm))
    finally:  # the closures name each other: a cycle the collector would have to find, and
        # that would keep the model alive until it did (tests/test_no_cycles.py)
        sparse = attribute = nodes = graph = None  # noqa: F841
    return out
