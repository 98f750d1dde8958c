"""onnxruntime's quantized com.microsoft operators (onemodel/evaluate/kernels/ms_quant.py and
onemodel/inference/rules/ms_quant.py) against onnxruntime and float64 numpy computations.

onnxruntime runs on the CPU provider, graph optimizations off, one thread. It is trusted where
its kernel computes the operator's definition: float32 outputs are then compared within a
stated tolerance (different summation orders and fused multiply-adds round differently), and
exact integer or quantized results exactly. A float64 numpy computation, written here from the
operator's definition (bits unpacked with numpy's unpackbits, not the kernel's shifts), bounds
the float32 rounding error where it is the stronger oracle.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from oracle import assert_close_to_exact, node_model, ours
from oracle_releases import needs_onnxruntime

from onemodel.errors import EvaluationError, InvalidModelError, UnsupportedError
from onemodel.formats.onnx import decode_model
from onemodel.inference import infer_model

RNG = np.random.default_rng(13)
MS = "com.microsoft"
EPS = float(np.finfo(np.float32).eps)


def ms_model(op_type: str, feeds: dict, inputs: list, outputs=("y",), **attrs):
    """One com.microsoft node (opsets "" 21 and com.microsoft 1)."""
    return node_model(op_type, feeds, inputs, list(outputs), opset=1, domain=MS, **attrs)


def run_ort(model: onnx.ModelProto, feeds: dict) -> list:
    """onnxruntime's outputs (CPU provider, no graph optimization, one thread)."""
    import onnxruntime

    so = onnxruntime.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    sess = onnxruntime.InferenceSession(model.SerializeToString(), so,
                                        providers=["CPUExecutionProvider"])
    return sess.run(None, {k: v for k, v in feeds.items()
                           if k in {i.name for i in model.graph.input}})


def inferred(model: onnx.ModelProto, name: str = "y"):
    res = infer_model(decode_model(model.SerializeToString()))
    assert not res.contradictions, res.contradictions
    return res.values[name]


def codes64(packed: np.ndarray, bits: int) -> np.ndarray:
    """Unsigned ``bits``-bit codes packed low-first along the last axis, by numpy's
    unpackbits (little bit order), as float64."""
    bit = np.unpackbits(np.asarray(packed, np.uint8)[..., None], axis=-1, bitorder="little")
    bit = bit.reshape(packed.shape[:-1] + (-1, bits))
    return (bit * (2 ** np.arange(bits))).sum(-1).astype(np.float64)


# -- MatMulNBits ------------------------------------------------------------------------------

def nbits_case(m: int, k: int, n: int, bits: int, block: int, zp: str, g_idx: bool = False,
               bias: bool = False, dtype=np.float32):
    """Random MatMulNBits feeds and input names; ``zp`` is "none", "packed" or "float"."""
    kb = -(-k // block)
    feeds = {"a": RNG.standard_normal((m, k)).astype(dtype),
             "b": RNG.integers(0, 256, (n, kb, block * bits // 8), dtype=np.uint8),
             "s": (RNG.random((n, kb)) * 0.1 + 0.01).astype(dtype)}
    names = ["a", "b", "s"]
    if zp == "packed":
        feeds["zp"] = RNG.integers(0, 256, (n, -(-kb * bits // 8)), dtype=np.uint8)
    elif zp == "float":
        feeds["zp"] = (RNG.random((n, kb)) * 2 ** bits).astype(dtype)
    names.append("zp" if zp != "none" else "")
    if g_idx:
        feeds["g"] = RNG.integers(0, kb, k).astype(np.int32)
    names.append("g" if g_idx else "")
    if bias:
        feeds["bias"] = RNG.standard_normal(n).astype(dtype)
        names.append("bias")
    while names[-1] == "":
        names.pop()
    return feeds, names


def nbits_weight64(feeds: dict, k: int, n: int, bits: int, block: int) -> np.ndarray:
    """W [N, K] in float64 from the definition: (code - zero point) * scale per block."""
    kb = -(-k // block)
    code = codes64(feeds["b"].reshape(n, -1), bits)[:, :k]
    scale = feeds["s"].astype(np.float64).reshape(n, kb)
    if "zp" not in feeds:
        zp = np.full((n, kb), 2.0 ** (bits - 1))
    elif feeds["zp"].dtype == np.uint8:
        zp = codes64(feeds["zp"].reshape(n, -1), bits)[:, :kb]
    else:
        zp = feeds["zp"].astype(np.float64).reshape(n, kb)
    group = feeds["g"].astype(np.int64) if "g" in feeds else np.arange(k) // block
    return (code - zp[:, group]) * scale[:, group]


def nbits_check(feeds, names, *, k, n, bits, block, with_ort=True, **attrs):
    model = ms_model("MatMulNBits", feeds, names, K=k, N=n, bits=bits, block_size=block,
                     **attrs)
    (y,) = ours(model, feeds)
    w = nbits_weight64(feeds, k, n, bits, block)
    a = feeds["a"].astype(np.float64)
    exact = a @ w.T + (feeds["bias"].astype(np.float64) if "bias" in feeds else 0)
    # float32: one rounding for each dequantized weight, K products and K - 1 sums (+ bias):
    # |error| <= (K + 3) u sum |terms| (Higham's gamma bound, u = EPS32 / 2)
    terms = np.abs(a) @ np.abs(w).T + (np.abs(feeds["bias"]) if "bias" in feeds else 0)
    assert y.dtype == feeds["a"].dtype and y.shape == exact.shape
    if y.dtype == np.float32:
        assert_close_to_exact(y, exact, ulps=(k + 3) / 2, scale=terms)
    if with_ort:
        (want,) = run_ort(model, feeds)
        # both dequantize to float32 and sum K products in their own order (MLAS blocks, fused
        # multiply-adds): within float32 rounding of the sum of |terms|
        tol = 4e-6 * k if y.dtype == np.float32 else 2e-3 * k
        np.testing.assert_allclose(y.astype(np.float64), want.astype(np.float64), rtol=0,
                                   atol=tol * float(terms.max()))
    return model, y


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("zp", ["none", "packed", "float"])
@pytest.mark.parametrize("k, block", [(64, 16), (50, 32), (200, 64), (128, 128)])
def test_matmul_nbits_matches_definition_and_onnxruntime(bits, zp, k, block):
    feeds, names = nbits_case(3, k, 5, bits, block, zp)
    # onnxruntime 1.32 refuses 8-bit weights with float zero points on the CPU
    nbits_check(feeds, names, k=k, n=5, bits=bits, block=block,
                with_ort=not (bits == 8 and zp == "float"))


@pytest.mark.parametrize("zp", ["none", "float"])
def test_matmul_nbits_g_idx_matches_onnxruntime(zp):
    feeds, names = nbits_case(2, 96, 6, 4, 32, zp, g_idx=True)
    nbits_check(feeds, names, k=96, n=6, bits=4, block=32)


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_matmul_nbits_g_idx_with_packed_zero_points_follows_the_definition(bits):
    # onnxruntime 1.32's g_idx path reads packed uint8 zero points but then uses 8 (its
    # Dequantize4BitsKernelReOrder never assigns the value read) and reads 4-bit codes only
    # (its 2-bit results differ from the definition, 8 bits it refuses), so it is no oracle
    # here; the float64 definition is, and the zero points must change the result.
    feeds, names = nbits_case(2, 64, 4, bits, 16, "packed", g_idx=True)
    _, y = nbits_check(feeds, names, k=64, n=4, bits=bits, block=16, with_ort=False)
    plain = {k: v for k, v in feeds.items() if k != "zp"}
    _, y8 = nbits_check(plain, ["a", "b", "s", "", "g"], k=64, n=4, bits=bits, block=16,
                        with_ort=False)
    assert np.abs(y - y8).max() > 1e-3


def test_matmul_nbits_bias_batched_a_and_accuracy_level():
    feeds, names = nbits_case(4, 64, 7, 4, 32, "packed", bias=True)
    feeds["a"] = RNG.standard_normal((2, 3, 64)).astype(np.float32)
    # accuracy_level 0 only: at level 4 onnxruntime quantizes A to int8, which this reference
    # result does not (see the kernel's docstring), so the two would differ by design
    model, y = nbits_check(feeds, names, k=64, n=7, bits=4, block=32, accuracy_level=0)
    assert y.shape == (2, 3, 7)
    v = inferred(model)
    assert v.shape == (2, 3, 7) and v.elem == onnx.TensorProto.FLOAT


def test_matmul_nbits_float16():
    feeds, names = nbits_case(3, 64, 5, 4, 16, "float", bias=True, dtype=np.float16)
    model, y = nbits_check(feeds, names, k=64, n=5, bits=4, block=16)
    w = nbits_weight64(feeds, 64, 5, 4, 16)
    exact = feeds["a"].astype(np.float64) @ w.T + feeds["bias"].astype(np.float64)
    # float16 output of a float32 computation: within one float16 rounding (2**-11 relative)
    # of the exact value, plus the float32 bound
    np.testing.assert_allclose(y.astype(np.float64), exact, rtol=2 ** -10,
                               atol=1e-4 * float(np.abs(exact).max()))
    assert inferred(model).elem == onnx.TensorProto.FLOAT16


@pytest.mark.parametrize("bits, block, symmetric", [(4, 32, False), (4, 128, True),
                                                    (8, 32, False), (2, 16, False)])
def test_matmul_nbits_on_the_quantizer_output(bits, block, symmetric):
    """A MatMul quantized by onnxruntime's MatMulNBitsQuantizer (asymmetric: packed zero
    points; symmetric: none) runs as onnxruntime runs it."""
    from onnx import helper, numpy_helper
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    w = RNG.standard_normal((96, 40)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, [3, 96])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3, 40])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    q = MatMulNBitsQuantizer(model, bits=bits, block_size=block, is_symmetric=symmetric)
    q.process()
    qm = q.model.model
    assert [n.op_type for n in qm.graph.node] == ["MatMulNBits"]
    feeds = {"a": RNG.standard_normal((3, 96)).astype(np.float32)}
    (y,) = ours(qm, feeds)
    (want,) = run_ort(qm, feeds)
    # float32 products summed in different orders: 4e-6 * K of the largest |output|
    np.testing.assert_allclose(y, want, rtol=0, atol=4e-6 * 96 * float(np.abs(want).max()))
    # and close to the float MatMul (quantization error, a sanity check of the layout)
    full = feeds["a"].astype(np.float64) @ w
    assert np.abs(y - full).max() < (0.6 if bits == 2 else 0.25) * np.abs(full).max()


@pytest.mark.parametrize("attrs, error", [
    ({"bits": 3}, UnsupportedError), ({"block_size": 8}, InvalidModelError),
    ({"block_size": 48}, InvalidModelError), ({"K": 32}, EvaluationError)])
def test_matmul_nbits_refusals(attrs, error):
    feeds, names = nbits_case(2, 64, 3, 4, 16, "none")
    base = {"K": 64, "N": 3, "bits": 4, "block_size": 16}
    base.update(attrs)
    with pytest.raises(error):
        ours(ms_model("MatMulNBits", feeds, names, **base), feeds)


def test_unknown_com_microsoft_operator_is_refused():
    feeds = {"x": np.ones(3, np.float32)}
    with pytest.raises(UnsupportedError):
        ours(ms_model("NoSuchQuantizedOp", feeds, ["x"]), feeds)


# -- GatherBlockQuantized ---------------------------------------------------------------------

def narrow_model(op_type: str, feeds: dict, inputs: list, **attrs) -> tuple:
    """A com.microsoft node whose narrow-typed inputs (int4, uint4, float8, float4; onnxruntime
    takes no such feeds) are initializers; returns the model and the remaining feeds."""
    from onnx import numpy_helper

    narrow = [n for n in inputs if n and feeds[n].dtype.kind == "V"]
    rest = {k: v for k, v in feeds.items() if k not in narrow}
    infos = {n: onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None)
             for n in narrow}
    model = ms_model(op_type, rest, inputs, infos=infos, **attrs)
    keep = [i for i in model.graph.input if i.name not in narrow]
    del model.graph.input[:]
    model.graph.input.extend(keep)
    model.graph.initializer.extend(numpy_helper.from_array(feeds[n], n) for n in narrow)
    return model, rest


def gbq_exact(feeds: dict, g: int, q: int, block: int, bits: int = 4) -> np.ndarray:
    """The definition in float64: dequantize all of data, then gather (zeros out of range)."""
    data = feeds["d"]
    scale = feeds["s"].astype(np.float64)
    if data.dtype == np.uint8:
        code = codes64(data, bits)
        zp = (codes64(feeds["z"], bits)[..., :scale.shape[-1]] if "z" in feeds
              else np.full(scale.shape, 2.0 ** (bits - 1)))
    else:
        code = data.astype(np.float64)
        zp = feeds["z"].astype(np.float64) if "z" in feeds else np.zeros(scale.shape)
    q %= code.ndim
    g %= code.ndim
    rep = lambda p: np.repeat(p, block, axis=q).take(np.arange(code.shape[q]), axis=q)  # noqa: E731
    deq = (code - rep(zp)) * rep(scale)
    s = code.shape[g]
    idx = feeds["i"].astype(np.int64)
    ok = (idx >= -s) & (idx < s)
    out = np.take(deq, np.where(ok, idx % s, 0), axis=g)
    okb = ok.reshape((1,) * g + ok.shape + (1,) * (code.ndim - g - 1))
    return np.where(okb, out, 0.0)


@pytest.mark.parametrize("dtype", ["int4", "uint4"])
@pytest.mark.parametrize("shape, g, q, block", [
    ((6, 40), 0, 1, 16), ((3, 5, 32), 1, 2, 16), ((4, 40, 3), 0, 1, 32), ((32, 6), 0, 0, 16),
    ((3, 64), 1, 1, 32), ((5, 33), -2, -1, 16)])
@pytest.mark.parametrize("with_zp", [False, True])
def test_gather_block_quantized_int4(dtype, shape, g, q, block, with_zp):
    import ml_dtypes

    dt = getattr(ml_dtypes, dtype)
    lo, hi = (-8, 8) if dtype == "int4" else (0, 16)
    sshape = list(shape)
    sshape[q % len(shape)] = -(-shape[q % len(shape)] // block)
    s = shape[g % len(shape)]
    feeds = {"d": RNG.integers(lo, hi, shape).astype(dt),
             "i": np.array([[0, -1], [2, s + 3]], np.int64),   # s + 3: out of range, zeros
             "s": (RNG.random(sshape) + 0.1).astype(np.float32)}
    names = ["d", "i", "s"]
    if with_zp:
        feeds["z"] = RNG.integers(lo, hi, sshape).astype(dt)
        names.append("z")
    model, rest = narrow_model("GatherBlockQuantized", feeds, names, gather_axis=g,
                               quantize_axis=q, block_size=block)
    (y,) = ours(model, rest)
    exact = gbq_exact(feeds, g, q, block)
    # one float32 rounding of (code - zp) * scale per element: half an ulp
    assert_close_to_exact(y, exact, ulps=0.5, scale=np.abs(exact))
    # onnxruntime computes the same single product in float32: exact by construction
    (want,) = run_ort(model, rest)
    np.testing.assert_array_equal(y, want)
    v = inferred(model)
    assert v.shape == y.shape and v.elem == onnx.TensorProto.FLOAT


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("with_zp", [False, True])
@pytest.mark.parametrize("sdtype", [np.float32, np.float16])
def test_gather_block_quantized_packed_uint8(bits, with_zp, sdtype):
    per, k, block = 8 // bits, 48, 16
    kb = k // block
    feeds = {"d": RNG.integers(0, 256, (7, k // per), dtype=np.uint8),
             "i": np.array([3, 0, -2, 9], np.int32),
             "s": (RNG.random((7, kb)) + 0.1).astype(sdtype)}
    names = ["d", "i", "s"]
    if with_zp:
        feeds["z"] = RNG.integers(0, 256, (7, -(-kb // per)), dtype=np.uint8)
        names.append("z")
    model = ms_model("GatherBlockQuantized", feeds, names, gather_axis=0, quantize_axis=1,
                     block_size=block, bits=bits)
    (y,) = ours(model, feeds)
    assert y.shape == (4, k) and y.dtype == sdtype
    exact = gbq_exact(feeds, 0, 1, block, bits)
    # float32 product (half an ulp), then for float16 scales a float16 rounding (half a
    # float16 ulp, 2**-11 relative = 2**12 float32 eps)
    ulps = 0.5 if sdtype == np.float32 else 0.5 + 2 ** 12
    assert_close_to_exact(y.astype(np.float32), exact, ulps=ulps, scale=np.abs(exact))
    (want,) = run_ort(model, feeds)
    np.testing.assert_array_equal(y, want)   # the same single rounded product (and cast)
    v = inferred(model)
    assert v.shape == (4, k)
    assert v.elem == (onnx.TensorProto.FLOAT if sdtype == np.float32 else onnx.TensorProto.FLOAT16)


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float4_e2m1fn"])
@pytest.mark.parametrize("block, sshape", [(16, (6, 3)), (0, (6, 1)), (32, (1, 2))])
def test_gather_block_quantized_float_data(dtype, block, sshape):
    import ml_dtypes

    data = (RNG.standard_normal((6, 40)) * 2).astype(getattr(ml_dtypes, dtype))
    feeds = {"d": data, "i": np.array([1, 5, -1], np.int64),
             "s": (RNG.random(sshape) + 0.1).astype(np.float32)}
    model, rest = narrow_model("GatherBlockQuantized", feeds, ["d", "i", "s"], gather_axis=0,
                               quantize_axis=1, block_size=block)
    (y,) = ours(model, rest)
    (want,) = run_ort(model, rest)
    np.testing.assert_array_equal(y, want)   # one rounded float32 product per element
    b = block or 40
    scale = np.broadcast_to(np.repeat(feeds["s"].astype(np.float64), b, axis=1)[:, :40],
                            (6, 40))
    exact = (data.astype(np.float64) * scale)[[1, 5, -1]]
    assert_close_to_exact(y, exact, ulps=0.5, scale=np.abs(exact))


@pytest.mark.parametrize("attrs, error", [
    ({"block_size": 24}, InvalidModelError), ({"bits": 3}, InvalidModelError),
    ({"gather_axis": 1}, EvaluationError), ({"block_size": 32}, EvaluationError)])
def test_gather_block_quantized_refusals(attrs, error):
    feeds = {"d": np.zeros((4, 16), np.uint8), "i": np.array([0], np.int64),
             "s": np.ones((4, 2), np.float32)}
    base = {"gather_axis": 0, "quantize_axis": 1, "block_size": 16, "bits": 4}
    base.update(attrs)
    with pytest.raises(error):
        ours(ms_model("GatherBlockQuantized", feeds, ["d", "i", "s"], **base), feeds)


# -- DynamicQuantizeMatMul, MatMulIntegerToFloat ----------------------------------------------

def int_range(dtype, oracle: bool):
    """Integer draws for dtype; for onnxruntime comparisons int8 stays in [-64, 64): its AVX2
    u8 x s8 path (pmaddubsw) saturates int16 pair sums beyond 2 * 255 * 64, which no such
    value reaches, so its integer product is then exact on any x86-64 CPU."""
    if dtype == np.uint8:
        return 0, 256
    return (-64, 64) if oracle else (-128, 128)


def scaled64(a_q, a_zp, b, b_zp, mult, bias):
    """float64 (a_q - a_zp) @ (b - b_zp) * mult + bias, and the magnitude of its terms."""
    acc = (a_q.astype(np.int64) - np.int64(a_zp)) @ (b.astype(np.int64) - b_zp.astype(np.int64))
    prod = acc.astype(np.float64) * np.asarray(mult, np.float64)
    bias64 = 0.0 if bias is None else bias.astype(np.float64)
    return prod + bias64, np.abs(prod) + np.abs(bias64)


@pytest.mark.parametrize("b_dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("with_zp, with_bias", [(False, False), (True, False), (True, True),
                                                (False, True)])
@pytest.mark.parametrize("oracle", [False, True])
def test_dynamic_quantize_matmul(b_dtype, per_column, with_zp, with_bias, oracle):
    lo, hi = int_range(b_dtype, oracle)
    cols = (6,) if per_column else ()
    feeds = {"a": (RNG.standard_normal((2, 3, 20)) * 3).astype(np.float32),
             "b": RNG.integers(lo, hi, (20, 6)).astype(b_dtype),
             "bs": np.asarray(RNG.random(cols) * 0.02 + 0.001, np.float32)}
    names = ["a", "b", "bs", "", ""]
    if with_zp:
        feeds["bz"] = np.asarray(RNG.integers(lo, hi, cols), b_dtype)
        names[3] = "bz"
    if with_bias:
        feeds["bias"] = RNG.standard_normal(6).astype(np.float32)
        names[4] = "bias"
    while names[-1] == "":
        names.pop()
    model = ms_model("DynamicQuantizeMatMul", feeds, names)
    (y,) = ours(model, feeds)
    # A's uint8 quantization by its definition (DynamicQuantizeLinear's float32 formula)
    a = feeds["a"]
    hi_a, lo_a = np.float32(max(0.0, a.max())), np.float32(min(0.0, a.min()))
    a_scale = np.float32(hi_a - lo_a) / np.float32(255)
    a_zp = np.rint(np.clip(np.float32(0) - lo_a / a_scale, 0, 255))
    a_q = np.clip(np.rint(a / a_scale) + a_zp, 0, 255).astype(np.uint8)
    b_zp = feeds.get("bz", np.zeros((), b_dtype))
    mult = a_scale * feeds["bs"]
    exact, terms = scaled64(a_q, a_zp, feeds["b"], b_zp, mult, feeds.get("bias"))
    # float32(acc) is exact (|acc| < 2**24); one rounded multiply and one add: 1 eps of terms
    assert_close_to_exact(y, exact, ulps=1, scale=terms)
    if oracle:
        (want,) = run_ort(model, feeds)
        # onnxruntime's MLAS may quantize A by multiplying with 1 / scale, so a tie can round
        # one step apart: an output then moves by up to a_scale * b_scale * max |B - b_zp|
        step = float(np.max(mult) * np.abs(feeds["b"].astype(np.int64) - b_zp).max())
        np.testing.assert_allclose(y, want, rtol=0, atol=step + 2 * EPS * float(terms.max()))
    v = inferred(model)
    assert v.shape == (2, 3, 6) and v.elem == onnx.TensorProto.FLOAT


@pytest.mark.parametrize("a_dtype, b_dtype", [(np.uint8, np.int8), (np.uint8, np.uint8),
                                              (np.int8, np.int8), (np.int8, np.uint8)])
@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("out", [np.float32, np.float16])
def test_matmul_integer_to_float(a_dtype, b_dtype, per_column, out):
    # onnxruntime 1.32 has no int8 x uint8 kernel: that pair is checked against int64 only
    oracle = not (a_dtype == np.int8 and b_dtype == np.uint8)
    alo, ahi = int_range(a_dtype, oracle)
    lo, hi = int_range(b_dtype, oracle)
    cols = (6,) if per_column else ()
    feeds = {"a": RNG.integers(alo, ahi, (2, 4, 20)).astype(a_dtype),
             "b": RNG.integers(lo, hi, (20, 6)).astype(b_dtype),
             "as": np.asarray(0.03, out), "bs": np.asarray(RNG.random(cols) * 0.02 + 1e-3, out),
             "az": np.asarray(RNG.integers(alo, ahi), a_dtype),
             "bz": np.asarray(RNG.integers(lo, hi, cols), b_dtype),
             "bias": RNG.standard_normal(6).astype(out)}
    names = ["a", "b", "as", "bs", "az", "bz", "bias"]
    model = ms_model("MatMulIntegerToFloat", feeds, names)
    (y,) = ours(model, feeds)
    assert y.dtype == out and y.shape == (2, 4, 6)
    mult = np.float32(feeds["as"]) * feeds["bs"].astype(np.float32)
    exact, terms = scaled64(feeds["a"], feeds["az"], feeds["b"], feeds["bz"], mult,
                            feeds["bias"])
    if out == np.float32:
        assert_close_to_exact(y, exact, ulps=1, scale=terms)
    else:   # then one float16 rounding: half a float16 ulp (2**-11) of |y|
        np.testing.assert_allclose(y.astype(np.float64), exact,
                                   rtol=2 ** -11, atol=2 * EPS * float(terms.max()))
    if oracle:
        (want,) = run_ort(model, feeds)
        # the same exact integer product; scaling by one multiply and one add in float32
        np.testing.assert_allclose(y.astype(np.float64), want.astype(np.float64), rtol=0,
                                   atol=2 * EPS * float(terms.max()) * (1 if out == np.float32
                                                                        else 2 ** 13))
    assert inferred(model).elem == (onnx.TensorProto.FLOAT if out == np.float32
                                    else onnx.TensorProto.FLOAT16)


# (a_shape, a_scale shape, b_scale shape, where the scales apply): "pre" scales multiply the
# integer product before the bias is added, "post" ones multiply Y after it (onnxruntime's CPU
# kernel: an a_scale that is not per tensor, and a b_scale its GEMM does not take)
SCALE_CASES = {
    "a_per_row": ((3, 20), (3, 1), (), "bs pre, as post"),
    "a_per_row_b_per_column": ((3, 20), (3, 1), (6,), "bs pre, as post"),
    "a_per_column": ((3, 20), (6,), (), "both pre"),           # exchanged with b_scale
    "a_per_column_2d": ((3, 20), (1, 6), (), "both pre"),
    "b_per_row": ((3, 20), (), (3, 1), "as pre, bs post"),     # exchanged with a_scale
    "a_one_by_one": ((3, 20), (1, 1), (), "bs pre, as post"),  # [1, 1] is not per tensor
    "a_per_element": ((3, 20), (3, 6), (), "bs pre, as post"),
    "batched_a_per_row": ((2, 3, 20), (2, 3, 1), (), "bs pre, as post"),
    "batched_a_per_column_3d": ((2, 3, 20), (2, 1, 6), (), "bs pre, as post"),  # B is 2-D
}


@pytest.mark.parametrize("case", sorted(SCALE_CASES))
@pytest.mark.parametrize("with_bias", [False, True])
def test_matmul_integer_to_float_scales_not_per_tensor(case, with_bias):
    """Per-row and per-column a_scale (and a per-row b_scale), as onnxruntime's CPU kernel
    takes them: against a float64 computation of that order (an integer product exact in
    float32, |acc| < 2**24; then a_scale * b_scale, the product, the bias and the later scale:
    at most 4 float32 roundings, 4 eps of the terms' magnitude) and against onnxruntime (the
    same exact integers, the same 4 roundings each side: 8 eps)."""
    a_shape, as_shape, bs_shape, order = SCALE_CASES[case]
    feeds = {"a": RNG.integers(0, 256, a_shape).astype(np.uint8),
             "b": RNG.integers(-64, 64, (20, 6)).astype(np.int8),
             "as": np.asarray(RNG.random(as_shape) * 0.04 + 0.01, np.float32),
             "bs": np.asarray(RNG.random(bs_shape) * 0.02 + 1e-3, np.float32),
             "az": np.asarray(RNG.integers(0, 256), np.uint8),
             "bias": RNG.standard_normal(6).astype(np.float32)}
    names = ["a", "b", "as", "bs", "az", "", "bias"]
    if not with_bias:
        del feeds["bias"], names[5:]
    model = ms_model("MatMulIntegerToFloat", feeds, names)
    (y,) = ours(model, feeds)
    acc = ((feeds["a"].astype(np.int64) - np.int64(feeds["az"]))
           @ feeds["b"].astype(np.int64)).astype(np.float64)
    a_s, b_s = feeds["as"].astype(np.float64), feeds["bs"].astype(np.float64)
    pre, post = {"bs pre, as post": (b_s, a_s), "as pre, bs post": (a_s, b_s),
                 "both pre": (a_s * b_s, 1.0)}[order]
    bias = feeds["bias"].astype(np.float64) if with_bias else 0.0
    exact = (acc * pre + bias) * post
    terms = (np.abs(acc * pre) + np.abs(bias)) * np.abs(post)
    assert y.shape == exact.shape == np.broadcast_shapes(a_shape[:-1] + (6,))
    assert_close_to_exact(y, exact, ulps=4, scale=terms)
    (want,) = run_ort(model, feeds)
    np.testing.assert_allclose(y, want, rtol=0, atol=8 * EPS * float(terms.max()))
    if with_bias and order != "both pre":   # the bias is scaled: not the operator's formula
        assert np.abs(exact - (acc * a_s * b_s + bias)).max() > 1e-3


@pytest.mark.parametrize("case", ["a_per_row", "a_per_column", "b_per_row"])
def test_matmul_integer_to_float_scales_not_per_tensor_float16(case):
    """float16 scales and bias (the output type): the same float32 computation rounded once to
    float16 at the end, as onnxruntime computes it: within one float16 step (2**-10 of |y|)
    of onnxruntime's output, and of the float64 computation of that order."""
    a_shape, as_shape, bs_shape, order = SCALE_CASES[case]
    feeds = {"a": RNG.integers(0, 256, a_shape).astype(np.uint8),
             "b": RNG.integers(-64, 64, (20, 6)).astype(np.int8),
             "as": np.asarray(RNG.random(as_shape) * 0.04 + 0.01, np.float16),
             "bs": np.asarray(RNG.random(bs_shape) * 0.02 + 1e-3, np.float16),
             "bias": RNG.standard_normal(6).astype(np.float16)}
    model = ms_model("MatMulIntegerToFloat", feeds, ["a", "b", "as", "bs", "", "", "bias"])
    (y,) = ours(model, feeds)
    assert y.dtype == np.float16
    acc = (feeds["a"].astype(np.int64) @ feeds["b"].astype(np.int64)).astype(np.float64)
    a_s, b_s = feeds["as"].astype(np.float64), feeds["bs"].astype(np.float64)
    pre, post = {"bs pre, as post": (b_s, a_s), "as pre, bs post": (a_s, b_s),
                 "both pre": (a_s * b_s, 1.0)}[order]
    exact = (acc * pre + feeds["bias"].astype(np.float64)) * post
    (want,) = run_ort(model, feeds)
    for other in (exact, want.astype(np.float64)):
        np.testing.assert_allclose(y.astype(np.float64), other, rtol=2 ** -10, atol=2 ** -14)


@needs_onnxruntime
def test_matmul_integer_to_float_refusals():
    """A per-row a_zero_point is refused (onnxruntime's CPU kernel refuses it too); a per-row
    a_scale of the wrong shape ([M], which neither broadcasts to Y [M, N] nor is one per
    column) is a shape error, as it is in onnxruntime."""
    base = {"a": np.zeros((2, 3), np.uint8), "b": np.zeros((3, 4), np.int8),
            "as": np.ones((), np.float32), "bs": np.ones((), np.float32)}
    for extra, names, error in (({"az": np.zeros(2, np.uint8)}, ["a", "b", "as", "bs", "az"],
                                 UnsupportedError),
                                ({"as": np.ones(2, np.float32)}, ["a", "b", "as", "bs"],
                                 EvaluationError),
                                ({"as": np.ones((3, 1), np.float32)}, ["a", "b", "as", "bs"],
                                 EvaluationError)):
        feeds = dict(base, **extra)
        model = ms_model("MatMulIntegerToFloat", feeds, names)
        with pytest.raises(error):
            ours(model, feeds)
        if error is UnsupportedError or extra["as"].ndim == 1:
            with pytest.raises(Exception, match="zero point|broadcast"):
                run_ort(model, feeds)


# -- QLinear element-wise operators, pooling, concatenation -----------------------------------

def quantized(dtype, shape):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, shape).astype(dtype)


def requantize64(real: np.ndarray, scale, zero_point, dtype) -> tuple[np.ndarray, np.ndarray]:
    """The definition's quantization of float64 values: round half to even, saturate; and
    whether each value lies farther than 1e-3 of a step from a rounding tie (where float32
    arithmetic cannot flip the rounding)."""
    v = real / np.float64(scale)
    info = np.iinfo(dtype)
    q = np.clip(np.rint(v) + int(zero_point), info.min, info.max).astype(dtype)
    clear = np.abs(np.abs(v - np.floor(v)) - 0.5) > 1e-3
    return q, clear


def assert_requantized(y, exact, clear):
    """Equal to the definition away from ties, within one step at them."""
    diff = np.abs(y.astype(np.int64) - exact.astype(np.int64))
    assert y.dtype == exact.dtype and y.shape == exact.shape
    assert diff.max(initial=0) <= 1
    np.testing.assert_array_equal(y[clear], exact[clear])


def deq64(x, scale, zp):
    return (x.astype(np.float64) - int(zp)) * np.float64(np.float32(scale))


@pytest.mark.parametrize("op_type", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("b_shape", [(3, 4, 5), (4, 1), ()])
def test_qlinear_add_mul(op_type, dtype, b_shape):
    feeds = {"a": quantized(dtype, (3, 4, 5)), "as": np.array(0.05, np.float32),
             "az": quantized(dtype, ()), "b": quantized(dtype, b_shape),
             "bs": np.array(0.07, np.float32), "bz": quantized(dtype, ()),
             "cs": np.array(0.1 if op_type == "QLinearAdd" else 0.9, np.float32),
             "cz": quantized(dtype, ())}
    model = ms_model(op_type, feeds, ["a", "as", "az", "b", "bs", "bz", "cs", "cz"])
    (y,) = ours(model, feeds)
    da, db = deq64(feeds["a"], 0.05, feeds["az"]), deq64(feeds["b"], 0.07, feeds["bz"])
    real = da + db if op_type == "QLinearAdd" else da * db
    exact, clear = requantize64(real, np.float32(feeds["cs"]), feeds["cz"], dtype)
    assert_requantized(y, exact, clear)
    # onnxruntime rearranges the arithmetic (QLinearAdd: (A - za) * (sa / sc) + (B - zb) *
    # (sb / sc)), which rounds differently near a tie: within one quantization step
    (want,) = run_ort(model, feeds)
    assert np.abs(y.astype(np.int64) - want.astype(np.int64)).max() <= 1
    v = inferred(model)
    assert v.shape == (3, 4, 5) and v.elem == (onnx.TensorProto.UINT8 if dtype == np.uint8
                                                else onnx.TensorProto.INT8)


@pytest.mark.parametrize("op_type", ["QLinearAdd", "QLinearMul"])
def test_qlinear_add_mul_default_zero_points(op_type):
    feeds = {"a": quantized(np.uint8, (6,)), "as": np.array(0.5, np.float32),
             "b": quantized(np.uint8, (6,)), "bs": np.array(0.25, np.float32),
             "cs": np.array(4.0 if op_type == "QLinearAdd" else 64.0, np.float32)}
    model = ms_model(op_type, feeds, ["a", "as", "", "b", "bs", "", "cs"])
    (y,) = ours(model, feeds)
    da, db = deq64(feeds["a"], 0.5, 0), deq64(feeds["b"], 0.25, 0)
    real = da + db if op_type == "QLinearAdd" else da * db
    exact, clear = requantize64(real, np.float32(feeds["cs"]), 0, np.uint8)
    assert_requantized(y, exact, clear)
    # onnxruntime 1.32's type inference refuses an omitted A or B zero point, so it checks
    # only the omitted C zero point (A's and B's given as 0)
    feeds["za"] = feeds["zb"] = np.array(0, np.uint8)
    model = ms_model(op_type, feeds, ["a", "as", "za", "b", "bs", "zb", "cs"])
    (y0,) = ours(model, feeds)
    np.testing.assert_array_equal(y0, y)
    (want,) = run_ort(model, feeds)
    assert np.abs(y.astype(np.int64) - want.astype(np.int64)).max() <= 1


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_sigmoid_every_code(dtype):
    info = np.iinfo(dtype)
    feeds = {"x": np.arange(info.min, info.max + 1).astype(dtype),
             "xs": np.array(0.05, np.float32), "xz": np.array(3, dtype),
             "ys": np.array(1 / 256, np.float32), "yz": np.array(info.min, dtype)}
    model = ms_model("QLinearSigmoid", feeds, ["x", "xs", "xz", "ys", "yz"])
    (y,) = ours(model, feeds)
    real = 1 / (1 + np.exp(-deq64(feeds["x"], 0.05, 3)))
    exact, clear = requantize64(real, np.float32(1 / 256), info.min, dtype)
    assert_requantized(y, exact, clear)
    # onnxruntime tabulates quantize(sigmoid(dequantize(x))) in float32: within one step
    (want,) = run_ort(model, feeds)
    assert np.abs(y.astype(np.int64) - want.astype(np.int64)).max() <= 1
    assert inferred(model).shape == (info.max - info.min + 1,)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("channels_last", [0, 1])
@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (1, 4, 9)])
def test_qlinear_global_average_pool(dtype, channels_last, shape):
    yz = -5 if dtype == np.int8 else 5
    feeds = {"x": quantized(dtype, shape), "xs": np.array(0.05, np.float32),
             "xz": np.array(3, dtype), "ys": np.array(0.03, np.float32),
             "yz": np.array(yz, dtype)}
    model = ms_model("QLinearGlobalAveragePool", feeds, ["x", "xs", "xz", "ys", "yz"],
                     channels_last=channels_last)
    (y,) = ours(model, feeds)
    axes = tuple(range(1, len(shape) - 1)) if channels_last else tuple(range(2, len(shape)))
    real = deq64(feeds["x"], 0.05, 3).mean(axis=axes, keepdims=True)
    exact, clear = requantize64(real, np.float32(0.03), yz, dtype)
    assert_requantized(y, exact, clear)
    # onnxruntime: integer sum, then float32 scaling: within one step of the definition
    (want,) = run_ort(model, feeds)
    assert want.shape == y.shape
    assert np.abs(y.astype(np.int64) - want.astype(np.int64)).max() <= 1
    assert inferred(model).shape == y.shape


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_concat(dtype):
    z2 = -1 if dtype == np.int8 else 100
    feeds = {"ys": np.array(0.05, np.float32), "yz": np.array(3, dtype),
             "x1": quantized(dtype, (2, 3)), "s1": np.array(0.05, np.float32),
             "z1": np.array(3, dtype),                       # Y's parameters: copied
             "x2": quantized(dtype, (2, 4)), "s2": np.array(0.11, np.float32),
             "z2": np.array(z2, dtype),
             "x3": quantized(dtype, (2, 1)), "s3": np.array(0.025, np.float32),
             "z3": np.array(0, dtype)}
    names = ["ys", "yz", "x1", "s1", "z1", "x2", "s2", "z2", "x3", "s3", "z3"]
    model = ms_model("QLinearConcat", feeds, names, axis=-1)
    (y,) = ours(model, feeds)
    assert y.shape == (2, 8)
    np.testing.assert_array_equal(y[:, :3], feeds["x1"])
    for x, s, z, cols in (("x2", 0.11, z2, slice(3, 7)), ("x3", 0.025, 0, slice(7, 8))):
        exact, clear = requantize64(deq64(feeds[x], s, z), np.float32(0.05), 3, dtype)
        assert_requantized(y[:, cols], exact, clear)
    # onnxruntime requantizes through a float32 lookup table: within one step
    (want,) = run_ort(model, feeds)
    assert np.abs(y.astype(np.int64) - want.astype(np.int64)).max() <= 1
    v = inferred(model)
    assert v.shape == (2, 8) and v.elem == (onnx.TensorProto.UINT8 if dtype == np.uint8
                                             else onnx.TensorProto.INT8)


def test_qlinear_refusals():
    feeds = {"a": np.zeros(3, np.uint8), "b": np.zeros(3, np.uint8),
             "s": np.array(1.0, np.float32), "t": np.array(1.0, np.float32),
             "u": np.array(1.0, np.float32), "z": np.zeros(3, np.uint8),
             "f": np.zeros(3, np.float32), "y": np.array(0, np.uint8)}
    for op_type, names, attrs, error in (
            ("QLinearAdd", ["a", "s", "z", "b", "t", "", "u"], {}, UnsupportedError),  # per axis
            ("QLinearSigmoid", ["f", "s", "", "t"], {}, UnsupportedError),       # a float X
            ("QLinearConcat", ["s", "y", "a", "t"], {"axis": 0}, InvalidModelError)):  # pairs
        used = {k: feeds[k] for k in names if k}
        with pytest.raises(error):
            ours(ms_model(op_type, used, names, **attrs), used)


# -- inference rules ---------------------------------------------------------------------------

def test_every_kernel_has_a_rule_and_unknown_inputs_do_not_raise():
    from tests.infer.rules_check import check_family_registered, check_unknown_inputs

    assert check_family_registered("ms_quant") == 9
    assert check_unknown_inputs("ms_quant") >= 9


def test_rules_report_contradictions():
    from onnx import helper

    def contradictions(op_type, inputs, **attrs):
        graph = helper.make_graph(
            [helper.make_node(op_type, [n for n, _, _ in inputs], ["y"], domain=MS, **attrs)],
            "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
            [helper.make_value_info("y", onnx.TypeProto())])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                        helper.make_opsetid(MS, 1)])
        model.ir_version = 10
        res = infer_model(decode_model(model.SerializeToString()))
        return " ".join(c.message for c in res.contradictions)

    F, U8 = onnx.TensorProto.FLOAT, onnx.TensorProto.UINT8
    assert "K" in contradictions("MatMulNBits", [("a", F, [2, 30]), ("b", U8, [4, 2, 8]),
                                                 ("s", F, [8])], K=32, N=4, block_size=16)
    assert "rank" in contradictions("QLinearGlobalAveragePool", [
        ("x", U8, [2, 3]), ("xs", F, []), ("xz", U8, []), ("ys", F, []), ("yz", U8, [])])
    assert "broadcast" in contradictions("QLinearAdd", [
        ("a", U8, [3]), ("as", F, []), ("az", U8, []), ("b", U8, [4]), ("bs", F, []),
        ("bz", U8, []), ("cs", F, [])])


@pytest.mark.parametrize("op_type", ["MatMulNBits", "GatherBlockQuantized",
                                     "DynamicQuantizeMatMul", "MatMulIntegerToFloat",
                                     "QLinearAdd", "QLinearMul", "QLinearSigmoid",
                                     "QLinearGlobalAveragePool", "QLinearConcat"])
def test_a_node_without_its_required_inputs_is_refused(op_type):
    feeds = {"x": np.zeros((2, 32), np.uint8)}
    with pytest.raises((InvalidModelError, EvaluationError)):
        ours(ms_model(op_type, feeds, ["x"], K=32, N=2, block_size=16, axis=0), feeds)
