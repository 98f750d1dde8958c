"""onemodel's inference against onnx's (issue 12, Show 1; issue 24, item 7): on every model of
testdata/ and every node and model conformance case of the installed onnx, in every graph (the
main graph and each subgraph: If branches, Loop and Scan bodies, SequenceMap bodies, the graph
attributes of attention operators), wherever
``onnx.shape_inference.infer_shapes(model, data_prop=True)`` gives a node output or a
subgraph's input a type, onemodel's inferred Value of that graph (:attr:`Inference.graphs`, by
the graph's path: names may repeat across subgraphs) does not contradict it (same kind and
element type, same rank, the same extent where onnx has a number); and, model by model, every
such value whose tensor type onnx knows fully (element type and every extent, numeric or
symbolic) onemodel knows fully too, with an int wherever onnx has one. The totals of fully
known node outputs per corpus part are held, onemodel's against onnx's.

A ``dim_param`` that onnx makes up (``unk__3``, not in the model it was given) names an extent
onnx does not know and is not counted as known. A node to one of whose outputs onnx gives a
negative extent is left out: no tensor has one (Clause 6.5), so onnx's arithmetic there says
nothing (AffineGrid's expansion splits a 5-element ``size`` into 4 parts in the branch for 2-D
grids, which a 3-D grid never runs: onnx gives ``[2] [2] [2] [-1]``, onemodel the parts the
evaluator's Split gives, ``[2] [2] [1] [0]``).
"""

from __future__ import annotations

import pathlib
import re

import onnx
import onnx.shape_inference
import pytest

import onemodel
from onemodel.inference import infer_model

ROOT = pathlib.Path(__file__).resolve().parents[2]
TESTDATA = sorted(p for p in (ROOT / "testdata").rglob("*.onnx"))
KINDS = ("node", "simple", "light", "pytorch-converted", "pytorch-operator")

#: The totals measured at the last change of the rules, per corpus part: (node outputs of every
#: graph onnx types fully, onemodel types fully). Update both when a rule changes what is known.
TOTALS = {
    "testdata": (1018, 1217),  # detector_legacy.onnx: +66 onnx, +78 onemodel; bert_tiny.onnx
    # and gpt2_tiny.onnx: +543 onnx, +674 onemodel; the branches of nested.onnx: +2 each
    "node": (12888, 14427),    # subgraphs: +254 onnx, +522 onemodel
    "simple": (32, 32),
    "light": (4025, 4031),
    "pytorch-converted": (104, 104),
    "pytorch-operator": (55, 55),
}

def _dim_params(graph, out: set) -> set:
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
            out.update(d.dim_param for d in vi.type.tensor_type.shape.dim if d.dim_param)
    for node in graph.node:
        for a in node.attribute:
            if a.HasField("g"):
                _dim_params(a.g, out)
            for g in a.graphs:
                _dim_params(g, out)
    return out


def _onnx_full(t, own: set) -> bool:
    if not t.HasField("tensor_type"):
        return False
    tt = t.tensor_type
    if not tt.elem_type or not tt.HasField("shape"):
        return False
    return all(d.HasField("dim_value") or (d.dim_param and (d.dim_param in own or not
               _MADE_UP.match(d.dim_param))) for d in tt.shape.dim)


_MADE_UP = re.compile(r"^unk__\d+$")


def _onnx_dims(tt) -> list:
    return [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]


def _disagreement(t, v) -> str | None:
    """How onemodel's Value ``v`` contradicts onnx's type ``t`` (a TypeProto), or None."""
    which = t.WhichOneof("value")
    if v is None or v.kind is None or which is None:
        return None
    if which == "tensor_type":
        tt = t.tensor_type
        if v.kind != "tensor":
            return f"onnx: tensor, onemodel: {v}"
        if tt.elem_type and v.elem is not None and tt.elem_type != v.elem:
            return f"onnx elem {tt.elem_type}, onemodel {v}"
        if tt.HasField("shape") and v.shape is not None:
            dims = _onnx_dims(tt)
            if len(dims) != len(v.shape):
                return f"onnx {dims}, onemodel {v}"
            for a, b in zip(dims, v.shape):
                if a is not None and b is not None and b != a:
                    return f"onnx {dims}, onemodel {v}"
        return None
    if which in ("sequence_type", "optional_type"):
        kind = "sequence" if which == "sequence_type" else "optional"
        if v.kind != kind:
            return f"onnx: {kind}, onemodel: {v}"
        return _disagreement(getattr(t, which).elem_type, v.inner)
    return None


def onnx_graphs(graph, path: str = "graph"):
    """(path, GraphProto) of ``graph`` and of every subgraph in its nodes' attributes, depth
    first, with the paths of :func:`onemodel.ir.walk.iter_graphs` (``graph.nodes[3].
    attributes[0].g``, ``...attributes[1].graphs[0]``)."""
    yield path, graph
    for i, node in enumerate(graph.node):
        for j, a in enumerate(node.attribute):
            if a.HasField("g"):
                yield from onnx_graphs(a.g, f"{path}.nodes[{i}].attributes[{j}].g")
            for k, g in enumerate(a.graphs):
                yield from onnx_graphs(g, f"{path}.nodes[{i}].attributes[{j}].graphs[{k}]")


def _negative(t) -> bool:
    return t.HasField("tensor_type") and t.tensor_type.HasField("shape") and \
        any(d.HasField("dim_value") and d.dim_value < 0 for d in t.tensor_type.shape.dim)


def _full(v) -> bool:
    return v is not None and v.kind == "tensor" and v.complete


def _less_known(t, v) -> bool:
    """Whether onemodel's Value ``v`` knows less of a value than onnx's fully known type ``t``:
    not fully known, or a symbol or expression where onnx has an int."""
    if not _full(v):
        return True
    return any(a is not None and type(b) is not int for a, b in
               zip(_onnx_dims(t.tensor_type), v.shape))


def compare(path) -> tuple[list, list, int, int]:
    """(disagreements, values onemodel knows less of than onnx, node outputs onnx types fully,
    node outputs onemodel types fully) of the model at ``path``, over every graph."""
    proto = onnx.load(str(path))
    own = _dim_params(proto.graph, set())
    got = onnx.shape_inference.infer_shapes(proto, data_prop=True).graph
    graphs = infer_model(onemodel.load(str(path))).graphs
    bad, less = [], []
    n_onnx = n_om = 0
    for gpath, g in onnx_graphs(got):
        types = {vi.name: vi.type for vi in list(g.value_info) + list(g.output)}
        values = graphs.get(gpath, {})
        for vi in g.input if gpath != "graph" else ():  # a subgraph's inputs: what the node
            v = values.get(vi.name)                      # gives them (not counted)
            d = _disagreement(vi.type, v)
            if d:
                bad.append(f"{gpath} input {vi.name}: {d}")
            if _onnx_full(vi.type, own) and _less_known(vi.type, v):
                less.append(f"{gpath} input {vi.name}: onemodel {v}")
        for node in g.node:
            names = [o for o in node.output if o]
            if any(n in types and _negative(types[n]) for n in names):
                continue
            for name in names:
                t, v = types.get(name), values.get(name)
                if t is not None:
                    d = _disagreement(t, v)
                    if d:
                        bad.append(f"{gpath} {name}: {d}")
                if t is not None and _onnx_full(t, own):
                    n_onnx += 1
                    if _less_known(t, v):
                        less.append(f"{gpath} {name}: onemodel {v}")
                n_om += _full(v)
    return bad, less, n_onnx, n_om


@pytest.fixture(scope="module")
def corpus(conformance_cases):
    parts = {"testdata": TESTDATA}
    for kind in KINDS:
        parts[kind] = [c.model_path for c in conformance_cases if c.kind == kind]
    return parts


def test_no_contradiction_with_onnx_and_the_totals(corpus):
    bad, less, fewer, totals = [], [], [], {}
    for part, paths in corpus.items():
        n_onnx = n_om = 0
        for p in paths:
            b, lk, a, c = compare(p)
            where = p.parent.name if p.name == "model.onnx" else p.name
            bad += [f"{where}: {x}" for x in b]
            less += [f"{where}: {x}" for x in lk]
            if c < a:
                fewer.append(f"{where}: onnx {a}, onemodel {c}")
            n_onnx += a
            n_om += c
        totals[part] = (n_onnx, n_om)
    assert not bad, f"{len(bad)} disagreements with onnx: {bad[:20]}"
    assert not less, f"{len(less)} values onnx knows better: {less[:20]}"
    assert not fewer, f"{len(fewer)} models with fewer fully known values: {fewer[:20]}"
    assert totals == TOTALS, str(totals)
    for part, (n_onnx, n_om) in totals.items():
        assert n_om >= n_onnx, (part, n_om, n_onnx)
    assert sum(n_om for _, n_om in totals.values()) > 14_000
    assert sum(len(p) for p in corpus.values()) > 2000     # the whole corpus was read
