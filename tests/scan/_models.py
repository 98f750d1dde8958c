"""Small generated ONNX models for the scan tests (tests/scan/_fleet.py) and benchmarks/scan.py:
valid models varied in operator, opset, producer and weight size, the same bytes on every run.
The ``onnx`` package is the generator (a test oracle, never a runtime import of onemodel)."""

from __future__ import annotations

_OPS = ("Add", "Mul", "Sub", "MatMul")
_PRODUCERS = ("trainer-a", "exporter-b", "quantizer-c")


def make_model(i: int, weight_bytes: int = 16 * 1024, layers: int = 1) -> bytes:
    """The ``i``-th model of the fleet: ``y = op(x, w)`` then Relu, ``w`` a float32 initializer
    of about ``weight_bytes`` bytes (rows of 64 values, the count varying with ``i``), opset 13
    to 21, one of three producers. With ``layers`` > 1, ``layers`` such blocks one after the
    other (``op`` Add, Mul or Sub: ``y_k = Relu(op(y_(k-1), w_k))``), the weight bytes split
    among them: 2 x ``layers`` nodes, ``layers`` initializers. The same bytes for the same
    arguments."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    op = _OPS[i % len(_OPS)]
    if layers > 1 and op == "MatMul":
        op = "Add"
    rows = max(1, weight_bytes // (256 * layers) + (i % 7) - 3)
    rng = np.random.default_rng(i)
    weights = [rng.standard_normal((rows, 64), dtype=np.float32) for _ in range(layers)]
    x_shape = [rows, rows] if op == "MatMul" else [rows, 64]
    nodes, prev = [], "x"
    for k in range(layers):
        w, t, y = ("w", "t", "y") if layers == 1 else (f"w{k}", f"t{k}", f"y{k}")
        nodes += [helper.make_node(op, [prev, w], [t]), helper.make_node("Relu", [t], [y])]
        prev = y
    graph = helper.make_graph(
        nodes, f"g{i}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [rows, 64])],
        [numpy_helper.from_array(w, "w" if layers == 1 else f"w{k}")
         for k, w in enumerate(weights)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13 + i % 9)],
                              producer_name=_PRODUCERS[i % len(_PRODUCERS)],
                              producer_version=f"1.{i % 4}")
    model.ir_version = 8
    return model.SerializeToString()


def make_models(n: int, weight_bytes: int = 16 * 1024, layers: int = 1) -> dict[str, bytes]:
    """``{relative path: bytes}`` of ``n`` models, ten to a folder (``run-3/model-0042.onnx``)."""
    return {f"run-{i % 10}/model-{i:04d}.onnx": make_model(i, weight_bytes, layers)
            for i in range(n)}
