"""Cast to a float8 FNUZ type across opset 24: +-Inf saturates to +-240 (E4M3FNUZ) at 24 and
later, and is NaN at 19 to 23 (the definitions' tables): converting down is refused unless the
input is a constant without infinities (found by benchmarks/opset.py's coverage)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from opset_models import F, model, run, value

from onemodel.opset_convert import ConversionRefused, convert

E4M3FNUZ = TensorProto.FLOAT8E4M3FNUZ


def _cast(opset, inputs=("x",), inits=()):
    return model([helper.make_node("Cast", list(inputs), ["y"], to=E4M3FNUZ)],
                 [value("x", F, [3])] if "x" in inputs else [],
                 [value("y", E4M3FNUZ, [3])], opset, initializers=inits)


def test_the_evaluator_gives_the_two_definitions_apart():
    x = np.array([np.inf, 1.0, -np.inf], dtype=np.float32)
    at24 = run(_cast(24), {"x": x})[0].astype(np.float64)
    at23 = run(_cast(23), {"x": x})[0].astype(np.float64)
    assert at24.tolist() == [240.0, 1.0, -240.0]
    assert np.isnan(at23[0]) and at23[1] == 1.0 and np.isnan(at23[2])


@pytest.mark.parametrize("target", [23, 19])
def test_down_from_24_is_refused_for_an_input_that_may_be_infinite(target):
    with pytest.raises(ConversionRefused) as e:
        convert(_cast(24), {"": target})
    (path, op, reason), = e.value.refusals
    assert path == "graph.nodes[0]" and op == f"Cast-24 -> {target}"
    assert "+-Inf" in reason and "'x'" in reason


def test_down_from_24_converts_a_constant_without_infinities():
    c = np.array([1.0, 500.0, -3.0], dtype=np.float32)
    m = _cast(24, inputs=("c",), inits={"c": c})
    low = convert(m, {"": 23}).model
    assert run(low, {})[0].astype(np.float64).tolist() == [1.0, 240.0, -3.0]
    assert run(m, {})[0].astype(np.float64).tolist() == [1.0, 240.0, -3.0]


def test_saturate_0_and_other_targets_convert_down():
    m = model([helper.make_node("Cast", ["x"], ["y"], to=E4M3FNUZ, saturate=0)],
              [value("x", F, [3])], [value("y", E4M3FNUZ, [3])], 24)
    convert(m, {"": 23})
    m = model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E4M3FN)],
              [value("x", F, [3])], [value("y", TensorProto.FLOAT8E4M3FN, [3])], 24)
    convert(m, {"": 23})
