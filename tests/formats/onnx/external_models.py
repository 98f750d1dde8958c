"""Small ONNX models with external data for the tests of onemodel.formats.onnx.external*/writer.

Models are built with the ``onnx`` package (a test oracle only) and saved with its own external
data writer, so what is read is what the most common producer writes.
"""

from __future__ import annotations

import os
import pathlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onemodel.formats.onnx import decode_model
from onemodel.ir import iter_tensors


def rich_model() -> onnx.ModelProto:
    """A model with tensors everywhere Clause 13 allows external data: initializers of several
    element types (float32, float16, int8, int64, bool, int4), a small one, a Constant node's
    tensor attribute, an ``If`` whose branches hold initializers, and a local function whose node
    has a tensor attribute. Values are fixed (seeded)."""
    rng = np.random.default_rng(7)
    inits = [
        numpy_helper.from_array(rng.standard_normal((32, 48)).astype(np.float32), "w_f32"),
        numpy_helper.from_array(rng.standard_normal((40, 33)).astype(np.float16), "w_f16"),
        numpy_helper.from_array(rng.integers(-128, 127, (2000,), dtype=np.int8), "w_i8"),
        numpy_helper.from_array(rng.integers(-9, 9, (300,), dtype=np.int64), "w_i64"),
        numpy_helper.from_array(rng.integers(0, 2, (1500,)).astype(bool), "w_bool"),
        numpy_helper.from_array(np.arange(6, dtype=np.float32), "small"),
        helper.make_tensor("w_i4", TensorProto.INT4, [3001],
                           rng.integers(-8, 7, 3001).astype(np.int8).tolist()),
    ]
    const = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(
        rng.standard_normal((20, 30)).astype(np.float32), "const_value"))
    then_init = numpy_helper.from_array(rng.standard_normal((25, 25)).astype(np.float32), "then_w")
    else_init = numpy_helper.from_array(rng.standard_normal((25, 25)).astype(np.float32), "else_w")
    out = helper.make_tensor_value_info("o", TensorProto.FLOAT, [25, 25])
    then_g = helper.make_graph([helper.make_node("Identity", ["then_w"], ["o"])], "then", [],
                               [out], initializer=[then_init])
    else_g = helper.make_graph([helper.make_node("Identity", ["else_w"], ["o"])], "else", [],
                               [out], initializer=[else_init])
    nodes = [const,
             helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g),
             helper.make_node("Fn", ["c"], ["z"], domain="local")]
    fn_const = helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(
        rng.standard_normal((16, 20)).astype(np.float32), "fn_value"))
    fn = helper.make_function("local", "Fn", ["a"], ["b"],
                              [fn_const, helper.make_node("Add", ["a", "k"], ["b"])],
                              [helper.make_opsetid("", 21)])
    graph = helper.make_graph(
        nodes, "rich", [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [25, 25]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                   helper.make_opsetid("local", 1)],
                             functions=[fn], ir_version=10)


def mlp_model(sizes=(64, 64, 64), seed=0) -> onnx.ModelProto:
    """A runnable MatMul+Add chain on input ``x`` [1, sizes[0]] (float32), for onnxruntime."""
    rng = np.random.default_rng(seed)
    inits, nodes, cur = [], [], "x"
    for i in range(len(sizes) - 1):
        inits.append(numpy_helper.from_array(
            rng.standard_normal((sizes[i], sizes[i + 1])).astype(np.float32), f"w{i}"))
        inits.append(numpy_helper.from_array(
            rng.standard_normal((sizes[i + 1],)).astype(np.float32), f"b{i}"))
        nodes += [helper.make_node("MatMul", [cur, f"w{i}"], [f"m{i}"]),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"h{i}"])]
        cur = f"h{i}"
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, sizes[0]])],
        [helper.make_tensor_value_info(cur, TensorProto.FLOAT, [1, sizes[-1]])],
        initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def save_external(model: onnx.ModelProto, path, **kw) -> pathlib.Path:
    """``onnx.save_model(..., save_as_external_data=True, **kw)`` into ``path``; the path."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(path), save_as_external_data=True, **kw)
    return path


def oracle_tensors(path) -> list[bytes]:
    """Raw bytes of every tensor of the model at ``path``, in iter_tensors order, as
    ``onnx.load(load_external_data=True)`` gives them (inline after loading)."""
    proto = onnx.load(str(path), load_external_data=True)
    inline = decode_model(proto.SerializeToString())
    return [t.tobytes() for _, t in iter_tensors(inline)]


def external_tensor(name: str, dims, entries, data_type=TensorProto.FLOAT) -> TensorProto:
    """A TensorProto with ``data_location`` EXTERNAL and the given ``(key, value)`` entries,
    written as they are (duplicates and unknown keys included)."""
    t = TensorProto(name=name, data_type=data_type, dims=list(dims))
    t.data_location = TensorProto.EXTERNAL
    for k, v in entries:
        e = t.external_data.add()
        e.key = k
        e.value = v
    return t


def model_with(t: TensorProto, where: str = "initializer") -> onnx.ModelProto:
    """A model holding tensor ``t`` at ``where``: ``initializer``, ``constant`` (a Constant
    node's attribute), ``subgraph`` (an initializer of an If branch), ``sparse`` (the values of
    a sparse initializer, with inline indices) or ``function`` (a Constant in a local
    function)."""
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    opsets = [helper.make_opsetid("", 21)]
    functions = []
    inits, sparse, inputs = [], [], []
    if where == "initializer":
        inits = [t]
        nodes = [helper.make_node("Identity", [t.name], ["y"])]
    elif where == "constant":
        nodes = [helper.make_node("Constant", [], ["y"], value=t)]
    elif where == "subgraph":
        branch = helper.make_graph([helper.make_node("Identity", [t.name], ["o"])], "b", [],
                                   [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)],
                                   initializer=[t])
        nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=branch, else_branch=branch)]
        inputs = [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])]
    elif where == "sparse":
        n = int(np.prod(t.dims))
        idx = numpy_helper.from_array(np.arange(n, dtype=np.int64), "idx")
        sparse = [helper.make_sparse_tensor(t, idx, [n * 2])]
        nodes = [helper.make_node("Identity", [t.name], ["y"])]
    elif where == "function":
        body = [helper.make_node("Constant", [], ["b"], value=t)]
        functions = [helper.make_function("local", "Fn", [], ["b"], body, opsets)]
        nodes = [helper.make_node("Fn", [], ["y"], domain="local")]
        opsets = opsets + [helper.make_opsetid("local", 1)]
    else:
        raise ValueError(where)
    graph = helper.make_graph(nodes, "g", inputs, [out], initializer=inits,
                              sparse_initializer=sparse)
    return helper.make_model(graph, opset_imports=opsets, functions=functions, ir_version=10)


def write_model(model: onnx.ModelProto, path) -> pathlib.Path:
    """The model's bytes at ``path`` (no external data is written; references stay as built)."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model.SerializeToString())
    return path


def files_of(directory) -> dict[str, bytes]:
    """``{relative path: bytes}`` of every regular file under ``directory``."""
    out = {}
    for root, _, names in os.walk(directory):
        for n in names:
            p = pathlib.Path(root) / n
            out[str(p.relative_to(directory))] = p.read_bytes()
    return out
