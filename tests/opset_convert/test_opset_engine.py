"""The walk of opset conversion: subgraphs, model-local functions, other domains, the IR
version, weights shared, targets checked."""

from __future__ import annotations

import re
import warnings

import numpy as np
import onnx
import pytest
from onnx import helper
from opset_models import I64, F, clean, model, run, value, versions_of

import onemodel
from onemodel.errors import OneModelWarning, UsageError
from onemodel.opset_convert import convert, convert_opset
from onemodel.opset_convert.ir_versions import REQUIRED_IR, required_ir

X = np.random.default_rng(7).standard_normal((2, 3, 4)).astype(np.float32)


def test_if_branches_are_converted():
    branch = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["r"], axes=[2], keepdims=0)], "b", [],
        [value("r", F, [2, 3])])
    other = helper.make_graph(
        [helper.make_node("ReduceMax", ["x"], ["r2"], axes=[2], keepdims=0)], "c", [],
        [value("r2", F, [2, 3])])
    m = model([helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=other)],
              [value("c", onnx.TensorProto.BOOL, []), value("x", F, [2, 3, 4])],
              [value("y", F, [2, 3])], 11)
    up = convert(m, {"": 18}).model
    clean(up)
    then = up.graph.nodes[0].attribute("then_branch").g
    assert len(then.nodes[0].inputs) == 2 and then.initializers[0].numpy().tolist() == [2]
    for c, want in ((True, X.sum(2)), (False, X.max(2))):
        got = run(up, {"c": np.array(c), "x": X})[0]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    back = convert(up, {"": 11}).model
    clean(back)
    assert back.graph.nodes[0].attribute("then_branch").g.initializers == []


def test_a_model_local_function_is_converted_under_its_own_imports():
    body = helper.make_function(
        "local", "Sum1", ["a"], ["b"],
        [helper.make_node("ReduceSum", ["a"], ["b"], axes=[1], keepdims=1)],
        opset_imports=[helper.make_opsetid("", 11)])
    m = model([helper.make_node("Sum1", ["x"], ["y"], domain="local")],
              [value("x", F, [2, 3, 4])], [value("y", F, [2, 1, 4])], 11,
              functions=[body])
    m.opset_imports.append(onemodel.ir.OperatorSetId(domain="local", version=1))
    up = convert(m, {"": 13}).model
    clean(up)
    fn = up.functions[0]
    assert [n.op_type for n in fn.nodes] == ["Constant", "ReduceSum"]
    assert {o.domain or "": o.version for o in fn.opset_imports} == {"": 13}
    assert versions_of(up) == {"": 13, "local": 1}
    np.testing.assert_allclose(run(up, {"x": X})[0], X.sum(1, keepdims=True), rtol=1e-6)
    back = convert(up, {"": 11}).model
    clean(back)
    assert [n.op_type for n in back.functions[0].nodes] == ["ReduceSum"]


def test_other_domains_pass_through_and_are_noted():
    m = model([helper.make_node("Relu", ["x"], ["r"]),
               helper.make_node("Thing", ["r"], ["y"], domain="com.example")],
              [value("x", F, [3])], [value("y", F, [3])], 13)
    m.opset_imports.append(onemodel.ir.OperatorSetId(domain="com.example", version=1))
    conv = convert(m, {"": 14})
    assert conv.notes == ["graph.nodes[1]: Thing of domain 'com.example' passed through "
                          "unchanged"]
    assert conv.model.graph.nodes[1].op_type == "Thing"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        convert_opset(m, {"": 14})
    assert [str(w.message) for w in caught if w.category is OneModelWarning] == conv.notes


def test_weights_are_shared_not_copied():
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    m = model([helper.make_node("Add", ["x", "w"], ["y"])], [value("x", F, [3, 4])],
              [value("y", F, [3, 4])], 13, initializers={"w": w})
    up = onemodel.convert_opset(m, {"": 14})
    a, b = m.graph.initializers[0], up.graph.initializers[0]
    assert a is not b and a.raw_data is b.raw_data


def test_the_ir_version_follows_the_target_opset_or_the_caller():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [value("x", F, [3])],
              [value("y", F, [3])], 13)
    assert m.ir_version == 10
    assert convert_opset(m, {"": 13}).ir_version == 7
    assert convert_opset(m, {"": 21}).ir_version == 10
    low = convert_opset(m, {"": 8})
    assert low.ir_version == 3
    assert convert_opset(m, {"": 8}, ir_version=8).ir_version == 8
    clean(low)
    # past the newest IR version known (onnxruntime and onnx's checker refuse such a file), or
    # older than the target operator set requires: refused
    for bad, said in ((15, "a version from 1 to 14"), (99, "a version from 1 to 14"),
                      (0, "a version from 1 to 14"),
                      (6, "IR version 6 is older than the converted model requires (7")):
        with pytest.raises(UsageError, match=re.escape(said)):
            convert_opset(m, {"": 13}, ir_version=bad)
    assert convert_opset(m, {"": 13}, ir_version=14).ir_version == 14


def test_below_ir_4_initializers_become_graph_inputs():
    m = model([helper.make_node("Add", ["x", "w"], ["y"])], [value("x", F, [3])],
              [value("y", F, [3])], 13, initializers={"w": np.ones(3, np.float32)})
    low = convert_opset(m, {"": 7})
    assert low.ir_version == 3 and [vi.name for vi in low.graph.inputs] == ["x", "w"]
    clean(low)
    np.testing.assert_array_equal(run(low, {"x": X[0, 0, :3]})[0], X[0, 0, :3] + 1)


def test_the_stored_ir_table_is_onnxs():
    """REQUIRED_IR is derived again from onnx.helper.VERSION_TABLE: for each operator set
    version, the IR version of the first release whose operator set reaches it."""
    rows = onnx.helper.VERSION_TABLE
    for domain, col in (("", 2), ("ai.onnx.ml", 3)):
        top = max(r[col] for r in rows)
        for v in range(1, top + 1):
            first = min((r for r in rows if r[col] >= v), key=lambda r: (r[col], r[1]))
            assert required_ir(domain, v) == first[1], (domain, v)
        assert REQUIRED_IR[domain][-1][1] == top
    assert required_ir("ai.onnx.training", 1) == 7


@pytest.mark.parametrize("targets", [{"com.example": 1}, {"": 0}, {"": 99}, {"": "13"}, "13"])
def test_bad_targets_are_usage_errors(targets):
    m = model([helper.make_node("Relu", ["x"], ["y"])], [value("x", F, [3])],
              [value("y", F, [3])], 13)
    with pytest.raises(UsageError):
        convert_opset(m, targets)


def test_ml_domain_target_is_applied_to_its_import():
    m = model([helper.make_node("Identity", ["x"], ["y"])], [value("x", I64, [3])],
              [value("y", I64, [3])], 13, ml=1)
    up = convert_opset(m, {"": 13, "ai.onnx.ml": 3})
    assert versions_of(up) == {"": 13, "ai.onnx.ml": 3} and up.ir_version == 8


def test_a_loop_body_reading_an_outer_value_is_converted_and_refusals_name_its_path():
    """A Loop body whose Unsqueeze/ReduceSum read the outer 'x' and an outer constant: the
    body's nodes are stepped like the main graph's (the outer initializer is a constant
    there), and a refusal inside names the body's path."""
    body = helper.make_graph(
        [helper.make_node("ReduceSum", ["x", "ax"], ["r"], keepdims=0),
         helper.make_node("Add", ["acc", "r"], ["acc_out"]),
         helper.make_node("Identity", ["cond"], ["cond_out"])], "body",
        [value("i", I64, []), value("cond", onnx.TensorProto.BOOL, []), value("acc", F, [3])],
        [value("cond_out", onnx.TensorProto.BOOL, []), value("acc_out", F, [3])])
    m = model([helper.make_node("Loop", ["n", "", "a0"], ["acc"], body=body)],
              [value("x", F, [3, 4]), value("a0", F, [3])], [value("acc", F, [3])], 13,
              initializers={"n": np.array(3, np.int64), "ax": np.array([1], np.int64)})
    x = X[0]
    a0 = np.zeros(3, np.float32)
    want = run(m, {"x": x, "a0": a0})[0]
    np.testing.assert_allclose(want, 3 * x.astype(np.float64).sum(1), rtol=1e-6)
    low = convert(m, {"": 11}).model
    clean(low)
    inner = low.graph.nodes[0].attribute("body").g
    assert inner.nodes[0].attribute("axes").ints == [1] and inner.nodes[0].inputs == ["x"]
    np.testing.assert_array_equal(run(low, {"x": x, "a0": a0})[0], want)
    up = convert(low, {"": 18}).model
    clean(up)
    np.testing.assert_array_equal(run(up, {"x": x, "a0": a0})[0], want)
    computed = model([helper.make_node("Loop", ["n", "", "a0"], ["acc"], body=body)],
                     [value("x", F, [3, 4]), value("a0", F, [3]), value("ax", I64, [1])],
                     [value("acc", F, [3])], 13,
                     initializers={"n": np.array(3, np.int64)})
    from onemodel.opset_convert import ConversionRefused
    with pytest.raises(ConversionRefused) as e:
        convert(computed, {"": 12})
    assert e.value.refusals[0][0] == "graph.nodes[0].attributes[0].g.nodes[0]"


def test_a_target_domain_the_model_does_not_import_is_noted():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [value("x", F, [3])],
              [value("y", F, [3])], 13)
    conv = convert(m, {"": 14, "ai.onnx.ml": 3})
    assert conv.notes == ["the model does not import ai.onnx.ml: the target ai.onnx.ml 3 "
                          "changes nothing"]
    assert versions_of(conv.model) == {"": 14}


def test_below_ir_4_subgraph_initializers_become_constant_nodes():
    """IR 3 wants every initializer to be an input of its graph (Clause 7.2); a subgraph's
    inputs are fixed by its operator (a Loop body's: iteration, condition, carried values), so
    converted to opset 2 (IR 3) the body's initializer is a Constant node at its head: check is
    clean, the outputs the same, and the original model is untouched."""
    from onnx import numpy_helper

    c = np.array([1.5, -2.0], np.float32)
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["acc", "c"], ["acc_out"])], "body",
        [value("i", I64, []), value("cond_in", onnx.TensorProto.BOOL, []), value("acc", F, [2])],
        [value("cond_out", onnx.TensorProto.BOOL, []), value("acc_out", F, [2])],
        initializer=[numpy_helper.from_array(c, "c")])
    m = model([helper.make_node("Loop", ["n", "", "x"], ["y"], body=body)],
              [value("n", I64, []), value("x", F, [2])], [value("y", F, [2])], 13)
    x = np.array([4.0, 5.0], np.float32)
    low = convert_opset(m, {"": 2})
    assert low.ir_version == 3
    clean(low)
    g = next(a.g for a in low.graph.nodes[0].attributes if a.name == "body")
    assert not g.initializers and [n.op_type for n in g.nodes] == ["Constant", "Identity",
                                                                    "Add"]
    np.testing.assert_array_equal(run(low, {"n": np.array(3), "x": x})[0], x + 3 * c)
    orig = next(a.g for a in m.graph.nodes[0].attributes if a.name == "body")
    assert [t.name for t in orig.initializers] == ["c"]


def test_share_leaves_the_original_as_it_was_and_converts_the_same():
    """``convert(share=True)`` (what ``convert --opset`` uses) shares unchanged nodes and the
    initializers with the original, copies a node before an adapter rewrites it: the original
    keeps its axes input and its version-13 form; the result equals the unshared one."""
    from onemodel.formats.onnx import encode_model

    axes = np.array([1], dtype=np.int64)
    m = model([helper.make_node("Relu", ["x"], ["r"]),
               helper.make_node("Squeeze", ["r", "axes"], ["y"])],
              [value("x", F, [3, 1])], [value("y", F, [3])], 13, initializers={"axes": axes})
    before = encode_model(m)
    shared = convert(m, {"": 11}, share=True).model
    copied = convert(m, {"": 11}).model
    assert encode_model(m) == before  # the original untouched
    assert encode_model(shared) == encode_model(copied)
    relu, squeeze = shared.graph.nodes
    assert relu is m.graph.nodes[0]  # unchanged: shared
    assert squeeze is not m.graph.nodes[1] and squeeze.inputs == ["r"]
    assert squeeze.attribute("axes").value == [1] and m.graph.nodes[1].attribute("axes") is None
    x = np.array([[1.0], [-2.0], [3.0]], dtype=np.float32)
    assert run(shared, {"x": x})[0].tolist() == [1.0, 0.0, 3.0]


def test_the_producers_of_a_folded_input_are_removed_and_nothing_else():
    """Squeeze 13 -> 11 folds its axes (computed by Constant -> Cast) into an attribute: the
    Cast and then the Constant that fed it are read by nothing any more and go; a node that
    was unread before the conversion stays, and so does one whose output is a graph output
    though nothing reads it."""
    from onnx import TensorProto

    const = helper.make_node("Constant", [], ["a32"],
                             value=helper.make_tensor("v", TensorProto.INT32, [1], [1]))
    cast = helper.make_node("Cast", ["a32"], ["axes"], to=TensorProto.INT64)
    unread = helper.make_node("Relu", ["x"], ["unread"])  # dead before: not ours to remove
    shown = helper.make_node("Cast", ["a32"], ["shown"], to=TensorProto.INT64)
    sq = helper.make_node("Squeeze", ["x", "axes"], ["y"])
    m = model([const, cast, unread, shown, sq], [value("x", F, [3, 1])],
              [value("y", F, [3]), value("shown", I64, [1])], 13)
    out = convert(m, {"": 11}).model
    assert [(n.op_type, n.outputs) for n in out.graph.nodes] == [
        ("Constant", ["a32"]), ("Relu", ["unread"]), ("Cast", ["shown"]), ("Squeeze", ["y"])]
    m2 = model([const, cast, sq], [value("x", F, [3, 1])], [value("y", F, [3])], 13)
    out2 = convert(m2, {"": 11}).model
    assert [n.op_type for n in out2.graph.nodes] == ["Squeeze"]
    assert out2.graph.nodes[0].attribute("axes").value == [1]
    clean(out2)
    x = np.array([[1.0], [2.0], [3.0]], dtype=np.float32)
    assert run(out2, {"x": x})[0].tolist() == [1.0, 2.0, 3.0]


def _counting_inference(monkeypatch) -> list:
    """Count the conversion's inferences of the original model (engine._inference)."""
    from onemodel.opset_convert import engine

    calls: list = []
    real = engine._inference

    def counted(m):
        calls.append(m)
        return real(m)

    monkeypatch.setattr(engine, "_inference", counted)
    return calls


def test_the_original_is_inferred_only_when_a_node_needs_its_values(monkeypatch):
    # Add-7 and Relu-6 up to 18 cross only changes that add types: nothing reads what
    # inference knows, the original is not inferred (until its contradictions are asked)
    calls = _counting_inference(monkeypatch)
    m = model([helper.make_node("Add", ["x", "x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
              [value("x", F, [2, 3])], [value("y", F, [2, 3])], 11)
    conv = convert(m, {"": 18})
    assert calls == [] and versions_of(conv.model) == {"": 18}
    assert conv.contradictions == [] and len(calls) == 0  # (inferred by infer_model, not here)
    # down to 13 from 14 the types of Add's inputs are checked: the original is inferred once
    m14 = model([helper.make_node("Add", ["x", "x"], ["y"])], [value("x", F, [2, 3])],
                [value("y", F, [2, 3])], 14)
    convert(m14, {"": 13})
    assert len(calls) == 1 and calls[0] is not m14  # (the copy the conversion works on)


def test_contradictions_of_an_uninferred_original_are_inferred_when_asked():
    # Add of [2,3] and [4,3] contradicts broadcasting; the conversion up reads no values
    m = model([helper.make_node("Add", ["x", "z"], ["y"])],
              [value("x", F, [2, 3]), value("z", F, [4, 3])], [value("y", F, None)], 11)
    conv = convert(m, {"": 18})
    want = [c.message for c in onemodel.inference.infer_model(m).contradictions]
    assert want and [c.message for c in conv.contradictions] == want
