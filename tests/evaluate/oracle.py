"""Test helper for the kernel tests: build one-node ONNX models, run them through onemodel's
evaluator and through the oracles (onnxruntime, onnx.reference), compare the results.

Test helper only: it imports ``onnx`` and ``onnxruntime``, which nothing under ``onemodel/`` may.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

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


#: The ``relies_on`` of a float comparison with onnxruntime (see :func:`ort`), with ``{what}``
#: the operations: both engines round each float32 operation once, in their own order.
F32_ORACLE = ("float32 arithmetic rounded per operation, within a few ulps per accumulated term "
              "of the exact value on any CPU kernel ({what}); rtol/atol bound that rounding")


def ort(model: onnx.ModelProto, feeds: dict, *, relies_on: str) -> list:
    """Outputs of ``model`` on ``feeds`` as onnxruntime (CPU) computes them.

    onnxruntime picks its kernels by CPU (AVX2, AVX-512, VNNI...), so it is an oracle only where
    its result does not depend on that choice: ``relies_on`` (required) names the behaviour the
    caller relies on and why it holds on any x86-64 CPU, in one of two classes:

    * exact by construction: data movement (gather, copy, concatenation, control flow that only
      routes values), comparisons and selections, integer arithmetic that cannot overflow or
      saturate, float arithmetic whose every intermediate is exactly representable (products of
      small integers by powers of two);
    * float32 arithmetic rounded once per operation: onnxruntime's result is within a few ulps
      times the number of accumulated terms of the exact value, and so is onemodel's; the
      caller's ``rtol``/``atol`` is that bound (never bit-equality).

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
