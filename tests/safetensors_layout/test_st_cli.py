"""The command line of the safetensors layout: convert --external-data X.safetensors / --layout
safetensors / --align, weights out (DST .safetensors) and in (--into), info's data file line."""

from __future__ import annotations

import json

import numpy as np
import onnx
import safetensors.numpy as sn
from st_models import mlp_model
from typer.testing import CliRunner

from onemodel.cli import app
from onemodel.formats.safetensors.header import parse_header

runner = CliRunner()


def _cli(*args):
    return runner.invoke(app, [str(a) for a in args])


def _offsets(path) -> list[int]:
    m = onnx.load(str(path), load_external_data=False)
    return [int(next(e.value for e in t.external_data if e.key == "offset"))
            for t in m.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]


def test_convert_to_the_layout_and_info_says_it(tmp_path):
    onnx.save(mlp_model(), tmp_path / "m.onnx")
    r = _cli("convert", tmp_path / "m.onnx", tmp_path / "o.onnx", "--external-data",
             "w.safetensors", "--threshold", "0", "-q")
    assert r.exit_code == 0, r.output
    b = (tmp_path / "w.safetensors").read_bytes()
    h = parse_header(b, len(b))
    offs = _offsets(tmp_path / "o.onnx")
    assert len(offs) == 4 and all(o % 64 == 0 for o in offs)
    r = _cli("info", tmp_path / "o.onnx")
    assert r.exit_code == 0, r.output
    line = next(x for x in r.output.splitlines() if x.startswith("data file w.safetensors"))
    assert line.endswith(f"safetensors file, {len(h.entries) - 1} tensor entries (+1 padding "
                         "entry) in its header, every referenced tensor consistent with its "
                         "entry")  # the header entry of the padding before the first tensor
    r = _cli("info", tmp_path / "o.onnx", "--json")
    (f,) = json.loads(r.output)["external_data"]
    assert f["safetensors"] == {"entries": 4, "padding": 1, "checked": 4}


def test_layout_flag_and_align(tmp_path):
    onnx.save(mlp_model(), tmp_path / "m.onnx")
    r = _cli("convert", tmp_path / "m.onnx", tmp_path / "o.onnx", "--layout", "safetensors",
             "--align", "4096", "--threshold", "0", "-q")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "o.safetensors").exists()
    assert all(o % 4096 == 0 for o in _offsets(tmp_path / "o.onnx"))
    r = _cli("convert", tmp_path / "m.onnx", tmp_path / "p.onnx", "--layout", "safetensors",
             "--inline")
    assert r.exit_code == 2 and "choose one of --layout" in r.output


def test_weights_out_and_in(tmp_path):
    m = mlp_model(seed=9)
    onnx.save(m, tmp_path / "m.onnx")
    r = _cli("convert", tmp_path / "m.onnx", tmp_path / "w.safetensors")
    assert r.exit_code == 0 and "(safetensors): 4 tensors" in r.output, r.output
    got = sn.load_file(str(tmp_path / "w.safetensors"))
    want = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    assert all(np.array_equal(got[k], v) for k, v in want.items())
    sn.save_file({"b1": np.full(24, 0.5, np.float32)}, str(tmp_path / "t.safetensors"))
    r = _cli("convert", tmp_path / "t.safetensors", "--into", tmp_path / "m.onnx",
             tmp_path / "o.onnx", "-q")
    assert r.exit_code == 0, r.output
    out = {t.name: onnx.numpy_helper.to_array(t)
           for t in onnx.load(str(tmp_path / "o.onnx")).graph.initializer}
    assert out["b1"].tolist() == [0.5] * 24
    assert all(np.array_equal(out[k], want[k]) for k in ("w0", "b0", "w1"))
    r = _cli("convert", tmp_path / "m.onnx", tmp_path / "x.safetensors", "--threshold", "5")
    assert r.exit_code == 2 and "--threshold does not apply to safetensors output" in r.output
