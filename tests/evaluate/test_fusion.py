"""The plan-time fusion of the attention chain MatMul -> Softmax -> MatMul
(onemodel/evaluate/fusion.py): values within the bound of the float64 computation, computed in
blocks or not, and no fusion where another node, a subgraph or the caller sees the scores or the
probabilities, where the Softmax is not along the last axis or a kernel is replaced."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from oracle import tensor_info

from onemodel.evaluate import Session, fusion
from onemodel.evaluate.kernels import conv as conv_module
from onemodel.evaluate.kernels import norm as norm_module
from onemodel.evaluate.kernels.linalg import matmul_array
from onemodel.formats.onnx import decode_model

RNG = np.random.default_rng(37)
EPS32 = 2.0 ** -24


def _chain_model(feeds, *, axis=None, extra=None, opset=17):
    sm = {} if axis is None else {"axis": axis}
    nodes = [helper.make_node("MatMul", ["q", "k"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], **sm),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    outputs = ["y"]
    if extra is not None:  # another reader of an intermediate value
        nodes.append(helper.make_node("Relu", [extra], ["r"]))
        outputs.append("r")
    graph = helper.make_graph(nodes, "g", [tensor_info(n, feeds[n]) for n in ("q", "k", "v")],
                              [helper.make_value_info(n, onnx.TypeProto()) for n in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return decode_model(model.SerializeToString())


def _feeds(lead=(5, 3), m=7, k=4, n=9, d=6, dtype=np.float32):
    return {"q": (RNG.standard_normal(lead + (m, k)) * 2).astype(dtype),
            "k": (RNG.standard_normal(lead + (k, n)) * 2).astype(dtype),
            "v": RNG.standard_normal(lead + (n, d)).astype(dtype)}


def _fused(session: Session) -> int:
    return sum(getattr(st.fn, "fused", None) is fusion.attention_chain
               for st in session._main.steps)


def _assert_within_bound(y, feeds):
    """y against the chain in float64. The scores carry at most k roundings of |q| @ |k|
    (ds); a probability's relative error is then at most 2 ds (the shift cancels) plus the
    softmax's own spread x 2^-24 (spread <= 80) and n roundings of its sum; the product adds n
    roundings of p @ |v|."""
    q, k, v = (feeds[n].astype(np.float64) for n in ("q", "k", "v"))
    s = q @ k
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    kk, n = q.shape[-1], k.shape[-1]
    ds = (kk * EPS32 * (np.abs(q) @ np.abs(k))).max()
    bound = (2 * ds + (80 + 2 * n) * EPS32) * (p @ np.abs(v))
    assert y.dtype == feeds["q"].dtype and y.shape == s.shape[:-1] + (v.shape[-1],)
    assert np.all(np.abs(y - p @ v) <= bound)


@pytest.mark.parametrize("block_bytes", [1, 300, fusion.BLOCK_BYTES])  # 1 and 300: in blocks
@pytest.mark.parametrize("pure", [True, False])  # numpy's blocks; the compiled kernel if built
def test_fused_chain_is_within_the_bound_of_float64(block_bytes, pure, monkeypatch):
    """The bound holds for both ways of computing the chain: numpy products in blocks with
    Softmax's exponentials, and the compiled kernel's row at a time (ckernels.attention: exp
    within 1.02 ulp, sums over d and over n in other orders, one division)."""
    if pure:
        monkeypatch.setenv("ONEMODEL_PURE_PYTHON", "1")
    monkeypatch.setattr(fusion, "BLOCK_BYTES", block_bytes)
    feeds = _feeds()
    feeds["k"] = np.ascontiguousarray(feeds["k"].swapaxes(-1, -2)).swapaxes(-1, -2)  # a view
    session = Session(_chain_model(feeds))
    assert _fused(session) == 1 and len(session._main.steps) == 1
    (y,) = session.run(feeds).values()
    _assert_within_bound(y, feeds)


def test_fused_chain_of_float64_and_of_broadcast_operands():
    feeds = _feeds(dtype=np.float64)
    (y,) = Session(_chain_model(feeds)).run(feeds).values()
    q, k, v = feeds["q"], feeds["k"], feeds["v"]
    s = q @ k
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(y, p @ v, rtol=1e-12, atol=1e-13)  # float64 roundings only
    # operands of different batch shapes (broadcast): the kernels without blocks
    feeds = _feeds()
    feeds["v"] = feeds["v"][:1]
    session = Session(_chain_model(feeds))
    assert _fused(session) == 1
    (y,) = session.run(feeds).values()
    _assert_within_bound(y, {**feeds, "v": np.broadcast_to(feeds["v"], (5, 3, 9, 6))})


@pytest.mark.parametrize("case", ["scores read", "probabilities read", "axis 1", "opset 11",
                                  "scores asked for", "session kernel"])
def test_chain_is_not_fused_where_its_intermediates_or_kernels_differ(case):
    feeds = _feeds()
    kwargs = {"extra": "s"} if case == "scores read" else \
        {"extra": "p"} if case == "probabilities read" else \
        {"axis": 1} if case == "axis 1" else {"opset": 11} if case == "opset 11" else {}
    model = _chain_model(feeds, **kwargs)
    kernels = {("", "MatMul"): lambda ctx, a, b: matmul_array(a, b)} \
        if case == "session kernel" else None
    session = Session(model, kernels=kernels)
    outputs = ["y", "s"] if case == "scores asked for" else None
    res = session.run(feeds, outputs=outputs)
    plan = session._plans[None if outputs is None else tuple(outputs)]
    assert not any(getattr(st.fn, "fused", None) is fusion.attention_chain
                   for st in plan.steps)
    if case in ("scores read", "probabilities read", "scores asked for", "session kernel"):
        _assert_within_bound(res["y"], feeds)


def test_error_in_a_fused_chain_names_its_last_node():
    from onemodel.errors import EvaluationError

    feeds = _feeds()
    feeds["v"] = feeds["v"][..., :8, :]  # n = 9 scores per row, 8 values
    session = Session(_chain_model(feeds), check_inputs=False)
    assert _fused(session) == 1
    with pytest.raises(EvaluationError, match=r"node 2 \(MatMul\) failed: .*in the fused "
                       r"MatMul \(node 0\) -> Softmax \(node 1\) -> MatMul \(node 2\)"):
        session.run(feeds)


def _linear_model(feeds, *, bias_first=False, reader=False):
    add = ["c", "y"] if bias_first else ["y", "c"]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", add, ["z"])]
    outputs = ["z"]
    if reader:
        nodes.append(helper.make_node("Neg", ["y"], ["n"]))
        outputs.append("n")
    graph = helper.make_graph(nodes, "g", [tensor_info(n, feeds[n]) for n in ("x", "w", "c")],
                              [helper.make_value_info(n, onnx.TypeProto()) for n in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return decode_model(model.SerializeToString())


@pytest.mark.parametrize("bias_shape", [(6,), (4, 1, 6), (1,), ()])
@pytest.mark.parametrize("bias_first", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_product_and_sum_fused_within_the_bound_of_exact(bias_shape, bias_first, dtype):
    # (4, 1, 6) broadcasts the product [3, 6] up: the sum is then a new array
    feeds = {"x": (RNG.standard_normal((3, 5)) * 4).astype(dtype),
             "w": (RNG.standard_normal((5, 6)) * 4).astype(dtype),
             "c": np.asarray(RNG.standard_normal(bias_shape) * 4).astype(dtype)}
    session = Session(_linear_model(feeds, bias_first=bias_first))
    assert len(session._main.steps) == 1
    assert session._main.steps[0].fn.fused is (fusion.sum_product if bias_first
                                               else fusion.product_sum)
    (z,) = session.run(feeds).values()
    x, w, c = (feeds[n].astype(np.float64) for n in ("x", "w", "c"))
    exact = x @ w + c
    assert z.dtype == dtype and z.shape == exact.shape
    if dtype == np.int64:
        np.testing.assert_array_equal(z, exact.astype(np.int64))  # small integers: exact
    else:
        # 5 products and the bias: at most 6 roundings of the sum of |terms|
        eps = 2.0 ** -24 if dtype == np.float32 else 2.0 ** -53
        assert np.all(np.abs(z - exact) <= 6 * eps * (np.abs(x) @ np.abs(w) + np.abs(c)))


def test_product_read_by_another_node_is_not_fused():
    feeds = {"x": RNG.standard_normal((3, 5)).astype(np.float32),
             "w": RNG.standard_normal((5, 6)).astype(np.float32),
             "c": RNG.standard_normal(6).astype(np.float32)}
    session = Session(_linear_model(feeds, reader=True))
    assert [st.node.op_type for st in session._main.steps] == ["MatMul", "Add", "Neg"]
    res = session.run(feeds)
    np.testing.assert_allclose(res["n"], -(feeds["x"].astype(np.float64) @ feeds["w"]),
                               rtol=1e-5, atol=1e-5)  # 5 products: float32 roundings only
    np.testing.assert_allclose(res["z"] + res["n"], np.broadcast_to(feeds["c"], (3, 6)),
                               rtol=0, atol=1e-5)


def _conv_relu_model(feeds, *, reader=False, bias=True):
    ins = ["x", "w", "b"] if bias else ["x", "w"]
    nodes = [helper.make_node("Conv", ins, ["y"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["y"], ["r"])]
    outputs = ["r"]
    if reader:  # the Conv's output read by another node too
        nodes.append(helper.make_node("Neg", ["y"], ["n"]))
        outputs.append("n")
    graph = helper.make_graph(nodes, "g", [tensor_info(n, feeds[n]) for n in ins],
                              [helper.make_value_info(n, onnx.TypeProto()) for n in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return decode_model(model.SerializeToString())


def _conv_feeds(dtype):
    return {"x": RNG.standard_normal((2, 3, 7, 9)).astype(dtype),
            "w": RNG.standard_normal((5, 3, 3, 3)).astype(dtype),
            "b": RNG.standard_normal(5).astype(dtype)}


def _conv_exact(feeds, bias=True):
    x, w = (feeds[n].astype(np.float64) for n in ("x", "w"))
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = sum(np.einsum("nchw,mc->nmhw", xp[:, :, i:i + 7, j:j + 9], w[:, :, i, j])
            for i in range(3) for j in range(3))
    mag = sum(np.einsum("nchw,mc->nmhw", np.abs(xp[:, :, i:i + 7, j:j + 9]),
                        np.abs(w[:, :, i, j])) for i in range(3) for j in range(3))
    if bias:
        y = y + feeds["b"].astype(np.float64)[None, :, None, None]
        mag = mag + np.abs(feeds["b"].astype(np.float64))[None, :, None, None]
    return y, mag


@pytest.mark.parametrize("pure", [False, True])  # the compiled Conv kernel, and numpy's path
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [True, False])
def test_conv_and_relu_fused_within_the_bound_of_exact(pure, dtype, bias, monkeypatch):
    if pure:
        monkeypatch.setenv("ONEMODEL_PURE_PYTHON", "1")
    feeds = _conv_feeds(dtype)
    if not bias:
        del feeds["b"]
    session = Session(_conv_relu_model(feeds, bias=bias))
    assert [getattr(st.fn, "fused", None) for st in session._main.steps] == [
        conv_module.conv_relu]
    (r,) = session.run(feeds).values()
    y, mag = _conv_exact(feeds, bias)
    # 27 products and the bias: at most 28 roundings of the sum of |terms|; Relu is exact
    eps = 2.0 ** -24 if dtype == np.float32 else 2.0 ** -53
    assert r.dtype == dtype and r.shape == y.shape
    assert np.all(np.abs(r - np.maximum(y, 0)) <= 28 * eps * mag)
    assert np.all(r >= 0)


def test_conv_read_by_another_node_is_not_fused_with_its_relu():
    feeds = _conv_feeds(np.float32)
    session = Session(_conv_relu_model(feeds, reader=True))
    assert [st.node.op_type for st in session._main.steps] == ["Conv", "Relu", "Neg"]
    res = session.run(feeds)
    y, mag = _conv_exact(feeds)
    assert np.all(np.abs(-res["n"] - y) <= 28 * EPS32 * mag)
    np.testing.assert_array_equal(res["r"], np.maximum(-res["n"], 0))  # Relu of the same sums


def test_fused_conv_and_relu_keep_nan():
    feeds = _conv_feeds(np.float32)
    feeds["x"][1, 2, 3, 4] = np.nan  # reaches the 3x3 windows around (3, 4) of sample 1
    (r,) = Session(_conv_relu_model(feeds)).run(feeds).values()
    nan = np.isnan(r)
    assert nan[1, :, 2:5, 3:6].all() and nan.sum() == 5 * 9


def _linear_relu_model(feeds, *, bias_first=False, reader=False):
    add = ["c", "y"] if bias_first else ["y", "c"]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", add, ["z"]),
             helper.make_node("Relu", ["z"], ["r"])]
    outputs = ["r"]
    if reader:  # the sum read by another node too: only MatMul -> Add is fused
        nodes.append(helper.make_node("Neg", ["z"], ["n"]))
        outputs.append("n")
    graph = helper.make_graph(nodes, "g", [tensor_info(n, feeds[n]) for n in ("x", "w", "c")],
                              [helper.make_value_info(n, onnx.TypeProto()) for n in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return decode_model(model.SerializeToString())


@pytest.mark.parametrize("bias_first", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_linear_layer_and_relu_fused_within_the_bound_of_exact(bias_first, dtype):
    feeds = {"x": (RNG.standard_normal((4, 5)) * 4).astype(dtype),
             "w": (RNG.standard_normal((5, 6)) * 4).astype(dtype),
             "c": (RNG.standard_normal(6) * 4).astype(dtype)}
    session = Session(_linear_relu_model(feeds, bias_first=bias_first))
    assert [st.fn.fused for st in session._main.steps] == [
        fusion.sum_product_relu if bias_first else fusion.product_sum_relu]
    (r,) = session.run(feeds).values()
    x, w, c = (feeds[n].astype(np.float64) for n in ("x", "w", "c"))
    exact = np.maximum(x @ w + c, 0)
    assert r.dtype == dtype and r.shape == exact.shape and np.all(r >= 0)
    if dtype == np.int64:
        np.testing.assert_array_equal(r, exact.astype(np.int64))  # small integers: exact
    else:  # 5 products and the bias: 6 roundings of the sum of |terms|; Relu is exact
        assert np.all(np.abs(r - exact) <= 6 * EPS32 * (np.abs(x) @ np.abs(w) + np.abs(c)))


def test_relu_of_a_sum_another_node_reads_is_not_fused():
    feeds = {"x": RNG.standard_normal((3, 5)).astype(np.float32),
             "w": RNG.standard_normal((5, 6)).astype(np.float32),
             "c": RNG.standard_normal(6).astype(np.float32)}
    session = Session(_linear_relu_model(feeds, reader=True))
    assert [getattr(st.fn, "fused", None) for st in session._main.steps] == [
        fusion.product_sum, None, None]
    res = session.run(feeds)
    np.testing.assert_array_equal(res["r"], np.maximum(-res["n"], 0))  # Relu of the same sums


def _add_ln_model(feeds, *, reader=False, bias=True):
    ins = ["s", "b"] if bias else ["s"]
    nodes = [helper.make_node("Add", ["x", "r"], ["z"]),
             helper.make_node("LayerNormalization", ["z"] + ins, ["y"], epsilon=1e-5)]
    outputs = ["y"]
    if reader:  # the sum read by another node too
        nodes.append(helper.make_node("Neg", ["z"], ["n"]))
        outputs.append("n")
    graph = helper.make_graph(nodes, "g", [tensor_info(n, feeds[n]) for n in ["x", "r"] + ins],
                              [helper.make_value_info(n, onnx.TypeProto()) for n in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return decode_model(model.SerializeToString())


def _layer_norm64(z, s, b):
    mean = z.mean(-1, keepdims=True)
    var = ((z - mean) ** 2).mean(-1, keepdims=True)
    y = (z - mean) / np.sqrt(var + np.float64(np.float32(1e-5))) * s
    return y if b is None else y + b


@pytest.mark.parametrize("pure", [False, True])  # the compiled kernel, and numpy's path
@pytest.mark.parametrize("r_shape", [(6, 40), (40,)])  # same shape, or broadcast (numpy's Add)
@pytest.mark.parametrize("bias", [True, False])
def test_add_and_layer_norm_fused_within_the_bound_of_exact(pure, r_shape, bias, monkeypatch):
    if pure:
        monkeypatch.setenv("ONEMODEL_PURE_PYTHON", "1")
    feeds = {"x": RNG.standard_normal((6, 40)).astype(np.float32),
             "r": RNG.standard_normal(r_shape).astype(np.float32),
             "s": RNG.standard_normal(40).astype(np.float32)}
    if bias:
        feeds["b"] = RNG.standard_normal(40).astype(np.float32)
    session = Session(_add_ln_model(feeds, bias=bias))
    assert [getattr(st.fn, "fused", None) for st in session._main.steps] == [
        norm_module.add_layer_norm]
    (y,) = session.run(feeds).values()
    # exact: the float32 sum (Add's result, exact to compute) normalized in float64; the
    # kernel's two passes of 40 terms and four roundings after: within 24 ulps of the scale
    # of |z - mean| * inv * |s| (the bound of tests/evaluate/test_layer_norm_kernel.py)
    z = (feeds["x"] + feeds["r"]).astype(np.float64)
    s = feeds["s"].astype(np.float64)
    b = feeds["b"].astype(np.float64) if bias else None
    exact = _layer_norm64(z, s, b)
    inv = 1 / np.sqrt(((z - z.mean(-1, keepdims=True)) ** 2).mean(-1, keepdims=True) + 1e-5)
    scale = (np.abs(z).mean(-1, keepdims=True) + np.abs(z)) * inv * np.abs(s)
    assert y.dtype == np.float32 and y.shape == exact.shape
    assert np.all(np.abs(y - exact) <= (40 / 32 + 16) * EPS32 * scale
                  + (2 * EPS32 * np.abs(b) if bias else 0))


def test_add_read_by_another_node_is_not_fused_with_its_layer_norm():
    feeds = {"x": RNG.standard_normal((3, 8)).astype(np.float32),
             "r": RNG.standard_normal((3, 8)).astype(np.float32),
             "s": np.ones(8, np.float32), "b": np.zeros(8, np.float32)}
    session = Session(_add_ln_model(feeds, reader=True))
    assert [st.node.op_type for st in session._main.steps] == ["Add", "LayerNormalization",
                                                                "Neg"]
    res = session.run(feeds)
    np.testing.assert_array_equal(-res["n"], feeds["x"] + feeds["r"])


def test_fused_add_and_layer_norm_of_float16_rounds_the_sum_to_float16():
    # Add in float16 rounds each sum; LayerNormalization then stashes in float32: the fused
    # step must give the unfused nodes' values exactly (both go through numpy here)
    x = RNG.standard_normal((4, 16)).astype(np.float16)
    r = RNG.standard_normal((4, 16)).astype(np.float16)
    feeds = {"x": x, "r": r, "s": np.ones(16, np.float16), "b": np.zeros(16, np.float16)}
    (y,) = Session(_add_ln_model(feeds)).run(feeds).values()
    fused_off = Session(_add_ln_model(feeds, reader=True)).run(feeds)["y"]
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, fused_off)


def test_two_chains_back_to_back_fuse_the_first_and_compute_the_second():
    """MatMul -> Softmax -> MatMul -> Softmax -> MatMul: the first chain is fused; its last
    MatMul (now the fused step) starts no second chain, whose nodes run as they are."""
    feeds = _feeds(lead=(2,), m=4, k=3, n=4, d=4)
    feeds["v2"] = RNG.standard_normal((2, 4, 5)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["q", "k"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"]),
             helper.make_node("MatMul", ["p", "v"], ["y"]),
             helper.make_node("Softmax", ["y"], ["p2"]),
             helper.make_node("MatMul", ["p2", "v2"], ["z"])]
    graph = helper.make_graph(nodes, "g", [tensor_info(n, feeds[n]) for n in ("q", "k", "v", "v2")],
                              [helper.make_value_info("z", onnx.TypeProto())])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    session = Session(decode_model(model.SerializeToString()))
    assert [st.node.op_type for st in session._main.steps] == ["MatMul", "Softmax", "MatMul"]
    assert _fused(session) == 1
    (z,) = session.run(feeds).values()
    q, k, v, v2 = (feeds[n].astype(np.float64) for n in ("q", "k", "v", "v2"))

    def softmax(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    np.testing.assert_allclose(z, softmax(softmax(q @ k) @ v) @ v2, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_a_dot_product_and_a_scalar_bias_fused(relu, dtype):
    """MatMul of two vectors is a 0-d value (numpy gives a scalar): the fused sum (and Relu)
    return a 0-d array of it, as the nodes do."""
    feeds = {"x": np.arange(1, 9).astype(dtype), "w": np.arange(8, 0, -1).astype(dtype),
             "c": np.asarray(-200, dtype)}
    model = _linear_relu_model(feeds) if relu else _linear_model(feeds)
    (r,) = Session(model).run(feeds).values()
    exact = sum(i * (9 - i) for i in range(1, 9)) - 200  # 120 - 200
    assert np.asarray(r).shape == () and np.asarray(r).dtype == dtype
    assert r == (max(exact, 0) if relu else exact)


@pytest.mark.parametrize("pure", [False, True])
def test_attention_of_large_values_stays_finite(pure, monkeypatch):
    """|v| n beyond the largest float32: the probabilities are formed before the products
    with v (as Softmax -> MatMul computes them), so nothing overflows that the nodes keep
    finite: equal scores average v's rows."""
    if pure:
        monkeypatch.setenv("ONEMODEL_PURE_PYTHON", "1")
    feeds = {"q": np.zeros((2, 3, 4, 4), np.float32), "k": np.zeros((2, 3, 4, 6), np.float32),
             "v": np.full((2, 3, 6, 5), 3e38, np.float32)}
    feeds["v"][..., 0, :] = 1e38
    (y,) = Session(_chain_model(feeds)).run(feeds).values()
    exact = (1e38 + 5 * 3e38) / 6
    assert np.isfinite(y).all()
    np.testing.assert_allclose(y, exact, rtol=8 * EPS32)  # 6 roundings of the sum, a division


def _scaled_chain_model(feeds, *, reader=False):
    nodes = [helper.make_node("Mul", ["q", "sq"], ["qs"]),
             helper.make_node("Mul", ["sk", "k"], ["ks"]),  # the scale first
             helper.make_node("MatMul", ["qs", "ks"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"]),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    outputs = ["y"]
    if reader:  # the scaled q read by another node too
        nodes.append(helper.make_node("Neg", ["qs"], ["n"]))
        outputs.append("n")
    ins = ("q", "sq", "k", "sk", "v")
    graph = helper.make_graph(nodes, "g", [tensor_info(n, feeds[n]) for n in ins],
                              [helper.make_value_info(n, onnx.TypeProto()) for n in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return decode_model(model.SerializeToString())


@pytest.mark.parametrize("scales", ["scalars", "a row of scales", "float64"])
@pytest.mark.parametrize("pure", [True, False])
def test_mul_scaling_q_and_k_runs_inside_the_chain(scales, pure, monkeypatch):
    """Mul nodes that only the chain reads run inside it: a float32 tensor times one float32
    value is multiplied as the compiled kernel packs it (the same float32 products), any other
    Mul by its own kernel first. Either way the values are those of the chain on the Mul nodes'
    products, bit for bit (the same kernels on the same operands)."""
    if pure:
        monkeypatch.setenv("ONEMODEL_PURE_PYTHON", "1")
    dtype = np.float64 if scales == "float64" else np.float32
    feeds = _feeds(dtype=dtype)
    feeds["sq"] = np.asarray([0.35355339], dtype) if scales != "a row of scales" else \
        RNG.uniform(0.2, 0.6, 4).astype(dtype)
    feeds["sk"] = np.asarray(1.7, dtype)
    feeds["k"] = np.ascontiguousarray(feeds["k"].swapaxes(-1, -2)).swapaxes(-1, -2)  # a view
    session = Session(_scaled_chain_model(feeds))
    assert len(session._main.steps) == 1  # both Mul nodes inside the chain's step
    assert session._main.steps[0].fn.fused.__name__ == "attention_chain_scaled"
    (y,) = session.run(feeds).values()
    scaled = {"q": feeds["q"] * feeds["sq"], "k": feeds["sk"] * feeds["k"], "v": feeds["v"]}
    (want,) = Session(_chain_model(scaled)).run(scaled).values()
    np.testing.assert_array_equal(y, want)
    _assert_within_bound(y, scaled)


def test_mul_read_by_another_node_stays_a_node():
    feeds = _feeds()
    feeds["sq"] = np.asarray([0.5], np.float32)
    feeds["sk"] = np.asarray(2.0, np.float32)
    session = Session(_scaled_chain_model(feeds, reader=True))
    ops = [st.node.op_type for st in session._main.steps]
    assert ops == ["Mul", "MatMul", "Neg"]  # the Mul of k inside the chain, the Mul of q not
    res = session.run(feeds)
    np.testing.assert_array_equal(res["n"], -(feeds["q"] * feeds["sq"]))
    _assert_within_bound(res["y"], {"q": feeds["q"] * 0.5, "k": feeds["k"] * 2, "v": feeds["v"]})


@pytest.mark.parametrize("relu", [False, True])
def test_bias_of_a_transposed_view_s_product_is_added_through_its_packed_base(relu):
    """MatMul of a Transpose's view by a matrix gives a transposed view of a packed product;
    the fused Add (and Relu) run on it in place: numpy's values, bit for bit (one addition
    and a maximum per element)."""
    x = RNG.standard_normal((6, 4, 5)).astype(np.float32).transpose(1, 0, 2)
    w = RNG.standard_normal((5, 8)).astype(np.float32)
    c = RNG.standard_normal(8).astype(np.float32)
    y = (fusion.product_sum_relu if relu else fusion.product_sum)(None, x, w, c)
    want = matmul_array(x, w) + c
    if relu:
        want = np.maximum(want, np.float32(0))
    assert not y.flags.c_contiguous  # the product's layout, kept
    np.testing.assert_array_equal(y, want)


def test_chain_read_by_a_transpose_lays_its_result_out_for_it():
    """A chain whose result only a Transpose reads (attention's heads put back together) writes
    it in the Transpose's order: the Transpose's view is packed, the values those of the nodes
    one by one (within the bound of float64; bit for bit those of the chain without it)."""
    feeds = _feeds(lead=(5, 3))
    nodes = [helper.make_node("MatMul", ["q", "k"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"]),
             helper.make_node("MatMul", ["p", "v"], ["y"]),
             helper.make_node("Transpose", ["y"], ["t"], perm=[2, 0, 1, 3])]
    graph = helper.make_graph(nodes, "g", [tensor_info(n, feeds[n]) for n in ("q", "k", "v")],
                              [helper.make_value_info("t", onnx.TypeProto())])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    session = Session(decode_model(model.SerializeToString()))
    names = [getattr(st.fn, "fused", st.fn).__name__ for st in session._main.steps]
    assert names == ["attention_chain_laid_out", "transpose"]
    (t,) = session.run(feeds).values()
    (y,) = Session(_chain_model(feeds)).run(feeds).values()
    np.testing.assert_array_equal(t, y.transpose(2, 0, 1, 3))
    _assert_within_bound(t.transpose(1, 2, 0, 3), feeds)
    if fusion.ckernels.enabled():
        assert t.flags.c_contiguous


def _view_chain_model(feeds, *, reader=False, opset=17):
    nodes = [helper.make_node("Reshape", ["x", "s1"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0, 2]),
             helper.make_node("Reshape", ["t", "s2"], ["y"])]
    outputs = ["y"]
    if reader:
        nodes.append(helper.make_node("Neg", ["r"], ["n"]))
        outputs.append("n")
    graph = helper.make_graph(nodes, "g", [tensor_info("x", feeds["x"])], [
        helper.make_value_info(n, onnx.TypeProto()) for n in outputs],
        initializer=[onnx.numpy_helper.from_array(feeds[n], n) for n in ("s1", "s2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return decode_model(model.SerializeToString())


@pytest.mark.parametrize("reader", [False, True])
def test_reshape_transpose_reshape_runs_as_one_view_step(reader):
    """Reshape -> Transpose -> Reshape with its intermediates read by no other node is one step
    whose result (the values of the nodes one by one) is a view of its input where the strides
    allow (an export's heads split from a projection); with the first Reshape read by another
    node the three stay nodes."""
    x = np.arange(5 * 2 * 8, dtype=np.float32).reshape(5, 2, 8)
    feeds = {"x": x, "s1": np.array([5, -1, 4], np.int64), "s2": np.array([2, 2, 5, 4], np.int64)}
    session = Session(_view_chain_model(feeds, reader=reader))
    names = [getattr(st.fn, "fused", st.fn).__name__ for st in session._main.steps]
    assert names == (["reshape", "transpose", "reshape", "neg"] if reader
                     else ["reshape_view_chain"])
    res = session.run({"x": x})
    np.testing.assert_array_equal(res["y"], x.reshape(5, 4, 4).transpose(1, 0, 2)
                                  .reshape(2, 2, 5, 4))


def test_a_kernel_s_own_error_in_a_fused_step_names_the_chain():
    from onemodel.errors import EvaluationError
    x = np.zeros((2, 3, 4), np.float32)
    feeds = {"x": x, "s1": np.array([-1, -1], np.int64), "s2": np.array([24], np.int64)}
    session = Session(_view_chain_model(feeds))
    with pytest.raises(EvaluationError, match=r"node 2 \(Reshape\) failed: in the fused Reshape "
                       r"\(node 0\) -> Transpose \(node 1\) -> Reshape \(node 2\): shape \[-1, "
                       r"-1\] has more than one -1"):
        session.run({"x": x})


def _conv_silu_model(feeds, *, swapped=False, reader=False, group=1):
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], group=group),
             helper.make_node("Sigmoid", ["y"], ["s"]),
             helper.make_node("Mul", ["s", "y"] if swapped else ["y", "s"], ["z"])]
    outputs = ["z"]
    if reader:  # the Sigmoid's output read by another node too
        nodes.append(helper.make_node("Neg", ["s"], ["n"]))
        outputs.append("n")
    graph = helper.make_graph(nodes, "g", [tensor_info(n, feeds[n]) for n in ("x", "w", "b")],
                              [helper.make_value_info(n, onnx.TypeProto()) for n in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return decode_model(model.SerializeToString())


@pytest.mark.parametrize("pure", [False, True])  # the compiled Conv kernels, and numpy's path
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("swapped", [False, True])
@pytest.mark.parametrize("group", [1, 3])  # one group, and depthwise
def test_conv_sigmoid_mul_fused_as_silu_with_the_values_of_the_three_nodes(
        pure, dtype, swapped, group, monkeypatch):
    if pure:
        monkeypatch.setenv("ONEMODEL_PURE_PYTHON", "1")
    feeds = _conv_feeds(dtype)
    if group == 3:
        feeds["w"] = RNG.standard_normal((3, 1, 3, 3)).astype(dtype)
        feeds["b"] = RNG.standard_normal(3).astype(dtype)
    model = _conv_silu_model(feeds, swapped=swapped, group=group)
    session = Session(model)
    assert [getattr(st.fn, "fused", None) for st in session._main.steps] == [
        conv_module.conv_silu]
    (z,) = session.run(feeds).values()
    # the three nodes one by one (fusion off): the same bits (the Sigmoid kernel's values,
    # then the product Mul rounds)
    monkeypatch.setattr(fusion, "fuse_attention", lambda steps, *a, **k: steps)
    import onemodel.evaluate.runner as runner_module
    monkeypatch.setattr(runner_module, "fuse_attention", lambda steps, *a, **k: steps)
    plain = Session(model)
    assert [st.node.op_type for st in plain._main.steps] == ["Conv", "Sigmoid", "Mul"]
    (want,) = plain.run(feeds).values()
    assert z.dtype == want.dtype == dtype and z.shape == want.shape
    np.testing.assert_array_equal(np.ascontiguousarray(z).view(np.uint8),
                                  np.ascontiguousarray(want).view(np.uint8))
    # and it is SiLU: y * sigmoid(y), within float rounding of the float64 computation
    if dtype == np.float32 and group == 1:
        y, mag = _conv_exact(feeds)
        silu = y / (1 + np.exp(-y))
        assert np.all(np.abs(z - silu) <= 40 * EPS32 * (mag + np.abs(silu)))


def test_a_sigmoid_another_node_reads_is_not_fused():
    feeds = _conv_feeds(np.float32)
    session = Session(_conv_silu_model(feeds, reader=True))
    assert [st.node.op_type for st in session._main.steps] == ["Conv", "Sigmoid", "Mul", "Neg"]
