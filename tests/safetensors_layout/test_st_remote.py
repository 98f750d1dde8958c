"""The safetensors layout and weights commands on URLs (HTTP Range server of tests/servers):
the header read with at most two range requests, tensors fetched lazily, hostile files refused
as locally."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import safetensors.numpy as sn
from st_models import mlp_model

import onemodel
from onemodel.errors import MalformedError


def _serve(server, tmp_path, **convert):
    m = mlp_model(seed=6, sizes=(256, 128, 64))
    onnx.save(m, tmp_path / "m.onnx")
    onemodel.convert(tmp_path / "m.onnx", tmp_path / "o.onnx", external_data="w.safetensors",
                     threshold=0, **convert)
    for name in ("o.onnx", "w.safetensors"):
        server.files[name] = (tmp_path / name).read_bytes()
    return {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}


def _on(server, name):
    return [r for r in server.log if r.path.endswith(name) and r.method == "GET"]


def test_a_remote_model_reads_its_safetensors_header_in_one_request(http_server, tmp_path):
    want = _serve(http_server, tmp_path)
    assert len(http_server.files["w.safetensors"]) > 1 << 17  # larger than one 64 KiB read
    with onemodel.load(http_server.url("o.onnx")) as m:
        header_reads = len(_on(http_server, "w.safetensors"))
        assert header_reads == 1  # the header (< 64 KiB), checked; no tensor fetched yet
        w1 = m.graph.initializers[2]
        assert w1.name == "w1" and np.array_equal(w1.numpy(), want["w1"])
        assert len(_on(http_server, "w.safetensors")) == 2  # one range read for w1
        report = onemodel.formats.onnx.external_data_report(m)
    assert report[0]["safetensors"] == {"entries": 4, "padding": 0, "checked": 4}


def test_a_hostile_remote_safetensors_file_is_refused(http_server, tmp_path):
    _serve(http_server, tmp_path)
    data = bytearray(http_server.files["w.safetensors"])
    data[8] = ord("[")  # the header is no JSON object
    http_server.files["w.safetensors"] = bytes(data)
    with pytest.raises(MalformedError) as info:
        onemodel.load(http_server.url("o.onnx"))
    assert "safetensors.header" in info.value.message
    assert info.value.path == "ModelProto.graph.initializer[0]"


def test_weights_in_from_a_url_and_out_of_a_remote_model(http_server, tmp_path):
    want = _serve(http_server, tmp_path)
    tuned = {k: (v + 1).astype(np.float32) for k, v in want.items()}
    sn.save_file(tuned, str(tmp_path / "t.safetensors"))
    http_server.files["t.safetensors"] = (tmp_path / "t.safetensors").read_bytes()
    onemodel.convert(http_server.url("t.safetensors"), tmp_path / "tuned.onnx",
                     into=tmp_path / "m.onnx")
    got = {t.name: onnx.numpy_helper.to_array(t)
           for t in onnx.load(str(tmp_path / "tuned.onnx")).graph.initializer}
    assert {k: v.tolist() for k, v in got.items()} == {k: v.tolist() for k, v in tuned.items()}
    onemodel.convert(http_server.url("o.onnx"), tmp_path / "w.safetensors")
    back = sn.load_file(str(tmp_path / "w.safetensors"))
    assert all(np.array_equal(back[k], v) for k, v in want.items())
