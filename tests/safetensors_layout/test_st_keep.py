"""Layout ``keep`` of a model whose data files are safetensors files: written elsewhere (the
default of ``convert A/out.onnx B/out.onnx``), each data file keeps its header, so the copy is
the same valid safetensors file and the model loads. Before, the header (bytes no reference
selects) was written as zeros and the copy could not be read (MalformedError)."""

from __future__ import annotations

import numpy as np
import onnx
from safetensors import safe_open
from st_models import all_types_model, mlp_model

import onemodel


def _arrays(path) -> dict:
    with onemodel.load(path) as m:  # (STRING: no raw layout, its values)
        return {t.name: t.numpy().tolist() if t.data_type == 8 else t.tobytes()
                for t in m.graph.initializers}


def test_keep_elsewhere_copies_a_safetensors_data_file_whole(tmp_path):
    onnx.save(all_types_model(), tmp_path / "m.onnx")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    onemodel.convert(tmp_path / "m.onnx", tmp_path / "a" / "out.onnx", layout="safetensors",
                     threshold=16)
    onemodel.convert(tmp_path / "a" / "out.onnx", tmp_path / "b" / "out.onnx")  # keep
    assert (tmp_path / "b" / "out.safetensors").read_bytes() == \
        (tmp_path / "a" / "out.safetensors").read_bytes()
    assert (tmp_path / "b" / "out.onnx").read_bytes() == \
        (tmp_path / "a" / "out.onnx").read_bytes()
    assert _arrays(tmp_path / "b" / "out.onnx") == _arrays(tmp_path / "m.onnx")


def test_keep_elsewhere_copies_each_shard_whole(tmp_path):
    m = mlp_model(seed=8)  # w0 7680, b0 160, w1 3840, b1 96 bytes: three shards of 4000
    onnx.save(m, tmp_path / "m.onnx")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    onemodel.convert(tmp_path / "m.onnx", tmp_path / "a" / "o.onnx",
                     external_data="model.safetensors", threshold=0, max_shard_size=4000)
    onemodel.convert(tmp_path / "a" / "o.onnx", tmp_path / "b" / "o.onnx")
    want = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    for i, keys in ((1, ["w0"]), (2, ["b0", "w1"]), (3, ["b1"])):
        name = f"model-0000{i}-of-00003.safetensors"
        assert (tmp_path / "b" / name).read_bytes() == (tmp_path / "a" / name).read_bytes()
        with safe_open(str(tmp_path / "b" / name), "np") as f:
            for key in keys:
                assert np.array_equal(f.get_tensor(key), want[key])
    assert _arrays(tmp_path / "b" / "o.onnx") == _arrays(tmp_path / "m.onnx")
