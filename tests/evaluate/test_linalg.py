"""MatMul, Gemm, Einsum, Det (onemodel/evaluate/kernels/linalg.py) against onnx.reference."""

from __future__ import annotations

import numpy as np
import pytest

from oracle import assert_outputs, node_model, ours, reference

RNG = np.random.default_rng(2)


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
    want = (feeds["a"].astype(np.float32) @ feeds["b"].astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(y, want)


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
    feeds = {"a": _r(*a), "b": _r(*b)}
    (y,) = ours(node_model("MatMul", feeds, ["a", "b"], ["y"]), feeds)
    np.testing.assert_allclose(y, np.matmul(feeds["a"], feeds["b"]), rtol=1e-6, atol=1e-6)
    assert y.shape == a[:-1] + (b[1],)
