"""Test helper for the kernel tests: build one-node ONNX models, run them through onemodel's
evaluator and through the oracles (onnxruntime, onnx.reference), compare the results.

Test helper only: it imports ``onnx`` and ``onnxruntime``, which nothing under ``onemodel/`` may.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onemodel.evaluate import run
from onemodel.formats.onnx import decode_model


def tensor_info(name: str, value: np.ndarray) -> onnx.ValueInfoProto:
    """A tensor graph input typed after ``value``."""
    value = np.asarray(value)
    if value.dtype == object:
        return helper.make_tensor_value_info(name, onnx.TensorProto.STRING, value.shape)
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype),
                                         value.shape)


def node_model(op_type: str, feeds: dict, inputs: list[str], outputs: list[str], *,
               opset: int = 21, domain: str = "", infos: dict | None = None,
               ir_version: int = 10, **attrs) -> onnx.ModelProto:
    """A model of one node ``op_type(inputs) -> outputs``.

    Graph inputs are the names of ``inputs`` found in ``feeds`` (typed after their values) or in
    ``infos`` (name -> ValueInfoProto, for sequences and maps); ``""`` leaves an input out.
    Graph outputs are the non-empty names of ``outputs``, untyped. A ``domain`` other than the
    default is imported at version ``opset`` (and the default domain at 21).
    """
    infos = infos or {}
    graph_inputs = []
    for name in inputs:
        if not name:
            continue
        graph_inputs.append(infos[name] if name in infos else tensor_info(name, feeds[name]))
    node = helper.make_node(op_type, inputs, outputs, domain=domain or None, **attrs)
    graph = helper.make_graph([node], "g", graph_inputs,
                              [helper.make_value_info(n, onnx.TypeProto()) for n in outputs
                               if n])
    opsets = [helper.make_opsetid("", opset if not domain else 21)]
    if domain:
        opsets.append(helper.make_opsetid(domain, opset))
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = ir_version
    return model


def ours(model: onnx.ModelProto, feeds: dict) -> list:
    """Outputs of ``model`` on ``feeds`` as onemodel's evaluator computes them, in graph order."""
    m = decode_model(model.SerializeToString())
    res = run(m, feeds)
    return [res[o.name] for o in model.graph.output]


def ort(model: onnx.ModelProto, feeds: dict, *, relies_on: str) -> list:
    """Outputs of ``model`` on ``feeds`` as onnxruntime (CPU) computes them.

    onnxruntime picks its kernels by CPU (AVX2, AVX-512, VNNI...), so it is an oracle only where
    its result does not depend on that choice: ``relies_on`` (required) names the behaviour the
    caller relies on and why it holds on any x86-64 CPU, in one of two classes:

    exact by construction: data movement (gather, copy, concatenation, control flow that only
    routes values), comparisons and selections, integer arithmetic that cannot overflow or
    saturate, float arithmetic whose every intermediate is exactly representable (products of
    small integers by powers of two), a single IEEE operation per element (correctly rounded on
    every CPU). A float kernel that rounds many operations (sums, interpolation, exp) is not
    exact by construction: compare it with :func:`reference64` through
    :func:`assert_close_to_exact` instead.

    Never for integer kernels whose CPU paths may saturate (u8*s8 MatMulInteger, ConvInteger,
    QLinearConv, QLinearMatMul use ``pmaddubsw`` on AVX2, which saturates int16 pair sums):
    those tests compare with an exact int64 computation.
    """
    if not relies_on or not relies_on.strip():
        raise ValueError("say which onnxruntime behaviour the comparison relies on")
    import onnxruntime

    so = onnxruntime.SessionOptions()
    so.log_severity_level = 3
    sess = onnxruntime.InferenceSession(model.SerializeToString(), so,
                                        providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def reference(model: onnx.ModelProto, feeds: dict) -> list:
    """Outputs of ``model`` on ``feeds`` as onnx.reference.ReferenceEvaluator computes them."""
    from onnx.reference import ReferenceEvaluator

    return list(ReferenceEvaluator(model).run(None, feeds))


#: float32 machine epsilon, 2**-23: twice the unit roundoff u = 2**-24 of one rounded operation.
EPS32 = float(np.finfo(np.float32).eps)

_FLOATS = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)


def _float_only_inputs(model: onnx.ModelProto) -> set[str]:
    """Names of the top-level node inputs whose type constraint at the model's opset takes
    tensor(float) but not tensor(double) (Resize's ``scales``...)."""
    versions = {o.domain or "": o.version for o in model.opset_import}
    names = set()
    for node in model.graph.node:
        domain = node.domain or ""
        schema = onnx.defs.get_schema(node.op_type, versions[domain], domain)
        constraints = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
        for formal, name in zip(schema.inputs, node.input):
            allowed = constraints.get(formal.type_str, [formal.type_str])
            if name and "tensor(float)" in allowed and "tensor(double)" not in allowed:
                names.add(name)
    return names


def _to_double_graph(graph: onnx.GraphProto, keep: set[str]) -> None:
    for vi in [*graph.input, *graph.output, *graph.value_info]:
        t = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and t.elem_type in _FLOATS and vi.name not in keep:
            t.elem_type = onnx.TensorProto.DOUBLE
    for i, init in enumerate(graph.initializer):
        if init.data_type in _FLOATS and init.name not in keep:
            value = numpy_helper.to_array(init).astype(np.float64)
            graph.initializer[i].CopyFrom(numpy_helper.from_array(value, init.name))
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type in _FLOATS:
                value = numpy_helper.to_array(attr.t).astype(np.float64)
                attr.t.CopyFrom(numpy_helper.from_array(value, attr.t.name))
            elif attr.type == onnx.AttributeProto.GRAPH:
                _to_double_graph(attr.g, set())
            elif attr.name == "to" and node.op_type == "Cast" and attr.i in _FLOATS:
                attr.i = onnx.TensorProto.DOUBLE


def reference64(model: onnx.ModelProto, feeds: dict) -> list:
    """The exact outputs of ``model`` on ``feeds``: onnx.reference.ReferenceEvaluator run on a
    copy of the model whose float tensors (graph inputs, outputs, value_info, initializers,
    tensor attributes, Cast targets, in subgraphs too) are DOUBLE, on the feeds cast to float64.

    Float attributes keep their stored (float32) value, which is the value the model defines;
    so do graph inputs that an operator takes as tensor(float) only (Resize's ``scales``): they
    are parameters, not arithmetic. The definition evaluated in float64 is within ~1e-15
    relative of its real-number value, far below float32 rounding, so it serves as the exact
    result. Refused (``ValueError``) where a float-only input is computed inside the graph, and
    (``AssertionError``) where a float output does not come out as float64 (an implementation
    that computes in float32 is no exact oracle). onnx.reference is only an oracle where it
    implements the definition: callers use it for operators it implements completely.
    """
    from onnx.reference import ReferenceEvaluator

    keep = _float_only_inputs(model)
    given = {i.name for i in model.graph.input} | {t.name for t in model.graph.initializer}
    if keep - given:
        raise ValueError(f"{sorted(keep - given)} take float but not double: write the float64 "
                         "formula")
    model64 = onnx.ModelProto()
    model64.CopyFrom(model)
    _to_double_graph(model64.graph, keep)
    feeds64 = {k: (v.astype(np.float64) if isinstance(v, np.ndarray) and v.dtype.kind == "f"
                   and k not in keep else v) for k, v in feeds.items()}
    outs = list(ReferenceEvaluator(model64).run(None, feeds64))
    for i, out in enumerate(outs):
        if isinstance(out, np.ndarray) and out.dtype.kind == "f":
            assert out.dtype == np.float64, f"reference64 output {i} came out {out.dtype}"
    return outs


def bound_ratio(got, exact, *, ulps: float, scale=None) -> float:
    """The largest ``|got - exact| / (ulps * EPS32 * scale)`` over the float elements of ``got``
    (nested lists and dicts of arrays, like :func:`assert_same`); 0 if there are none.

    ``scale`` (a number or an array broadcast to the output) is the magnitude the rounding
    error is proportional to: the sum of the absolute values of the terms an element is
    computed from, or its own absolute value for a relative bound. By default, the largest
    ``|exact|`` of each output (a norm-wise bound).
    """
    if isinstance(exact, list):
        return max([bound_ratio(g, e, ulps=ulps, scale=scale) for g, e in zip(got, exact)],
                   default=0.0)
    if isinstance(exact, dict):
        return max([bound_ratio(got[k], exact[k], ulps=ulps, scale=scale) for k in exact],
                   default=0.0)
    e = np.asarray(exact)
    if e.dtype.kind != "f":
        return 0.0
    g = np.asarray(got).astype(np.float64)
    e = e.astype(np.float64)
    finite = np.isfinite(e)
    if scale is None:
        scale = np.abs(e[finite]).max(initial=0.0)
    bound = ulps * EPS32 * np.broadcast_to(np.asarray(scale, np.float64), e.shape)
    err = np.where(finite, np.abs(g - np.where(finite, e, 0.0)), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(err == 0, 0.0, err / bound)
    return float(np.nan_to_num(ratio, nan=np.inf).max(initial=0.0))


def assert_close_to_exact(got, exact, *, ulps: float, scale=None, path: str = "out") -> None:
    """``got`` (onemodel's float32 outputs) is within ``ulps * EPS32 * scale`` of ``exact``
    (float64, e.g. from :func:`reference64`), elementwise: the caller states ``ulps`` from the
    number of float32 roundings an output goes through (see :func:`bound_ratio` for ``scale``).

    Same structure, shapes and non-float values as :func:`assert_same` (integers and strings
    exactly); a float output must have the dtype of the model's definition (float32 where
    ``exact`` is float64) and NaN or infinity exactly where ``exact`` has them.
    """
    if isinstance(exact, list):
        assert isinstance(got, list) and len(got) == len(exact), \
            f"{path}: {type(got).__name__} of {len(got)}, expected {len(exact)} elements"
        for i, (g, e) in enumerate(zip(got, exact)):
            assert_close_to_exact(g, e, ulps=ulps, scale=scale, path=f"{path}[{i}]")
        return
    if isinstance(exact, dict):
        assert isinstance(got, dict) and set(got) == set(exact), f"{path}: keys differ"
        for k in exact:
            assert_close_to_exact(got[k], exact[k], ulps=ulps, scale=scale, path=f"{path}[{k!r}]")
        return
    e = np.asarray(exact)
    if e.dtype.kind != "f":
        assert_same(got, exact, path=path)
        return
    g = np.asarray(got)
    assert g.shape == e.shape, f"{path}: shape {g.shape}, expected {e.shape}"
    assert g.dtype.kind == "f" and (g.dtype == np.float32 or e.dtype != np.float64), \
        f"{path}: dtype {g.dtype}"
    np.testing.assert_array_equal(np.isfinite(g), np.isfinite(e), err_msg=f"{path}: non-finite")
    ratio = bound_ratio(g, e, ulps=ulps, scale=scale)
    if ratio > 1:
        d = np.abs(g.astype(np.float64) - e)
        i = np.unravel_index(np.nanargmax(np.where(np.isfinite(e), d, 0)), e.shape)
        raise AssertionError(f"{path}: {ratio:.3g} x the bound of {ulps} ulps (at {i}: "
                             f"{g[i]!r}, exact {e[i]!r})")


def assert_same(got, want, rtol: float = 1e-5, atol: float = 1e-6, path: str = "out") -> None:
    """``got`` equals ``want``: same structure (lists, dicts, None), same dtype and shape, values
    within ``rtol`` / ``atol`` for floats, exactly equal otherwise."""
    if want is None:
        assert got is None, f"{path}: expected None, got {type(got).__name__}"
        return
    if isinstance(want, list):
        assert isinstance(got, list), f"{path}: expected a list, got {type(got).__name__}"
        assert len(got) == len(want), f"{path}: {len(got)} elements, expected {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, rtol, atol, f"{path}[{i}]")
        return
    if isinstance(want, dict):
        assert isinstance(got, dict), f"{path}: expected a dict, got {type(got).__name__}"
        assert set(got) == set(want), f"{path}: keys {sorted(got)} != {sorted(want)}"
        for k in want:
            assert_same(got[k], want[k], rtol, atol, f"{path}[{k!r}]")
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{path}: shape {got.shape}, expected {want.shape}"
    if want.dtype == object or want.dtype.kind in "US":
        assert got.tolist() == want.tolist(), f"{path}: {got!r} != {want!r}"
        return
    assert got.dtype == want.dtype, f"{path}: dtype {got.dtype}, expected {want.dtype}"
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=path)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                                   atol=atol, equal_nan=True, err_msg=path)


def assert_outputs(got: list, want: list, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Every output of ``got`` matches ``want`` (see :func:`assert_same`)."""
    assert len(got) == len(want), f"{len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        assert_same(g, w, rtol, atol, f"output {i}")
