"""Small ONNX models for the check tests, one defect each (built with onnx.helper)."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper


def vi(name, typed=True):
    if not typed:
        v = onnx.ValueInfoProto()
        v.name = name
        return v
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [2])


def model(nodes=None, inputs=("x",), outputs=("y",), initializers=(), opsets=(("", 17),),
          ir_version=8, name="g", **kw):
    nodes = nodes if nodes is not None else [helper.make_node("Relu", ["x"], ["y"])]
    g = helper.make_graph(nodes, name, [vi(i) for i in inputs], [vi(o) for o in outputs],
                          initializer=list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets], **kw)
    m.ir_version = ir_version
    return m


def save(tmp_path, m, name="m.onnx"):
    p = tmp_path / name
    p.write_bytes(m.SerializeToString())
    return str(p)
