"""A generated ~1 GB ONNX model for the sharding test (test_st_large.py) and
benchmarks/safetensors.py (which loads this file by its path): a few large float32 and float16
initializers and small ones, in one external data file written chunk by chunk (never a whole
tensor in memory), built with onemodel's own records and encoder.

Every element's value is a function of the tensor's number ``i`` and the element's flat index
``j`` (:func:`values`), exact in its type, so a reader can check any element, and the SHA-256 of
each tensor's raw bytes is computed while writing them.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np

from onemodel.formats.onnx.wire_encode import encode
from onemodel.ir import (
    EXTERNAL,
    Dimension,
    Graph,
    Model,
    Node,
    OperatorSetId,
    Shape,
    StringStringEntry,
    Tensor,
    TensorType,
    Type,
    ValueInfo,
)
from onemodel.ir.dtypes import DataType

#: ``(name, ONNX element type, dims)`` of the generated model, in order: 1,003,847,854 bytes of
#: tensor data; sizes that are not multiples of 64 (the small ones) make padding entries.
BIG_SPECS = [
    ("model.embed_tokens.weight", DataType.FLOAT, [8192, 8192]),      # 268,435,456 bytes
    ("model.norm.bias", DataType.FLOAT, [8191]),                      # 32,764
    ("model.layers.0.mlp.weight", DataType.FLOAT16, [8192, 16384]),   # 268,435,456
    ("model.layers.0.mlp.bias", DataType.FLOAT16, [77]),              # 154
    ("model.layers.1.mlp.weight", DataType.FLOAT, [65536, 1000]),     # 262,144,000
    ("lm_head.weight", DataType.FLOAT, [50000, 1024]),                # 204,800,000
    ("step", DataType.INT64, [3]),                                    # 24
]

NUMPY = {DataType.FLOAT: np.float32, DataType.FLOAT16: np.float16, DataType.INT64: np.int64}

_CHUNK = 1 << 24  # elements generated at a time


def count(dims) -> int:
    """Number of elements of ``dims``."""
    n = 1
    for d in dims:
        n *= int(d)
    return n


def nbytes(code: int, dims) -> int:
    """Raw bytes of a tensor of element type ``code`` (FLOAT, FLOAT16, INT64) and ``dims``."""
    return count(dims) * np.dtype(NUMPY[code]).itemsize


def values(i: int, code: int, j: np.ndarray) -> np.ndarray:
    """The values of tensor number ``i`` (element type ``code``) at flat indices ``j`` (an
    int64 array): FLOAT ``(j % 4093) / 4 + i``, FLOAT16 ``(j % 1021) / 2 + i`` (below 1024 in
    steps of 1/2: exact in float16), INT64 ``7 j + i``."""
    if code == DataType.FLOAT:
        return ((j % 4093) * 0.25 + i).astype(np.float32)
    if code == DataType.FLOAT16:
        return ((j % 1021) * 0.5 + i).astype(np.float16)
    return (j * 7 + i).astype(np.int64)


def write_big_model(directory, specs=BIG_SPECS, name: str = "big.onnx") -> tuple[str, dict]:
    """Write ``<directory>/<name>`` (an Identity node per initializer, outputs ``o<i>``) and its
    external data file ``<name>.data`` (the tensors one after the other, no gaps).

    Returns ``(model path, {tensor name: SHA-256 hex of its raw bytes})``."""
    directory = os.fspath(directory)
    data = name + ".data"
    digests = {}
    tensors = []
    offset = 0
    with open(os.path.join(directory, data), "wb") as f:
        for i, (tname, code, dims) in enumerate(specs):
            h = hashlib.sha256()
            n = count(dims)
            for start in range(0, n, _CHUNK):
                chunk = values(i, code, np.arange(start, min(n, start + _CHUNK),
                                                  dtype=np.int64))
                h.update(chunk.data)
                f.write(chunk.data)
            size = nbytes(code, dims)
            digests[tname] = h.hexdigest()
            ref = [StringStringEntry(key=k, value=v) for k, v in (
                ("location", data), ("offset", str(offset)), ("length", str(size)))]
            tensors.append(Tensor(name=tname, data_type=int(code), dims=list(dims),
                                  data_location=EXTERNAL, external_data=ref))
            offset += size

    def typed(vname, code, dims):
        shape = Shape(dims=[Dimension(dim_value=int(d)) for d in dims])
        return ValueInfo(name=vname, type=Type(tensor_type=TensorType(elem_type=int(code),
                                                                      shape=shape)))

    graph = Graph(name="big", initializers=tensors,
                  nodes=[Node(op_type="Identity", name=f"id{i}", inputs=[t],
                              outputs=[f"o{i}"]) for i, (t, _, _) in enumerate(specs)],
                  outputs=[typed(f"o{i}", c, d) for i, (_, c, d) in enumerate(specs)])
    model = Model(ir_version=10, opset_imports=[OperatorSetId(domain="", version=21)],
                  graph=graph)
    path = os.path.join(directory, name)
    with open(path, "wb") as f:
        f.write(encode(model))
    return path, digests
