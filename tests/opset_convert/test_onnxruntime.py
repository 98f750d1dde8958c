"""Real exports converted to opsets 11, 13, 17, 21 and the latest onnxruntime runs, and run by
onnxruntime: the testdata CNN, detector and transformer exports (every testdata/models/*.onnx),
the scikit-learn pipeline (ai.onnx.ml, ZipMap) and a quantized QDQ model built here
(QuantizeLinear/DequantizeLinear around Conv and MatMul). Each converted model gives the
original's outputs within the Clause 11.5 tolerances of float32 (rtol 1e-5, atol 1e-6 here:
the conversions change no arithmetic, onnxruntime may pick other kernels per opset); a
conversion the test expects refused is asserted refused, with its reason."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onemodel
from onemodel.evaluate.inputs import random_inputs
from onemodel.formats.onnx import decode_model, encode_model
from onemodel.opset_convert import ConversionRefused
from onemodel.opset_convert.engine import latest

MODELS = Path(__file__).resolve().parents[2] / "testdata" / "models"
#: the ai.onnx opsets every model is converted to, with the latest onnxruntime runs
TARGETS = (11, 13, 17, 21)
#: dimension variables: transformer_legacy.onnx runs only at seq 16 (testdata/README.md)
DIMS = {"batch": 1, "seq": 16}


def _ort_run(m, feeds):
    import onnxruntime as ort

    s = ort.InferenceSession(encode_model(m), providers=["CPUExecutionProvider"])
    names = [o.name for o in m.graph.outputs]
    return dict(zip(names, s.run(names, feeds)))


def ort_latest(m) -> int:
    """The greatest ai.onnx opset (up to onemodel's latest) whose definitions of the operators
    of ``m`` the installed onnxruntime has CPU kernels for: for each operator it has kernels
    of, the definition in force there is one a kernel starts at (onnxruntime 1.32 knows
    QuantizeLinear-28 but has no kernel for it: its kernels start at 25)."""
    from onnxruntime.capi import _pybind_state as C

    from onemodel import schemas

    starts: dict = {}
    for k in C.get_all_opkernel_def():
        if k.domain == "" and k.provider == "CPUExecutionProvider":
            starts.setdefault(k.op_name, set()).add(k.version_range[0])
    ops = {n.op_type for n in m.graph.nodes if (n.domain or "") in ("", "ai.onnx")}
    for v in range(latest(""), 11, -1):
        if all(schemas.get(op, "", v) is None or schemas.get(op, "", v).since_version
               in starts[op] for op in ops if op in starts):
            return v
    return 11


def qdq_model(per_channel: bool):
    """A quantized (QDQ) CNN at opset 13, as onnxruntime's quantizer writes one: the input
    quantized to uint8 and dequantized, a Conv whose int8 weights are dequantized (per tensor,
    or per output channel with ``axis=0``), Relu, the activations quantized and dequantized
    again, Flatten, and a MatMul of dequantized int8 weights."""
    rng = np.random.default_rng(11)
    wc = rng.integers(-100, 100, (4, 3, 3, 3), dtype=np.int8)
    wm = rng.integers(-100, 100, (4 * 6 * 6, 5), dtype=np.int8)
    f = np.float32
    inits = {"s_x": np.array(1 / 128, f), "z_x": np.array(128, np.uint8),
             "w_c": wc, "s_c": (np.array([0.01, 0.02, 0.015, 0.005], f) if per_channel
                                else np.array(0.01, f)),
             "z_c": np.zeros(4, np.int8) if per_channel else np.array(0, np.int8),
             "s_a": np.array(0.05, f), "z_a": np.array(0, np.uint8),
             "w_m": wm, "s_m": np.array(0.003, f), "z_m": np.array(0, np.int8)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s_x", "z_x"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s_x", "z_x"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w_c", "s_c", "z_c"], ["wcd"],
                              **({"axis": 0} if per_channel else {})),
             helper.make_node("Conv", ["xd", "wcd"], ["c"]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "s_a", "z_a"], ["rq"]),
             helper.make_node("DequantizeLinear", ["rq", "s_a", "z_a"], ["rd"]),
             helper.make_node("Flatten", ["rd"], ["fl"]),
             helper.make_node("DequantizeLinear", ["w_m", "s_m", "z_m"], ["wmd"]),
             helper.make_node("MatMul", ["fl", "wmd"], ["y"])]
    g = helper.make_graph(nodes, "qdq",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
                          initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)
    return decode_model(m.SerializeToString())


#: model -> {target: why it is refused}; every other target converts and matches
REFUSED = {
    # per-axis DequantizeLinear (axis) was introduced at 13: opset 11 has per-tensor only
    "qdq_per_channel": {11: "graph.nodes[2]: DequantizeLinear-13 -> 11: the scale 's_c' "
                            "holds 4 values (per-axis quantization has no equivalent before "
                            "opset 13)"},
}
EXPORTS = sorted(p.name for p in MODELS.glob("*.onnx"))


def _model(name):
    if name.startswith("qdq_"):
        return qdq_model(per_channel=name == "qdq_per_channel")
    return onemodel.load(MODELS / name)


@pytest.mark.parametrize("name", EXPORTS + ["qdq_per_tensor", "qdq_per_channel"])
def test_converted_models_run_in_onnxruntime_and_match(name):
    m = _model(name)
    params = {d for vi in m.graph.inputs if vi.type is not None and vi.type.shape is not None
              for d in vi.type.shape.extents if isinstance(d, str)}
    feeds = random_inputs(m, seed=4, dims={p: DIMS.get(p, 1) for p in params})
    want = _ort_run(m, feeds)
    refused = REFUSED.get(name, {})
    done = []
    targets = sorted({*TARGETS, ort_latest(m)})
    assert targets[-1] >= 21
    for v in targets:
        if v in refused:
            with pytest.raises(ConversionRefused) as e:
                onemodel.convert_opset(m, {"": v})
            assert refused[v] in str(e.value), str(e.value)
            continue
        c = onemodel.convert_opset(m, {"": v})
        assert c.opset_version("") == v
        got = _ort_run(c, feeds)
        for k, w in want.items():
            if isinstance(w, np.ndarray) and w.dtype.kind == "f":
                np.testing.assert_allclose(got[k], w, rtol=1e-5, atol=1e-6, err_msg=f"{k} @{v}")
            else:
                assert str(got[k]) == str(w), (k, v)
        done.append(v)
    assert len(done) == len(targets) - len(refused)


def test_the_sklearn_pipeline_converts_its_ml_domain_too():
    """The scikit-learn pipeline (ai.onnx.ml 1, ZipMap) converted to ai.onnx.ml 3 together with
    each ai.onnx target: onnxruntime gives the same probabilities and labels."""
    m = onemodel.load(MODELS / "sklearn_pipeline_zipmap.onnx")
    feeds = random_inputs(m, seed=5)
    want = _ort_run(m, feeds)
    for v in TARGETS:
        c = onemodel.convert_opset(m, {"": v, "ai.onnx.ml": 3})
        assert (c.opset_version(""), c.opset_version("ai.onnx.ml")) == (v, 3)
        got = _ort_run(c, feeds)
        for k, w in want.items():
            assert str(got[k]) == str(w), (k, v)
