"""Small models for the opset conversion tests, built with onnx.helper (a test oracle) and
decoded by onemodel; and the round trip every adapter test makes: convert, check, run."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import onemodel
from onemodel.evaluate import Session
from onemodel.formats.onnx import decode_model
from onemodel.opset_convert import convert

F, I64, F64, I8 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.DOUBLE, TensorProto.INT8


def value(name, elem=F, shape=None):
    """A graph input or output of element type ``elem`` (float by default)."""
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, opset, initializers=(), ml=None, functions=()):
    """An onemodel Model of one graph importing ai.onnx ``opset`` (and ai.onnx.ml ``ml``)."""
    g = helper.make_graph(nodes, "g", inputs, outputs,
                          initializer=[numpy_helper.from_array(v, k)
                                       for k, v in dict(initializers).items()])
    imports = [helper.make_opsetid("", opset)]
    if ml is not None:
        imports.append(helper.make_opsetid("ai.onnx.ml", ml))
    m = helper.make_model(g, opset_imports=imports, functions=list(functions),
                          ir_version=10)
    return decode_model(m.SerializeToString())


def run(m, feeds: dict) -> list:
    """The graph outputs of ``m`` on ``feeds``, in order."""
    names = [o.name for o in m.graph.outputs]
    got = Session(m).run(feeds, names)
    return [got[n] for n in names]


def clean(m) -> None:
    """``check`` finds no error in ``m``."""
    report = onemodel.check(m)
    errors = [f for f in report.findings if f.severity == "error"]
    assert not errors, [str(f) for f in errors]


def versions_of(m) -> dict:
    return {o.domain or "": o.version for o in m.opset_imports}


def through(m, opsets, feeds, want, *, rtol=0.0, atol=0.0):
    """Convert ``m`` to each opset of ``opsets`` in turn (each from the previous result), and
    check each result: ``check`` clean, the imports and IR version set, and its outputs on
    ``feeds`` equal to ``want`` (exactly, or within rtol/atol of the float64 values).
    Returns the last model."""
    for v in opsets:
        m = convert(m, {"": v}).model
        assert versions_of(m)[""] == v
        clean(m)
        for got, w in zip(run(m, feeds), want):
            if rtol or atol:
                np.testing.assert_allclose(got.astype(np.float64), w, rtol=rtol, atol=atol)
            else:
                assert got.dtype == w.dtype and got.shape == w.shape, (got, w)
                np.testing.assert_array_equal(got, w)
    return m


def ops(m) -> list:
    return [n.op_type for n in m.graph.nodes]
