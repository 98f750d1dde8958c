"""Every model in testdata/models run by onemodel's evaluator: it matches onnxruntime within
tolerance, ONNX -> OneModel -> run is bit-identical to running the .onnx, and a model with an
operator of a custom domain is refused before any computation, naming the operator."""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import pytest
from oracle_releases import NO_ONNXRUNTIME

import onemodel
from onemodel.errors import UnsupportedError
from onemodel.evaluate import Session, random_inputs, register_kernel, unregister_kernel
from onemodel.evaluate.inputs import symbolic_dims
from onemodel.formats.onnx import decode_model

onnxruntime = pytest.importorskip("onnxruntime", reason=NO_ONNXRUNTIME)

MODELS = pathlib.Path(__file__).resolve().parents[2] / "testdata" / "models"
ALL = sorted(str(p.relative_to(MODELS)) for p in MODELS.rglob("*.onnx"))

#: Dimension variables of the models' inputs. transformer_legacy.onnx runs only at seq 16 (the
#: exporter froze the traced length, see testdata/README.md).
DIMS = {"batch": 3, "seq": 16}
#: Extent used for a dimension with neither dim_value nor dim_param.
UNNAMED = 7
#: onnxruntime fuses and reorders float32 arithmetic; what testdata/make_models.py allows too.
RTOL, ATOL = 1e-4, 1e-5


def feeds_for(model, seed: int = 0) -> dict:
    """Deterministic inputs: ``random_inputs`` with the ``DIMS`` the model has; an input with
    an unnamed dim gets ``UNNAMED`` there (``random_inputs`` would make it 1), by ``shapes``."""
    named = symbolic_dims(model)
    dims = {k: v for k, v in DIMS.items() if k in named}
    shapes = {}
    for vi in model.graph.inputs:
        t = vi.type.value if vi.type is not None and vi.type.kind == "tensor" else None
        if t is None or t.shape is None or vi.name in model.graph.initializer_map():
            continue
        declared = t.shape.values
        if any(d is None for d in declared):
            shapes[vi.name] = tuple(UNNAMED if d is None else dims.get(d, 1)
                                    if isinstance(d, str) else d for d in declared)
    return random_inputs(model, seed=seed, dims=dims, shapes=shapes)


def _ort(path: pathlib.Path, feeds: dict) -> dict:
    """onnxruntime's outputs. Relies on: float32 Conv, MatMul, Gemm, attention and normalization
    kernels that round each operation once (in their own order and fusions, on any CPU), so
    both engines are within RTOL/ATOL of the exact value for these small models; the models
    have no u8*s8 integer kernels (whose AVX2 path saturates) and no quantized operators."""
    so = onnxruntime.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    sess = onnxruntime.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def _close(got, want, path: str) -> None:
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            _close(g, w, f"{path}[{i}]")
    elif isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), path
        for k in want:
            _close(got[k], want[k], f"{path}[{k!r}]")
    elif isinstance(want, float):  # map values (ZipMap) are Python floats in both
        assert isinstance(got, (float, np.floating)), (path, type(got))
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=path)
    else:
        g, w = np.asarray(got), np.asarray(want)
        assert g.shape == w.shape and g.dtype == w.dtype, (path, g.shape, g.dtype, w.shape,
                                                           w.dtype)
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=path)
        else:
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=path)


def _bits(a, b, path: str) -> None:
    if isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _bits(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), path
        for k in a:
            _bits(a[k], b[k], f"{path}[{k!r}]")
    else:
        x, y = np.asarray(a), np.asarray(b)
        assert x.dtype == y.dtype and x.shape == y.shape, path
        assert x.tobytes() == y.tobytes(), f"{path}: not bit-identical"


def test_every_model_is_covered():
    assert {"cnn_dynamo.onnx", "cnn_legacy.onnx", "transformer_dynamo.onnx",
            "transformer_legacy.onnx", "sklearn_pipeline_zipmap.onnx",
            "external/mlp_dynamo.onnx"} <= set(ALL)


@pytest.mark.parametrize("name", ALL)
def test_model_matches_onnxruntime(name):
    path = MODELS / name
    with onemodel.load(path) as model:  # resolves external data next to the file
        feeds = feeds_for(model)
        ours = Session(model).run(feeds)
        theirs = _ort(path, feeds)
        assert list(ours) == list(theirs)
        for k in theirs:
            _close(ours[k], theirs[k], f"{name}:{k}")


@pytest.mark.parametrize("name", ALL)
def test_onemodel_conversion_runs_bit_identical(name, tmp_path):
    path = MODELS / name
    with onemodel.load(path) as model:
        feeds = feeds_for(model, seed=1)
        first = Session(model).run(feeds)
        onemodel.save(model, tmp_path / "m.onemodel")
    with onemodel.load(tmp_path / "m.onemodel") as back:
        again = Session(back).run(feeds)
    assert list(first) == list(again)
    for k in first:
        _bits(first[k], again[k], f"{name}:{k}")


def test_two_runs_of_one_session_are_bit_identical():
    with onemodel.load(MODELS / "transformer_dynamo.onnx") as model:
        session = Session(model)
        feeds = feeds_for(model, seed=2)
        a, b = session.run(feeds), session.run(feeds)
    _bits(a["logits"], b["logits"], "logits")


def _with_custom_node(path: pathlib.Path) -> onnx.ModelProto:
    proto = onnx.load(str(path))
    out = proto.graph.output[0].name
    proto.graph.node.append(onnx.helper.make_node("Mystery", [out], ["mystery_out"],
                                                  domain="com.example.ops"))
    proto.graph.output[0].name = "mystery_out"
    proto.opset_import.append(onnx.helper.make_opsetid("com.example.ops", 3))
    return proto


def test_custom_domain_node_is_refused_before_any_computation():
    calls = []

    def counting_relu(ctx, x):
        calls.append(x.shape)
        return np.maximum(x, np.zeros((), x.dtype))

    register_kernel("", "Relu", 1, counting_relu)
    try:
        plain = decode_model((MODELS / "cnn_legacy.onnx").read_bytes())
        Session(plain).run(feeds_for(plain))
        assert calls, "the counting kernel did not run: it could not prove anything"
        calls.clear()
        model = decode_model(_with_custom_node(MODELS / "cnn_legacy.onnx").SerializeToString())
        with pytest.raises(UnsupportedError) as e:
            Session(model).run(feeds_for(model))
        assert "(com.example.ops, Mystery, 3)" in str(e.value)
        assert calls == []
    finally:
        unregister_kernel("", "Relu", 1)


def test_custom_domain_node_runs_with_a_user_kernel():
    model = decode_model(_with_custom_node(MODELS / "cnn_legacy.onnx").SerializeToString())
    register_kernel("com.example.ops", "Mystery", 1, lambda ctx, x: x * 2)
    try:
        feeds = feeds_for(model)
        got = Session(model).run(feeds)["mystery_out"]
    finally:
        unregister_kernel("com.example.ops", "Mystery")
    plain = decode_model((MODELS / "cnn_legacy.onnx").read_bytes())
    np.testing.assert_array_equal(got, Session(plain).run(feeds)["logits"] * 2)
