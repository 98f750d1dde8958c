"""``onemodel convert IN OUT --opset``: exit codes, nothing written on refusal, the check of
the result; and the testdata exports converted and run against the original."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import helper
from opset_models import F, model, run, versions_of
from typer.testing import CliRunner

import onemodel
from onemodel.cli import app
from onemodel.cli.convert import opset_targets
from onemodel.errors import UsageError
from onemodel.evaluate.inputs import random_inputs
from onemodel.formats.onnx import encode_model

MODELS = Path(__file__).resolve().parents[2] / "testdata" / "models"
runner = CliRunner()


def cli(*args):
    return runner.invoke(app, [str(a) for a in args])


def _write(tmp_path, m, name="m.onnx") -> Path:
    p = tmp_path / name
    p.write_bytes(encode_model(m))
    return p


def test_convert_opset_writes_the_converted_model(tmp_path):
    src = _write(tmp_path, model([helper.make_node("ReduceSum", ["x"], ["y"], axes=[0])],
                                 [helper.make_tensor_value_info("x", F, [2, 3])],
                                 [helper.make_tensor_value_info("y", F, None)], 11))
    r = cli("convert", src, tmp_path / "out.onnx", "--opset", "13")
    assert r.exit_code == 0, r.output
    assert "opset: ai.onnx 13; IR version 7" in r.stdout
    out = onemodel.load(tmp_path / "out.onnx")
    assert versions_of(out) == {"": 13} and out.ir_version == 7
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(run(out, {"x": x})[0], x.sum(0, keepdims=True))
    r = cli("convert", tmp_path / "out.onnx", tmp_path / "o.onemodel", "--opset", "11",
            "--ir-version", "8")
    assert r.exit_code == 0, r.output
    back = onemodel.load(tmp_path / "o.onemodel")
    assert versions_of(back) == {"": 11} and back.ir_version == 8


def test_a_refusal_exits_2_and_writes_nothing(tmp_path):
    src = _write(tmp_path, model([helper.make_node("Softmax", ["x"], ["y"], axis=0),
                                  helper.make_node("Softmax", ["x"], ["z"], axis=0)],
                                 [helper.make_tensor_value_info("x", F, [2, 3])],
                                 [helper.make_tensor_value_info("y", F, None),
                                  helper.make_tensor_value_info("z", F, None)], 13))
    r = cli("convert", src, tmp_path / "out.onnx", "--opset", "12")
    assert r.exit_code == 2
    lines = r.output.splitlines()
    assert lines[0] == (f"Unsupported: cannot convert 2 nodes (each on a line below); "
                        f"{tmp_path / 'out.onnx'} not written")
    assert [x.split(": ", 2)[:2] for x in lines[1:]] == [
        ["  graph.nodes[0]", "Softmax-13 -> 12"], ["  graph.nodes[1]", "Softmax-13 -> 12"]]
    assert "axis 0 is not the last axis of 'x'" in lines[1]
    assert not (tmp_path / "out.onnx").exists()


def test_every_refused_node_is_listed_however_many(tmp_path):
    # 60 refusals make a message far past the 2,000 characters an error line is cut to
    n = 60
    src = _write(tmp_path, model([helper.make_node("Softmax", ["x"], [f"y{i}"], axis=0)
                                  for i in range(n)],
                                 [helper.make_tensor_value_info("x", F, [2, 3])],
                                 [helper.make_tensor_value_info(f"y{i}", F, None)
                                  for i in range(n)], 13))
    r = cli("convert", src, tmp_path / "out.onnx", "--opset", "12")
    assert r.exit_code == 2 and "cannot convert 60 nodes" in r.output.splitlines()[0]
    listed = [x for x in r.output.splitlines()[1:] if x.startswith("  graph.nodes[")]
    assert [x.split(":")[0].strip() for x in listed] == [f"graph.nodes[{i}]" for i in range(n)]


@pytest.mark.parametrize("args, said", [
    (["--opset", "=13"], "--opset takes VERSION or DOMAIN=VERSION (13, ai.onnx.ml=3), not '=13'"),
    (["--opset", "99"], "--opset: ai.onnx opset 99: a version from 1 to 28"),
    (["--opset", "ai.onnx.ml=9"], "--opset: ai.onnx.ml opset 9: a version from 1 to 5"),
    (["--opset", "13", "--ir-version", "99"], "--ir-version: IR version 99: a version from 1 to "
                                              "14"),
    (["--opset", "13", "--ir-version", "2"], "--ir-version: IR version 2 is older than the "
                                             "converted model requires (7")])
def test_opset_and_ir_version_usage_errors_name_their_flag(tmp_path, args, said):
    # found by a new-user trial: `=13` was taken as ai.onnx, 99 went unnamed, IR 99 was written
    src = _write(tmp_path, model([helper.make_node("Relu", ["x"], ["y"])],
                                 [helper.make_tensor_value_info("x", F, [2])],
                                 [helper.make_tensor_value_info("y", F, None)], 13))
    r = cli("convert", src, tmp_path / "out.onnx", *args)
    assert r.exit_code == 2 and r.output.startswith(f"Usage error: {said}"), r.output
    assert len(r.output.strip().splitlines()) == 1 and not (tmp_path / "out.onnx").exists()


@pytest.mark.parametrize("args", [["--opset", "x"], ["--opset", "13", "--opset", "ai.onnx=12"],
                                  ["--ir-version", "7"], ["--opset", "com.x=1"]])
def test_bad_opset_options_exit_2(tmp_path, args):
    src = _write(tmp_path, model([helper.make_node("Relu", ["x"], ["y"])],
                                 [helper.make_tensor_value_info("x", F, [2])],
                                 [helper.make_tensor_value_info("y", F, [2])], 13))
    r = cli("convert", src, tmp_path / "out.onnx", *args)
    assert r.exit_code == 2, r.output
    assert not (tmp_path / "out.onnx").exists()


def test_opset_values():
    assert opset_targets(["13", "ai.onnx.ml=3"]) == {"": 13, "ai.onnx.ml": 3}
    assert opset_targets(["ai.onnx=12"]) == {"": 12}
    with pytest.raises(UsageError):
        opset_targets(["13", "12"])


def test_a_check_error_of_the_result_fails_the_conversion(tmp_path, monkeypatch):
    """The converted model is checked in memory: an error it has and the original has not
    fails the conversion, nothing written; --no-check writes it. (The conversion is made to
    lose the node that defines the graph output, as a faulty adapter would.)"""
    import onemodel.opset_convert.engine as oc

    real = oc.convert

    def faulty(m, targets, ir_version=None, share=False):
        conv = real(m, targets, ir_version, share)
        conv.model.graph.nodes = []
        return conv

    monkeypatch.setattr(oc, "convert", faulty)
    src = _write(tmp_path, model([helper.make_node("Relu", ["x"], ["y"])],
                                 [helper.make_tensor_value_info("x", F, [2])],
                                 [helper.make_tensor_value_info("y", F, [2])], 13))
    r = cli("convert", src, tmp_path / "out.onnx", "--opset", "14")
    assert r.exit_code == 2, r.output
    assert "the converted model fails check with 1 error" in r.output
    assert not (tmp_path / "out.onnx").exists()


def test_a_contradiction_of_shape_inference_fails_the_conversion(tmp_path, monkeypatch):
    """The converted model is inferred in memory too: a contradiction it has and the original
    has not (here the graph output declared [7] where Relu of x [2] gives [2], as a faulty
    adapter could leave it; check's own rules do not compare extents) fails the conversion,
    nothing written."""
    import onemodel.opset_convert.engine as oc
    from onemodel.ir import Type

    real = oc.convert

    def faulty(m, targets, ir_version=None, share=False):
        conv = real(m, targets, ir_version, share)
        conv.model.graph.outputs[0].type = Type.tensor(F, [7])
        return conv

    monkeypatch.setattr(oc, "convert", faulty)
    src = _write(tmp_path, model([helper.make_node("Relu", ["x"], ["y"])],
                                 [helper.make_tensor_value_info("x", F, [2])],
                                 [helper.make_tensor_value_info("y", F, [2])], 13))
    r = cli("convert", src, tmp_path / "out.onnx", "--opset", "14")
    assert r.exit_code == 2, r.output
    assert "shape inference finds 1 contradiction in the converted model" in r.output
    assert "[graph.outputs[0]]" in r.output
    assert not (tmp_path / "out.onnx").exists()
    r = cli("convert", src, tmp_path / "out.onnx", "--opset", "14", "--no-check")
    assert r.exit_code == 0, r.output
    # the same contradiction in the original is not the conversion's: it converts
    src = _write(tmp_path, model([helper.make_node("Relu", ["x"], ["y"])],
                                 [helper.make_tensor_value_info("x", F, [2])],
                                 [helper.make_tensor_value_info("y", F, [7])], 13), "c.onnx")
    r = cli("convert", src, tmp_path / "out2.onnx", "--opset", "14")
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("name,opset", [("detector_legacy.onnx", 11),
                                        ("detector_legacy.onnx", 28),
                                        ("cnn_legacy.onnx", 21), ("cnn_dynamo.onnx", 28),
                                        ("cnn_legacy.onnx", 11), ("cnn_legacy.onnx", 6),
                                        ("cnn_dynamo.onnx", 9),
                                        ("bert_tiny.onnx", 21), ("gpt2_tiny.onnx", 21),
                                        ("sklearn_pipeline_zipmap.onnx", 13)])
def test_testdata_exports_convert_and_compute_the_same(name, opset):
    """The converted export gives the original's outputs bit for bit on generated inputs
    (the operators on these paths only change versions, never arithmetic)."""
    m = onemodel.load(MODELS / name)
    conv = onemodel.convert_opset(m, {"": opset})
    report = onemodel.check(conv)
    assert not report.errors, [str(f) for f in report.errors]
    params = {d for vi in m.graph.inputs if vi.type is not None and vi.type.shape is not None
              for d in vi.type.shape.extents if isinstance(d, str)}
    feeds = random_inputs(m, seed=3, dims={p: 8 if "seq" in p else 1 for p in params})
    names = [o.name for o in m.graph.outputs]
    want = onemodel.evaluate.Session(m).run(feeds, names)
    got = onemodel.evaluate.Session(conv).run(feeds, names)
    for n in names:
        w, g = want[n], got[n]
        if isinstance(w, np.ndarray):
            np.testing.assert_array_equal(g, w)
        else:
            assert g == w


def test_the_help_of_opset_gives_the_versions_the_tables_know():
    from onemodel.opset_convert.engine import latest

    r = runner.invoke(app, ["convert", "--help"], env={"COLUMNS": "400"})
    assert f"ai.onnx, 1-{latest('')}; ai.onnx.ml=3, 1-{latest('ai.onnx.ml')})" in \
        " ".join(r.output.split())
