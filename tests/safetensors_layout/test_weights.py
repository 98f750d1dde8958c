"""Weights in and out (onemodel.api.extract_weights / apply_weights, formats.safetensors.weights):
a model's initializers as a safetensors file safetensors reads, and a fine-tuned file put back
into the model by name with dtypes and shapes checked."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
import safetensors.numpy as sn
from safetensors import safe_open
from st_models import all_types_model, colliding_model, mlp_model, mlp_reference

import onemodel
from onemodel.errors import InvalidModelError, MalformedError


def _arrays(m) -> dict:
    return {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}


def test_extracted_weights_read_with_safe_open_and_carry_the_digest(tmp_path):
    m = mlp_model(seed=2)
    onnx.save(m, tmp_path / "m.onnx")
    r = onemodel.convert(tmp_path / "m.onnx", tmp_path / "w.safetensors")
    want = _arrays(m)
    assert (r.target_format, r.tensors, r.tensor_bytes) == (
        "safetensors", 4, sum(a.nbytes for a in want.values()))
    with safe_open(str(tmp_path / "w.safetensors"), "np") as f:
        meta = f.metadata()
        pads = set(json.loads(meta.get("onemodel.padding", "[]")))
        assert set(f.keys()) - pads == set(want)
        for k in want:
            assert np.array_equal(f.get_tensor(k), want[k])
    assert meta["onemodel.digest"] == onemodel.digest(tmp_path / "m.onnx").hex
    assert json.loads(meta["onemodel.types"]) == {k: "FLOAT" for k in want}
    assert meta["onemodel.layout"] == "weights"


def test_a_fine_tuned_checkpoint_goes_back_into_its_graph(tmp_path):
    import onnxruntime as ort

    m = mlp_model(seed=5)
    onnx.save(m, tmp_path / "m.onnx")
    tuned = {k: (v * 3 - 1).astype(np.float32) for k, v in _arrays(m).items()}
    sn.save_file(tuned, str(tmp_path / "tuned.safetensors"))  # safetensors' own writer
    r = onemodel.convert(tmp_path / "tuned.safetensors", tmp_path / "out.onnx",
                         into=tmp_path / "m.onnx")
    assert (r.source_format, r.tensors) == ("safetensors", 4)
    out = onnx.load(str(tmp_path / "out.onnx"))
    assert {k: v.tolist() for k, v in _arrays(out).items()} == \
        {k: v.tolist() for k, v in tuned.items()}
    assert out.graph.node == m.graph.node
    x = np.ones((1, 48), np.float32)
    y = ort.InferenceSession(str(tmp_path / "out.onnx")).run(None, {"x": x})[0]
    np.testing.assert_allclose(y, mlp_reference(x, tuned), rtol=1e-5, atol=1e-4)


def test_out_and_back_in_is_the_same_model_for_every_element_type(tmp_path):
    onnx.save(all_types_model(), tmp_path / "m.onnx")
    onemodel.convert(tmp_path / "m.onnx", tmp_path / "w.safetensors")
    onemodel.convert(tmp_path / "w.safetensors", tmp_path / "back.onnx", into=tmp_path / "m.onnx")
    assert (tmp_path / "back.onnx").read_bytes() == (tmp_path / "m.onnx").read_bytes()


def test_colliding_names_go_back_to_their_own_graphs(tmp_path):
    onnx.save(colliding_model(), tmp_path / "m.onnx")
    onemodel.convert(tmp_path / "m.onnx", tmp_path / "w.safetensors")
    with safe_open(str(tmp_path / "w.safetensors"), "np") as f:
        tensors = {k: f.get_tensor(k) * 10 for k in f.keys()}
        meta = f.metadata()
    sn.save_file(tensors, str(tmp_path / "t.safetensors"), metadata=meta)
    onemodel.convert(tmp_path / "t.safetensors", tmp_path / "o.onnx", into=tmp_path / "m.onnx")
    o = onnx.load(str(tmp_path / "o.onnx"))
    branches = {a.name: onnx.numpy_helper.to_array(a.g.initializer[0])[0, 0]
                for a in o.graph.node[0].attribute}
    assert branches == {"then_branch": 10.0, "else_branch": 20.0}
    assert onnx.numpy_helper.to_array(o.graph.initializer[0])[0, 1] == 10.0


MISMATCH = {
    "dtype": ({"w0": np.zeros((48, 40), np.float16)}, "dtype F16 does not hold FLOAT"),
    "shape": ({"w0": np.zeros((40, 48), np.float32)}, "shape [40, 48] is not the tensor's dims"),
    "unknown name": ({"w9": np.zeros((2,), np.float32)}, "'w9' of the safetensors file is no"),
}


@pytest.mark.parametrize("case", sorted(MISMATCH))
def test_a_mismatch_is_refused_naming_the_tensor(tmp_path, case):
    onnx.save(mlp_model(), tmp_path / "m.onnx")
    tensors, words = MISMATCH[case]
    sn.save_file(tensors, str(tmp_path / "t.safetensors"))
    with pytest.raises(InvalidModelError) as info:
        onemodel.convert(tmp_path / "t.safetensors", tmp_path / "o.onnx",
                         into=tmp_path / "m.onnx")
    assert words in info.value.message and info.value.path
    if case != "unknown name":
        assert "'w0'" in info.value.message
        assert info.value.path == "graph.initializers[0]"
    assert not (tmp_path / "o.onnx").exists()


def test_a_hostile_weights_file_is_refused(tmp_path):
    onnx.save(mlp_model(), tmp_path / "m.onnx")
    (tmp_path / "t.safetensors").write_bytes(b"\x10" + bytes(7) + b'{"a":1}' + bytes(9))
    with pytest.raises(MalformedError) as info:
        onemodel.convert(tmp_path / "t.safetensors", tmp_path / "o.onnx",
                         into=tmp_path / "m.onnx")
    assert info.value.path.startswith("safetensors")
    assert not (tmp_path / "o.onnx").exists()


def test_weights_put_into_a_model_written_as_onemodel_read_back(tmp_path):
    # the replaced initializers' repeated fields stay empty lists (a null string_data in the
    # manifest made the .onemodel unreadable)
    m = mlp_model(seed=6)
    onnx.save(m, tmp_path / "m.onnx")
    tuned = {k: (v * 2 + 1).astype(np.float32) for k, v in _arrays(m).items()}
    sn.save_file(tuned, str(tmp_path / "tuned.safetensors"))
    onemodel.convert(tmp_path / "tuned.safetensors", tmp_path / "out.onemodel",
                     into=tmp_path / "m.onnx")
    onemodel.convert(tmp_path / "tuned.safetensors", tmp_path / "out.onnx",
                     into=tmp_path / "m.onnx")
    with onemodel.load(tmp_path / "out.onemodel") as back:
        got = {t.name: t.numpy().tolist() for t in back.graph.initializers}
    assert got == {k: v.tolist() for k, v in tuned.items()}
    assert onemodel.verify(tmp_path / "out.onemodel", tmp_path / "out.onnx").equal


def test_the_replaced_initializers_are_well_formed_ir_tensors(tmp_path):
    # every repeated field of a replaced initializer is a list (empty), as a fresh Tensor's:
    # string_data was None, which the OneModel writer refuses (it once wrote it as null)
    from onemodel.formats.safetensors.weights import apply_weights
    from onemodel.ir import Tensor
    from onemodel.ir.record import LIST_KINDS
    from onemodel.storage import open_source

    m = mlp_model(seed=7)
    onnx.save(m, tmp_path / "m.onnx")
    tuned = {k: (v - 3).astype(np.float32) for k, v in _arrays(m).items()}
    sn.save_file(tuned, str(tmp_path / "tuned.safetensors"))
    lists = [name for name, kind, _ in Tensor.FIELDS if kind in LIST_KINDS]
    with onemodel.load(tmp_path / "m.onnx") as model:
        replaced = apply_weights(model, open_source(tmp_path / "tuned.safetensors"))
        assert sorted(t.name for t in replaced) == sorted(tuned)
        for t in replaced:
            assert all(isinstance(getattr(t, f), list) for f in lists), t.name
            assert t.string_data == [] and t.external_data == []
            assert np.array_equal(t.numpy(), tuned[t.name])


def test_weights_put_into_a_onemodel_model_written_as_onemodel_read_back(tmp_path):
    m = mlp_model(seed=8)
    onnx.save(m, tmp_path / "m.onnx")
    onemodel.convert(tmp_path / "m.onnx", tmp_path / "m.onemodel")
    tuned = {k: (v * -1).astype(np.float32) for k, v in _arrays(m).items()}
    sn.save_file(tuned, str(tmp_path / "tuned.safetensors"))
    onemodel.convert(tmp_path / "tuned.safetensors", tmp_path / "out.onemodel",
                     into=tmp_path / "m.onemodel")
    onemodel.convert(tmp_path / "tuned.safetensors", tmp_path / "out.onnx",
                     into=tmp_path / "m.onnx")
    assert onemodel.verify(tmp_path / "out.onemodel", tmp_path / "out.onnx").equal
    with onemodel.load(tmp_path / "out.onemodel") as back:
        got = {t.name: t.numpy().tolist() for t in back.graph.initializers}
    assert got == {k: v.tolist() for k, v in tuned.items()}
