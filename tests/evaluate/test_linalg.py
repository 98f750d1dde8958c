"""MatMul, Gemm, Einsum, Det (onemodel/evaluate/kernels/linalg.py) against onnx.reference and
exact float64 products with a stated bound."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import assert_outputs, node_model, ours, reference

RNG = np.random.default_rng(2)
EPS32 = float(np.finfo(np.float32).eps)


def _r(*shape, dtype=np.float32):
    return RNG.uniform(-1, 1, shape).astype(dtype)


@pytest.mark.parametrize("a, b", [((3, 4), (4, 5)), ((2, 3, 4), (4, 2)), ((4,), (4, 3)),
                                  ((2, 1, 3, 4), (5, 4, 2)), ((3,), (3,))])
def test_matmul_shapes(a, b):
    feeds = {"a": _r(*a), "b": _r(*b)}
    model = node_model("MatMul", feeds, ["a", "b"], ["y"])
    assert_outputs(ours(model, feeds), reference(model, feeds), rtol=1e-5)


def test_matmul_integers_and_float16():
    feeds = {"a": np.arange(6, dtype=np.int32).reshape(2, 3),
             "b": np.arange(6, dtype=np.int32).reshape(3, 2)}
    (y,) = ours(node_model("MatMul", feeds, ["a", "b"], ["y"]), feeds)
    np.testing.assert_array_equal(y, feeds["a"] @ feeds["b"])
    assert y.dtype == np.int32
    feeds = {"a": _r(3, 4, dtype=np.float16), "b": _r(4, 2, dtype=np.float16)}
    (y,) = ours(node_model("MatMul", feeds, ["a", "b"], ["y"]), feeds)
    assert y.dtype == np.float16
    # float16 result of a K=4 product: within half a float16 ulp (2**-11 relative) of the exact
    # float64 product, plus the float32 accumulation (4 * eps32 * sum |a||b|) before rounding.
    a64, b64 = feeds["a"].astype(np.float64), feeds["b"].astype(np.float64)
    exact = a64 @ b64
    bound = 2.0 ** -11 * np.abs(exact) + 4.04 * EPS32 * (np.abs(a64) @ np.abs(b64)) + 2.0 ** -25
    assert np.all(np.abs(y.astype(np.float64) - exact) <= bound)


@pytest.mark.parametrize("attrs, c_shape", [({}, None), ({"transA": 1}, (5,)),
                                            ({"transB": 1, "alpha": 0.5, "beta": 2.0}, (3, 1)),
                                            ({"transA": 1, "transB": 1}, (3, 5))])
def test_gemm(attrs, c_shape):
    a = _r(4, 3) if attrs.get("transA") else _r(3, 4)
    b = _r(5, 4) if attrs.get("transB") else _r(4, 5)
    feeds = {"a": a, "b": b}
    names = ["a", "b"]
    if c_shape is not None:
        feeds["c"] = _r(*c_shape)
        names.append("c")
    model = node_model("Gemm", feeds, names, ["y"], **attrs)
    assert_outputs(ours(model, feeds), reference(model, feeds), rtol=1e-5)


@pytest.mark.parametrize("eq, shapes", [("ij,jk->ik", [(2, 3), (3, 4)]),
                                        ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
                                        ("ii->i", [(3, 3)]), ("ij->", [(2, 3)]),
                                        ("i,j", [(2,), (3,)]),
                                        ("...ij,...jk", [(2, 2, 3), (3, 2)])])
def test_einsum(eq, shapes):
    feeds = {f"x{i}": _r(*s) for i, s in enumerate(shapes)}
    model = node_model("Einsum", feeds, list(feeds), ["y"], equation=eq)
    assert_outputs(ours(model, feeds), reference(model, feeds), rtol=1e-5)


def test_det():
    feeds = {"x": np.array([[[2, 0], [0, 3]], [[1, 2], [3, 4]]], np.float32)}
    (y,) = ours(node_model("Det", feeds, ["x"], ["y"]), feeds)
    np.testing.assert_allclose(y, [6, -2], rtol=1e-6)


@pytest.mark.parametrize("a, b", [((300, 64), (64, 64)), ((4, 77, 64), (64, 128)),
                                  ((7, 130, 128), (128, 96))])
def test_products_split_into_single_thread_pieces_are_exact(a, b):
    # 300 x 64 x 64 and the others fall between one BLAS thread's share and "small": they run as
    # stacks of row blocks (with a remainder block); the values must be those of one product.
    # The oracle is the float64 product (exact to 2**-53 relative for these sizes), not a float32
    # BLAS call: float32 kernels (OpenBLAS Haswell, SkylakeX, Sandybridge...) sum in different
    # orders. A float32 dot product of K terms summed in any order is within
    # K * eps32 * sum_k |a_ik| |b_kj| of the exact value (Higham, Accuracy and Stability of
    # Numerical Algorithms, 2nd ed., eq. 3.5, with the gamma_K <= 1.01 K eps bound); the test
    # allows exactly that bound, elementwise.
    feeds = {"a": _r(*a), "b": _r(*b)}
    (y,) = ours(node_model("MatMul", feeds, ["a", "b"], ["y"]), feeds)
    assert y.dtype == np.float32 and y.shape == a[:-1] + (b[1],)
    a64, b64 = feeds["a"].astype(np.float64), feeds["b"].astype(np.float64)
    exact = np.matmul(a64, b64)
    k = a[-1]
    bound = 1.01 * k * EPS32 * np.matmul(np.abs(a64), np.abs(b64))
    err = np.abs(y.astype(np.float64) - exact)
    assert np.all(err <= bound), f"max error / bound {float((err / bound).max()):.3g}"
    # the bound is a real constraint: a wrong block (one row left out) exceeds it by far
    assert float(bound.max()) < 1e-3
