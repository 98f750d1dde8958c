"""The contrib table (onnxruntime's operators of the domains onnx does not define, and those it
adds to the default domain; onemodel.schemas.contrib) against onnxruntime's live registry,
schema by schema, and the com.microsoft operators the evaluator implements against it."""

from __future__ import annotations

import onnx
import onnx.defs
import pytest

from onemodel import schemas
from onemodel.errors import UsageError

ort = pytest.importorskip(
    "onnxruntime", reason="onnxruntime (a dev dependency, the contrib table's source) is not "
                          "installed: the stored table cannot be compared with its registry")
from onnxruntime.capi import onnxruntime_pybind11_state as ort_state  # noqa: E402

same_ort = pytest.mark.skipif(
    ort.__version__ != schemas.onnxruntime_version(),
    reason=f"the contrib table was generated from onnxruntime {schemas.onnxruntime_version()}, "
           f"the installed one is {ort.__version__}: regenerate with tools/gen_schemas.py")

OPTION = {"Single": "single", "Optional": "optional", "Variadic": "variadic"}
ONNX = {(s.domain, s.name) for s in onnx.defs.get_all_schemas_with_history()}
#: every schema of onnxruntime that onnx does not define: what the contrib table must hold
CONTRIB = [s for s in ort_state.get_all_operator_schema() if (s.domain, s.name) not in ONNX]

#: the com.microsoft operators the evaluator and inference implement, with the versions their
#: kernels serve from (onemodel/evaluate/kernels/ms_*.py: all at com.microsoft 1)
IMPLEMENTED = {op: 1 for op in (
    "MatMulNBits", "GatherBlockQuantized", "DynamicQuantizeMatMul", "MatMulIntegerToFloat",
    "QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearGlobalAveragePool", "QLinearConcat",
    "Gelu", "FastGelu", "BiasGelu", "QuickGelu", "BiasAdd", "SkipLayerNormalization",
    "SkipSimplifiedLayerNormalization", "SimplifiedLayerNormalization",
    "EmbedLayerNormalization", "FusedMatMul", "FusedConv", "NhwcConv", "Trilu", "Attention",
    "MultiHeadAttention", "RotaryEmbedding", "GroupQueryAttention", "QAttention",
    "QEmbedLayerNormalization", "FusedGemm")}


def _formals(params):
    # onnxruntime's binding does not publish min_arity: the table stores onnx's default, 1
    return [(p.name, p.typeStr, OPTION[p.option.name], p.isHomogeneous, 1) for p in params]


def _mine(f):
    return (f.name, f.type_str, f.option, f.is_homogeneous, f.min_arity)


def _default(a):
    """onnxruntime's default (a serialized AttributeProto) as a plain value, by onnx.helper."""
    dv = onnx.AttributeProto()
    dv.ParseFromString(a._default_value)
    if dv.type == 0 and not dv.name:
        return (False, None)
    v = onnx.helper.get_attribute_value(dv)
    if isinstance(v, bytes):
        v = v.decode()
    elif isinstance(v, list):
        v = [x.decode() if isinstance(x, bytes) else x for x in v]
    return (True, v)


@same_ort
def test_every_contrib_schema_of_onnxruntime_is_stored_as_its_registry_reports_it():
    assert len(CONTRIB) == 226   # onnxruntime 1.32.0: 150 + 8 + 43 + 25 default-domain schemas
    for s in CONTRIB:
        got = schemas.contrib(s.name, s.domain, s.since_version)
        where = f"{s.domain or 'ai.onnx'}::{s.name}-{s.since_version}"
        assert got is not None and got.since_version == s.since_version, where
        assert (got.name, got.domain, got.deprecated) == (s.name, s.domain, s.deprecated), where
        assert [_mine(f) for f in got.inputs] == _formals(s.inputs), where
        assert [_mine(f) for f in got.outputs] == _formals(s.outputs), where
        assert (got.min_input, got.max_input, got.min_output, got.max_output) == (
            s.min_input, s.max_input, s.min_output, s.max_output), where
        assert dict(got.constraints) == {
            c.type_param_str: tuple(sorted(c.allowed_type_strs)) for c in s.type_constraints}, where
        assert sorted(got.attributes) == sorted(s.attributes), where
        for name, a in s.attributes.items():
            mine = got.attributes[name]
            assert (mine.type, mine.required) == (a.type.name, a.required), (where, name)
            assert (mine.has_default, mine.default) == _default(a), (where, name)


@same_ort
def test_the_contrib_table_holds_nothing_else_and_leaves_the_onnx_table_alone():
    want = {}
    for s in CONTRIB:
        want.setdefault(s.domain, {}).setdefault(s.name, []).append(s.since_version)
    assert set(schemas.contrib_domains()) == set(want) - {""} == {
        "com.microsoft", "com.microsoft.nchwc", "com.ms.internal.nhwc"}
    for domain, ops in want.items():
        assert set(schemas.contrib_operators(domain)) == set(ops), domain
        for op, since in ops.items():
            assert tuple(s.since_version for s in schemas.definitions(op, domain)) == tuple(
                sorted(since)), (domain, op)
    # the ONNX lookups are unchanged: its domains only, no contrib operator served by get
    assert set(schemas.domains()) == {"", "ai.onnx.ml", "ai.onnx.preview.training",
                                      "ai.onnx.preview"}
    assert schemas.get("SimplifiedLayerNormalization", "", 24) is None
    assert schemas.get("Attention", "com.microsoft", 1) is None
    # an operator onnx defines is not served by the contrib table, even where onnxruntime has it
    assert schemas.contrib("Relu", "", 14) is None and schemas.contrib("Gelu", "", 20) is None


def test_the_default_domain_additions_are_only_operators_onnx_lacks():
    added = schemas.contrib_operators("")
    assert "SimplifiedLayerNormalization" in added and "Affine" in added
    for op in added:
        assert schemas.get(op, "", None) is None, op


def test_every_com_microsoft_operator_the_evaluator_implements_has_a_stored_signature():
    missing = []
    for op, since in IMPLEMENTED.items():
        # SimplifiedLayerNormalization: onnxruntime registers it in the default domain only
        domain = "" if op == "SimplifiedLayerNormalization" else "com.microsoft"
        got = schemas.contrib(op, domain, since)
        if got is None or got.since_version != since:
            missing.append((domain, op, since))
    assert missing == []
    assert schemas.contrib("SimplifiedLayerNormalization", "com.microsoft", 1) is None


def test_contrib_lookups_by_version():
    s = schemas.contrib("Attention", "com.microsoft", 1)
    assert s is not None and s.domain == "com.microsoft" and s.since_version == 1
    assert s.attributes["num_heads"].required and s.default("unidirectional") == 0
    assert schemas.contrib("Attention", "com.microsoft", 7) == s      # in force until a newer
    assert schemas.contrib("Attention") == s
    assert schemas.contrib("NoSuchOperator", "com.microsoft", 1) is None
    assert schemas.contrib("Attention", "com.example", 1) is None
    assert schemas.contrib_operators("com.example") == ()
    assert schemas.onnxruntime_version() == "1.32.0"
    with pytest.raises(UsageError):
        schemas.contrib("Attention", "com.microsoft", 0)
