"""Operator set checks (codes OM301-OM311) against onemodel.schemas: a model per defect
(onnx.helper, ir_version and opsets set so that onnx fixes nothing up), asserting code, severity
and the path in ONNX (Annex B) field names; the models of testdata/ and the conformance models
of the installed onnx give no error of these codes."""

from __future__ import annotations

import glob
import os
import time

import onnx
import pytest
from check_models import model, save, vi
from onnx import TensorProto, helper
from oracle_releases import NO_ONNXRUNTIME

import onemodel
from onemodel.formats.onnx.paths import onnx_path
from onemodel.validation.operators import check_operators

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def found(tmp_path, m, family=check_operators):
    """The family's findings of ``m`` saved as an ONNX file, paths in ONNX field names."""
    with onemodel.load(save(tmp_path, m)) as loaded:
        return [(f.code, f.severity, onnx_path(loaded, f.path), f.message)
                for f in family(loaded, {})]


def one(fs, code):
    got = [f for f in fs if f[0] == code]
    assert len(got) == 1, fs
    return got[0]


def test_valid_models_check_clean(tmp_path):
    nodes = [helper.make_node("Clip", ["x"], ["c"]),                       # optional omitted
             helper.make_node("Clip", ["c", "", "mx"], ["d"]),             # optional skipped
             helper.make_node("Concat", ["d", "d", "x"], ["e"], axis=0),   # variadic
             helper.make_node("Constant", [], ["k"], value_float=1.0),     # one of its options
             helper.make_node("Dropout", ["e"], ["f", ""]),                # optional output
             helper.make_node("Add", ["f", "k"], ["y"])]
    mx = helper.make_tensor("mx", TensorProto.FLOAT, [], [6.0])
    assert found(tmp_path, model(nodes, initializers=[mx])) == []


def test_an_unknown_operator(tmp_path):
    code, sev, path, msg = one(found(tmp_path, model([helper.make_node("Foo", ["x"], ["y"])])),
                               "OM301")
    assert (sev, path) == ("error", "graph.node[0].op_type")
    assert "'Foo'" in msg and "ai.onnx" in msg


def test_an_operator_newer_than_the_imported_opset(tmp_path):
    m = model([helper.make_node("Gelu", ["x"], ["y"])], opsets=(("", 19),))
    code, sev, path, msg = one(found(tmp_path, m), "OM302")
    assert (sev, path) == ("error", "graph.node[0].op_type")
    assert "version 19" in msg and "introduced in version 20" in msg
    assert found(tmp_path, model([helper.make_node("Gelu", ["x"], ["y"])],
                                 opsets=(("", 20),))) == []


def test_an_ml_operator_at_its_imported_version(tmp_path):
    n = helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml", threshold=0.5)
    assert found(tmp_path, model([n], opsets=(("", 17), ("ai.onnx.ml", 1)))) == []
    bad = helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml", thresh=0.5)
    assert one(found(tmp_path, model([bad], opsets=(("", 17), ("ai.onnx.ml", 1)))),
               "OM308")[2] == "graph.node[0].attribute[0].name"


def test_a_model_local_function_defines_its_operator(tmp_path):
    body = [helper.make_node("Relu", ["a"], ["b"])]
    fn = helper.make_function("local", "Foo", ["a"], ["b"], body, [helper.make_opsetid("", 17)])
    m = model([helper.make_node("Foo", ["x"], ["y"], domain="local")],
              opsets=(("", 17), ("local", 1)))
    m.functions.append(fn)
    assert found(tmp_path, m) == []


def test_function_bodies_are_checked_at_their_own_imports(tmp_path):
    body = [helper.make_node("Gelu", ["a"], ["b"]),
            helper.make_node("Relu", ["b"], ["c"], alpha=1.0)]
    fn = helper.make_function("local", "F", ["a"], ["c"], body, [helper.make_opsetid("", 19)])
    m = model([helper.make_node("F", ["x"], ["y"], domain="local")],
              opsets=(("", 20), ("local", 1)))
    m.functions.append(fn)
    fs = found(tmp_path, m)
    assert sorted(f[:3] for f in fs) == [
        ("OM302", "error", "functions[0].node[0].op_type"),
        ("OM308", "error", "functions[0].node[1].attribute[0].name")]


def test_subgraphs_are_checked(tmp_path):
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], alpha=1.0)], "then", [],
                             [vi("t")])
    other = helper.make_graph([helper.make_node("Nope", ["x"], ["e"])], "else", [], [vi("e")])
    c = helper.make_tensor("c", TensorProto.BOOL, [], [True])
    m = model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
              initializers=[c])
    fs = found(tmp_path, m)
    assert sorted(f[:3] for f in fs) == [
        ("OM301", "error", "graph.node[0].attribute[0].g.node[0].op_type"),   # else_branch
        ("OM308", "error", "graph.node[0].attribute[1].g.node[0].attribute[0].name")]


def test_a_deprecated_operator_is_a_warning(tmp_path):
    n = helper.make_node("Upsample", ["x", "s"], ["y"], mode="nearest")
    s = helper.make_tensor("s", TensorProto.FLOAT, [1], [2.0])
    code, sev, path, msg = one(found(tmp_path, model([n], initializers=[s],
                                                      opsets=(("", 10),))), "OM303")
    assert (sev, path) == ("warning", "graph.node[0]") and "deprecated" in msg
    # Upsample-9 is not deprecated
    assert found(tmp_path, model([n], initializers=[s], opsets=(("", 9),))) == []


def test_custom_domains_warn_once_per_operator(tmp_path):
    nodes = [helper.make_node("Foo", ["x"], ["a"], domain="com.x"),
             helper.make_node("Foo", ["a"], ["b"], domain="com.x"),
             helper.make_node("Bar", ["b"], ["y"], domain="com.x")]
    fs = found(tmp_path, model(nodes, opsets=(("", 17), ("com.x", 1))))
    assert [f[:3] for f in fs] == [("OM304", "warning", "graph.node[0]"),
                                   ("OM304", "warning", "graph.node[2]")]
    assert "no schema: not checked" in fs[0][3] and "'com.x'" in fs[0][3]


def test_an_ort_contrib_operator_only_warns(tmp_path):
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 2], [1.0, 0.0, 0.0, 1.0])
    n = helper.make_node("FusedMatMul", ["x", "w"], ["y"], domain="com.microsoft", alpha=1.0,
                         transA=0)
    fs = found(tmp_path, model([n], initializers=[w], opsets=(("", 17), ("com.microsoft", 1))))
    assert [f[:3] for f in fs] == [("OM304", "warning", "graph.node[0]")]


def test_input_count(tmp_path):
    code, sev, path, msg = one(found(tmp_path, model([helper.make_node("Add", ["x", "x", "x"],
                                                                       ["y"])])), "OM305")
    assert (sev, path) == ("error", "graph.node[0].input")
    assert "3 inputs" in msg and "exactly 2" in msg
    # a variadic input needs its minimum arity
    code, sev, path, msg = one(found(tmp_path, model([helper.make_node("Concat", [], ["y"],
                                                                       axis=0)])), "OM305")
    assert (sev, path) == ("error", "graph.node[0].input") and "at least 1" in msg


def test_output_count(tmp_path):
    code, sev, path, msg = one(found(tmp_path, model([helper.make_node("Relu", ["x"],
                                                                       ["y", "z"])],
                                                     outputs=("y", "z"))), "OM306")
    assert (sev, path) == ("error", "graph.node[0].output") and "2 outputs" in msg


def test_an_empty_name_only_for_an_optional_formal(tmp_path):
    code, sev, path, msg = one(found(tmp_path, model([helper.make_node("Add", ["x", ""],
                                                                       ["y"])])), "OM307")
    assert (sev, path) == ("error", "graph.node[0].input[1]") and "'B'" in msg
    code, sev, path, msg = one(found(tmp_path, model([helper.make_node("Relu", ["x"], [""]),
                                                      helper.make_node("Relu", ["x"], ["y"])])),
                               "OM307")
    assert (sev, path) == ("error", "graph.node[0].output[0]")


def test_an_unknown_attribute(tmp_path):
    n = helper.make_node("Relu", ["x"], ["y"], alpha=0.1, __internal=1)   # sorted by name
    assert [a.name for a in n.attribute] == ["__internal", "alpha"]
    code, sev, path, msg = one(found(tmp_path, model([n])), "OM308")
    assert (sev, path) == ("error", "graph.node[0].attribute[1].name") and "'alpha'" in msg


def test_an_attribute_of_the_wrong_type(tmp_path):
    n = helper.make_node("Concat", ["x", "x"], ["y"], axis=0.0)
    code, sev, path, msg = one(found(tmp_path, model([n])), "OM309")
    assert (sev, path) == ("error", "graph.node[0].attribute[0].type")
    assert "FLOAT" in msg and "INT" in msg


def test_an_attribute_whose_type_and_value_field_disagree(tmp_path):
    # type INT with the value in f: a reader takes i, which is not set (onnx.checker: "type
    # field and data field mismatch")
    n = helper.make_node("Concat", ["x", "x"], ["y"])
    a = helper.make_attribute("axis", 1.0)
    a.type = onnx.AttributeProto.INT
    n.attribute.append(a)
    code, sev, path, msg = one(found(tmp_path, model([n])), "OM309")
    assert (sev, path) == ("error", "graph.node[0].attribute[0].i")
    assert msg.endswith("'axis' of node 'Concat' (Concat-13) is INT but has no i value (its "
                        "value is in f)"), msg
    # an INTS attribute with no element is a list, not a missing value
    n = helper.make_node("Transpose", ["x"], ["y"])
    n.attribute.append(helper.make_attribute("perm", [], attr_type=onnx.AttributeProto.INTS))
    assert [f for f in found(tmp_path, model([n])) if f[0] == "OM309"] == []


def test_an_attribute_without_a_type(tmp_path):
    n = helper.make_node("Concat", ["x", "x"], ["y"], axis=0)
    n.attribute[0].ClearField("type")
    f = one(found(tmp_path, model([n])), "OM309")
    assert f[1:3] == ("error", "graph.node[0].attribute[0].type") and "no type" in f[3]


def test_a_required_attribute_missing(tmp_path):
    code, sev, path, msg = one(found(tmp_path, model([helper.make_node("Concat", ["x", "x"],
                                                                       ["y"])])), "OM310")
    assert (sev, path) == ("error", "graph.node[0]") and "'axis'" in msg


def test_an_attribute_given_twice(tmp_path):
    n = helper.make_node("Concat", ["x", "x"], ["y"], axis=0)
    n.attribute.append(helper.make_attribute("axis", 0))
    code, sev, path, msg = one(found(tmp_path, model([n])), "OM311")
    assert (sev, path) == ("error", "graph.node[0].attribute[1].name")
    assert "first as attribute 0" in msg


def test_several_defects_in_one_model(tmp_path):
    nodes = [helper.make_node("Foo", ["x"], ["a"]),
             helper.make_node("Concat", ["x", ""], ["b"]),
             helper.make_node("Relu", ["x"], ["y"], alpha=0.1)]
    fs = found(tmp_path, model(nodes))
    assert [f[:3] for f in fs] == [("OM301", "error", "graph.node[0].op_type"),
                                   ("OM307", "error", "graph.node[1].input[1]"),
                                   ("OM310", "error", "graph.node[1]"),
                                   ("OM308", "error", "graph.node[2].attribute[0].name")]


def _clean_of_mine(path):
    with onemodel.load(path) as m:
        return [f for f in check_operators(m, {}) if f.severity == "error"]


def test_testdata_models_have_no_operator_findings():
    paths = sorted(glob.glob(os.path.join(ROOT, "testdata", "models", "**", "*.onnx"),
                             recursive=True))
    assert len(paths) >= 6
    for p in paths:
        with onemodel.load(p) as m:
            assert check_operators(m, {}) == [], p


def test_conformance_models_have_no_operator_errors():
    from conformance_data import iter_cases

    cases = iter_cases()
    assert len(cases) > 1500
    start = time.perf_counter()
    bad = {c.id: errs for c in cases if (errs := _clean_of_mine(str(c.model_path)))}
    assert bad == {}
    assert time.perf_counter() - start < 20


def test_through_onemodel_check_strict_and_a_onemodel_file(tmp_path):
    """The family runs in onemodel.check: ONNX paths, warnings that --strict makes errors,
    OneModel manifest paths."""
    nodes = [helper.make_node("Foo", ["x"], ["a"], domain="com.x"),
             helper.make_node("Relu", ["a"], ["y"], alpha=0.1)]
    p = save(tmp_path, model(nodes, opsets=(("", 17), ("com.x", 1))))
    r = onemodel.check(p, select=["OM3"])
    assert [(f.code, f.severity, f.path) for f in r.findings] == [
        ("OM304", "warning", "graph.node[0]"),
        ("OM308", "error", "graph.node[1].attribute[0].name")]
    assert r.findings[1].clause == "ONNX Part 1, Clauses 7.3.1, 10.4"
    r = onemodel.check(p, select=["OM304"], strict=True)
    assert [(f.code, f.severity) for f in r.findings] == [("OM304", "error")] and not r.ok
    assert onemodel.check(p, select=["OM304"]).ok
    om = str(tmp_path / "m.onemodel")
    with onemodel.load(p) as m:
        onemodel.save(m, om)
    r = onemodel.check(om, select=["OM3"])
    assert [(f.code, f.path) for f in r.findings] == [
        ("OM304", "manifest.graph.nodes[0]"),
        ("OM308", "manifest.graph.nodes[1].attributes[0].name")]


@pytest.mark.parametrize("name, level", [("transformer_dynamo", "ORT_ENABLE_EXTENDED"),
                                         ("cnn_legacy", "ORT_ENABLE_ALL")])
def test_an_ort_optimized_model_only_warns(tmp_path, name, level):
    """onnxruntime's optimizer writes contrib operators (com.microsoft FusedMatMul,
    SkipLayerNormalization; com.microsoft.nchwc Conv ...): one OM304 warning per operator type,
    nothing else."""
    ort = pytest.importorskip("onnxruntime", reason=NO_ONNXRUNTIME)
    out = str(tmp_path / f"{name}_ort.onnx")
    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    so.optimized_model_filepath = out
    so.log_severity_level = 3
    ort.InferenceSession(os.path.join(ROOT, "testdata", "models", f"{name}.onnx"), so,
                         providers=["CPUExecutionProvider"])
    m = onnx.load(out)
    custom = {(n.domain, n.op_type) for n in m.graph.node if n.domain.startswith("com.microsoft")}
    assert custom
    r = onemodel.check(out)
    assert r.ok, r.errors
    assert sorted((f.code, f.severity, f.message) for f in r.findings) == sorted(
        ("OM304", "warning", f"operator '{op}' of domain '{d}' has no schema: not checked")
        for d, op in custom)
