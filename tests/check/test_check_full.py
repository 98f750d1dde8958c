"""`check --full`: shape inference's contradictions are OM410 errors with the path in the file's
terms, operators without an inference rule one OM411 info; nothing of it without --full; any
model the structure checks refuse is still checked without a traceback."""

from __future__ import annotations

import json

import numpy as np
import pytest
from check_models import model, save
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

import onemodel
from onemodel.cli import app
from onemodel.operators import Operator

runner = CliRunner()
F = TensorProto.FLOAT


def _tvi(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def _declared_wrong(tmp_path, name="m.onnx"):
    """x [N,3] -> Neg -> a (declared [N,4] by value_info) -> Shape -> y (declared [3])."""
    g = helper.make_graph([helper.make_node("Neg", ["x"], ["a"]),
                           helper.make_node("Shape", ["a"], ["y"])], "g",
                          [_tvi("x", ["N", 3])], [_tvi("y", [3], TensorProto.INT64)],
                          value_info=[_tvi("a", ["N", 4])])
    return save(tmp_path, helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]),
                name)


def _full(report):
    return [(f.code, f.severity, f.path, f.message) for f in report.findings
            if f.code.startswith("OM41")]


def test_declared_types_contradicting_inference_are_errors(tmp_path):
    p = _declared_wrong(tmp_path)
    assert _full(onemodel.check(p)) == [] and onemodel.check(p).ok  # only with --full
    r = onemodel.check(p, full=True)
    assert _full(r) == [
        ("OM410", "error", "graph.node[0]",
         "'a' is declared [N,4] but inferred [N,3] (axis 1)"),
        ("OM410", "error", "graph.output[0]", "'y' is declared [3] but inferred [2] (axis 0)")]
    assert not r.ok and r.findings[0].clause == "ONNX Part 1, Clauses 9.4, 10.4"


def test_paths_are_in_onemodel_terms_for_a_onemodel_file(tmp_path):
    src = str(tmp_path / "m.onemodel")
    onemodel.convert(_declared_wrong(tmp_path), src)
    assert [f.path for f in onemodel.check(src, full=True).findings] == \
        ["manifest.graph.nodes[0]", "manifest.graph.outputs[0]"]


def test_a_model_in_memory_has_ir_paths(tmp_path):
    with onemodel.load(_declared_wrong(tmp_path)) as m:
        assert [f.path for f in onemodel.check(m, full=True).findings] == \
            ["graph.nodes[0]", "graph.outputs[0]"]


def test_an_operators_own_contradiction(tmp_path):
    w = numpy_helper.from_array(np.zeros((2, 4), np.float32), "w")
    nodes = [helper.make_node("Add", ["x", "w"], ["y"])]
    g = helper.make_graph(nodes, "g", [_tvi("x", ["N", 3])], [_tvi("y", None)], [w])
    p = save(tmp_path, helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert _full(onemodel.check(p, full=True)) == [
        ("OM410", "error", "graph.node[0]", "Add: inputs do not broadcast: extents [3, 4] at "
                                            "axis -1")]


def _wrap_rule(ctx, x):
    """com.test.Wrap: the output of its ``body`` graph, inferred with the node's input."""
    outs = ctx.infer_graph("body", [x])
    return outs[0] if outs else None


#: com.test.Wrap, declared with its rule for the calls that name it (onemodel.operators)
WRAP = Operator("Wrap", "com.test", inputs=[("x", "T")], outputs=[("y", "T")],
                attributes={"body": "GRAPH"}, constraints={"T": ["tensor(float)"]},
                rule=_wrap_rule)


def test_a_contradiction_in_a_subgraph_has_its_annex_b_path(tmp_path):
    body = helper.make_graph([helper.make_node("Neg", ["bx"], ["by"])], "body",
                             [_tvi("bx", None)], [_tvi("by", [7])])
    g = helper.make_graph([helper.make_node("Wrap", ["x"], ["y"], domain="com.test", body=body)],
                          "g", [_tvi("x", [2])], [_tvi("y", None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("com.test", 1)])
    r = onemodel.check(save(tmp_path, m), full=True, operators=[WRAP])
    assert _full(r) == [("OM410", "error", "graph.node[0].attribute[0].g.output[0]",
                         "'by' is declared [7] but inferred [2] (axis 0)")]


def test_a_contradiction_in_a_function_body_names_the_call(tmp_path):
    five = numpy_helper.from_array(np.zeros(5, np.float32))
    f = helper.make_function("local", "f", ["fx"], ["fy"],
                             [helper.make_node("Constant", [], ["fw"], value=five),
                              helper.make_node("Add", ["fx", "fw"], ["fy"])],
                             [helper.make_opsetid("", 17)])
    g = helper.make_graph([helper.make_node("f", ["x"], ["y"], domain="local")], "g",
                          [_tvi("x", [3])], [_tvi("y", None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("local", 1)], functions=[f])
    p = save(tmp_path, m)
    found = _full(onemodel.check(p, full=True))
    assert found == [("OM410", "error", "graph.node[0](function f).node[1]",
                      "Add: inputs do not broadcast: extents [3, 5] at axis -1")]
    onemodel.convert(p, str(tmp_path / "m.onemodel"))
    assert [f.path for f in onemodel.check(str(tmp_path / "m.onemodel"), full=True).findings] \
        == ["manifest.graph.nodes[0](function f).nodes[1]"]


def test_operators_without_a_rule_are_listed_once_as_an_info(tmp_path):
    nodes = [helper.make_node("Foo", ["x"], ["a"], domain="com.x"),
             helper.make_node("Bar", ["a"], ["b"], domain="com.x"),
             helper.make_node("Foo", ["b"], ["y"], domain="com.x")]
    p = save(tmp_path, model(nodes, opsets=(("", 17), ("com.x", 2))))
    r = onemodel.check(p, full=True, strict=True, ignore="OM304")
    assert _full(r) == [("OM411", "info", None,
                         "no inference rule for 2 operators (com.x Bar-2, com.x Foo-2): their "
                         "outputs' shapes are unknown, what depends on them is checked less")]
    assert r.ok  # an info, under --strict too
    assert onemodel.check(p, full=True, select="OM411", ignore="OM304").counts["info"] == 1
    assert onemodel.check(p, full=True, ignore="OM41,OM304").findings == []


def test_the_command_line(tmp_path):
    p = _declared_wrong(tmp_path)
    assert runner.invoke(app, ["check", p]).exit_code == 0
    r = runner.invoke(app, ["check", p, "--full"])
    assert r.exit_code == 1
    assert "OM410 error (2)" in r.stdout
    assert "  graph.output[0]: 'y' is declared [3] but inferred [2] (axis 0)" in r.stdout
    r = runner.invoke(app, ["check", p, "--full", "--json"])
    doc = json.loads(r.stdout)
    assert [(f["code"], f["path"]) for f in doc["findings"]] == \
        [("OM410", "graph.node[0]"), ("OM410", "graph.output[0]")]
    assert doc["counts"] == {"error": 2, "warning": 0, "info": 0, "total": 2}


def _cycle():
    return model([helper.make_node("Neg", ["b"], ["a"]), helper.make_node("Neg", ["a"], ["b"]),
                  helper.make_node("Neg", ["a"], ["y"])])


def _recursive():
    f = helper.make_function("local", "f", ["fx"], ["fy"],
                             [helper.make_node("f", ["fx"], ["fy"], domain="local")],
                             [helper.make_opsetid("local", 1)])
    return model([helper.make_node("f", ["x"], ["y"], domain="local")],
                 opsets=(("", 17), ("local", 1)), functions=[f])


def _no_graph():
    m = model()
    m.ClearField("graph")
    return m


DEFECTS = {
    "cycle": _cycle,
    "undefined input": lambda: model([helper.make_node("Add", ["x", "nope"], ["y"])]),
    "out of order": lambda: model([helper.make_node("Neg", ["a"], ["y"]),
                                   helper.make_node("Neg", ["x"], ["a"])]),
    "defined twice": lambda: model([helper.make_node("Neg", ["x"], ["y"]),
                                    helper.make_node("Relu", ["x"], ["y"])]),
    "no opset": lambda: model(opsets=()),
    "domain not imported": lambda: model([helper.make_node("Foo", ["x"], ["y"], domain="d")]),
    "empty op_type": lambda: model([helper.make_node("", ["x"], ["y"])]),
    "too many inputs": lambda: model([helper.make_node("Neg", ["x", "x", "x"], ["y"])]),
    "no graph": _no_graph,
}


@pytest.mark.parametrize("name", sorted(DEFECTS))
def test_a_model_the_structure_checks_refuse_is_still_checked(tmp_path, name):
    p = save(tmp_path, DEFECTS[name]())
    plain, full = onemodel.check(p), onemodel.check(p, full=True)
    # --full adds what inference finds and changes nothing else; here it finds nothing
    assert plain.errors and full.findings == plain.findings, full.findings


def test_a_recursive_function_is_an_error_and_is_not_expanded(tmp_path):
    """f calls itself: check reports it at its definition (OM122, with or without --full);
    inference does not expand the call and says so at the call (OM413)."""
    p = save(tmp_path, _recursive())
    def every(report):
        return [(f.code, f.severity, f.path, f.message) for f in report.findings]

    rec = ("OM122", "error", "functions[0]", "function local.f calls itself")
    assert every(onemodel.check(p)) == [rec]
    assert every(onemodel.check(p, full=True)) == [
        rec, ("OM413", "info", "graph.node[0]",
              "f: function local.f calls itself; the call is not expanded")]


def test_out_of_order_nodes_are_inferred_in_dependency_order(tmp_path):
    m = DEFECTS["out of order"]()
    m.graph.output[0].CopyFrom(_tvi("y", [5]))
    r = onemodel.check(save(tmp_path, m), full=True)
    assert _full(r) == [("OM410", "error", "graph.output[0]",
                         "'y' is declared [5] but inferred [2] (axis 0)")]


@pytest.mark.parametrize("suffix", [".onnx", ".onemodel"])
def test_initializer_elements_are_read_for_the_shapes_they_carry(tmp_path, suffix):
    """Reshape to an initializer's [2, -1]: the elements are read (check reads structure
    only otherwise) and the declared output [3, 4] contradicts [2, 6]."""
    target = numpy_helper.from_array(np.array([2, -1], np.int64), "target")
    g = helper.make_graph([helper.make_node("Reshape", ["x", "target"], ["y"])], "g",
                          [_tvi("x", [3, 4])], [_tvi("y", [3, 4])], [target])
    p = save(tmp_path, helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    if suffix == ".onemodel":
        onemodel.convert(p, str(tmp_path / "m.onemodel"))
        p = str(tmp_path / "m.onemodel")
    where = "graph.output[0]" if suffix == ".onnx" else "manifest.graph.outputs[0]"
    assert [(f.code, f.path, f.message) for f in onemodel.check(p, full=True).findings] == [
        ("OM410", where, f"'y' is declared [3,4] but inferred [2,6] (axis {k})") for k in (0, 1)]


def test_a_heterogeneous_variadic_binds_no_type(tmp_path):
    """Loop's carried values (V, variadic, heterogeneous): a float and an int64 value, each
    declared of its own type, contradict nothing (V does not stand for the first one's type)."""
    I64, B = TensorProto.INT64, TensorProto.BOOL
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Identity", ["a_in"], ["a_out"]),
         helper.make_node("Identity", ["b_in"], ["b_out"])], "body",
        [_tvi("i", [], I64), _tvi("c_in", [], B), _tvi("a_in", [2]), _tvi("b_in", [3], I64)],
        [_tvi("c_out", [], B), _tvi("a_out", [2]), _tvi("b_out", [3], I64)])
    g = helper.make_graph(
        [helper.make_node("Loop", ["m", "c", "a", "b"], ["a_end", "b_end"], body=body)], "g",
        [_tvi("m", [], I64), _tvi("c", [], B), _tvi("a", [2]), _tvi("b", [3], I64)],
        [_tvi("a_end", [2]), _tvi("b_end", [3], I64)])
    p = save(tmp_path, helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)]))
    assert [f for f in onemodel.check(p, full=True).findings if f.code == "OM410"] == []


def test_an_optimizers_outputs_each_have_their_tensors_type(tmp_path):
    """Adagrad over a float and a double tensor (T3 heterogeneous): X_new and H_new of each
    have its element type; declared so, they contradict nothing."""
    D = TensorProto.DOUBLE
    names = ["r", "t", "x1", "x2", "g1", "g2", "h1", "h2"]
    types = [(F, []), (TensorProto.INT64, []), (F, [2]), (D, [3]), (F, [2]), (D, [3]), (F, [2]),
             (D, [3])]
    outs = [("x1n", F, [2]), ("x2n", D, [3]), ("h1n", F, [2]), ("h2n", D, [3])]
    node = helper.make_node("Adagrad", names, [o[0] for o in outs],
                            domain="ai.onnx.preview.training")
    g = helper.make_graph([node], "g", [_tvi(n, s, e) for n, (e, s) in zip(names, types)],
                          [_tvi(n, s, e) for n, e, s in outs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("ai.onnx.preview.training", 1)])
    p = save(tmp_path, m)
    assert [f for f in onemodel.check(p, full=True).findings if f.code.startswith("OM41")] == []
    for o in m.graph.output:  # not declared: what inference gives alone
        o.ClearField("type")
    from onemodel.inference import infer_model
    with onemodel.load(m.SerializeToString()) as loaded:
        values = infer_model(loaded).values
    assert [str(values[n]) for n, _, _ in outs] == \
        ["tensor(float)[2]", "tensor(double)[3]", "tensor(float)[2]", "tensor(double)[3]"]


def test_no_conformance_model_contradicts_its_inference():
    """Every conformance model of the installed onnx (node, simple, pytorch and light cases)
    states only types its operators entail: --full finds no OM410 in any (Clause 9.4: an
    inference is exact or unknown, never a guess that a correct model contradicts)."""
    from conformance_data import iter_cases

    cases = iter_cases()
    assert len(cases) > 1500
    found = {}
    for c in cases:
        bad = [str(f) for f in onemodel.check(str(c.model_path), full=True).findings
               if f.code == "OM410"]
        if bad:
            found[c.id] = bad
    assert found == {}


def test_a_minus_one_batch_is_unknown_to_inference_and_a_warning(tmp_path):
    """PaddlePaddle exports declare a batch of -1: check --full read it as the extent -1 and
    reported an error at the first node (213 nodes downstream in the trial), where run reads
    it as unknown with a warning. Inference reads it as unknown too now, and check says so once
    per declared value, OM405 (a warning: the model is ok)."""
    c = numpy_helper.from_array(np.ones((1, 4), np.float32), "c")
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]),
                           helper.make_node("Add", ["r", "c"], ["y"])], "g",
                          [_tvi("x", [-1, 4])], [_tvi("y", [-1, 4])], [c])
    path = save(tmp_path, helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    for full in (False, True):
        r = onemodel.check(path, full=full)
        assert r.ok and not r.errors, r.findings
        assert [(f.code, f.severity, f.path, f.message) for f in r.findings] == [
            ("OM405", "warning", "graph.input[0].type.tensor_type.shape.dim[0]",
             "a graph input 'x' declares [-1,4]: the extent -1 (axis 0) is read as unknown"),
            ("OM405", "warning", "graph.output[0].type.tensor_type.shape.dim[0]",
             "a graph output 'y' declares [-1,4]: the extent -1 (axis 0) is read as unknown")]
    from onemodel.inference import infer_model
    res = infer_model(path)
    assert res.graphs["graph"]["r"].shape == (None, 4)
    assert not res.contradictions


def test_question_mark_dim_params_are_unknown_and_a_warning(tmp_path):
    """A dim_param that names no variable ('?') is read as unknown, each occurrence its own
    extent: the Concat of [?, 2] and [?, 3] along axis 1 needs no equal first extents."""
    g = helper.make_graph([helper.make_node("Concat", ["a", "b"], ["y"], axis=1)], "g",
                          [_tvi("a", ["?", 2]), _tvi("b", ["?", 3])], [_tvi("y", ["n", 5])])
    path = save(tmp_path, helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    r = onemodel.check(path, full=True)
    assert r.ok and [(f.code, f.path) for f in r.findings] == [
        ("OM405", "graph.input[0].type.tensor_type.shape.dim[0]"),
        ("OM405", "graph.input[1].type.tensor_type.shape.dim[0]")]
    assert r.findings[0].message == ("a graph input 'a' declares [?,2]: the dim_param '?' "
                                     "(axis 0) is read as unknown, each '?' its own extent")
    from onemodel.inference import infer_model
    assert infer_model(path).graphs["graph"]["a"].shape == (None, 2)
