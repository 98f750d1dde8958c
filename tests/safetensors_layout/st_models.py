"""Small ONNX models for the safetensors layout tests, built with ``onnx`` (a test oracle)."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onemodel.ir.dtypes import INFO, DataType

_spec = importlib.util.spec_from_file_location(
    "st_external_models", pathlib.Path(__file__).parents[1] / "formats" / "onnx" /
    "external_models.py")
_external_models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_external_models)

#: Every ONNX element type with a raw layout (STRING and UNDEFINED excluded).
RAW_TYPES = [c for c in INFO if c not in (DataType.STRING, DataType.UNDEFINED)]


def all_types_model(seed: int = 3) -> onnx.ModelProto:
    """One initializer ``t_<TYPE>`` of each raw element type, of 5 x 7 elements (35: an odd
    count, so 4-, 2- and 6-bit tensors end in a part-filled octet whose unused bits are zero),
    random octets; a STRING initializer; a small float one (16 bytes)."""
    rng = np.random.default_rng(seed)
    inits = []
    for code in RAW_TYPES:
        info = INFO[code]
        n = info.raw_nbytes(35)
        raw = bytearray(rng.integers(0, 256, n, dtype=np.uint8).tobytes())
        used = (35 * info.bits) % 8
        if used:
            raw[-1] &= (1 << used) - 1
        t = helper.make_tensor(f"t_{info.name}", int(code), [5, 7], bytes(raw), raw=True)
        inits.append(t)
    inits.append(helper.make_tensor("words", TensorProto.STRING, [2], [b"ab", b"c"]))
    inits.append(numpy_helper.from_array(np.arange(4, dtype=np.float32), "small"))
    graph = helper.make_graph([], "all", [], [helper.make_tensor_value_info(
        "small", TensorProto.FLOAT, [4])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=11)


def mlp_model(seed: int = 0, sizes=(48, 40, 24)) -> onnx.ModelProto:
    """The runnable MatMul+Add chain of tests/formats/onnx/external_models.py on ``x``
    [1, sizes[0]] float32 (for onnxruntime); with these sizes the biases' byte sizes (160, 96)
    are not multiples of 64, so alignment needs padding."""
    return _external_models.mlp_model(sizes=sizes, seed=seed)


def mlp_reference(x: np.ndarray, weights: dict) -> np.ndarray:
    """What :func:`mlp_model` computes for ``x`` with ``weights`` (name -> array), in float64."""
    y = x.astype(np.float64)
    i = 0
    while f"w{i}" in weights:
        y = y @ weights[f"w{i}"].astype(np.float64) + weights[f"b{i}"].astype(np.float64)
        i += 1
    return y


def colliding_model() -> onnx.ModelProto:
    """An ``If`` whose two branches each hold an initializer named ``w`` (float32 [8, 8],
    different values), and a main-graph initializer ``w.2`` (the first unique key a naive
    renaming would take)."""
    out = helper.make_tensor_value_info("o", TensorProto.FLOAT, [8, 8])
    branches = []
    for k, name in enumerate(("then", "else")):
        w = numpy_helper.from_array(np.full((8, 8), k + 1, np.float32), "w")
        branches.append(helper.make_graph([helper.make_node("Identity", ["w"], ["o"])], name,
                                          [], [out], initializer=[w]))
    main = numpy_helper.from_array(np.arange(64, dtype=np.float32).reshape(8, 8), "w.2")
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=branches[0],
                          else_branch=branches[1]),
         helper.make_node("Add", ["y", "w.2"], ["z"])], "collide",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [8, 8])], initializer=[main])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
