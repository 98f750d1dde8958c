"""Shape and indexing kernels (onemodel/evaluate/kernels/shape.py) against onnx.reference and
hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper
from oracle import assert_outputs, node_model, ours, reference

from onemodel.errors import EvaluationError

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
I64 = np.int64


def _check(op_type, feeds, names, outputs=("y",), opset=21, **attrs):
    model = node_model(op_type, feeds, names, list(outputs), opset=opset, **attrs)
    got = ours(model, {k: v for k, v in feeds.items() if k in names})
    assert_outputs(got, reference(model, {k: v for k, v in feeds.items() if k in names}))
    return got


@pytest.mark.parametrize("shape, allowzero", [([4, -1], 0), ([0, 12], 0), ([2, 0, 4], 0),
                                              ([-1], 0), ([3, 8], 1)])
def test_reshape(shape, allowzero):
    _check("Reshape", {"x": X, "s": np.array(shape, I64)}, ["x", "s"], allowzero=allowzero)


def test_reshape_allowzero_keeps_zero_extent():
    feeds = {"x": np.zeros((0, 3), np.float32), "s": np.array([3, 0], I64)}
    (y,) = ours(node_model("Reshape", feeds, ["x", "s"], ["y"], allowzero=1), feeds)
    assert y.shape == (3, 0)


def test_transpose_squeeze_unsqueeze_flatten():
    _check("Transpose", {"x": X}, ["x"])
    _check("Transpose", {"x": X}, ["x"], perm=[1, 0, 2])
    x1 = X.reshape(2, 1, 3, 1, 4)
    _check("Squeeze", {"x": x1, "a": np.array([1, -2], I64)}, ["x", "a"])
    _check("Squeeze", {"x": x1}, ["x"])
    _check("Unsqueeze", {"x": X, "a": np.array([0, -1], I64)}, ["x", "a"])
    _check("Unsqueeze", {"x": X}, ["x"], opset=11, axes=[1, 4])
    for axis in (0, 2, -1, 3):
        _check("Flatten", {"x": X}, ["x"], axis=axis)


def test_views_do_not_copy_the_input():
    feeds = {"x": X, "s": np.array([6, 4], I64)}
    (y,) = ours(node_model("Reshape", feeds, ["x", "s"], ["y"]), feeds)
    assert np.shares_memory(y, X)


def test_concat_split_slice():
    _check("Concat", {"a": X, "b": X[:, :1]}, ["a", "b"], axis=1)
    _check("Concat", {"a": X, "b": X}, ["a", "b"], axis=-1)
    _check("Split", {"x": X, "s": np.array([1, 3], I64)}, ["x", "s"], outputs=("p", "q"), axis=2)
    _check("Split", {"x": X}, ["x"], outputs=("p", "q", "r"), axis=1)
    _check("Split", {"x": X}, ["x"], outputs=("p", "q", "r"), axis=2, num_outputs=3, opset=18)
    _check("Split", {"x": X}, ["x"], outputs=("p", "q"), axis=0, opset=11, split=[1, 1])
    for starts, ends, axes, steps in (([0, 1], [2, 3], [0, 1], [1, 1]),
                                      ([-1], [-1000], [2], [-1]),
                                      ([3], [0], [2], [-2]),
                                      ([1], [2 ** 62], [1], [1]),
                                      ([0, 0, 3], [9, 9, 0], [0, 1, 2], [2, 2, -1])):
        feeds = {"x": X, "st": np.array(starts, I64), "en": np.array(ends, I64),
                 "ax": np.array(axes, I64), "sp": np.array(steps, I64)}
        _check("Slice", feeds, ["x", "st", "en", "ax", "sp"])


def test_gather_family():
    idx = np.array([[0, -1], [1, 0]], I64)
    _check("Gather", {"x": X, "i": idx}, ["x", "i"], axis=1)
    _check("Gather", {"x": X, "i": np.array(1, I64)}, ["x", "i"], axis=2)
    gi = np.array([[[0, 2, 1, 0]] * 2, [[1, 1, 0, 2]] * 2], I64)
    _check("GatherElements", {"x": X, "i": gi}, ["x", "i"], axis=1)
    _check("GatherND", {"x": X, "i": np.array([[0, 1], [1, 2]], I64)}, ["x", "i"])
    _check("GatherND", {"x": X, "i": np.array([[1], [0]], I64)}, ["x", "i"], batch_dims=1)


def test_gather_out_of_range_is_an_error_with_location():
    from onemodel.errors import EvaluationError
    feeds = {"x": X, "i": np.array([5], I64)}
    with pytest.raises(EvaluationError, match="out of (range|bounds)") as e:
        ours(node_model("Gather", feeds, ["x", "i"], ["y"]), feeds)
    assert e.value.path.startswith("graph.nodes[0]")


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_family(reduction):
    d = np.arange(8, dtype=np.float32).reshape(2, 4)
    feeds = {"d": d, "i": np.array([[1], [0]], I64), "u": np.full((2, 4), 3, np.float32)}
    _check("ScatterND", feeds, ["d", "i", "u"], reduction=reduction)
    feeds = {"d": d, "i": np.array([[1, 3], [0, 0]], I64),
             "u": np.array([[10, 20], [30, 40]], np.float32)}
    _check("ScatterElements", feeds, ["d", "i", "u"], axis=1, reduction=reduction)


def test_expand_tile_pad():
    _check("Expand", {"x": np.array([[1], [2]], np.float32), "s": np.array([2, 1, 3], I64)},
           ["x", "s"])
    _check("Tile", {"x": X, "r": np.array([1, 2, 3], I64)}, ["x", "r"])
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for mode in ("constant", "reflect", "edge", "wrap"):
        feeds = {"x": x, "p": np.array([1, 2, 1, 2], I64), "v": np.array(9, np.float32)}
        _check("Pad", feeds, ["x", "p", "v"] if mode == "constant" else ["x", "p"], mode=mode)
    feeds = {"x": x, "p": np.array([-1, 1], I64), "v": np.array(0, np.float32),
             "a": np.array([1], I64)}
    (y,) = ours(node_model("Pad", feeds, ["x", "p", "v", "a"], ["y"]), feeds)
    np.testing.assert_array_equal(y, np.pad(x[:, 1:], [(0, 0), (0, 1)]))
    # cropping the whole axis leaves it empty; cropping more than it holds is an error (a
    # negative slice end would wrap around and give elements back)
    feeds = {"x": x, "p": np.array([0, -2, 0, -2], I64)}
    (y,) = ours(node_model("Pad", feeds, ["x", "p"], ["y"]), feeds)
    assert y.shape == (3, 0)
    feeds = {"x": x, "p": np.array([0, -3, 0, -2], I64)}
    with pytest.raises(EvaluationError, match="crop 5 elements from axis 1 of extent 4"):
        ours(node_model("Pad", feeds, ["x", "p"], ["y"]), feeds)


def test_generators():
    _check("Shape", {"x": X}, ["x"])
    _check("Shape", {"x": X}, ["x"], start=-2, end=10)
    _check("Size", {"x": X}, ["x"])
    value = numpy_helper.from_array(np.array([7], np.int32))
    _check("ConstantOfShape", {"s": np.array([2, 3], I64)}, ["s"], value=value)
    _check("ConstantOfShape", {"s": np.array([], I64)}, ["s"])
    _check("Range", {"a": np.array(1, I64), "b": np.array(10, I64), "c": np.array(3, I64)},
           ["a", "b", "c"])
    _check("Range", {"a": np.array(1.0, np.float32), "b": np.array(-2, np.float32),
                     "c": np.array(-0.5, np.float32)}, ["a", "b", "c"])
    _check("EyeLike", {"x": np.zeros((3, 4), np.float32)}, ["x"], k=1)
    _check("EyeLike", {"x": np.zeros((3, 2), np.int32)}, ["x"], dtype=1, k=-1)
    for upper in (0, 1):
        _check("Trilu", {"x": X, "k": np.array(1, I64)}, ["x", "k"], upper=upper)
    _check("OneHot", {"i": np.array([[0, 2], [-1, 5]], I64), "d": np.array(4, I64),
                      "v": np.array([0, 1], np.float32)}, ["i", "d", "v"], axis=1)
    _check("NonZero", {"x": np.array([[1, 0], [0, 3]], np.int32)}, ["x"])


def test_constant_value_attributes():
    for attr, value, want in (("value_float", 1.5, np.array(1.5, np.float32)),
                              ("value_floats", [1.0, 2.0], np.array([1, 2], np.float32)),
                              ("value_int", 3, np.array(3, I64)),
                              ("value_ints", [4, 5], np.array([4, 5], I64)),
                              ("value_string", "hi", np.array("hi", dtype=object)),
                              ("value_strings", ["a", "b"], np.array(["a", "b"], dtype=object)),
                              ("value", numpy_helper.from_array(X), X)):
        (y,) = ours(node_model("Constant", {}, [], ["y"], **{attr: value}), {})
        assert y.dtype == want.dtype and y.shape == want.shape
        assert y.tolist() == want.tolist()


def test_rearrangements():
    x = np.arange(32, dtype=np.float32).reshape(1, 8, 2, 2)
    for mode in ("DCR", "CRD"):
        _check("DepthToSpace", {"x": x}, ["x"], blocksize=2, mode=mode)
    _check("SpaceToDepth", {"x": x}, ["x"], blocksize=2)
    (y,) = ours(node_model("SpaceToDepth", {"x": x}, ["x"], ["y"], opset=28, blocksize=2,
                           mode="CRD"), {"x": x})
    back = ours(node_model("DepthToSpace", {"y": y}, ["y"], ["z"], blocksize=2, mode="CRD"),
                {"y": y})[0]
    np.testing.assert_array_equal(back, x)
    _check("Compress", {"x": X, "c": np.array([True, False, True])}, ["x", "c"], axis=1)
    _check("Compress", {"x": X, "c": np.array([False, True, True])}, ["x", "c"])
    seq = np.arange(20, dtype=np.float32).reshape(4, 5)
    _check("ReverseSequence", {"x": seq, "l": np.array([4, 3, 2, 1, 4], I64)}, ["x", "l"],
           batch_axis=1, time_axis=0)
    _check("ReverseSequence", {"x": seq, "l": np.array([1, 2, 3, 5], I64)}, ["x", "l"],
           batch_axis=0, time_axis=1)
    _check("CenterCropPad", {"x": X, "s": np.array([1, 5], I64)}, ["x", "s"], axes=[1, 2])


@pytest.mark.parametrize("attrs", [{}, {"axis": 0}, {"axis": 1, "sorted": 1}])
def test_unique(attrs):
    x = np.array([[2, 1, 2], [3, 1, 3], [2, 1, 2]], np.int64)
    _check("Unique", {"x": x}, ["x"], outputs=("y", "i", "inv", "c"), **attrs)


def test_unique_unsorted_keeps_first_occurrence_order():
    # (onnx.reference fails on this case, so the values are written out)
    x = np.array([[2, 1, 2], [3, 1, 3], [2, 1, 2]], np.int64)
    y, i, inv, c = ours(node_model("Unique", {"x": x}, ["x"], ["y", "i", "inv", "c"], sorted=0),
                        {"x": x})
    np.testing.assert_array_equal(y, [2, 1, 3])
    np.testing.assert_array_equal(i, [0, 1, 3])
    np.testing.assert_array_equal(inv, [0, 1, 0, 2, 1, 2, 0, 1, 0])
    np.testing.assert_array_equal(c, [4, 3, 2])


@pytest.mark.parametrize("shape, kind", [([1 << 30, 1 << 30], "Unsupported"),
                                         ([1 << 40, 1 << 40], "InvalidModel"),
                                         ([3, -1], "InvalidModel")])
def test_constant_of_shape_refuses_impossible_shapes_before_allocating(shape, kind):
    from onemodel.errors import OneModelError
    feeds = {"s": np.array(shape, I64)}
    with pytest.raises(OneModelError) as info:
        ours(node_model("ConstantOfShape", feeds, ["s"], ["y"]), feeds)
    assert info.value.kind == kind
    assert "ConstantOfShape shape" in info.value.message


def _rtr_sequential(x, s1, z1, perm, s2, z2):
    from onemodel.evaluate.kernels import shape as shape_kernels
    return shape_kernels._reshape(np.transpose(shape_kernels._reshape(x, s1, z1), perm), s2, z2)


def test_reshape_transpose_reshape_of_an_export_s_heads_is_a_view():
    """[seq, batch, heads * d] (a select of a packed projection) -> [seq, batch * heads, d] ->
    [batch * heads, seq, d] -> [batch, heads, seq, d]: the nodes one by one copy at the first
    Reshape; the chain gives the same values as a view of the projection."""
    from onemodel.evaluate.kernels.shape import reshape_transpose_reshape
    proj = np.arange(2 * 5 * 24, dtype=np.float32).reshape(2, 5, 24).transpose(1, 0, 2)
    q = proj[:, :, 8:16]                                   # [5, 2, 8]: heads 2 of d 4
    got = reshape_transpose_reshape(q, [5, -1, 4], 0, [1, 0, 2], [2, 2, 5, 4], 0)
    want = _rtr_sequential(q, [5, -1, 4], 0, [1, 0, 2], [2, 2, 5, 4], 0)
    assert np.shares_memory(got, proj) and got.shape == (2, 2, 5, 4)
    np.testing.assert_array_equal(got, want)


def test_reshape_transpose_reshape_equals_the_nodes_on_random_shapes():
    """Any shapes that nest or not (then the chain copies as the nodes do), axes of 1, 0 and -1
    in the shapes, allowzero, the reversed axes (perm None), views as input: the values and the
    shape of the nodes one by one."""
    from onemodel.evaluate.kernels.shape import reshape_transpose_reshape
    rng = np.random.default_rng(5)

    def factors(n):
        out = []
        while n > 1:
            d = int(rng.choice([f for f in (2, 3, 4, 6, n) if n % f == 0]))
            out.append(d)
            n //= d
        if rng.random() < 0.3:
            out.insert(int(rng.integers(0, len(out) + 1)), 1)
        return out or [1]

    for _ in range(400):
        shape = tuple(int(v) for v in rng.choice([1, 2, 3, 4, 6], int(rng.integers(1, 4))))
        x = rng.standard_normal(shape).astype(np.float32)
        if x.ndim > 1 and rng.random() < 0.5:
            x = x.transpose(rng.permutation(x.ndim))
        s1, s2 = factors(x.size), factors(x.size)
        perm = None if rng.random() < 0.2 else [int(p) for p in rng.permutation(len(s1))]
        if rng.random() < 0.3:
            s1[int(rng.integers(0, len(s1)))] = -1
        got = reshape_transpose_reshape(x, s1, 0, perm, s2, 1)
        want = _rtr_sequential(x, s1, 0, perm, s2, 1)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("s1, perm, s2", [([5, 5], [1, 0], [25]), ([4, 6], [0, 1, 2], [24]),
                                          ([4, 6], [1, 0], [-1, -1]), ([0, 8], [1, 0], [24])])
def test_reshape_transpose_reshape_fails_as_the_nodes_do(s1, perm, s2):
    from onemodel.evaluate.kernels.shape import reshape_transpose_reshape
    x = np.zeros((2, 3, 4), np.float32)
    with pytest.raises((ValueError, EvaluationError)) as seq:
        _rtr_sequential(x, s1, 0, perm, s2, 0)
    with pytest.raises(seq.type):
        reshape_transpose_reshape(x, s1, 0, perm, s2, 0)


@pytest.mark.parametrize("shape", [[-2, 6], [4, -7], [[4, 6]]])
def test_reshape_refuses_extents_below_minus_one_and_a_shape_not_1d(shape):
    """Reshape's shape is a 1-D tensor of extents, 0 and one -1 (numpy would take any negative
    extent as -1 and flatten a 2-D shape; onnxruntime refuses both too)."""
    feeds = {"x": np.zeros((4, 6), np.float32), "s": np.array(shape, I64)}
    model = node_model("Reshape", feeds, ["x", "s"], ["y"], opset=21)
    with pytest.raises(EvaluationError, match="below -1|is 2-D, not 1-D"):
        ours(model, feeds)
