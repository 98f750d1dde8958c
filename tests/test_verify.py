"""verify: field-by-field comparison with paths, storage-insensitive tensor contents, loose mode,
and running both models."""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import onemodel
from onemodel.formats.onnx import decode_model
from onemodel.ir.tensor import raw_to_typed


def _model(values=(1.0, 2.0), op="Relu"):
    const = helper.make_node("Constant", [], ["c"], value_floats=list(values))
    node = helper.make_node(op, ["x"], ["y"])
    add = helper.make_node("Add", ["y", "w"], ["z"])
    w = numpy_helper.from_array(np.array([0.5, -0.25], np.float32), "w")
    g = helper.make_graph([const, node, add], "g",
                          [helper.make_tensor_value_info("x", 1, [2])],
                          [helper.make_tensor_value_info("z", 1, [2]),
                           helper.make_tensor_value_info("c", 1, [2])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _ir(proto):
    return decode_model(proto.SerializeToString())


def test_equal_models_and_loose_mode_with_float_lists():
    a, b = _ir(_model()), _ir(_model())
    assert onemodel.compare_models(a, b) == []
    assert onemodel.compare_models(a, b, loose=True) == []


def test_attribute_float_difference_is_named_with_its_bits():
    diffs = onemodel.compare_models(_ir(_model((1.0, 2.0))), _ir(_model((1.0, 3.0))))
    assert [d.path for d in diffs] == ["graph.nodes[0].attributes[0].floats"]


def test_tensor_contents_compare_across_storage_forms():
    a = _ir(_model())
    b = _ir(_model())
    t = b.graph.initializers[0]
    field, values = raw_to_typed(t.data_type, t.raw_view(), t.size)
    t.raw_data = None
    setattr(t, field, values)  # same values, typed storage (float_data) instead of raw_data
    assert t.storage == "typed"
    assert onemodel.compare_models(a, b) == []
    values = values.copy()
    values[1] = -0.5
    setattr(t, field, values)
    diffs = onemodel.compare_models(a, b)
    assert [d.path for d in diffs] == ["graph.initializers[0].contents"]
    assert "element 1" in diffs[0].message
    assert diffs[0].message.startswith("w: ") and diffs[0].message.endswith("-0.25 vs -0.5")


def test_nan_payloads_count():
    a, b = _ir(_model()), _ir(_model())
    bits = np.array([0x7FC00001, 0x7FC00002], dtype=np.uint32)
    a.graph.initializers[0].raw_data = bits.tobytes()
    b.graph.initializers[0].raw_data = (bits + np.uint32(1)).tobytes()
    assert [d.path for d in onemodel.compare_models(a, b)] == ["graph.initializers[0].contents"]


def test_presence_differs_unless_loose():
    a, b = _ir(_model()), _ir(_model())
    b.graph.nodes[1].name = ""  # explicitly empty instead of absent
    assert [d.path for d in onemodel.compare_models(a, b)] == ["graph.nodes[1].name"]
    assert onemodel.compare_models(a, b, loose=True) == []


def test_run_failure_does_not_hide_a_structural_difference(tmp_path):
    onnx.save(_model(), tmp_path / "a.onnx")
    onnx.save(_model(op="Qonv"), tmp_path / "b.onnx")  # an operator nobody implements
    report = onemodel.verify(tmp_path / "a.onnx", tmp_path / "b.onnx", run=True)
    assert not report.equal
    assert report.first.path == "graph.nodes[1].op_type"
    assert any(d.path == "run" and "Qonv" in d.message for d in report.differences)


def test_run_compares_outputs_bit_for_bit(tmp_path):
    onnx.save(_model(), tmp_path / "a.onnx")
    changed = _model()
    changed.graph.initializer[0].CopyFrom(
        numpy_helper.from_array(np.array([0.5, -0.125], np.float32), "w"))
    onnx.save(changed, tmp_path / "b.onnx")
    ok = onemodel.verify(tmp_path / "a.onnx", tmp_path / "a.onnx", run=True)
    assert ok.equal and ok.outputs_compared == ["z", "c"]
    bad = onemodel.verify(tmp_path / "a.onnx", tmp_path / "b.onnx", run=True)
    assert [d.path for d in bad.differences] == ["graph.initializers[0].contents",
                                                 "outputs['z']"]


def test_numpy_is_read_only_and_cannot_change_the_model():
    m = _ir(_model())
    t = m.graph.initializers[0]
    field, values = raw_to_typed(t.data_type, t.raw_view(), t.size)
    t.raw_data, t.data_location = None, None
    setattr(t, field, values)
    arr = t.numpy()
    with pytest.raises(ValueError):
        arr[0] = 3.0
    assert t.numpy()[0] == 0.5


#: tokens int64 [batch, seq]; runs only at seq 16 (the exporter froze the traced length)
LEGACY = pathlib.Path(__file__).resolve().parents[1] / "testdata" / "models" / \
    "transformer_legacy.onnx"


@pytest.mark.parametrize("run", [False, True])
def test_dims_and_shapes_are_checked_with_or_without_run(run):
    from onemodel.errors import UsageError
    with pytest.raises(UsageError, match=r"dims=\{'sq': 16\}: the model has no symbolic "
                                         r"dimension 'sq'; its dims are: batch, seq"):
        onemodel.verify(LEGACY, LEGACY, run=run, dims={"sq": 16})
    with pytest.raises(UsageError, match=r"shapes=\{'token': \(1, 16\)\}: it is not a graph input"
                                         r".*tokens"):
        onemodel.verify(LEGACY, LEGACY, run=run, shapes={"token": (1, 16)})
    with pytest.raises(UsageError, match=r"rank 1; the graph declares rank 2"):
        onemodel.verify(LEGACY, LEGACY, run=run, shapes={"tokens": (16,)})
    assert onemodel.verify(LEGACY, LEGACY, run=run, dims={"seq": 16}).equal


def test_verify_run_of_the_legacy_transformer_needs_seq_16_and_says_so():
    from onemodel.errors import EvaluationError
    with pytest.raises(EvaluationError) as e:
        onemodel.verify(LEGACY, LEGACY, run=True)
    assert "inputs were generated: tokens [1, 1] with batch = 1, seq = 1" in str(e.value)
    assert "input 'tokens' axis 1 (seq) = 1 does not fit node 75: with dims={'seq': 16} the " \
        "model runs" in str(e.value)
    ok = onemodel.verify(LEGACY, LEGACY, run=True, dims={"seq": 16})
    assert ok.equal and ok.outputs_compared == ["logits"]
    ok = onemodel.verify(LEGACY, LEGACY, run=True, shapes={"tokens": (3, 16)})
    assert ok.equal and ok.outputs_compared == ["logits"]


def test_compare_runs_takes_shapes():
    from onemodel.verify import compare_runs
    with onemodel.load(LEGACY) as a:
        diffs, names = compare_runs(a, a, shapes={"tokens": (2, 16)})
    assert diffs == [] and names == ["logits"]


def test_loose_takes_an_empty_type_for_an_absent_one(tmp_path):
    """A TypeProto present with no value case (If-branch outputs) is no type in a plain v1 file:
    loose verify calls the two equal, strict verify names the difference."""
    onnx_model = onnx.ModelProto()
    cond = helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, [])
    branches = []
    for name, val in (("then", 1.0), ("else", 2.0)):
        out = onnx.ValueInfoProto(name=f"{name}_out")
        out.type.SetInParent()  # present, no value case
        node = helper.make_node("Constant", [], [out.name],
                                value=helper.make_tensor("v", onnx.TensorProto.FLOAT, [1], [val]))
        branches.append(helper.make_graph([node], name, [], [out]))
    node = helper.make_node("If", ["c"], ["y"], then_branch=branches[0], else_branch=branches[1])
    onnx_model = helper.make_model(
        helper.make_graph([node], "g", [cond],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)]),
        opset_imports=[helper.make_opsetid("", 21)])
    src = tmp_path / "m.onnx"
    src.write_bytes(onnx_model.SerializeToString())
    onemodel.convert(src, tmp_path / "plain.onemodel", strict_v1=True)
    assert onemodel.verify(src, tmp_path / "plain.onemodel", loose=True).equal
    strict = onemodel.verify(src, tmp_path / "plain.onemodel")
    assert not strict.equal
    assert any(d.path.endswith("outputs[0].type") and "present vs absent" in d.message
               for d in strict.differences), [str(d) for d in strict.differences]


def test_onnxruntime_failing_on_the_generated_inputs_is_an_evaluation_error_with_the_hint():
    """onnxruntime's failure while running (status FAIL: the legacy transformer's Reshape at
    seq 1) is an EvaluationError, at the node onnxruntime names, with the note the default
    engine gives: the axis at fault, found by running with onnxruntime itself."""
    import onnxruntime  # noqa: F401  (the dev extra installs it: the test must not skip)

    from onemodel.errors import EvaluationError
    with pytest.raises(EvaluationError) as e:
        onemodel.verify(LEGACY, LEGACY, run=True, engine="onnxruntime")
    err = e.value
    assert err.message.startswith("onnxruntime failed while running the model: ")
    assert "requested shape:{16,4,16}" in err.message
    assert err.path == "graph.nodes[75] (Reshape '/encoder/layers.0/self_attn/Reshape_4')"
    assert "(inputs were generated: tokens [1, 1] with batch = 1, seq = 1; input 'tokens' axis " \
        "1 (seq) = 1 does not fit node 75: with dims={'seq': 16} the model runs)" in err.message
    ok = onemodel.verify(LEGACY, LEGACY, run=True, engine="onnxruntime", dims={"seq": 16})
    assert ok.equal and ok.outputs_compared == ["logits"]


def test_onnxruntime_refusing_the_model_at_session_creation_stays_unsupported(tmp_path):
    """An operator onnxruntime lacks fails when the session is made: Unsupported, no hint."""
    import onnxruntime  # noqa: F401

    from onemodel.errors import EvaluationError, UnsupportedError
    g = helper.make_graph([helper.make_node("Mystery", ["x"], ["y"], domain="com.example")],
                          "g", [helper.make_tensor_value_info("x", 1, ["n"])],
                          [helper.make_tensor_value_info("y", 1, ["n"])])
    path = tmp_path / "custom.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                                  helper.make_opsetid("com.example", 1)]), path)
    with pytest.raises(UnsupportedError) as e:
        onemodel.verify(path, path, run=True, engine="onnxruntime")
    assert not isinstance(e.value, EvaluationError)
    assert e.value.message.startswith("onnxruntime cannot run the model: ")
    assert "Mystery" in e.value.message and "inputs were generated" not in e.value.message


def test_the_truth_of_a_report_is_its_verdict(tmp_path):
    # a trial: `if onemodel.verify(a, b):` held for two different models (the report object
    # was always true)
    import onemodel

    root = pathlib.Path(__file__).resolve().parents[1] / "testdata" / "models"
    same = onemodel.verify(root / "bert_tiny.onnx", root / "bert_tiny.onnx")
    other = onemodel.verify(root / "bert_tiny.onnx", root / "gpt2_tiny.onnx")
    assert same.equal and bool(same) is True
    assert not other.equal and bool(other) is False
