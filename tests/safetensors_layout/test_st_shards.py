"""Layout ``safetensors`` in shards (``max_shard_size``, ``--max-shard-size``): Hugging Face's
``<stem>-0000i-of-0000k.safetensors`` files and ``<data file>.index.json``, read back with json and
safe_open as ``transformers`` reads them; the ONNX references point into the shards."""

from __future__ import annotations

import json

import numpy as np
import onnx
from safetensors import safe_open
from st_models import mlp_model, mlp_reference
from typer.testing import CliRunner

import onemodel
from onemodel.cli import app


def test_shards_and_their_index(tmp_path):
    import onnxruntime as ort

    m = mlp_model(seed=8)  # w0 7680, b0 160, w1 3840, b1 96 bytes
    onnx.save(m, tmp_path / "m.onnx")
    r = CliRunner().invoke(app, [
        "convert", str(tmp_path / "m.onnx"), str(tmp_path / "o.onnx"), "--external-data",
        "model.safetensors", "--threshold", "0", "--max-shard-size", "4000", "-q"])
    assert r.exit_code == 0, r.output
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    # w0 alone (past 4000 by itself), b0 + w1 = 4000 exactly, b1 in a third
    names = [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    assert index == {"metadata": {"total_size": 7680 + 160 + 3840 + 96},
                     "weight_map": {"w0": names[0], "b0": names[1], "w1": names[1],
                                    "b1": names[2]}}
    assert not (tmp_path / "model.safetensors").exists()
    want = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    for key, shard in index["weight_map"].items():
        with safe_open(str(tmp_path / shard), "np") as f:
            assert np.array_equal(f.get_tensor(key), want[key])
    refs = {t.name: {e.key: e.value for e in t.external_data}["location"]
            for t in onnx.load(str(tmp_path / "o.onnx"), load_external_data=False)
            .graph.initializer}
    assert refs == index["weight_map"]
    x = np.ones((1, 48), np.float32)
    y = ort.InferenceSession(str(tmp_path / "o.onnx")).run(None, {"x": x})[0]
    np.testing.assert_allclose(y, mlp_reference(x, want), rtol=1e-5, atol=1e-4)
    onemodel.convert(tmp_path / "o.onnx", tmp_path / "back.onnx", layout="inline")
    assert (tmp_path / "back.onnx").read_bytes() == (tmp_path / "m.onnx").read_bytes()


def test_under_the_shard_size_one_file_and_no_index(tmp_path):
    onnx.save(mlp_model(), tmp_path / "m.onnx")
    onemodel.convert(tmp_path / "m.onnx", tmp_path / "o.onnx", external_data="w.safetensors",
                     threshold=0, max_shard_size=1 << 20)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "o.onnx", "w.safetensors"]


def test_max_shard_size_needs_the_safetensors_layout(tmp_path):
    onnx.save(mlp_model(), tmp_path / "m.onnx")
    r = CliRunner().invoke(app, ["convert", str(tmp_path / "m.onnx"), str(tmp_path / "o.onnx"),
                                 "--external-data", "w.bin", "--max-shard-size", "10"])
    assert r.exit_code == 2 and "--max-shard-size must be a positive integer" in r.output


def _sharded(tmp_path, src, dst, *extra):
    return CliRunner().invoke(app, ["convert", str(src), str(dst), "--layout", "safetensors",
                                    "--threshold", "0", "--max-shard-size", "4000", "-q",
                                    *extra])


def test_converting_again_into_the_same_directory_replaces_its_shards_and_index(tmp_path):
    m = mlp_model(seed=8)
    onnx.save(m, tmp_path / "m.onnx")
    out = tmp_path / "out"
    out.mkdir()
    for _ in range(2):  # the second run replaces the first one's shards and index, no --force
        r = _sharded(tmp_path, tmp_path / "m.onnx", out / "model.onnx")
        assert r.exit_code == 0, r.output
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert sorted(set(index["weight_map"].values())) == [
        f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    want = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    for key, shard in index["weight_map"].items():
        with safe_open(str(out / shard), "np") as f:
            assert np.array_equal(f.get_tensor(key), want[key])


def test_an_index_of_another_model_is_not_replaced_without_force(tmp_path):
    onnx.save(mlp_model(seed=8), tmp_path / "m.onnx")
    out = tmp_path / "out"
    out.mkdir()
    foreign = b'{"metadata": {"total_size": 1}, "weight_map": {"x": "other.safetensors"}}\n'
    (out / "model.safetensors.index.json").write_bytes(foreign)
    r = _sharded(tmp_path, tmp_path / "m.onnx", out / "model.onnx")
    assert r.exit_code != 0
    assert "shard index" in r.output and "model.safetensors.index.json" in r.output
    assert "--force" in r.output
    assert (out / "model.safetensors.index.json").read_bytes() == foreign
    assert sorted(p.name for p in out.iterdir()) == ["model.safetensors.index.json"]
    r = _sharded(tmp_path, tmp_path / "m.onnx", out / "model.onnx", "--force")
    assert r.exit_code == 0, r.output
    assert json.loads((out / "model.safetensors.index.json").read_text())["weight_map"]["w0"] \
        == "model-00001-of-00003.safetensors"
