"""One source of truth for attribute defaults: a built-in kernel reads an attribute with
``ctx.attr(name)``, which gives the default of the operator's definition (onemodel.schemas, ONNX
1-2) in force at the imported version (Part 1, Clause 14.4). A kernel passes a literal default
only where some version it serves defines the attribute without one (or not at all), and then
the literal is the definition's default at every version that has one.

The kernels' source is read with ``ast`` (tests/evaluate/kernel_source.py): the kernel function
and every kernel-module helper it calls, at each version (``if ctx.opset >= 13:`` branches and
``x if ctx.opset < 6 else y`` defaults evaluated there).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from kernel_source import NO_DEFAULT, UNKNOWN, attribute_reads

from onemodel import schemas
from onemodel.evaluate import registry
from onemodel.evaluate.runner import run
from onemodel.ir import Attribute, Graph, Model, Node, OperatorSetId, ValueInfo
from onemodel.operators import table

registry.load_builtin()

#: (domain, op_type, attribute) -> why the kernel's default is not the definition's, checked to
#: be still needed (the test fails when one no longer differs).
DIFFERENT = {
    ("", "GRU", "direction"):
        "GRU-1's definition gives the default 'foward', a typo of onnx; the kernel takes the "
        "'forward' the description means (onnx's own reference reads the attribute the same way)",
}

#: (domain, op_type, attribute) -> why a kernel reads the attribute with ``ctx.attr(name,
#: None)`` although the definition has a default: it computes the same value itself.
FALLBACK = {
    ("", "RNN", "activations"):
        "the definition's ['Tanh', 'Tanh'] is one Tanh per direction; the kernel takes "
        "['Tanh'] * num_directions, the same functions for either direction",
}


def _served_versions():
    """(domain, op_type, since, kernel, [every opset version the kernel serves]), for the
    operators of ONNX's schema table (the kernels of onnxruntime's contrib operators pass
    their defaults, onnxruntime's, as literals)."""
    top = {d: max(max(schemas.versions(o, d)) for o in schemas.operators(d))
           for d in schemas.domains()}
    for (domain, op), entries in sorted(table.attachments("kernel").items()):
        if domain not in top or op not in schemas.operators(domain):
            continue
        for i, (since, fn) in enumerate(entries):
            end = entries[i + 1][0] if i + 1 < len(entries) else max(top[domain], since) + 1
            yield domain, op, since, fn, range(since, end)


def _same(kernel, schema) -> bool:
    """Whether a kernel's literal equals a definition's default exactly: a FLOAT default is the
    float32 value the definition stores (0.009999999776482582, not 0.01), as a set attribute is;
    ints, strings and lists of them as they are."""
    if isinstance(schema, float):
        return isinstance(kernel, (int, float)) and not isinstance(kernel, bool) and \
            kernel == schema
    if isinstance(schema, list):
        return (isinstance(kernel, (list, tuple)) and len(kernel) == len(schema)
                and all(_same(k, s) for k, s in zip(kernel, schema)))
    return type(kernel) is type(schema) and kernel == schema


def _findings():
    """(mismatch, fallback, unknown, sites): literal defaults that differ, ``None`` defaults
    and non-literal ones where the definition has a default, by (domain, op_type, attribute);
    sites: ``module.py:line`` of a literal default -> for each version reaching it, whether
    the definition has a default there."""
    mismatch, fallback, unknown, sites = {}, {}, {}, {}
    for domain, op, since, fn, served in _served_versions():
        module = fn.__module__.rsplit(".", 1)[1]
        for v in served:
            schema = schemas.get(op, domain, v)
            assert schema is not None, f"{domain}::{op}-{since}: no definition at {v}"
            for name, default, where, kind in attribute_reads(module, fn.__name__, v):
                spec = schema.attributes.get(name)
                has = spec is not None and spec.has_default
                literal = default not in (NO_DEFAULT, UNKNOWN) and default is not None
                if literal and kind == "attr":
                    sites.setdefault((where, name), []).append((domain, op, v, has))
                if not has or default is NO_DEFAULT:
                    continue
                key = (domain, op, name)
                if default is UNKNOWN:
                    unknown.setdefault(key, []).append((v, where))
                elif default is None:
                    fallback.setdefault(key, []).append((v, where))
                elif not _same(default, spec.default):
                    mismatch.setdefault(key, []).append((v, where, default, spec.default))
    return mismatch, fallback, unknown, sites


FINDINGS = _findings()


def test_the_registry_claims_the_kernels_this_test_reads():
    # the versions read here are those of every definition a kernel serves (the table's)
    served = {(d, o, v) for d, o, v, k, _ in table.served() if k is not None
              and d in schemas.domains() and o in schemas.operators(d)}
    read = {(d, o, s) for d, o, _, _, versions in _served_versions()
            for s in schemas.versions(o, d) if s in versions}
    assert read == served and len(served) == 653


def test_the_reader_sees_the_kernels_reads():
    """The reader finds what the source says: Softmax-13 and Softmax-11 read axis on two
    lines of one helper (an ``if ctx.opset >= 13`` branch); Clip's defaults depend on the
    version through a conditional expression; Conv's read of group is in a helper."""
    fn = registry.lookup("", "Softmax", 13)
    reads13 = attribute_reads(fn.__module__.rsplit(".", 1)[1], fn.__name__, 13)
    reads11 = attribute_reads(fn.__module__.rsplit(".", 1)[1], fn.__name__, 11)
    assert [(n, d) for n, d, *_ in reads13] == [("axis", NO_DEFAULT)]
    assert [(n, d) for n, d, *_ in reads11] == [("axis", NO_DEFAULT)]
    assert reads13[0][2] != reads11[0][2]
    clip = registry.lookup("", "Clip", 6)
    module = clip.__module__.rsplit(".", 1)[1]
    assert [(n, d) for n, d, *_ in attribute_reads(module, clip.__name__, 1)] == [
        ("min", -math.inf), ("max", math.inf)]
    assert [(n, d) for n, d, *_ in attribute_reads(module, clip.__name__, 6)] == [
        ("min", -3.4028234663852886e38), ("max", 3.4028234663852886e38)]
    conv = registry.lookup("", "Conv", 11)
    names = {n for n, *_ in attribute_reads(conv.__module__.rsplit(".", 1)[1], conv.__name__,
                                              11)}
    assert {"group", "auto_pad", "pads", "strides", "dilations", "kernel_shape"} <= names


def test_every_literal_default_of_a_kernel_is_the_definitions():
    mismatch = FINDINGS[0]
    wrong = {k: v for k, v in mismatch.items() if k not in DIFFERENT}
    assert not wrong, "kernel defaults that differ from the definition: " + "; ".join(
        f"{d or 'ai.onnx'}::{op}.{n}: " + ", ".join(
            f"at {v} {where} passes {k!r}, the definition says {s!r}" for v, where, k, s in found)
        for (d, op, n), found in sorted(wrong.items()))
    assert set(DIFFERENT) <= set(mismatch), "no longer different: " + repr(
        set(DIFFERENT) - set(mismatch))


def test_no_kernel_repeats_a_default_the_definition_gives():
    """A literal default is written only where a version reaching it has no default to take
    (``attrs.get`` on the attribute dict is left out: it has no definition default)."""
    sites = FINDINGS[3]
    repeated = sorted(k for k, vs in sites.items() if all(has for *_, has in vs)
                      and not any((d, op, k[1]) in DIFFERENT for d, op, _, _ in vs))
    assert not repeated, "literal defaults the definitions give (omit them): " + repr(repeated)
    # the literals left where a definition has a default serve versions without one as well:
    # Clip-1 has no min/max default (Clip-6 the float32 range), MaxPool-1 no ceil_mode
    mixed = {k for k, vs in sites.items() if len({has for *_, has in vs}) == 2}
    assert {("elementwise.py", "min"), ("elementwise.py", "max"), ("pool.py", "ceil_mode")} <= {
        (where.split(":")[0], name) for where, name in mixed}


def test_every_default_a_kernel_reads_is_a_literal_the_test_can_check():
    _, fallback, unknown, _ = FINDINGS
    assert not unknown, f"defaults not written as literals: {unknown}"
    assert set(fallback) == set(FALLBACK), (
        "kernels that read an attribute the definition gives a default with ctx.attr(name, "
        "None): "
        + repr({k: v for k, v in fallback.items() if k not in FALLBACK}))


# -- the defaults that differed, by evaluation ---------------------------------------------------
def _node_model(op, opset, attrs=(), inputs=("x",), outputs=("y",)):
    return Model(ir_version=7, opset_imports=[OperatorSetId(domain="", version=opset)],
                 graph=Graph(name="g", inputs=[ValueInfo(name=i) for i in inputs],
                             outputs=[ValueInfo(name=o) for o in outputs],
                             nodes=[Node(op_type=op, inputs=list(inputs), outputs=list(outputs),
                                         attributes=list(attrs))]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_clip_6_clips_to_the_float32_range_by_default(dtype):
    """Clip-6's min and max default to the lowest and greatest float32 (-3.4028234663852886e38,
    3.4028234663852886e38), not to infinities: an infinite input comes out finite."""
    big = 3.4028234663852886e38
    x = np.array([-np.inf, -1e39 if dtype is np.float64 else -np.inf, -2.5, 0.0, 7.0, np.inf],
                 dtype)
    y = run(_node_model("Clip", 6), {"x": x})["y"]
    assert y.dtype == dtype
    assert y.tolist() == [-big, -big, -2.5, 0.0, 7.0, big]
    # set bounds are used as they are
    m = _node_model("Clip", 6, [Attribute(name="min", f=-1.0, type=1),
                                Attribute(name="max", f=1.0, type=1)])
    assert run(m, {"x": x})["y"].tolist() == [-1.0, -1.0, -1.0, 0.0, 1.0, 1.0]


def test_clip_6_float16_keeps_infinities_beyond_its_range():
    """float16 cannot hold the float32 limits: clipping to them leaves every float16 value,
    infinities included (the limits round to infinity in float16)."""
    x = np.array([-np.inf, -65504.0, 1.0, np.inf], np.float16)
    y = run(_node_model("Clip", 6), {"x": x})["y"]
    assert y.dtype == np.float16 and y.tolist() == [-np.inf, -65504.0, 1.0, np.inf]


@pytest.mark.parametrize("opset, alpha, gamma", [
    (1, 1.6732, 1.0507),                                    # Selu-1's defaults
    (6, 1.67326319217681884765625, 1.05070102214813232421875),
])
def test_selu_defaults_are_those_of_the_version(opset, alpha, gamma):
    """Selu-1 defaults alpha 1.6732 and gamma 1.0507 (float32); Selu-6 on, the exact constants
    of the paper rounded to float32. A float64 input is computed in float64: checked against
    the formula within 8 float64 roundings of its terms' magnitude (g a (e^x + 1) for x <= 0)."""
    x = np.array([-3.0, -1.0, -0.25, 0.0, 0.5, 2.0], np.float64)
    y = run(_node_model("Selu", opset), {"x": x})["y"]
    a, g = float(np.float32(alpha)), float(np.float32(gamma))
    want = np.where(x > 0, g * x, g * (a * np.exp(x) - a))
    scale = np.where(x > 0, g * np.abs(x), g * a * (np.exp(np.minimum(x, 0)) + 1))
    assert y.dtype == np.float64
    assert (np.abs(y - want) <= 8 * 2.0**-53 * scale).all()
    # the other version's constants are 4e-5 apart: far above that bound
    b, h = (1.6732, 1.0507) if opset >= 6 else (1.67326319217681884765625,
                                                 1.05070102214813232421875)
    b, h = float(np.float32(b)), float(np.float32(h))
    other = np.where(x > 0, h * x, h * (b * np.exp(x) - b))
    assert (np.abs(y - other)[x != 0] > 1e3 * 2.0**-53 * scale[x != 0]).all()


# -- ctx.attr(name): the definition's default ----------------------------------------------------
def _seen_by(domain, op, opset, reads, attrs=()):
    """What a per-session kernel for (domain, op) gets from ``ctx.attr`` calls ``reads``."""
    seen = {}

    def kernel(ctx, x):
        seen.update({repr(r): ctx.attr(*r) for r in reads})
        return x

    m = Model(ir_version=7, opset_imports=[OperatorSetId(domain=domain, version=opset)],
              graph=Graph(name="g", inputs=[ValueInfo(name="x")], outputs=[ValueInfo(name="y")],
                          nodes=[Node(op_type=op, domain=domain, inputs=["x"], outputs=["y"],
                                      attributes=list(attrs))]))
    run(m, {"x": np.zeros(2, np.float32)}, kernels={(domain, op): kernel})
    return {eval(k): v for k, v in seen.items()}


def test_attr_without_a_default_is_the_definitions_at_the_imported_version():
    got = _seen_by("", "Softmax", 11, [("axis",), ("axis", 7), ("axis", None), ("nope",)])
    assert got == {("axis",): 1, ("axis", 7): 7, ("axis", None): None, ("nope",): None}
    assert _seen_by("", "Softmax", 13, [("axis",)]) == {("axis",): -1}
    # FLOAT: the float32 value the definition stores; lists are the kernel's own
    alpha = _seen_by("", "LeakyRelu", 16, [("alpha",)])[("alpha",)]
    assert alpha == float(np.float32(0.01)) and alpha != 0.01
    axes = _seen_by("", "MeanVarianceNormalization", 13, [("axes",)])[("axes",)]
    axes.append(5)
    assert _seen_by("", "MeanVarianceNormalization", 13, [("axes",)]) == {("axes",): [0, 2, 3]}
    # a set attribute wins; a custom domain has no definition
    set_ = _seen_by("", "Softmax", 13, [("axis",)], [Attribute(name="axis", i=0, type=2)])
    assert set_ == {("axis",): 0}
    assert _seen_by("com.example", "Softmax", 1, [("axis",), ("axis", 3)]) == {
        ("axis",): None, ("axis", 3): 3}


def test_a_kernel_computes_with_the_float32_default_as_a_set_attribute_would(tmp_path):
    """LeakyRelu without alpha: the definition's float32 0.01 (0.009999999776482582), exactly
    what a node of an ONNX file setting alpha=0.01 holds (FLOAT is float32 on the wire), so a
    float64 input gives the same result both ways (-1 * alpha is exact)."""
    import onnx
    from onnx import TensorProto, helper

    import onemodel

    x = np.array([-1.0, -4.0, 3.0], np.float64)
    unset = run(_node_model("LeakyRelu", 16), {"x": x})["y"]
    g = helper.make_graph([helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.01)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [3])])
    path = tmp_path / "leaky.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)]), str(path))
    with onemodel.load(str(path)) as m:
        set_ = run(m, {"x": x})["y"]
    a = float(np.float32(0.01))
    assert unset.tolist() == set_.tolist() == [-a, -4 * a, 3.0]
