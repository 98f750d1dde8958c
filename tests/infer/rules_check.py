"""Checks shared by the rule tests of the element-wise, activation, cast, loss and training
families: the exact inferred type of an output (symbolic extents written as variable names),
soundness against the evaluator, agreement with onnx's own inference where it has an answer,
one node's inference on given Values (data of symbolic extents), and the registry and
unknown-input checks every family gets."""

from __future__ import annotations

import onnx
import onnx.shape_inference

import onemodel
from onemodel.inference import UNKNOWN, Expr, Value, infer_model
from onemodel.inference.engine import Engine, Scope
from onemodel.operators import table
from onemodel.schemas import get as get_schema
from tests.infer.harness import node_model, sound


def dims(spec):
    """A shape spec (ints, variable names, Expr, None) as inference's tuple of extents."""
    if spec is None:
        return None
    return tuple(Expr.var(d) if isinstance(d, str) else d for d in spec)


def onnx_output(model, name: str):
    """onnx's inferred (elem, [dim_value or None]) of ``name``, strict, with data propagation;
    None when it infers nothing; (elem, None) for an unknown rank."""
    proto = onnx.load_from_string(onemodel.to_bytes(model))
    try:
        got = onnx.shape_inference.infer_shapes(proto, strict_mode=True, data_prop=True)
    except Exception:  # onnx has no inference for it at that opset (or refuses): no answer
        return None
    for vi in list(got.graph.output) + list(got.graph.value_info):
        if vi.name == name and vi.type.HasField("tensor_type"):
            t = vi.type.tensor_type
            if not t.HasField("shape"):
                return t.elem_type, None
            return t.elem_type, [d.dim_value if d.HasField("dim_value") else None
                                 for d in t.shape.dim]
    return None


def expect(model, shape, elem, out: str = "y", data=None, check_onnx: bool = True,
           draws: int = 3):
    """Assert output ``out`` of ``model`` is inferred with exactly ``shape`` (spec of
    :func:`dims`) and element type ``elem`` (and elements ``data`` when given), that the
    evaluator agrees (``sound``), and that onnx's inference, where it has an element type,
    rank or extent, has the same one (so it knows none we do not). Returns the Value."""
    res = infer_model(model)
    assert not res.contradictions, res.contradictions
    v = res.values[out]
    assert v.shape == dims(shape), (str(v), shape)
    assert v.elem == elem, (str(v), elem)
    if data is not None:
        assert v.data == tuple(data), (v.data, data)
    assert sound(model, draws=draws) > 0
    if check_onnx:
        o = onnx_output(model, out)
        if o is not None:
            oe, os_ = o
            if oe:
                assert oe == elem, (out, oe, elem)
            if os_ is not None:
                assert v.shape is not None, (out, os_, str(v))   # onnx knows no more
                assert len(os_) == len(v.shape), (os_, str(v))
                for a, b in zip(os_, v.shape):
                    if a is not None:
                        assert a == b, (os_, str(v))
    return v


def contradicts(model, *words) -> list:
    """Assert inferring ``model`` reports contradictions, one of them at the node with every
    word of ``words`` in its message, and that it raises nothing. Returns the messages."""
    res = infer_model(model)
    msgs = [c.message for c in res.contradictions]
    assert any(all(w in m for w in words) for m in msgs), msgs
    return msgs


def infer_values(op: str, values: list, n_outputs: int = 1, opset: int = 21, domain: str = "",
                 **attrs):
    """One node's inference on the given input Values (None: an omitted input), as the engine
    does it inside a graph. Returns (output Values, contradiction messages)."""
    m = node_model(op, [(f"i{k}", 1, None) if v is not None else ("",)
                        for k, v in enumerate(values)], n_outputs, opset=opset, domain=domain,
                   **attrs)
    eng = Engine(m)
    opsets = {"": opset}
    if domain:
        opsets[domain] = 1
    outs = eng.infer_node(m.graph.nodes[0], list(values), "graph.nodes[0]", Scope(None, opsets))
    return outs, [c.message for c in eng.result.contradictions]


def family_keys(module: str) -> dict:
    """(domain, op_type) -> the since_version of every definition a kernel of
    ``kernels/<module>.py`` serves (the operator table's, onemodel.operators)."""
    out: dict = {}
    for domain, op, v, k, _ in table.served():
        if k is not None and k.__module__.endswith(f".kernels.{module}"):
            out.setdefault((domain, op), []).append(v)
    return {key: tuple(v) for key, v in out.items()}


def check_family_registered(module: str) -> int:
    """Assert every definition a kernel of ``kernels/<module>.py`` serves is served by a rule
    of ``rules/<module>.py``. Returns the number of operators."""
    keys = family_keys(module)
    assert keys
    for (domain, op), versions in keys.items():
        for v in versions:
            r = table.implementation("rule", domain, op, v)
            assert r is not None and r.__module__.endswith(f".rules.{module}"), (domain, op, v)
    return len(keys)


def check_unknown_inputs(module: str) -> int:
    """Infer every operator version of the family on inputs of nothing known, on tensors of
    the first allowed element type and unknown rank, and on sequences of those (every input
    the definition lists, variadic ones twice): nothing raises. Returns the number of
    inferences made."""
    n = 0
    for (domain, op), versions in family_keys(module).items():
        for v in versions:
            schema = get_schema(op, domain, v)
            formals = list(schema.inputs) if schema is not None else []
            if formals and formals[-1].variadic:
                formals.append(formals[-1])
            typed = []
            for f in formals:
                allowed = schema.constraints.get(f.type_str, (f.type_str,))
                name = allowed[0][len("tensor("):-1] if allowed[0].startswith("tensor(") \
                    else "float"
                code = getattr(onnx.TensorProto, name.upper(), onnx.TensorProto.FLOAT)
                typed.append(Value.tensor(code, None))
            n_out = max(1, len(schema.outputs) if schema is not None else 1)
            attrs = {"to": onnx.TensorProto.FLOAT} if op in ("Cast", "BitCast") else {}
            if op == "BitShift":
                attrs["direction"] = "LEFT"
            odd = [Value.sequence(t) for t in typed]   # a wrong kind, as a bad model has
            for ins in ([UNKNOWN] * len(formals), typed, odd):
                outs, _ = infer_values(op, ins, n_out, opset=v if not domain else 21,
                                       domain=domain, **attrs)
                assert len(outs) == n_out
                n += 1
    return n


def data_sound(model, draws: int = 3, seed: int = 0, low: int = 1, high: int = 6) -> int:
    """Run ``model`` for ``draws`` random bindings of its input dimension variables and assert
    every known element of every inferred integer or bool tensor (an int, a bool, or an
    expression evaluated under the binding) equals the evaluator's. Returns the number of
    elements compared."""
    import random

    import numpy as np

    from onemodel.evaluate import Session
    from onemodel.evaluate.inputs import random_inputs
    from tests.infer.harness import _variables

    values = infer_model(model, positive_dims=low >= 1).values
    names = [n for node in model.graph.nodes for n in node.outputs if n]
    rng = random.Random(seed)
    sess = Session(model)
    compared = 0
    for draw in range(draws):
        binding = {v: rng.randint(low, high) for v in _variables(model)}
        got = sess.run(random_inputs(model, seed=seed + draw, dims=binding), outputs=names)
        for name, actual in got.items():
            v = values.get(name)
            if v is None or v.data is None or not isinstance(actual, np.ndarray):
                continue
            flat = actual.reshape(-1).tolist()
            assert len(flat) == len(v.data), (name, v.data, actual)
            for want, have in zip(v.data, flat):
                if isinstance(want, Expr):
                    want = want.evaluate(binding)
                if want is not None and not isinstance(want, float):
                    assert want == have, (name, v.data, flat, binding)
                    compared += 1
    return compared
