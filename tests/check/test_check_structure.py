"""Structure checks (codes OM101-OM119): a model per defect, asserting code, severity and the
path in ONNX (Annex B) field names; several defects in one model are all reported."""

from __future__ import annotations

import onnx
import pytest
from check_models import model, save, vi
from onnx import TensorProto, helper

import onemodel
from onemodel.validation import Finding

MODELS = __import__("pathlib").Path(__file__).resolve().parents[2] / "testdata" / "models"


def found(tmp_path, m, **kw):
    return onemodel.check(save(tmp_path, m), **kw)


def one(report, code):
    fs = [f for f in report.findings if f.code == code]
    assert len(fs) == 1, report.findings
    return fs[0]


def test_a_valid_model_checks_clean(tmp_path):
    r = found(tmp_path, model())
    assert r.ok and r.findings == [] and r.counts == {"error": 0, "warning": 0, "info": 0,
                                                     "total": 0}


def test_no_ir_version(tmp_path):
    m = model()
    m.ir_version = 0  # the default of proto3: not written
    f = one(found(tmp_path, m), "OM101")
    assert (f.severity, f.path, f.clause) == ("error", "ir_version", "ONNX Part 1, Clause 5.3.1")


def test_no_opset_import(tmp_path):
    m = model()
    del m.opset_import[:]
    r = found(tmp_path, m)
    assert one(r, "OM103").path == "opset_import"
    # and the node's default domain is then not imported
    assert one(r, "OM105").path == "graph.node[0].domain"


def test_a_domain_imported_at_two_versions(tmp_path):
    f = one(found(tmp_path, model(opsets=(("", 17), ("ai.onnx", 18)))), "OM104")
    assert (f.severity, f.path) == ("error", "opset_import[1].domain")
    # the first import is named in the finding's own path form
    assert f.message == ("domain 'ai.onnx' is imported at version 18 and at version 17 (first "
                         "at opset_import[0].domain): which definition its operators bind to "
                         "is ambiguous")
    assert f.clause == "ONNX Part 1, Clauses 5.3.2, 14.3"


def test_a_domain_imported_twice_at_one_version_is_a_warning(tmp_path):
    """skl2onnx writes ('', 17) twice: redundant, not ambiguous; onnx's checker and
    onnxruntime take the model (issue 23), so check says so as a warning, OM120, and the
    model is ok."""
    m = model(opsets=(("", 17), ("", 17)))
    r = found(tmp_path, m)
    assert r.ok and not any(f.code == "OM104" for f in r.findings)
    f = one(r, "OM120")
    assert (f.severity, f.path, f.clause) == ("warning", "opset_import[1].domain",
                                              "ONNX Part 1, Clause 5.3.2")
    assert f.message == ("domain '' is imported twice at version 17 (first at "
                         "opset_import[0].domain): the repetition is redundant")
    onnx.checker.check_model(m, full_check=True)  # the oracles accept it
    ort = pytest.importorskip("onnxruntime")
    ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    # in a function's imports too
    fn = helper.make_function("local", "f", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])],
                              [helper.make_opsetid("", 17), helper.make_opsetid("", 17)])
    m = model(opsets=(("", 17), ("local", 1)))
    m.functions.append(fn)
    assert one(found(tmp_path, m), "OM120").path == "functions[0].opset_import[1].domain"


def test_the_first_import_is_named_as_the_finding_path_is(tmp_path):
    """OM104 in a function's imports, and in a .onemodel file: the message's "first at" names
    the earlier import in the same terms as the finding's path."""
    m = model()
    fn = helper.make_function("local", "f", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])],
                              [helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx", 18)])
    m.functions.append(fn)
    m.opset_import.append(helper.make_opsetid("local", 1))
    f = one(found(tmp_path, m), "OM104")
    assert f.path == "functions[0].opset_import[1].domain"
    assert "(first at functions[0].opset_import[0].domain)" in f.message
    src = save(tmp_path, model(opsets=(("", 17), ("ai.onnx", 18))), "d.onnx")
    dst = str(tmp_path / "d.onemodel")
    onemodel.convert(src, dst)
    f = one(onemodel.check(dst), "OM104")
    assert f.path.startswith("manifest.") and f.path.endswith("[1].domain")
    assert f"(first at {f.path[:-len('[1].domain')]}[0].domain)" in f.message


def test_a_used_domain_not_imported(tmp_path):
    nodes = [helper.make_node("Foo", ["x"], ["y"], domain="com.x")]
    f = one(found(tmp_path, model(nodes)), "OM105")
    assert (f.severity, f.path) == ("error", "graph.node[0].domain")
    assert "'com.x'" in f.message


def test_empty_names(tmp_path):
    nodes = [helper.make_node("", ["x"], ["y"])]
    r = found(tmp_path, model(nodes, name=""))
    assert one(r, "OM106").path == "graph.node[0].op_type"
    assert one(r, "OM107").path == "graph.name"


def test_top_level_values_typed(tmp_path):
    m = model()
    m.graph.input[0].CopyFrom(vi("x", typed=False))
    f = one(found(tmp_path, m), "OM108")
    assert (f.severity, f.path) == ("error", "graph.input[0].type")


def test_a_name_defined_twice(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])]
    f = one(found(tmp_path, model(nodes)), "OM109")
    assert (f.severity, f.path) == ("error", "graph.node[1].output[0]")


def test_ir3_initializer_must_be_an_input(tmp_path):
    w = helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0])
    nodes = [helper.make_node("Add", ["x", "w"], ["y"])]
    f = one(found(tmp_path, model(nodes, initializers=[w], ir_version=3, opsets=(("", 8),))),
            "OM110")
    assert (f.severity, f.path) == ("error", "graph.initializer[0].name")
    # from IR version 4 it need not be
    assert found(tmp_path, model(nodes, initializers=[w], ir_version=4, opsets=(("", 9),))).ok


def test_an_undefined_use(tmp_path):
    nodes = [helper.make_node("Add", ["x", "nope"], ["y"])]
    f = one(found(tmp_path, model(nodes)), "OM112")
    assert (f.severity, f.path) == ("error", "graph.node[0].input[1]")
    assert "'nope'" in f.message


def test_nodes_out_of_order_are_reported_not_fatal(tmp_path):
    nodes = [helper.make_node("Neg", ["t"], ["y"]), helper.make_node("Relu", ["x"], ["t"]),
             helper.make_node("Add", ["x", "gone"], ["z"])]
    r = found(tmp_path, model(nodes, outputs=("y", "z")))
    f = one(r, "OM113")
    assert (f.severity, f.path) == ("error", "graph.node[0]")
    assert one(r, "OM112").path == "graph.node[2].input[1]"  # checking went on


def test_a_cycle(tmp_path):
    nodes = [helper.make_node("Neg", ["b"], ["a"]), helper.make_node("Neg", ["a"], ["b"]),
             helper.make_node("Relu", ["x"], ["y"])]
    f = one(found(tmp_path, model(nodes)), "OM114")
    assert (f.severity, f.path) == ("error", "graph.node[0]")


def test_metadata_keys_distinct(tmp_path):
    m = model()
    helper.set_model_props(m, {"a": "1"})
    e = m.metadata_props.add()
    e.key, e.value = "a", "2"
    f = one(found(tmp_path, m), "OM115")
    assert (f.severity, f.path) == ("error", "metadata_props[1].key")


def test_functions_unique(tmp_path):
    fn = helper.make_function("local", "f", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])],
                              [helper.make_opsetid("", 17)])
    m = model(opsets=(("", 17), ("local", 1)))
    m.functions.extend([fn, fn])
    f = one(found(tmp_path, m), "OM116")
    assert (f.severity, f.path) == ("error", "functions[1]")


def test_ref_attr_name_outside_a_function(tmp_path):
    a = helper.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT)
    a.ref_attr_name = "a"
    node = helper.make_node("LeakyRelu", ["x"], ["y"])
    node.attribute.append(a)
    f = one(found(tmp_path, model([node])), "OM117")
    assert (f.severity, f.path) == ("error", "graph.node[0].attribute[0].ref_attr_name")


def test_training_bindings_name_real_values(tmp_path):
    m = model()
    ti = m.training_info.add()
    ti.algorithm.CopyFrom(helper.make_graph([helper.make_node("Relu", ["x"], ["u"])], "alg",
                                            [vi("x")], [vi("u")]))
    b = ti.update_binding.add()
    b.key, b.value = "w", "u"
    f = one(found(tmp_path, m), "OM118")
    assert (f.severity, f.path) == ("error", "training_info[0].update_binding[0].key")


def test_several_defects_are_all_reported(tmp_path):
    nodes = [helper.make_node("Add", ["x", "nope"], ["y"]), helper.make_node("Neg", ["x"], ["y"]),
             helper.make_node("Foo", ["x"], ["z"], domain="com.x")]
    m = model(nodes, outputs=("y", "z", "missing"), opsets=(("", 17), ("", 18)))
    r = found(tmp_path, m)
    got = sorted((f.code, f.path) for f in r.errors)
    assert got == [("OM104", "opset_import[1].domain"), ("OM105", "graph.node[2].domain"),
                   ("OM109", "graph.node[1].output[0]"), ("OM112", "graph.node[0].input[1]"),
                   ("OM112", "graph.output[2]")]
    assert r.counts["error"] == 5 and not r.ok


def test_select_ignore_strict_full(tmp_path):
    nodes = [helper.make_node("Add", ["x", "nope"], ["y"]), helper.make_node("Neg", ["x"], ["y"])]
    p = save(tmp_path, model(nodes))
    assert [f.code for f in onemodel.check(p, select=["OM112"]).findings] == ["OM112"]
    assert [f.code for f in onemodel.check(p, ignore=["OM11"]).findings] == ["OM109"]
    r = onemodel.check(p, select=["OM41"], full=True)  # an undefined input: unknown, no clash
    assert r.findings == [] and r.ok
    r = onemodel.check(p, select=["OM1", "OM41"], full=True, strict=True)
    assert [f.code for f in r.findings] == ["OM109", "OM112"] and not r.ok
    with pytest.raises(onemodel.errors.UsageError):
        onemodel.check(p, select=["XX1"])


def test_a_model_in_memory_has_ir_paths(tmp_path):
    nodes = [helper.make_node("Add", ["x", "nope"], ["y"])]
    with onemodel.load(save(tmp_path, model(nodes))) as m:
        r = onemodel.check(m)
    assert [(f.code, f.path) for f in r.findings] == [("OM112", "graph.nodes[0].inputs[1]")]
    assert isinstance(r.findings[0], Finding)


def test_a_onemodel_file_may_hold_nodes_out_of_order(tmp_path):
    """The OneModel reader sorts the nodes (format section 3, rule 3): no OM113 there."""
    nodes = [helper.make_node("Add", ["x", "y0"], ["y"]), helper.make_node("Relu", ["x"], ["y0"])]
    assert one(found(tmp_path, model(nodes)), "OM113").path == "graph.node[0]"
    with onemodel.load(save(tmp_path, model(nodes))) as m:
        onemodel.save(m, str(tmp_path / "m.onemodel"))
    r = onemodel.check(str(tmp_path / "m.onemodel"))
    assert r.ok and r.findings == []


def test_paths_in_subgraphs_and_function_bodies_use_annex_b_names(tmp_path):
    branch = helper.make_graph([helper.make_node("Neg", ["ghost"], ["b"])], "b", [], [vi("b")])
    nodes = [helper.make_node("If", ["x"], ["y"], then_branch=branch, else_branch=branch)]
    fn = helper.make_function("local", "f", ["a"], ["b"], [helper.make_node("Add", ["a", "w"],
                                                                            ["b"])],
                              [helper.make_opsetid("", 17)])
    m = model(nodes, opsets=(("", 17), ("local", 1)))
    m.functions.append(fn)
    r = found(tmp_path, m, select=["OM1"])   # (If's condition x is no bool: OM401)
    assert sorted((f.code, f.path) for f in r.findings) == [
        ("OM112", "functions[0].node[0].input[1]"),
        ("OM112", "graph.node[0].attribute[0].g.node[0].input[0]"),
        ("OM112", "graph.node[0].attribute[1].g.node[0].input[0]"),
    ]


def test_a_function_body_out_of_order(tmp_path):
    body = [helper.make_node("Neg", ["t"], ["b"]), helper.make_node("Relu", ["a"], ["t"])]
    fn = helper.make_function("local", "f", ["a"], ["b"], body, [helper.make_opsetid("", 17)])
    m = model(opsets=(("", 17), ("local", 1)))
    m.functions.append(fn)
    f = one(found(tmp_path, m), "OM113")
    assert (f.severity, f.path) == ("error", "functions[0].node[0]")


def test_select_takes_a_comma_separated_string_and_a_report_is_true_when_ok():
    import onemodel
    from onemodel.ir import Graph, Model

    bad = Model(ir_version=None, graph=Graph(name="g"))
    as_list = onemodel.check(bad, select=["OM1"])
    as_text = onemodel.check(bad, select="OM1, OM3")
    codes = [f.code for f in as_list.findings]
    assert as_list.errors and [f.code for f in as_text.findings] == codes
    assert not as_text and not as_text.ok
    assert onemodel.check(bad, select="OM411")  # nothing selected: no error, so true


def test_full_under_strict_stays_an_info_and_does_not_fail_a_clean_model():
    import onemodel

    report = onemodel.check(MODELS / "cnn_dynamo.onnx", full=True, strict=True)
    # no contradiction; at most the info listing operators without an inference rule
    assert report.ok and [f.code for f in report.findings] in ([], ["OM411"])
    assert all(f.severity == "info" for f in report.findings)


def test_a_subgraph_reading_a_later_value_is_reported_where_it_reads_it(tmp_path):
    """An If whose branch reads 'late', which a node after the If produces: the finding names
    the inner use, as onnx's checker names the inner node (issue 23), not the If."""
    then = helper.make_graph([helper.make_node("Identity", ["late"], ["t"])], "then", [],
                             [vi("t")])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [],
                              [vi("e")])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
             helper.make_node("Neg", ["x"], ["late"])]
    m = model(nodes, inputs=("c", "x"), outputs=("y", "late"))
    assert [a.name for a in m.graph.node[0].attribute] == ["else_branch", "then_branch"]
    f = one(found(tmp_path, m), "OM113")
    assert f.path == "graph.node[0].attribute[1].g.node[0].input[0]"
    assert f.message == ("node 'If' at position 0 reads 'late' in a subgraph, which node 'Neg' "
                         "at position 1 produces later (not topologically sorted)")
    with pytest.raises(onnx.checker.ValidationError, match="Identity"):
        onnx.checker.check_model(m)
    # a direct input stays reported at the node, now naming the value and its producer
    nodes = [helper.make_node("Neg", ["t"], ["y"]), helper.make_node("Relu", ["x"], ["t"])]
    f = one(found(tmp_path, model(nodes)), "OM113")
    assert f.path == "graph.node[0]"
    assert f.message == ("node 'Neg' at position 0 reads 't', which node 'Relu' at position 1 "
                         "produces later (not topologically sorted)")
