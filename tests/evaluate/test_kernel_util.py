"""Helpers shared by the kernel modules (onemodel/evaluate/kernels/_util.py): axis attributes
and the float32 computation of narrow floats, and the errors kernels raise through them."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

from onemodel.errors import EvaluationError
from onemodel.evaluate import run
from onemodel.evaluate.kernels._util import axis_index, back, wide, wide_all
from onemodel.formats.onnx import decode_model


def test_axis_index_counts_negative_axes_from_the_end_and_refuses_the_rest():
    assert [axis_index(a, 3) for a in (-3, -2, -1, 0, 1, 2)] == [0, 1, 2, 0, 1, 2]
    for a, rank in ((3, 3), (-4, 3), (0, 0), (-1, 0)):
        with pytest.raises(EvaluationError) as e:
            axis_index(a, rank, "Gather axis")
        assert e.value.message == f"Gather axis {a} is out of range for rank {rank}"


def test_wide_computes_narrow_floats_in_float32_and_keeps_the_others():
    for dt in (np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn):
        w, back_to = wide(np.ones(2, dt))
        assert w.dtype == np.float32 and back_to == np.dtype(dt)
    for dt in (np.float32, np.float64, np.int8, np.uint64, np.bool_, np.complex64):
        x = np.ones(2, dt)
        w, back_to = wide(x)
        assert w is x and back_to == np.dtype(dt)
    (a, b), dt = wide_all(np.ones(2, np.float16), np.full(2, 3, np.float16))
    assert (a.dtype, b.dtype, dt) == (np.float32, np.float32, np.float16)
    y = np.array([1 / 3], np.float32)
    assert back(y, np.dtype(np.float16)).tobytes() == np.float16(1 / 3).tobytes()
    assert back(y, np.dtype(np.float32)) is y


@pytest.mark.parametrize("op, attrs, shape", [
    ("Gather", {"axis": 2}, [2, 2]),
    ("Squeeze", {}, []),  # axes [0] of a scalar: no such axis
    ("LayerNormalization", {"axis": -3}, [2, 2]),
    ("Concat", {"axis": -3}, [2, 2]),
])
def test_kernels_refuse_an_axis_outside_the_rank_with_the_node_path(op, attrs, shape):
    x = np.ones(shape, np.float32)
    feeds = {"x": x}
    inputs = ["x"]
    inits = []
    if op == "Gather":
        inputs.append("i")
        inits.append(helper.make_tensor("i", TP.INT64, [1], [0]))
    elif op == "Squeeze":
        inputs.append("a")
        inits.append(helper.make_tensor("a", TP.INT64, [1], [0]))
    elif op == "LayerNormalization":
        inputs.append("s")
        inits.append(helper.make_tensor("s", TP.FLOAT, [2], [1, 1]))
    g = helper.make_graph([helper.make_node(op, inputs, ["y"], **attrs)], "g",
                          [helper.make_tensor_value_info("x", TP.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TP.FLOAT, None)], initializer=inits)
    m = decode_model(helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 21)]).SerializeToString())
    with pytest.raises(EvaluationError, match="out of range for rank") as e:
        run(m, feeds)
    assert e.value.path.startswith("graph.nodes[0]")
