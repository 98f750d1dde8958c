"""Real onnxruntime transformer-tool outputs run by onemodel: the tiny Hugging Face BERT and
GPT-2 exports of testdata/models (testdata/make_hf_models.py) put through
``onnxruntime.transformers.optimizer.optimize_model``, ``onnxruntime.quantization.
quantize_dynamic``, ``MatMulNBitsQuantizer`` (4 bits, block 32, symmetric and asymmetric) and
onnxruntime's own graph optimizer (``SessionOptions.optimized_model_filepath`` at
ORT_ENABLE_EXTENDED, which adds its CPU fusions: FusedGemm, FusedMatMul, Gelu,
DynamicQuantizeMatMul, MatMulIntegerToFloat).

Each derived model is made once per module in a temporary directory, checked to contain the
com.microsoft operators the tools are known to emit (so a silent change of the tools that
leaves nothing fused fails here), then run by onemodel and by onnxruntime (CPU, 1 thread, graph
optimizations disabled: the model is already optimized) on fixed inputs; onemodel's inference
types the same models without contradiction, with the outputs' element type, rank and fixed
extents.

``optimize_model`` is called with ``opt_level=0`` (its Python fusions only): any higher level
first runs onnxruntime's optimizer through a code path that imports torch, which is not a test
dependency; the onnxruntime-optimized variants cover that optimizer separately.

Tolerance: rtol 1e-4, atol 1e-5, for every variant. The float ones are float32 networks of
two layers whose operators both engines round once per operation in different orders (MLAS
blocking, fused kernels, own exp/erf/tanh): measured differences are below 1e-6 with outputs
of order 1. The quantized ones compute their 8-bit products exactly in both engines (uint8
weights, or int8 weights of 7 bits via ``reduce_range`` so onnxruntime's u8 x s8 AVX2 path
cannot saturate); the activations are quantized at run time from float32 values that agree to
~1e-7, and a value that rounded to another 8-bit step would move an output by about one
quantization step times a weight (~1e-3). The tolerance would catch that, and it has not
happened on these inputs: the measured differences are below 1e-6 here too. The 4-bit weight
models dequantize their constant weights exactly (4-bit integers times a float32 scale) and
compute in float32.
"""

from __future__ import annotations

import functools
import logging
import pathlib
from collections import Counter

import numpy as np
import onnx
import pytest
from oracle_releases import NO_ONNXRUNTIME

import onemodel
from onemodel.evaluate import run
from onemodel.inference import infer_model

onnxruntime = pytest.importorskip("onnxruntime", reason=NO_ONNXRUNTIME)

MODELS = pathlib.Path(__file__).resolve().parents[2] / "testdata" / "models"
RTOL, ATOL = 1e-4, 1e-5
#: The tiny configurations of testdata/make_hf_models.py (what optimize_model must be told).
HEADS, HIDDEN = 2, 32
BATCH, SEQ = 2, 7


def _ort_optimized(src: pathlib.Path, dst: pathlib.Path) -> None:
    so = onnxruntime.SessionOptions()
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(dst)
    so.log_severity_level = 3
    onnxruntime.InferenceSession(str(src), so, providers=["CPUExecutionProvider"])


def _fused(src: pathlib.Path, dst: pathlib.Path, kind: str) -> None:
    from onnxruntime.transformers.optimizer import optimize_model

    m = optimize_model(str(src), model_type=kind, num_heads=HEADS, hidden_size=HIDDEN,
                       opt_level=0)
    m.save_model_to_file(str(dst))


def _dynamic(src: pathlib.Path, dst: pathlib.Path, signed: bool) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    options = {"DefaultTensorType": onnx.TensorProto.FLOAT}  # for com.microsoft outputs
    if signed:
        quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, per_channel=True,
                         reduce_range=True, extra_options=options)
    else:
        quantize_dynamic(str(src), str(dst), weight_type=QuantType.QUInt8, extra_options=options)


def _nbits(src: pathlib.Path, dst: pathlib.Path, symmetric: bool) -> None:
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    q = MatMulNBitsQuantizer(onnx.load(str(src)), bits=4, block_size=32,
                             is_symmetric=symmetric)
    q.process()
    q.model.save_model_to_file(str(dst))


#: name -> (recipe: the variant it is made from and how, the com.microsoft operators it must
#: contain with their least counts).
VARIANTS = {
    "bert_opt": (("bert_tiny", "fuse"), {"Attention": 2, "EmbedLayerNormalization": 1,
                                         "SkipLayerNormalization": 4, "BiasGelu": 2}),
    "bert_opt_ort": (("bert_opt", "ort"), {"Attention": 2, "EmbedLayerNormalization": 1,
                                           "SkipLayerNormalization": 4, "BiasGelu": 2,
                                           "FusedGemm": 1}),
    "bert_ort": (("bert_tiny", "ort"), {"BiasGelu": 2, "FusedMatMul": 2, "FusedGemm": 1}),
    "bert_opt_qu8": (("bert_opt", "dyn_u8"), {"QAttention": 2, "QEmbedLayerNormalization": 1,
                                              "SkipLayerNormalization": 4, "BiasGelu": 2}),
    "bert_opt_qs8": (("bert_opt", "dyn_s8"), {"QAttention": 2, "QEmbedLayerNormalization": 1}),
    "bert_opt_qs8_ort": (("bert_opt_qs8", "ort"), {"QAttention": 2,
                                                   "DynamicQuantizeMatMul": 7}),
    "bert_qu8_ort": (("bert_qu8", "ort"), {"DynamicQuantizeMatMul": 1,
                                           "MatMulIntegerToFloat": 1, "Gelu": 1,
                                           "FusedMatMul": 1, "SkipLayerNormalization": 1}),
    "bert_qu8": (("bert_tiny", "dyn_u8"), {}),
    "bert_opt_nb4_sym": (("bert_opt", "nb_sym"), {"MatMulNBits": 6, "Attention": 2}),
    "bert_opt_nb4_asym": (("bert_opt", "nb_asym"), {"MatMulNBits": 6, "Attention": 2}),
    "gpt2_opt": (("gpt2_tiny", "fuse"), {"SkipLayerNormalization": 4, "FastGelu": 2}),
    "gpt2_opt_ort": (("gpt2_opt", "ort"), {"SkipLayerNormalization": 4, "FastGelu": 2,
                                           "FusedMatMul": 2}),
    "gpt2_qu8": (("gpt2_tiny", "dyn_u8"), {}),
    "gpt2_qs8_ort": (("gpt2_qs8", "ort"), {"DynamicQuantizeMatMul": 9, "FastGelu": 2}),
    "gpt2_qs8": (("gpt2_tiny", "dyn_s8"), {}),
    "gpt2_opt_nb4_sym": (("gpt2_opt", "nb_sym"), {"MatMulNBits": 7, "FastGelu": 2,
                                                  "SkipLayerNormalization": 4}),
    "gpt2_opt_nb4_asym": (("gpt2_opt", "nb_asym"), {"MatMulNBits": 7, "FastGelu": 2}),
}

#: Core-domain operators the plain quantize_dynamic outputs must contain.
CORE_QUANTIZED = {"DynamicQuantizeLinear", "MatMulInteger"}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A function: variant name -> path of that derived model, made on first use."""
    root = tmp_path_factory.mktemp("ms_exports")
    logging.getLogger("onnxruntime").setLevel(logging.ERROR)

    @functools.cache
    def path(name: str) -> pathlib.Path:
        if name in ("bert_tiny", "gpt2_tiny"):
            return MODELS / f"{name}.onnx"
        (base, how), _ = VARIANTS[name]
        src, dst = path(base), root / f"{name}.onnx"
        if how == "fuse":
            _fused(src, dst, base.split("_")[0])
        elif how == "ort":
            _ort_optimized(src, dst)
        elif how.startswith("dyn_"):
            _dynamic(src, dst, signed=how == "dyn_s8")
        else:
            _nbits(src, dst, symmetric=how == "nb_sym")
        return dst

    return path


def _feeds(kind: str) -> dict:
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 100, (BATCH, SEQ)).astype(np.int64)
    mask = np.ones((BATCH, SEQ), np.int64)
    mask[1, 5:] = 0  # right padding, the form the fused BERT's mask index stands for
    feeds = {"input_ids": ids, "attention_mask": mask}
    if kind == "bert":
        types = np.zeros((BATCH, SEQ), np.int64)
        types[:, 4:] = 1
        feeds["token_type_ids"] = types
    return feeds


def _onnxruntime(path: pathlib.Path, feeds: dict) -> dict:
    so = onnxruntime.SessionOptions()
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    sess = onnxruntime.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_tool_output_contains_the_fused_operators(made, name):
    proto = onnx.load(str(made(name)))
    ops = Counter((n.domain or "", n.op_type) for n in proto.graph.node)
    _, expected = VARIANTS[name]
    for op_type, least in expected.items():
        assert ops[("com.microsoft", op_type)] >= least, (name, op_type, sorted(ops.items()))
    if name in ("bert_qu8", "gpt2_qu8", "gpt2_qs8"):
        assert CORE_QUANTIZED <= {t for d, t in ops if d == ""}, sorted(ops.items())


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_tool_output_runs_in_onemodel_and_matches_onnxruntime(made, name):
    path = made(name)
    feeds = _feeds(name.split("_")[0])
    want = _onnxruntime(path, feeds)
    with onemodel.load(path) as model:
        got = run(model, feeds)
        inferred = infer_model(model)
    assert list(got) == list(want)
    assert not inferred.contradictions, inferred.contradictions
    for k, w in want.items():
        g = np.asarray(got[k])
        assert g.shape == w.shape and g.dtype == w.dtype, (k, g.shape, g.dtype, w.shape)
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=f"{name}:{k}")
        # the inference rules of the com.microsoft operators type the outputs: float, the rank
        # and every fixed extent of what was computed (the others are the input variables)
        v = inferred.values[k]
        assert v.elem == onnx.TensorProto.FLOAT and v.shape is not None, (k, str(v))
        assert len(v.shape) == g.ndim, (k, str(v), g.shape)
        assert all(e == n for e, n in zip(v.shape, g.shape) if type(e) is int), (k, str(v))


@pytest.mark.parametrize("name", ["bert_opt", "gpt2_opt", "bert_opt_ort", "gpt2_opt_ort"])
def test_fused_model_in_onemodel_computes_the_exported_network(made, name):
    """What makes the comparisons above meaningful: in onemodel, the fused model gives the
    outputs of the plain export (float32, same tolerance; the padded batch row is right-padded,
    the form the fused BERT's mask index keeps)."""
    kind = name.split("_")[0]
    feeds = _feeds(kind)
    with onemodel.load(MODELS / f"{kind}_tiny.onnx") as model:
        plain = run(model, feeds)
    with onemodel.load(made(name)) as model:
        fused = run(model, feeds)
    assert list(fused) == list(plain)
    for k in plain:
        np.testing.assert_allclose(fused[k], plain[k], rtol=RTOL, atol=ATOL, err_msg=k)
