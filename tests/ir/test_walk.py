"""Walks over every tensor: ``all_tensors`` (no paths, for summaries and close) visits what
``iter_tensors`` visits, in the same order; ``summarize`` counts each tensor once; the element
count's one-call path agrees with the checked loop."""

from __future__ import annotations

import pytest

from onemodel.errors import InvalidModelError, UnsupportedError
from onemodel.ir import (
    Attribute,
    DataType,
    Function,
    Graph,
    Model,
    Node,
    OperatorSetId,
    SparseTensor,
    Tensor,
    TrainingInfo,
    all_tensors,
    iter_graphs,
    iter_tensors,
)
from onemodel.ir.tensor import element_count
from onemodel.summary import summarize

F, I64, U8 = DataType.FLOAT, DataType.INT64, DataType.UINT8


def _t(name, dims, dt=F, external=False):
    t = Tensor(name=name, dims=dims, data_type=dt)
    if external:
        t.data_location = 1
    return t


def _sparse(name):
    return SparseTensor(values=_t(name + ".v", [2]), indices=_t(name + ".i", [2], I64), dims=[9])


def _model() -> Model:
    """Tensors in every place a tensor can sit, nested two graphs deep."""
    inner = Graph(name="inner", initializers=[_t("inner_w", [3], U8)],
                  nodes=[Node(op_type="Constant", attributes=[
                      Attribute(name="value", t=_t("inner_const", [2, 2]))])])
    body = Graph(name="body", initializers=[_t("body_w", [5])],
                 sparse_initializers=[_sparse("body_sp")],
                 nodes=[Node(op_type="If", attributes=[Attribute(name="then_branch", g=inner)])])
    main = Graph(
        name="main",
        initializers=[_t("w0", [2, 3]), _t("w1", [4], I64, external=True)],
        sparse_initializers=[_sparse("sp")],
        nodes=[Node(op_type="Relu"),
               Node(op_type="Loop", attributes=[Attribute(name="body", g=body)]),
               Node(op_type="Frob", domain="com.x", attributes=[
                   Attribute(name="ts", tensors=[_t("a0", [1]), _t("a1", [7], U8)]),
                   Attribute(name="st", sparse_tensor=_sparse("asp")),
                   Attribute(name="sts", sparse_tensors=[_sparse("asp2")]),
                   Attribute(name="gs", graphs=[Graph(name="g2",
                                                      initializers=[_t("g2_w", [6])])])])])
    fn = Function(name="f", domain="com.x",
                  nodes=[Node(op_type="Constant", attributes=[
                      Attribute(name="value", t=_t("fn_const", [8]))])],
                  attribute_defaults=[Attribute(name="d", t=_t("fn_default", [2], I64))])
    ti = TrainingInfo(initialization=Graph(name="init", initializers=[_t("ti_w", [10])]),
                      algorithm=Graph(name="algo", initializers=[_t("algo_w", [1], I64)]))
    return Model(ir_version=10, opset_imports=[OperatorSetId(domain="", version=21)],
                 graph=main, functions=[fn], training_info=[ti])


def test_all_tensors_is_iter_tensors_without_the_paths():
    m = _model()
    walked = [t for _, t in iter_tensors(m)]
    assert [t.name for t in walked] == [
        "w0", "w1", "sp.v", "sp.i", "body_w", "body_sp.v", "body_sp.i", "inner_w",
        "inner_const", "a0", "a1", "asp.v", "asp.i", "asp2.v", "asp2.i", "g2_w", "fn_const",
        "fn_default", "ti_w", "algo_w"]
    listed = all_tensors(m)
    assert len(listed) == len(walked) and all(a is b for a, b in zip(listed, walked))


def test_all_tensors_of_a_model_without_graph_is_empty():
    assert all_tensors(Model(ir_version=10)) == []


def test_summary_counts_every_tensor_and_initializer_once():
    s = summarize(_model())
    # initializers of every graph (main, Loop body, If branch, g2); not sparse, not training
    assert s["initializers"] == {
        "count": 5, "bytes": 2 * 3 * 4 + 4 * 8 + 5 * 4 + 3 + 6 * 4,
        "parameters": 2 * 3 + 4 + 5 + 3 + 6,
        "by_dtype": {"float": {"count": 3, "bytes": 24 + 20 + 24, "parameters": 6 + 5 + 6},
                     "int64": {"count": 1, "bytes": 32, "parameters": 4},
                     "uint8": {"count": 1, "bytes": 3, "parameters": 3}}}
    sparse_bytes = 2 * 4 + 2 * 8
    assert s["tensors"] == {
        "count": 20, "external": 1,
        "bytes": (24 + 32 + 20 + 3 + 24) + 4 * sparse_bytes + 4 * 4 + 1 * 4 + 7
        + 8 * 4 + 2 * 8 + 10 * 4 + 8}
    # nodes and ops of every graph: main 3, body 1, inner 1 (functions' nodes are not counted)
    assert s["nodes"] == 5
    assert s["ops"] == {"Constant": 1, "If": 1, "Loop": 1, "Relu": 1, "com.x.Frob": 1}


def test_a_shared_tensor_counts_where_it_sits():
    w = _t("w", [4])
    m = Model(ir_version=10, graph=Graph(initializers=[w], nodes=[
        Node(op_type="Constant", attributes=[Attribute(name="value", t=w)])]))
    s = summarize(m)
    assert s["initializers"]["count"] == 1 and s["initializers"]["bytes"] == 16
    assert s["tensors"] == {"count": 2, "bytes": 32, "external": 0}


@pytest.mark.parametrize("dims, count", [
    ([], 1), ([0], 0), ([7], 7), ([2, 3, 4], 24), ([0, 2**62, 2**62], 0),
    ([1] * 16 + [5], 5), ([2] * 17, 2**17),  # past 16 dims: the loop
    ([2**31, 2**28], 2**59),
])
def test_element_count(dims, count):
    assert element_count(dims) == count


@pytest.mark.parametrize("dims, error, text", [
    ([-1], InvalidModelError, "negative"),
    ([3, -1, -1], InvalidModelError, "negative"),  # a positive product of negative dims
    ([2**62, 2], InvalidModelError, "overflows"),
    ([2**40, 2**40], InvalidModelError, "overflows"),
    ([2**31, 2**29], UnsupportedError, "the limit"),
    ([2] * 20 + [-1], InvalidModelError, "negative"),
])
def test_element_count_refuses(dims, error, text):
    with pytest.raises(error, match=text):
        element_count(dims, "t.dims")


def test_a_tensor_size_error_names_the_dims_path():
    with pytest.raises(InvalidModelError) as e:
        _ = _t("w", [2, -3]).size
    assert e.value.path == "w.dims[1]"


def test_iter_graphs_gives_every_subgraph_with_its_path():
    m = _model()
    assert [(p, g.name) for p, g in iter_graphs(m.graph)] == [
        ("graph", "main"),
        ("graph.nodes[1].attributes[0].g", "body"),
        ("graph.nodes[1].attributes[0].g.nodes[0].attributes[0].g", "inner"),
        ("graph.nodes[2].attributes[3].graphs[0]", "g2")]
    paths = dict((t.name, p) for p, t in iter_tensors(m))
    assert paths["inner_const"] == ("graph.nodes[1].attributes[0].g.nodes[0].attributes[0].g"
                                    ".nodes[0].attributes[0].t")
    assert paths["g2_w"] == "graph.nodes[2].attributes[3].graphs[0].initializers[0]"


def test_subgraphs_of_an_attribute_and_a_node():
    a, b, c = Graph(name="a"), Graph(name="b"), Graph(name="c")
    both = Attribute(name="x", g=a, graphs=[b, c])  # GRAPH and GRAPHS fields both set
    assert both.subgraphs() == [("g", a), ("graphs[0]", b), ("graphs[1]", c)]
    assert Attribute(name="y", graphs=[c]).subgraphs() == [("graphs[0]", c)]
    assert not Attribute(name="z", i=3).subgraphs()
    node = Node(op_type="Frob", attributes=[Attribute(name="z", i=3), both,
                                            Attribute(name="w", g=c)])
    assert [g.name for g in node.subgraphs()] == ["a", "b", "c", "c"]
    assert list(Node(op_type="Relu").subgraphs()) == []
    m = Model(ir_version=10, graph=Graph(name="main", nodes=[node]))
    assert [p for p, _ in iter_graphs(m.graph)] == [
        "graph", "graph.nodes[0].attributes[1].g", "graph.nodes[0].attributes[1].graphs[0]",
        "graph.nodes[0].attributes[1].graphs[1]", "graph.nodes[0].attributes[2].g"]
