"""Test helpers of the inference rules: one-node models, and the soundness check of issue 12
(every value's actual shape, computed by the evaluator on random inputs for several bindings of
the dimension variables, matches its inferred symbolic shape under that binding).

    m = node_model("Concat", [("a", FLOAT, ["N", 2]), ("b", FLOAT, ["N", 3])], axis=1)
    v = inferred(m)["y"]                         # the Value of output "y"
    assert v.shape == (Expr.var("N"), 5)
    sound(m)                                     # evaluator vs inference, 3 draws
"""

from __future__ import annotations

import random

import numpy as np
from onnx import helper, numpy_helper

import onemodel
from onemodel.evaluate import Session
from onemodel.evaluate.inputs import random_inputs
from onemodel.inference import Expr, infer_model
from onemodel.ir.dtypes import code_of_dtype


def node_model(op_type: str, inputs: list, n_outputs: int = 1, *, opset: int = 21,
               domain: str = "", inits: dict | None = None, outputs=None, **attrs):
    """A model of one node: ``inputs`` a list of ``(name, elem_type, shape)`` graph inputs
    (``shape`` list of int/str/None, or None for unknown rank) or ``(name, ndarray)``
    initializers (constant inputs); an input name ``""`` is an omitted optional input. Outputs
    are ``y`` (one) or ``y0, y1, ...``, declared without a type unless ``outputs`` gives
    ``(name, elem, shape)`` entries."""
    ins, names, initializers = [], [], []
    for entry in inputs:
        if entry is None or entry[0] == "":
            names.append("")
            continue
        names.append(entry[0])
        if isinstance(entry[1], np.ndarray):
            initializers.append(numpy_helper.from_array(entry[1], entry[0]))
        else:
            ins.append(helper.make_tensor_value_info(entry[0], entry[1], entry[2]))
    for name, arr in (inits or {}).items():
        initializers.append(numpy_helper.from_array(np.asarray(arr), name))
    out_names = ["y"] if n_outputs == 1 else [f"y{i}" for i in range(n_outputs)]
    if outputs is None:
        outs = [helper.make_empty_tensor_value_info(n) for n in out_names]
    else:
        outs = [helper.make_tensor_value_info(*o) for o in outputs]
        out_names = [o[0] for o in outputs]
    node = helper.make_node(op_type, names, out_names, domain=domain, **attrs)
    g = helper.make_graph([node], "g", ins, outs, initializers)
    opsets = [helper.make_opsetid("", opset)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1 if domain != "ai.onnx.ml" else 5))
    m = helper.make_model(g, opset_imports=opsets)
    m.ir_version = 10
    return onemodel.load(m.SerializeToString())


def inferred(model, positive_dims: bool = True) -> dict:
    """The main graph's Values by name (asserting there is no contradiction)."""
    res = infer_model(model, positive_dims=positive_dims)
    assert not res.contradictions, res.contradictions
    return res.values


def _variables(model) -> list[str]:
    out = []
    for vi in model.graph.inputs:
        t = vi.type
        shape = t.shape if t is not None else None
        for d in (shape.dims if shape is not None else ()):
            if d.dim_param and d.dim_param not in out:
                out.append(d.dim_param)
    return out


def _binding_of(model, feed: dict) -> dict:
    """The values the dimension variables of the main graph's inputs take in ``feed``."""
    out = {}
    for vi in model.graph.inputs:
        t = vi.type
        shape = t.shape if t is not None else None
        arr = feed.get(vi.name)
        if shape is None or not isinstance(arr, np.ndarray) or arr.ndim != len(shape.dims):
            continue
        for d, n in zip(shape.dims, arr.shape):
            if d.dim_param:
                out.setdefault(d.dim_param, int(n))
    return out


def _check(name, v, actual, binding) -> bool:
    """Assert the computed ``actual`` (ndarray, list for a sequence, None or the element for an
    optional) fits the inferred Value ``v``; returns whether anything was compared."""
    if v is None or v.kind is None:
        return False
    if v.kind in ("sequence", "optional"):
        if v.kind == "sequence":
            assert isinstance(actual, list), (name, str(v), type(actual))
            items = actual
        else:
            items = [] if actual is None else [actual]
        for k, item in enumerate(items):
            _check(f"{name}[{k}]", v.inner, item, binding)
        return True
    if v.kind != "tensor" or not isinstance(actual, np.ndarray):
        return False
    if actual.dtype == object:  # strings
        assert v.elem in (None, 8), (name, v, actual.dtype)
    elif v.elem is not None:
        assert code_of_dtype(actual.dtype) == v.elem, (name, v, actual.dtype)
    if v.shape is None:
        return False
    assert len(v.shape) == actual.ndim, (name, str(v), actual.shape, binding)
    for k, d in enumerate(v.shape):
        want = d.evaluate(binding) if isinstance(d, Expr) else d
        if want is not None:
            assert want == actual.shape[k], (name, str(v), actual.shape, binding)
    if v.data is not None and all(type(x) is int for x in v.data):
        assert list(actual.reshape(-1)) == list(v.data), (name, v.data, actual)
    if v.data is not None and all(type(x) is bool for x in v.data):
        assert list(actual.reshape(-1)) == list(v.data), (name, v.data, actual)
    return True


class _Watching(Session):
    """A Session that keeps what each subgraph run (an If branch, a Loop or Scan iteration, a
    SequenceMap element, an attention operator's score function) was given and gave:
    ``runs`` lists ``(graph, inputs, outputs)``."""

    def __init__(self, model):
        super().__init__(model)
        self.runs: list = []

    def run_subgraph(self, graph, inputs, outer_env, path):
        out = super().run_subgraph(graph, inputs, outer_env, path)
        if len(self.runs) < _MAX_RUNS:
            self.runs.append((graph, list(inputs), out))
        return out


#: At most this many subgraph runs of one model run are compared (a long Loop's first ones).
_MAX_RUNS = 2000


def _subgraph_checks(model, runs: list, graphs: dict, binding: dict) -> int:
    """Check the inputs given to and the outputs taken from each subgraph run in ``runs``
    (:class:`_Watching`) against the inferred Values of that graph (``graphs``:
    :attr:`Inference.graphs`); returns the number of values compared. Subgraphs of function
    bodies have no path of the model and are not compared."""
    from onemodel.ir.walk import iter_graphs

    path_of = {id(g): p for p, g in iter_graphs(model.graph)}
    compared = 0
    for graph, inputs, outputs in runs:
        gpath = path_of.get(id(graph))
        values = graphs.get(gpath) if gpath is not None else None
        if values is None:
            continue
        for vi, actual in zip(graph.inputs, inputs):
            compared += _check(f"{gpath} {vi.name}", values.get(vi.name), actual, binding)
        for vi, actual in zip(graph.outputs, outputs):
            compared += _check(f"{gpath} {vi.name}", values.get(vi.name), actual, binding)
    return compared


def sound(model, draws: int = 3, seed: int = 0, low: int = 1, high: int = 6,
          fixed: dict | None = None, positive_dims: bool | None = None,
          feeds: list | None = None, subgraphs: bool = True) -> int:
    """Run ``model`` with random inputs for ``draws`` bindings of its input dimension
    variables (each in ``[low, high]``, ``fixed`` overriding), or with the given ``feeds``
    (input name -> value dicts, e.g. a conformance case's input files; the binding is read from
    their shapes), and assert that every value the evaluator computes has the inferred element
    type, rank and extents (an expression evaluated under the binding; unknown extents and
    ranks are not compared; a sequence's elements and an optional's element against the
    inferred element); so too the inputs and outputs of every run of a subgraph of the main
    graph (an If branch, each Loop and Scan iteration) against the inferred Values of that
    graph (:attr:`Inference.graphs`), unless ``subgraphs`` is False. Returns the number of
    (value, draw) pairs compared, a subgraph's values counted once per run."""
    bindings = [_binding_of(model, f) for f in feeds] if feeds is not None else None
    if positive_dims is None:  # input dimensions taken >= 1 unless draws may give 0
        if bindings is not None:
            positive_dims = all(v >= 1 for b in bindings for v in b.values())
        else:
            positive_dims = low >= 1 and all(v >= 1 for v in (fixed or {}).values())
    res = infer_model(model, positive_dims=positive_dims)
    assert not res.contradictions, res.contradictions
    values = res.values
    names = [n for node in model.graph.nodes for n in node.outputs if n]
    rng = random.Random(seed)
    compared = 0
    sess = _Watching(model)
    for draw in range(draws if feeds is None else len(feeds)):
        if feeds is None:
            binding = {v: rng.randint(low, high) for v in _variables(model)}
            binding.update(fixed or {})
            feed = random_inputs(model, seed=seed + draw, dims=binding)
        else:
            feed, binding = feeds[draw], bindings[draw]
        sess.runs = []
        got = sess.run(feed, outputs=names)
        for name, actual in got.items():
            compared += _check(name, values.get(name), actual, binding)
        if subgraphs:
            compared += _subgraph_checks(model, sess.runs, res.graphs, binding)
    return compared
