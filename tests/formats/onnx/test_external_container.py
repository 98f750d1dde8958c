"""ONNX with external data -> OneModel -> ONNX: the OneModel file carries the weights itself, and
writing it back with the keep layout gives the .onnx file and every data file byte for byte."""

from __future__ import annotations

import pathlib
import shutil

import pytest
from external_models import files_of, oracle_tensors, rich_model, save_external

import onemodel
from onemodel.ir import iter_tensors

ROOT = pathlib.Path(__file__).resolve().parents[3]
DYNAMO = ROOT / "testdata" / "models" / "external" / "mlp_dynamo.onnx"


def _to_onemodel_and_back(src: pathlib.Path, tmp_path: pathlib.Path, **write) -> pathlib.Path:
    """Convert a copy of ``src``'s directory to OneModel, delete the copy (so the OneModel file
    has to stand alone), and convert the OneModel file back to ONNX in a fresh directory."""
    copy = tmp_path / "src"
    shutil.copytree(src.parent, copy)
    mid = tmp_path / "mid" / "m.onemodel"
    mid.parent.mkdir()
    onemodel.convert(str(copy / src.name), str(mid))
    shutil.rmtree(copy)
    assert sorted(p.name for p in mid.parent.iterdir()) == ["m.onemodel"]
    out = tmp_path / "out" / src.name
    out.parent.mkdir()
    onemodel.convert(str(mid), str(out), **write)
    return out


@pytest.mark.parametrize("kw", [
    dict(all_tensors_to_one_file=True, location="weights.bin"),
    dict(all_tensors_to_one_file=False),
    dict(all_tensors_to_one_file=True, location="all.bin", size_threshold=0,
         convert_attribute=True),
    dict(all_tensors_to_one_file=True, location="big.bin", size_threshold=5000),
], ids=["one-file", "per-tensor", "all-tensors", "threshold"])
def test_onnx_onemodel_onnx_keep_is_byte_identical(tmp_path, kw):
    src = save_external(rich_model(), tmp_path / "in" / "m.onnx", **kw)
    out = _to_onemodel_and_back(src, tmp_path)
    assert files_of(out.parent) == files_of(src.parent)


def test_torch_dynamo_export_through_onemodel(tmp_path):
    out = _to_onemodel_and_back(DYNAMO, tmp_path)
    assert files_of(out.parent) == files_of(DYNAMO.parent)


def test_onemodel_to_other_layouts(tmp_path):
    src = save_external(rich_model(), tmp_path / "in" / "m.onnx", location="w.bin")
    want = oracle_tensors(src)
    mid = tmp_path / "m.onemodel"
    onemodel.convert(str(src), str(mid))
    for layout in ("inline", "file", "per_tensor"):
        out = tmp_path / layout / "m.onnx"
        out.parent.mkdir()
        onemodel.convert(str(mid), str(out), layout=layout, threshold=100)
        assert oracle_tensors(out) == want
        with onemodel.load(str(out)) as m:
            external = [t for _, t in iter_tensors(m) if t.is_external]
            assert bool(external) == (layout != "inline")
