"""Traversals of a model: every graph and every tensor, wherever it sits.

Paths use the field names of :mod:`onemodel.ir` (``graph.nodes[3].attributes[0].t``).
"""

from __future__ import annotations

from typing import Iterator

from .model import Attribute, Graph, Model, Node
from .tensor import SparseTensor, Tensor


def iter_graphs(graph: Graph, path: str = "graph") -> Iterator[tuple[str, Graph]]:
    """The graph and every subgraph in its nodes' attributes, depth first, with their paths."""
    yield path, graph
    for i, node in enumerate(graph.nodes):
        if not node.attributes:
            continue
        for j, attr in enumerate(node.attributes):
            for field, g in attr.subgraphs():
                yield from iter_graphs(g, f"{path}.nodes[{i}].attributes[{j}].{field}")


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
        yield from graph_tensors(g, f"{path}.{field}")


def _node_tensors(nodes: list[Node], path: str):
    for i, node in enumerate(nodes):
        for j, attr in enumerate(node.attributes):
            yield from _attribute_tensors(attr, f"{path}.nodes[{i}].attributes[{j}]")


def graph_tensors(graph: Graph, path: str = "graph") -> Iterator[tuple[str, Tensor]]:
    """Every tensor of a graph in the order of OneModel format section 1.3.

    Initializers, then each sparse initializer's values and indices, then, for each node in order,
    the tensors in its attributes, descending into subgraphs in place.
    """
    for i, t in enumerate(graph.initializers):
        yield f"{path}.initializers[{i}]", t
    for i, st in enumerate(graph.sparse_initializers):
        yield from _sparse(st, f"{path}.sparse_initializers[{i}]")
    yield from _node_tensors(graph.nodes, path)


def iter_tensors(model: Model) -> Iterator[tuple[str, Tensor]]:
    """Every tensor of a model, with its path, in the order of OneModel format section 1.3.

    The main graph (:func:`graph_tensors`), then for each function its nodes' attribute tensors
    and its attribute defaults, then the graphs of ``training_info``.
    """
    if model.graph is not None:
        yield from graph_tensors(model.graph, "graph")
    for f, fn in enumerate(model.functions):
        yield from _node_tensors(fn.nodes, f"functions[{f}]")
        for j, attr in enumerate(fn.attribute_defaults):
            yield from _attribute_tensors(attr, f"functions[{f}].attribute_defaults[{j}]")
    for k, ti in enumerate(model.training_info):
        if ti.initialization is not None:
            yield from graph_tensors(ti.initialization, f"training_info[{k}].initialization")
        if ti.algorithm is not None:
            yield from graph_tensors(ti.algorithm, f"training_info[{k}].algorithm")


def all_tensors(model: Model) -> list[Tensor]:
    """The tensors :func:`iter_tensors` yields, in the same order, as a list without paths.

    One pass of plain loops that builds no path strings: for walks that visit every tensor of a
    large model (``onemodel info``, :meth:`Model.close`), where the paths of 20,000 tensors
    cost more than the visit.
    """
    out: list = []
    add = out.append

    def sparse(st) -> None:
        if st.values is not None:
            add(st.values)
        if st.indices is not None:
            add(st.indices)

    def attribute(attr) -> None:
        if attr.t is not None:
            add(attr.t)
        out.extend(attr.tensors)
        if attr.sparse_tensor is not None:
            sparse(attr.sparse_tensor)
        for st in attr.sparse_tensors:
            sparse(st)
        for _, g in attr.subgraphs():
            graph(g)

    def nodes(ns) -> None:
        for node in ns:
            if node.attributes:
                for attr in node.attributes:
                    attribute(attr)

    def graph(g) -> None:
        out.extend(g.initializers)
        for st in g.sparse_initializers:
            sparse(st)
        nodes(g.nodes)

    if model.graph is not None:
        graph(model.graph)
    for fn in model.functions:
        nodes(fn.nodes)
        for attr in fn.attribute_defaults:
            attribute(attr)
    for ti in model.training_info:
        if ti.initialization is not None:
            graph(ti.initialization)
        if ti.algorithm is not None:
            graph(ti.algorithm)
    return out
