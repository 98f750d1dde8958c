"""ai.onnx.ml conversions: LabelEncoder 1 <-> 2, proved by running the original and the
converted model in onemodel's evaluator and in onnxruntime (labels: exact)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from opset_models import I64, model, run

from onemodel.formats.onnx import encode_model
from onemodel.opset_convert import ConversionRefused, convert

S = TensorProto.STRING
ML = "ai.onnx.ml"
WORDS = np.array(["b", "zz", "a", "c", "a"], dtype=object)
INDICES = np.array([2, -1, 0, 7, 1], np.int64)


def _encoder(ml, x_elem, y_elem, **attrs):
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, **attrs)
    return model([node], [helper.make_tensor_value_info("x", x_elem, [5])],
                 [helper.make_tensor_value_info("y", y_elem, [5])], 13, ml=ml)


def _ort(m, feeds):
    ort = pytest.importorskip("onnxruntime")
    s = ort.InferenceSession(encode_model(m), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)[0]


def _same(got, want):
    assert got.shape == want.shape and list(got.reshape(-1)) == list(want.reshape(-1)), \
        (got, want)


def _ml(m) -> int:
    return next(o.version for o in m.opset_imports if o.domain == ML)


def test_label_encoder_1_strings_to_indices_goes_to_2_and_back():
    m = _encoder(1, S, I64, classes_strings=["a", "b", "c"], default_int64=-5)
    want = np.array([1, -5, 0, 2, 0], np.int64)
    _same(run(m, {"x": WORDS})[0], want)
    up = convert(m, {ML: 2}).model
    node = up.graph.nodes[0]
    assert node.attribute("keys_strings").strings == [b"a", b"b", b"c"]
    assert list(node.attribute("values_int64s").ints) == [0, 1, 2]
    assert node.attribute("classes_strings") is None
    _same(run(up, {"x": WORDS})[0], want)
    _same(_ort(up, {"x": WORDS}), want)
    for ml in (4, 1):
        up = convert(up, {ML: ml}).model
        assert _ml(up) == ml
        _same(run(up, {"x": WORDS})[0], want)
    assert up.graph.nodes[0].attribute("classes_strings").strings == [b"a", b"b", b"c"]


def test_label_encoder_1_indices_to_strings_goes_to_2_and_back():
    m = _encoder(1, I64, S, classes_strings=["a", "b", "c"], default_string="?")
    want = np.array(["c", "?", "a", "?", "b"], dtype=object)
    _same(run(m, {"x": INDICES})[0], want)
    up = convert(m, {ML: 2}).model
    _same(run(up, {"x": INDICES})[0], want)
    _same(_ort(up, {"x": INDICES}), want)
    back = convert(up, {ML: 1}).model
    _same(run(back, {"x": INDICES})[0], want)


def test_label_encoder_2_down_reorders_a_permutation_of_indices():
    m = _encoder(2, S, I64, keys_strings=["x", "a", "b"], values_int64s=[2, 0, 1])
    want = np.array([1, -1, 0, -1, 0], np.int64)
    _same(_ort(m, {"x": WORDS}), want)
    _same(run(m, {"x": WORDS})[0], want)
    low = convert(m, {ML: 1}).model
    assert low.graph.nodes[0].attribute("classes_strings").strings == [b"a", b"b", b"x"]
    _same(run(low, {"x": WORDS})[0], want)


@pytest.mark.parametrize("attrs,x_elem,y_elem,match", [
    ({"keys_strings": ["a", "b"], "values_int64s": [0, 5]}, S, I64,
     "values_int64s are not the indices 0..n-1"),
    ({"keys_int64s": [0, 2], "values_strings": ["a", "b"]}, I64, S,
     "keys_int64s are not the indices 0..n-1"),
    ({"keys_strings": ["a"], "values_floats": [1.0]}, S, TensorProto.FLOAT,
     "keys_strings and values_floats has no equivalent in LabelEncoder-1"),
])
def test_label_encoder_2_down_refuses_what_1_cannot_map(attrs, x_elem, y_elem, match):
    with pytest.raises(ConversionRefused, match=match):
        convert(_encoder(2, x_elem, y_elem, **attrs), {ML: 1})


def test_label_encoder_1_up_refuses_repeated_classes():
    m = _encoder(1, S, I64, classes_strings=["a", "a"])
    with pytest.raises(ConversionRefused, match="classes_strings repeats a string"):
        convert(m, {ML: 2})
