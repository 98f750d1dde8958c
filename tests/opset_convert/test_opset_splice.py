"""``onemodel convert --opset`` when no node changes: the model's other fields are encoded
around its main graph's octets as read (:func:`onemodel.formats.onnx.splice.splice_graph`),
the same file the writer gives for a file in its canonical form; otherwise the writer."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from onnx import helper
from opset_models import F, model, versions_of

import onemodel
from onemodel import api
from onemodel.formats.onnx import encode_model
from onemodel.formats.onnx.wire_encode import Verbatim, encode, encode_pieces
from onemodel.opset_convert import convert_checked

MODELS = Path(__file__).resolve().parents[2] / "testdata" / "models"


def _writer_calls(monkeypatch) -> list:
    calls: list = []
    real = api._write

    def counted(*a, **k):
        calls.append(a[2])
        return real(*a, **k)

    monkeypatch.setattr(api, "_write", counted)
    return calls


def _converted(src, dst, targets):
    return api.convert(str(src), str(dst),
                       transform=lambda m: convert_checked(m, targets, share=True).model)


def _written_by_the_writer(src, targets, path) -> bytes:
    m = onemodel.load(str(src))
    with m:
        onemodel.save(convert_checked(m, targets).model, str(path))
    return path.read_bytes()


@pytest.mark.parametrize("name, target", [("cnn_dynamo", 21), ("bert_tiny", 18),
                                          ("sklearn_pipeline_zipmap", 21)])
def test_no_node_changed_the_graph_is_copied_as_read_and_equals_the_writers(
        tmp_path, monkeypatch, name, target):
    src = MODELS / f"{name}.onnx"
    calls = _writer_calls(monkeypatch)
    _converted(src, tmp_path / "s.onnx", {"": target})
    assert calls == []  # spliced: the writer was not called
    got = (tmp_path / "s.onnx").read_bytes()
    assert got == _written_by_the_writer(src, {"": target}, tmp_path / "w.onnx")
    back = onemodel.load(str(tmp_path / "s.onnx"))
    assert versions_of(back)[""] == target and back.graph == onemodel.load(str(src)).graph


def test_a_changed_node_is_written_by_the_writer(tmp_path, monkeypatch):
    # ReduceSum 11 -> 13 moves axes to an input: the graph changes
    src = tmp_path / "m.onnx"
    src.write_bytes(encode_model(model(
        [helper.make_node("ReduceSum", ["x"], ["y"], axes=[0])],
        [helper.make_tensor_value_info("x", F, [2, 3])],
        [helper.make_tensor_value_info("y", F, None)], 11)))
    calls = _writer_calls(monkeypatch)
    _converted(src, tmp_path / "o.onnx", {"": 13})
    assert len(calls) == 1
    out = onemodel.load(str(tmp_path / "o.onnx"))
    assert len(out.graph.nodes[0].inputs) == 2 and len(out.graph.initializers) == 1


def test_external_data_is_spliced_beside_its_data_and_copied_elsewhere(tmp_path, monkeypatch):
    d = tmp_path / "in"
    shutil.copytree(MODELS / "external", d)
    src = d / "mlp_dynamo.onnx"
    calls = _writer_calls(monkeypatch)
    _converted(src, d / "up.onnx", {"": 21})  # the same directory: the references hold
    assert calls == [] and sorted(p.name for p in d.iterdir()) == \
        ["mlp_dynamo.onnx", "mlp_dynamo.onnx.data", "up.onnx"]
    assert (d / "up.onnx").read_bytes() == _written_by_the_writer(src, {"": 21},
                                                                  d / "w.onnx")
    (d / "w.onnx").unlink()
    other = tmp_path / "other"
    other.mkdir()
    _converted(src, other / "up.onnx", {"": 21})  # elsewhere: the writer copies the data file
    assert calls[-1] == str(other / "up.onnx") and (other / "mlp_dynamo.onnx.data").exists()
    for path in (d / "up.onnx", other / "up.onnx"):
        m = onemodel.load(str(path))
        assert [t.numpy().tobytes() for t in m.graph.initializers] == \
            [t.numpy().tobytes() for t in onemodel.load(str(src)).graph.initializers]


def test_a_transform_returning_another_graph_is_written_by_the_writer(tmp_path, monkeypatch):
    src = MODELS / "cnn_dynamo.onnx"
    calls = _writer_calls(monkeypatch)

    def rename(m):
        c = m.copy()
        c.graph.nodes[0].name = "renamed"
        return c

    api.convert(str(src), str(tmp_path / "o.onnx"), transform=rename)
    assert len(calls) == 1
    assert onemodel.load(str(tmp_path / "o.onnx")).graph.nodes[0].name == "renamed"


def test_verbatim_octets_stand_for_a_sub_record():
    m = onemodel.load(str(MODELS / "cnn_dynamo.onnx"))
    graph = encode(m.graph)
    pieces = encode_pieces(m, substitute={id(m.graph): Verbatim(memoryview(graph))})
    assert any(isinstance(p, memoryview) and p.obj is graph for p in pieces)
    assert b"".join(bytes(p) for p in pieces) == encode(m)
