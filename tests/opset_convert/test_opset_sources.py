"""Opset conversion from and to any place and layout (issue 26, item 1): an ONNX file served
over HTTP converted by ``onemodel convert URL OUT.onemodel --opset``, a model on S3 converted
with the Python API and saved back to S3, and a model with external data converted with its
weights written to a data file again: each computes what the original does (exactly: the
conversions change no arithmetic here) and its weights are the original's octets."""

from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper
from opset_models import F, run, versions_of
from typer.testing import CliRunner

import onemodel
from onemodel.cli import app

runner = CliRunner()
W = np.arange(4096 * 64, dtype=np.float32).reshape(4096, 64) / 7.0  # 1 MiB


def _proto(opset=11):
    """y = ReduceSum(x @ W, axes=[1], keepdims=0) at ``opset`` (axes an attribute below 13)."""
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]),
         helper.make_node("ReduceSum", ["h"], ["y"], axes=[1], keepdims=0)], "g",
        [helper.make_tensor_value_info("x", F, [2, 4096])],
        [helper.make_tensor_value_info("y", F, None)], [numpy_helper.from_array(W, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=6)


X = (np.arange(2 * 4096, dtype=np.float32).reshape(2, 4096) % 5) - 2.0


def _want():
    return run(onemodel.load(_proto().SerializeToString()), {"x": X})[0]


def test_an_http_source_converts_to_a_onemodel_file(http_server, tmp_path):
    http_server.files["m.onnx"] = _proto().SerializeToString()
    out = tmp_path / "m13.onemodel"
    r = runner.invoke(app, ["convert", http_server.url("m.onnx"), str(out), "--opset", "13"])
    assert r.exit_code == 0, r.output
    with onemodel.load(out) as m:
        assert versions_of(m) == {"": 13} and m.ir_version == 7
        assert [n.op_type for n in m.graph.nodes] == ["MatMul", "ReduceSum"]
        assert len(m.graph.nodes[1].inputs) == 2  # axes moved to an input at 13
        np.testing.assert_array_equal(run(m, {"x": X})[0], _want())
        np.testing.assert_array_equal(m.graph.initializers[0].numpy(), W)


def test_an_s3_model_converts_and_saves_back_to_s3(s3):
    server, bucket = s3
    opts = server.storage_options
    onemodel.save(onemodel.load(_proto().SerializeToString()), f"s3://{bucket}/m.onnx",
                  storage_options=opts)
    with onemodel.load(f"s3://{bucket}/m.onnx", storage_options=opts) as m:
        new = onemodel.convert_opset(m, {"": 18})
        onemodel.save(new, f"s3://{bucket}/m18.onnx", storage_options=opts)
    with onemodel.load(f"s3://{bucket}/m18.onnx", storage_options=opts) as back:
        assert versions_of(back) == {"": 18} and back.ir_version == 8
        np.testing.assert_array_equal(run(back, {"x": X})[0], _want())
        np.testing.assert_array_equal(back.graph.initializers[0].numpy(), W)


def test_external_data_converts_with_its_weights_in_a_data_file_again(tmp_path):
    src = tmp_path / "m.onnx"
    onemodel.save(onemodel.load(_proto().SerializeToString()), src,
                  external_data="m.bin")
    assert (tmp_path / "m.bin").stat().st_size == W.nbytes
    out = tmp_path / "o" / "m21.onnx"
    out.parent.mkdir()
    r = runner.invoke(app, ["convert", str(src), str(out), "--opset", "21",
                            "--external-data", "m21.bin"])
    assert r.exit_code == 0, r.output
    assert (out.parent / "m21.bin").read_bytes() == (tmp_path / "m.bin").read_bytes()
    with onemodel.load(out) as m:
        assert versions_of(m) == {"": 21} and m.graph.initializers[0].is_external
        np.testing.assert_array_equal(run(m, {"x": X})[0], _want())
