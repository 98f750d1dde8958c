"""Operators converted below the version that introduced them by the function body their
definition provides (onemodel/opset_convert/function_body.py, bodies stored by
tools/gen_schemas.py): each proved by running the original and the written-out form in
onemodel's evaluator against float64 computation (rtol 1e-6, atol 1e-7 for float32
arithmetic, exactly for integers), and converting back up."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from opset_models import F64, I64, F, model, ops, run, through, value

from onemodel import schemas
from onemodel.opset_convert import ConversionRefused, convert

RNG = np.random.default_rng(20)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)
X64 = X.astype(np.float64)
TOL = {"rtol": 1e-6, "atol": 1e-7}


def _unary(op, opset, **attrs):
    return model([helper.make_node(op, ["x"], ["y"], **attrs)], [value("x", F, [2, 3, 4])],
                 [value("y", F, [2, 3, 4])], opset)


def test_the_schema_table_stores_function_bodies():
    """Mish-18's body is stored at opset 18 (Softplus, Tanh, Mul); a context-dependent body
    (Gelu-20) is not."""
    (opset, data), = schemas.function_bodies("Mish", "", 18)
    assert opset == 18 and b"Softplus" in data and b"Tanh" in data
    assert schemas.function_bodies("Gelu", "", 20) == ()
    assert schemas.function_bodies("Mish", "", 17) == ()


def test_mish_below_18_is_its_body():
    softplus = np.log1p(np.exp(X64))
    want = [X64 * np.tanh(softplus)]
    m = _unary("Mish", 18)
    np.testing.assert_allclose(run(m, {"x": X})[0], want[0], **TOL)
    low = through(m, [17, 13, 6], {"x": X}, want, **TOL)
    assert ops(low) == ["Softplus", "Tanh", "Mul"]
    through(low, [18], {"x": X}, want, **TOL)


def test_hard_swish_below_14_is_its_body_with_alpha_one_sixth():
    want = [X64 * np.clip(X64 * np.float32(1 / 6) + 0.5, 0, 1)]
    m = _unary("HardSwish", 14)
    np.testing.assert_allclose(run(m, {"x": X})[0], want[0], **TOL)
    low = through(m, [13, 6], {"x": X}, want, **TOL)
    assert ops(low) == ["HardSigmoid", "Mul"]
    assert low.graph.nodes[0].attribute("alpha").f == np.float32(1 / 6)


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_swish_below_24_takes_the_nodes_alpha_through_the_body(alpha):
    """The body's Constant refers to the operator's alpha (ref_attr_name): the node's value
    is written into it (as a float32 ``value`` tensor); CastLike below 15 becomes Cast."""
    want = [X64 / (1 + np.exp(-np.float32(alpha) * X64))]
    m = _unary("Swish", 24, alpha=alpha)
    np.testing.assert_allclose(run(m, {"x": X})[0], want[0], **TOL)
    low = through(m, [23, 13], {"x": X}, want, **TOL)
    assert ops(low) == ["Constant", "Cast", "Mul", "Sigmoid", "Mul"]
    assert low.graph.nodes[0].attribute("value").t.numpy() == np.float32(alpha)


def test_swiglu_below_28_expands_swish_in_turn():
    a, b = X, RNG.standard_normal((2, 3, 4)).astype(np.float32)
    want = [a.astype(np.float64) / (1 + np.exp(-a.astype(np.float64))) * b]
    m = model([helper.make_node("SwiGLU", ["a", "b"], ["y"])],
              [value("a", F, [2, 3, 4]), value("b", F, [2, 3, 4])], [value("y", F, [2, 3, 4])],
              28)
    np.testing.assert_allclose(run(m, {"a": a, "b": b})[0], want[0], **TOL)
    low = through(m, [27, 21], {"a": a, "b": b}, want, **TOL)
    assert "SwiGLU" not in ops(low) and "Swish" not in ops(low)


def test_mean_variance_normalization_below_9_is_its_body():
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    x64 = x.astype(np.float64)
    mean = x64.mean((0, 2, 3), keepdims=True)
    want = [(x64 - mean) / (np.sqrt(((x64 - mean) ** 2).mean((0, 2, 3), keepdims=True))
                            + 1e-9)]
    m = model([helper.make_node("MeanVarianceNormalization", ["x"], ["y"])],
              [value("x", F, [2, 3, 4, 5])], [value("y", F, [2, 3, 4, 5])], 13)
    np.testing.assert_allclose(run(m, {"x": x})[0], want[0], rtol=1e-5, atol=1e-5)
    low = through(m, [9, 8, 7], {"x": x}, want, rtol=1e-5, atol=1e-5)
    assert "MeanVarianceNormalization" not in ops(low)


def test_dynamic_quantize_linear_is_refused_below_11():
    """Its body rounds with Round, itself introduced at 11: no decomposition is attached."""
    m = model([helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])],
              [value("x", F, [3, 4])],
              [value("y", TensorProto.UINT8, [3, 4]), value("s", F, []),
               value("z", TensorProto.UINT8, [])], 11)
    with pytest.raises(ConversionRefused, match="DynamicQuantizeLinear does not exist before "
                                                "opset 11"):
        convert(m, {"": 10})


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows_below_17_are_their_bodies(op, periodic):
    n = 10
    size = np.array(n, np.int64)
    m = model([helper.make_node(op, ["n"], ["w"], periodic=periodic, output_datatype=F64)],
              [value("n", I64, [])], [value("w", F64, [None])], 17)
    d = n if periodic else n - 1
    k = np.arange(n) * 2 * np.pi / d
    a0, a1, a2 = {"HannWindow": (0.5, 0.5, 0.0),
                  "HammingWindow": (25 / 46, 21 / 46, 0.0),
                  "BlackmanWindow": (0.42, 0.5, 0.08)}[op]
    want = [a0 - a1 * np.cos(k) + a2 * np.cos(2 * k)]
    np.testing.assert_allclose(run(m, {"n": size})[0], want[0], rtol=1e-6, atol=1e-6)
    low = through(m, [16, 11], {"n": size}, want, rtol=1e-6, atol=1e-6)
    assert op not in ops(low) and "Range" in ops(low)
    low = through(low, [10, 9], {"n": size}, want, rtol=1e-6, atol=1e-6)
    assert "Range" not in ops(low) and "Loop" in ops(low)   # Range's own body in turn


def test_range_below_11_is_its_body_with_its_loop_converted():
    """Range-11's body holds a Loop: the Loop body's names are renamed with the rest and its
    nodes converted from opset 11 to the target."""
    m = model([helper.make_node("Range", ["a", "b", "c"], ["y"])],
              [value("a", F, []), value("b", F, []), value("c", F, [])],
              [value("y", F, [None])], 11)
    feeds = {"a": np.float32(1), "b": np.float32(5.5), "c": np.float32(1.5)}
    want = [np.array([1, 2.5, 4], np.float32)]
    through(m, [11], feeds, want)
    low = through(m, [10, 9, 7], feeds, want)
    assert ops(low)[-1] == "Loop" and "Range" not in ops(low)
    body = low.graph.nodes[-1].attribute("body").g
    assert {v.name for v in body.inputs}.isdisjoint(v.name for v in low.graph.inputs)
    through(low, [11], feeds, want)


def test_affine_grid_below_20_is_its_body_while_its_if_branches_convert():
    """AffineGrid's body holds Ifs for the 2-D and 3-D cases: at 19 it computes the same;
    further down, the 3-D branch's Split (num_outputs, 18 on) needs an extent that is not
    known in a 2-D model, and the refusal says so."""
    theta = RNG.standard_normal((2, 2, 3)).astype(np.float32)
    m = model([helper.make_node("AffineGrid", ["t", "s"], ["y"], align_corners=1)],
              [value("t", F, [2, 2, 3])], [value("y", F, None)], 20,
              initializers={"s": np.array([2, 3, 4, 5], np.int64)})
    h = np.linspace(-1, 1, 4)
    w = np.linspace(-1, 1, 5)
    base = np.stack([np.broadcast_to(w, (4, 5)), np.broadcast_to(h[:, None], (4, 5)),
                     np.ones((4, 5))], -1)                       # [H, W, 3]
    want = [np.einsum("hwk,nck->nhwc", base, theta.astype(np.float64))]
    np.testing.assert_allclose(run(m, {"t": theta})[0], want[0], rtol=1e-6, atol=1e-6)
    low = through(m, [19], {"t": theta}, want, rtol=1e-6, atol=1e-6)
    assert "AffineGrid" not in ops(low) and "If" in ops(low)
    with pytest.raises(ConversionRefused, match="Split-20 -> 16: num_outputs 2 along axis 1"):
        convert(m, {"": 16})


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_below_20_is_what_its_body_computes(approximate):
    from math import erf, pi, sqrt

    if approximate == "none":
        want = [0.5 * X64 * (1 + np.vectorize(erf)(X64 / sqrt(2)))]
    else:
        want = [0.5 * X64 * (1 + np.tanh(sqrt(2 / pi) * (X64 + 0.044715 * X64 ** 3)))]
    m = _unary("Gelu", 20, approximate=approximate)
    np.testing.assert_allclose(run(m, {"x": X})[0], want[0], **TOL)
    low = through(m, [19, 13, 9], {"x": X}, want, **TOL)
    assert "Gelu" not in ops(low)
    assert ("Erf" in ops(low)) == (approximate == "none")
    through(low, [20], {"x": X}, want, **TOL)
    if approximate == "none":
        with pytest.raises(ConversionRefused, match="Erf does not exist before opset 9"):
            convert(m, {"": 8})
    else:
        through(m, [8, 6], {"x": X}, want, **TOL)


def test_group_normalization_18_below_it_is_written_out_per_group():
    x = RNG.standard_normal((2, 6, 3, 2)).astype(np.float32)
    scale = np.array([0.5, -2.0, 1.5], np.float32)
    bias = np.array([0.25, 0.0, -1.0], np.float32)
    m = model([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3,
                                epsilon=1e-3)],
              [value("x", F, [2, 6, 3, 2])], [value("y", F, [2, 6, 3, 2])], 18,
              initializers={"s": scale, "b": bias})
    g = x.astype(np.float64).reshape(2, 3, -1)
    d = g - g.mean(-1, keepdims=True)
    norm = d / np.sqrt((d * d).mean(-1, keepdims=True) + np.float32(1e-3))
    want = [(norm * scale[None, :, None] + bias[None, :, None]).reshape(x.shape)]
    np.testing.assert_allclose(run(m, {"x": x})[0], want[0], rtol=1e-5, atol=1e-6)
    low = through(m, [17, 13, 7], {"x": x}, want, rtol=1e-5, atol=1e-6)
    assert "GroupNormalization" not in ops(low)
    through(low, [18], {"x": x}, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("alpha", [1.0, 2.0])
def test_celu_below_12_is_alpha_times_elu_of_x_over_alpha(alpha):
    want = [np.maximum(0, X64) + np.minimum(0, alpha * (np.exp(X64 / alpha) - 1))]
    m = _unary("Celu", 12, alpha=alpha)
    np.testing.assert_allclose(run(m, {"x": X})[0], want[0], **TOL)
    low = through(m, [11, 7], {"x": X}, want, **TOL)
    assert "Celu" not in ops(low) and "Elu" in ops(low)
    through(low, [12], {"x": X}, want, **TOL)


def test_rms_normalization_below_23_is_written_out_with_axes_folded_below_18():
    x = RNG.standard_normal((2, 3, 8)).astype(np.float32)
    s = RNG.standard_normal(8).astype(np.float32)
    m = model([helper.make_node("RMSNormalization", ["x", "s"], ["y"], epsilon=1e-3)],
              [value("x", F, [2, 3, 8])], [value("y", F, [2, 3, 8])], 23,
              initializers={"s": s})
    x64 = x.astype(np.float64)
    want = [x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + np.float32(1e-3)) * s]
    np.testing.assert_allclose(run(m, {"x": x})[0], want[0], rtol=1e-5, atol=1e-6)
    low = through(m, [22, 17, 13], {"x": x}, want, rtol=1e-5, atol=1e-6)
    assert "RMSNormalization" not in ops(low)
    assert low.graph.nodes[1].attribute("axes").ints == [-1]
    through(low, [23], {"x": x}, want, rtol=1e-5, atol=1e-6)
    double = model([helper.make_node("RMSNormalization", ["x", "s"], ["y"])],
                   [value("x", F64, [2, 8]), value("s", F64, [8])], [value("y")], 23)
    with pytest.raises(ConversionRefused, match="is not known to be the stash_type 1's"):
        convert(double, {"": 22})


def test_a_body_in_a_model_local_function_is_expanded_and_a_referenced_attribute_refused():
    """Mish in a model-local function is expanded there (its body's names fresh); Swish whose
    alpha refers to the function's own attribute cannot be: the value is the caller's."""
    mish = helper.make_function("local", "F", ["a"], ["b"],
                                [helper.make_node("Mish", ["a"], ["b"])],
                                [helper.make_opsetid("", 24)])
    m = model([helper.make_node("F", ["x"], ["y"], domain="local")],
              [value("x", F, [2, 3, 4])], [value("y", F, [2, 3, 4])], 24, functions=[mish])
    m.opset_imports.append(type(m.opset_imports[0])(domain="local", version=1))
    want = [X64 * np.tanh(np.log1p(np.exp(X64)))]
    low = through(m, [17], {"x": X}, want, **TOL)
    assert [n.op_type for n in low.functions[0].nodes] == ["Softplus", "Tanh", "Mul"]
    swish = helper.make_function("local", "G", ["a"], ["b"],
                                 [helper.make_node("Swish", ["a"], ["b"])],
                                 [helper.make_opsetid("", 24)], attributes=["k"])
    swish.node[0].attribute.append(
        helper.make_attribute_ref("alpha", helper.AttributeProto.FLOAT, ref_attr_name="k"))
    g = model([helper.make_node("G", ["x"], ["y"], domain="local", k=2.0)],
              [value("x", F, [2, 3, 4])], [value("y", F, [2, 3, 4])], 24, functions=[swish])
    g.opset_imports.append(type(g.opset_imports[0])(domain="local", version=1))
    with pytest.raises(ConversionRefused, match="attribute 'alpha' refers to the enclosing "
                                                "function's attribute 'k'"):
        convert(g, {"": 23})


def test_group_normalization_21_goes_below_18_through_18_and_its_decomposition():
    """A GroupNormalization-21 node whose per-channel scale and bias repeat within each group
    steps to 18 (its adapter) and is written out below it."""
    x = RNG.standard_normal((2, 6, 3)).astype(np.float32)
    scale = np.repeat(np.array([0.5, -2.0, 1.5], np.float32), 2)
    bias = np.repeat(np.array([0.25, 0.0, -1.0], np.float32), 2)
    m = model([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3)],
              [value("x", F, [2, 6, 3])], [value("y", F, [2, 6, 3])], 21,
              initializers={"s": scale, "b": bias})
    g = x.astype(np.float64).reshape(2, 3, -1)
    d = g - g.mean(-1, keepdims=True)
    norm = (d / np.sqrt((d * d).mean(-1, keepdims=True) + np.float32(1e-5))).reshape(x.shape)
    want = [norm * scale[None, :, None] + bias[None, :, None]]
    low = through(m, [17, 13], {"x": x}, want, rtol=1e-5, atol=1e-6)
    assert "GroupNormalization" not in ops(low)
