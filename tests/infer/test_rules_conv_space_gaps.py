"""Impossible windows and blocks the rules used to let through (onemodel/inference/rules/conv.py
with Col2Im, pool.py, shape.py's DepthToSpace/SpaceToDepth): a ``kernel_shape`` value, a
kernel extent of W, a stride or a dilation below 1 for Conv, ConvTranspose and the poolings
(MaxUnpool too); a ``blocksize`` below 1 and extents the block does not divide; Col2Im's block
count L against the sliding blocks of image_shape, block_shape, pads, strides and dilations, and
its channel extent against prod(block_shape); MaxUnpool's ``output_shape`` input (its value when
known, unknown extents when not, the computed shape when absent) and known indices outside the
output. Each contradiction is the single one at the node, with its exact message, and
``check --full`` reports it as OM410; the models are refused by onnx's strict inference where it
implements the check, else by onnxruntime; the valid neighbours keep their shapes (against
onnx's inference and onnxruntime's outputs)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.shape_inference
import pytest
from onnx import TensorProto as T
from oracle_releases import NO_ONNXRUNTIME

import onemodel
from onemodel.inference import Expr, infer_model
from tests.infer.harness import inferred, node_model
from tests.infer.rules_check import expect

ort = pytest.importorskip("onnxruntime", reason=NO_ONNXRUNTIME)

F = T.FLOAT
I64 = T.INT64
N, H = Expr.var("N"), Expr.var("H")


def _i64(*v):
    return np.array(v, np.int64)


def _w(*shape):
    return np.ones(shape, np.float32)


def _one(model, out: str = "y"):
    """(output ``out``'s shape, the single contradiction's message, at the node)."""
    res = infer_model(model)
    assert [c.path for c in res.contradictions] == ["graph.nodes[0]"], res.contradictions
    return res.values[out].shape, res.contradictions[0].message


def _proto(model) -> onnx.ModelProto:
    return onnx.load_from_string(onemodel.to_bytes(model))


def _onnx_refuses(model, words: str) -> None:
    with pytest.raises(Exception, match=words):
        onnx.shape_inference.infer_shapes(_proto(model), strict_mode=True)


def _ort(model, feed):
    """onnxruntime's outputs of ``model`` on ``feed`` (CPU)."""
    so = ort.SessionOptions()
    so.log_severity_level = 4
    s = ort.InferenceSession(onemodel.to_bytes(model), so, providers=["CPUExecutionProvider"])
    return s.run(None, feed)


def _ort_refuses(model, feed, words: str) -> None:
    with pytest.raises(Exception, match=words):
        _ort(model, feed)


def _x(*shape):
    return {"x": np.zeros(shape, np.float32)}


# -- 1. kernel_shape, strides, dilations below 1 ----------------------------------------------
WINDOWED = [
    ("Conv", [("x", F, [1, 3, 5, 5]), ("w", _w(4, 3, 2, 2))], [1, 4]),
    ("ConvTranspose", [("x", F, [1, 3, 5, 5]), ("w", _w(3, 4, 2, 2))], [1, 4]),
    ("MaxPool", [("x", F, [1, 3, 5, 5])], [1, 3]),
    ("AveragePool", [("x", F, [1, 3, 5, 5])], [1, 3]),
    ("LpPool", [("x", F, [1, 3, 5, 5])], [1, 3]),
]
BAD = [
    (dict(kernel_shape=[0, 2]), "kernel_shape [0, 2] has values that are not positive: [0]",
     "kernel_shape must only contain positive values"),
    (dict(kernel_shape=[2, -1]), "kernel_shape [2, -1] has values that are not positive: [-1]",
     "kernel_shape must only contain positive values"),
    (dict(kernel_shape=[2, 2], strides=[0, 1]),
     "strides [0, 1] has values that are not positive: [0]",
     "strides must only contain positive values"),
    (dict(kernel_shape=[2, 2], strides=[1, -2]),
     "strides [1, -2] has values that are not positive: [-2]",
     "strides must only contain positive values"),
    (dict(kernel_shape=[2, 2], dilations=[1, 0]),
     "dilations [1, 0] has values that are not positive: [0]",
     "dilations must only contain positive values"),
]


@pytest.mark.parametrize("op,inputs,head", WINDOWED, ids=[w[0] for w in WINDOWED])
@pytest.mark.parametrize("attrs,message,onnx_words", BAD,
                         ids=["k0", "k-1", "s0", "s-2", "d0"])
def test_window_attributes_below_one(op, inputs, head, attrs, message, onnx_words):
    m = node_model(op, inputs, opset=19, **attrs)
    shape, msg = _one(m)
    assert msg == f"{op}: {message}"
    assert shape == tuple(head) + (None, None)  # the batch and channels still known
    _onnx_refuses(m, onnx_words)
    _ort_refuses(m, _x(1, 3, 5, 5), onnx_words)


@pytest.mark.parametrize("op,inputs,head", WINDOWED, ids=[w[0] for w in WINDOWED])
def test_window_attributes_at_least_one_keep_the_shape(op, inputs, head):
    m = node_model(op, inputs, opset=19, kernel_shape=[2, 2], strides=[2, 1],
                   dilations=[1, 2])
    # Conv/pools: floor((5 - d*(k-1) - 1)/s) + 1 = [2, 3]; ConvTranspose:
    # s*(5-1) + d*(k-1) + 1 = [10, 7]
    spatial = [10, 7] if op == "ConvTranspose" else [2, 3]
    expect(m, head + spatial, F)
    got = _ort(m, _x(1, 3, 5, 5))[0]
    assert list(got.shape) == head + spatial


def test_conv_weights_with_an_empty_kernel_extent():
    m = node_model("Conv", [("x", F, [1, 3, 5, 5]), ("w", _w(4, 3, 0, 2))], opset=17)
    shape, msg = _one(m)
    assert msg == "Conv: the weights [4,3,0,2] have kernel extents that are not positive"
    assert shape == (1, 4, None, 4)  # the kernel extent 2 still gives floor((5-2)/1)+1 = 4
    _onnx_refuses(m, "kernel_shape must only contain positive values")


def test_max_unpool_kernel_and_strides_below_one():
    ins = [("x", F, [1, 1, 2, 2]), ("i", _i64(0, 2, 8, 10).reshape(1, 1, 2, 2))]
    m = node_model("MaxUnpool", ins, opset=11, kernel_shape=[0, 2], strides=[2, 2])
    shape, msg = _one(m)
    assert msg == "MaxUnpool: kernel_shape [0, 2] has values that are not positive: [0]"
    assert shape == (1, 1, None, None)
    _ort_refuses(m, _x(1, 1, 2, 2), "kernel")  # onnx's inference does not check MaxUnpool's
    m = node_model("MaxUnpool", ins, opset=11, kernel_shape=[2, 2], strides=[2, 0])
    shape, msg = _one(m)
    assert msg == "MaxUnpool: strides [2, 0] has values that are not positive: [0]"
    assert shape == (1, 1, None, None)
    _ort_refuses(m, _x(1, 1, 2, 2), "stride")


# -- 2. DepthToSpace / SpaceToDepth ------------------------------------------------------------
@pytest.mark.parametrize("op", ["DepthToSpace", "SpaceToDepth"])
@pytest.mark.parametrize("bs", [0, -2])
def test_blocksize_below_one(op, bs):
    m = node_model(op, [("x", F, [1, 8, 4, 4])], opset=13, blocksize=bs)
    shape, msg = _one(m)
    assert msg == f"{op}: blocksize {bs} is not positive"
    assert shape == (1, None, None, None)
    _onnx_refuses(m, "Blocksize must be positive")


@pytest.mark.parametrize("op,x,message,ort_words", [
    ("DepthToSpace", [1, 6, 2, 2], "the channel extent 6 does not divide by blocksize^2 = 4",
     "multiple of"),
    ("SpaceToDepth", [1, 2, 3, 4], "the height extent 3 does not divide by blocksize 2",
     "height to be a multiple"),
    ("SpaceToDepth", [1, 2, 4, 5], "the width extent 5 does not divide by blocksize 2",
     "width to be a multiple"),
])
def test_extents_the_block_does_not_divide(op, x, message, ort_words):
    m = node_model(op, [("x", F, x)], opset=13, blocksize=2)
    res = infer_model(m)
    assert [c.message for c in res.contradictions] == [f"{op}: {message}"]
    # (onnx's inference floors the division and gives a shape; onnxruntime refuses)
    _ort_refuses(m, _x(*x), ort_words)


def test_block_rearrangements_that_fit():
    m = node_model("SpaceToDepth", [("x", F, [1, 2, 4, 6])], opset=13, blocksize=2)
    expect(m, [1, 8, 2, 3], F)
    assert _ort(m, _x(1, 2, 4, 6))[0].shape == (1, 8, 2, 3)
    m = node_model("DepthToSpace", [("x", F, [1, 18, 2, 3])], opset=13, blocksize=3,
                   mode="CRD")
    expect(m, [1, 2, 6, 9], F)
    assert _ort(m, _x(1, 18, 2, 3))[0].shape == (1, 2, 6, 9)
    m = node_model("DepthToSpace", [("x", F, ["N", 8, "H", 3])], opset=13, blocksize=2)
    assert inferred(m)["y"].shape == (N, 2, 2 * H, 6)
    m = node_model("SpaceToDepth", [("x", F, ["N", 3, 4, 2])], opset=13, blocksize=1)
    assert inferred(m)["y"].shape == (N, 3, 4, 2)  # blocksize 1 is valid: the identity


# -- 3. Col2Im ----------------------------------------------------------------------------------
def _col2im(x, img, blk, **attrs):
    return node_model("Col2Im", [("x", F, x), ("i", _i64(*img)), ("b", _i64(*blk))], opset=18,
                      **attrs)


@pytest.mark.parametrize("x,img,blk,attrs,out", [
    ([1, 12, 9], [4, 4], [2, 2], {}, [1, 3, 4, 4]),                      # 3 x 3 blocks
    ([1, 12, 4], [4, 4], [2, 2], dict(strides=[2, 2]), [1, 3, 4, 4]),     # 2 x 2
    ([1, 12, 16], [4, 4], [2, 2], dict(pads=[1, 1, 0, 0]), [1, 3, 4, 4]),  # 4 x 4
    ([1, 12, 4], [4, 4], [2, 2], dict(dilations=[2, 2]), [1, 3, 4, 4]),   # 2 x 2
    ([2, 6, 10], [5, 3], [3, 2], dict(strides=[1, 2], pads=[1, 0, 1, 1]), [2, 1, 5, 3]),
    ([2, 16, 24], [3, 4, 5], [2, 2, 2], {}, [2, 2, 3, 4, 5]),             # 2 x 3 x 4
])
def test_col2im_block_counts_that_match(x, img, blk, attrs, out):
    m = _col2im(x, img, blk, **attrs)
    expect(m, out, F)
    assert list(_ort(m, _x(*x))[0].shape) == out


def test_col2im_symbolic_block_count_kept():
    m = _col2im(["N", 12, "L"], [4, 4], [2, 2])
    assert inferred(m)["y"].shape == (N, 3, 4, 4)


@pytest.mark.parametrize("x,img,blk,attrs,message,ort_words", [
    ([1, 12, 10], [4, 4], [2, 2], {},
     "X has 10 blocks on its last axis; image_shape [4, 4], block_shape [2, 2], pads "
     "[0, 0, 0, 0], strides [1, 1], dilations [1, 1] give 9 (3 x 3)", "sliding blocks"),
    ([1, 12, 9], [4, 4], [2, 2], dict(strides=[2, 2]),
     "X has 9 blocks on its last axis; image_shape [4, 4], block_shape [2, 2], pads "
     "[0, 0, 0, 0], strides [2, 2], dilations [1, 1] give 4 (2 x 2)", "sliding blocks"),
    ([1, 12, 9], [4, 4], [2, 2], dict(pads=[1, 0, 0, 0]),
     "X has 9 blocks on its last axis; image_shape [4, 4], block_shape [2, 2], pads "
     "[1, 0, 0, 0], strides [1, 1], dilations [1, 1] give 12 (4 x 3)", "sliding blocks"),
    ([1, 12, 0], [1, 1], [2, 2], {},
     "the dilated block does not fit the padded image: [0, 0] blocks per axis (image_shape "
     "[1, 1], block_shape [2, 2], pads [0, 0, 0, 0], strides [1, 1], dilations [1, 1])",
     "smaller than the dilated kernel"),
    ([1, 10, 9], [4, 4], [2, 2], {}, "X's extent 10 is not a multiple of the block size 4",
     "multiple of prod"),
    ([1, 12, 9], [4, 4], [2, 2], dict(strides=[0, 1]),
     "strides [0, 1] and dilations [1, 1] have values that are not positive: [0]",
     "stride values must be positive"),
    ([1, 12, 9], [4, 4], [2, 2], dict(dilations=[1, -1]),
     "strides [1, 1] and dilations [1, -1] have values that are not positive: [-1]",
     "dilation values must be positive"),
    ([1, 12, 9], [-4, 4], [2, 2], {}, "image_shape [-4,4] has negative extents",
     "'image_shape' values must be positive"),
])
def test_col2im_refused_by_onnxruntime(x, img, blk, attrs, message, ort_words):
    m = _col2im(x, img, blk, **attrs)
    shape, msg = _one(m)
    assert msg == f"Col2Im: {message}"
    assert shape[0] == 1 and len(shape) == 2 + len(img)
    # (onnx's inference does not check these and gives a shape; onnxruntime refuses)
    _ort_refuses(m, _x(*x), ort_words)


@pytest.mark.parametrize("x,img,blk,attrs,message,onnx_words", [
    ([1, 12, 9], [4, 4], [0, 2], {}, "block_shape [0,2] has values that are not positive",
     "'block_shape' input must contain only positive values"),
    ([1, 12, 9], [4, 4], [2, 2, 1], {},
     "image_shape [4,4] and block_shape [2,2,1] have different lengths", "mismatch"),
    ([1, 12, 9], [4, 4], [2, 2], dict(strides=[1]),
     "strides [1] does not have 2 values, one per spatial axis", "mismatch"),
    ([1, 12, 9], [4, 4], [2, 2], dict(pads=[0, 0]),
     "pads [0, 0] does not have 4 values, two per spatial axis", "mismatch"),
])
def test_col2im_refused_by_onnx(x, img, blk, attrs, message, onnx_words):
    m = _col2im(x, img, blk, **attrs)
    shape, msg = _one(m)
    assert msg == f"Col2Im: {message}"
    assert shape[:1] == (1,)
    _onnx_refuses(m, onnx_words)


# -- 4. MaxUnpool's output_shape -----------------------------------------------------------------
_IDX = _i64(0, 2, 8, 10).reshape(1, 1, 2, 2)   # MaxPool's indices of a 4x4 image, 2x2 windows


def _unpool(shape=None, idx=_IDX, **attrs):
    ins = [("x", F, [1, 1, 2, 2]), ("i", idx)]
    if shape is not None:
        ins.append(("s", _i64(*shape)) if isinstance(shape, list) else ("s", I64, [shape]))
    return node_model("MaxUnpool", ins, opset=11, kernel_shape=[2, 2], strides=[2, 2],
                      **attrs)


def test_max_unpool_output_shape_known_absent_unknown():
    m = _unpool([1, 1, 5, 5])
    assert inferred(m)["y"].shape == (1, 1, 5, 5)
    assert _ort(m, _x(1, 1, 2, 2))[0].shape == (1, 1, 5, 5)
    m = _unpool()                       # (2-1)*2 + 2 = 4
    expect(m, [1, 1, 4, 4], F)
    assert _ort(m, _x(1, 1, 2, 2))[0].shape == (1, 1, 4, 4)
    m = _unpool(pads=[0, 0, 1, 1], idx=_i64(0, 2, 6, 8).reshape(1, 1, 2, 2))
    expect(m, [1, 1, 3, 3], F)          # (2-1)*2 + 2 - 1 = 3
    assert _ort(m, _x(1, 1, 2, 2))[0].shape == (1, 1, 3, 3)
    # an output_shape input that is not a constant: set at run time, never the default
    assert inferred(_unpool(4))["y"].shape == (None, None, None, None)
    # output_shape wins over pads (the definition: pads are then ignored)
    m = _unpool([1, 1, 4, 4], pads=[0, 0, 1, 1])
    assert inferred(m)["y"].shape == (1, 1, 4, 4)
    assert _ort(m, _x(1, 1, 2, 2))[0].shape == (1, 1, 4, 4)


def test_max_unpool_output_shape_smaller_than_the_default_is_not_contradicted():
    # The definition does not bound output_shape by the computed extents (its indices must
    # only lie inside it): [1, 1, 3, 4] holds indices up to 11, so it is taken as given.
    m = _unpool([1, 1, 3, 4])
    assert inferred(m)["y"].shape == (1, 1, 3, 4)


@pytest.mark.parametrize("shape,message,ort_words", [
    ([1, 1, 3, 3], "indices [10] are outside [0, 9) of the output [1,1,3,3]", "output_shape"),
    ([1, 1, 2, 2], "indices [8, 10] are outside [0, 4) of the output [1,1,2,2]",
     "output_shape"),
    ([1, 1, 4, -4], "output_shape [1,1,4,-4] has negative extents: [-4]", "output_shape"),
    ([1, 1, 4], "output_shape has 3 values; X has rank 4", "same number of elements"),
])
def test_max_unpool_output_shape_contradictions(shape, message, ort_words):
    m = _unpool(shape)
    res = infer_model(m)
    assert [c.message for c in res.contradictions] == [f"MaxUnpool: {message}"]
    _ort_refuses(m, _x(1, 1, 2, 2), ort_words)


def test_max_unpool_default_shape_indices_outside():
    m = _unpool(pads=[0, 0, 1, 1])
    shape, msg = _one(m)
    assert shape == (1, 1, 3, 3)
    assert msg == "MaxUnpool: indices [10] are outside [0, 9) of the output [1,1,3,3]"
    _ort_refuses(m, _x(1, 1, 2, 2), "out of bound")


# -- check --full ---------------------------------------------------------------------------------
@pytest.mark.parametrize("model,message", [
    (node_model("MaxPool", [("x", F, [1, 3, 5, 5])], opset=19, kernel_shape=[0, 2]),
     "MaxPool: kernel_shape [0, 2] has values that are not positive: [0]"),
    (node_model("DepthToSpace", [("x", F, [1, 8, 4, 4])], opset=13, blocksize=0),
     "DepthToSpace: blocksize 0 is not positive"),
    (_col2im([1, 12, 10], [4, 4], [2, 2]),
     "Col2Im: X has 10 blocks on its last axis; image_shape [4, 4], block_shape [2, 2], pads "
     "[0, 0, 0, 0], strides [1, 1], dilations [1, 1] give 9 (3 x 3)"),
])
def test_check_full_reports_om410(model, message):
    r = onemodel.check(onemodel.to_bytes(model), full=True)
    # (the one-node models leave y untyped, OM108, which is not inference's)
    assert [(f.code, f.severity, f.path, f.message) for f in r.findings
            if f.code.startswith("OM4")] == [("OM410", "error", "graph.node[0]", message)]
