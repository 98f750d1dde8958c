"""Layout ``safetensors`` (onemodel.formats.onnx.writer, .safetensors.layout): ONNX whose external
data lies in one valid safetensors file, every tensor aligned, read back by safetensors itself,
by onnx and by onnxruntime; ``--inline`` back gives the original file."""

from __future__ import annotations

import json
import struct

import ml_dtypes
import numpy as np
import onnx
import pytest
from safetensors import safe_open
from st_models import RAW_TYPES, all_types_model, colliding_model, mlp_model, mlp_reference

import onemodel
from onemodel.errors import UnsupportedError
from onemodel.formats.safetensors.header import parse_header
from onemodel.formats.safetensors.layout import NATIVE
from onemodel.ir.dtypes import INFO


def _header(path):
    b = path.read_bytes()
    return parse_header(b, len(b), str(path)), b


def _refs(path) -> dict:
    return {t.name: {e.key: e.value for e in t.external_data}
            for t in onnx.load(str(path), load_external_data=False).graph.initializer
            if t.data_location == onnx.TensorProto.EXTERNAL}


@pytest.mark.parametrize("align", [64, 4096, 8])
def test_every_tensor_is_aligned_and_the_ranges_tile_the_file(tmp_path, align):
    onnx.save(mlp_model(), tmp_path / "m.onnx")
    onemodel.convert(tmp_path / "m.onnx", tmp_path / "out.onnx",
                     external_data="w.safetensors", threshold=0, align=align)
    h, raw = _header(tmp_path / "w.safetensors")  # parse_header checks the tiling
    assert h.data_start % align == 0
    refs = _refs(tmp_path / "out.onnx")
    assert set(refs) == {"w0", "b0", "w1", "b1"}
    pads = set(json.loads(h.metadata["onemodel.padding"])) if align > 8 else set()
    by_begin = {e.begin: e for e in h.entries if e.name not in pads}
    for name, ref in refs.items():
        off, n = int(ref["offset"]), int(ref["length"])
        assert ref["location"] == "w.safetensors" and off % align == 0
        e = by_begin[off]
        assert (e.name, e.end) == (name, off + n)
    for e in h.entries:  # padding entries hold zeros
        if e.name in pads:
            assert e.dtype == "U8" and raw[e.begin:e.end] == bytes(e.nbytes)
    # 160 bytes of b0 at 64 leave a 32-byte gap: a padding entry covers it
    assert (align == 64) <= bool(pads)


def test_safe_open_reads_every_tensor_and_onnxruntime_runs_it(tmp_path):
    import onnxruntime as ort

    m = mlp_model(seed=4)
    onnx.save(m, tmp_path / "m.onnx")
    onemodel.convert(tmp_path / "m.onnx", tmp_path / "out.onnx",
                     external_data="weights.safetensors", threshold=0)
    want = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    with safe_open(str(tmp_path / "weights.safetensors"), "np") as f:
        meta = f.metadata()
        keys = [k for k in f.keys() if k not in json.loads(meta.get("onemodel.padding", "[]"))]
        assert sorted(keys) == sorted(want)
        for k in keys:
            got = f.get_tensor(k)
            assert got.dtype == want[k].dtype and np.array_equal(got, want[k])
    assert json.loads(meta["onemodel.types"]) == {k: "FLOAT" for k in want}
    x = np.random.default_rng(1).standard_normal((1, 48)).astype(np.float32)
    y = ort.InferenceSession(str(tmp_path / "out.onnx")).run(None, {"x": x})[0]
    np.testing.assert_allclose(y, mlp_reference(x, want), rtol=1e-5, atol=1e-5)


def test_inline_back_is_byte_identical(tmp_path):
    onnx.save(all_types_model(), tmp_path / "m.onnx")
    onemodel.convert(tmp_path / "m.onnx", tmp_path / "out.onnx", layout="safetensors",
                     threshold=0)
    assert (tmp_path / "out.safetensors").exists()
    onemodel.convert(tmp_path / "out.onnx", tmp_path / "back.onnx", layout="inline")
    assert (tmp_path / "back.onnx").read_bytes() == (tmp_path / "m.onnx").read_bytes()


def _ml(code):
    return np.dtype(INFO[code].dtype) if code in NATIVE else np.dtype(np.uint8)


def test_every_element_type_survives(tmp_path, monkeypatch):
    m = all_types_model()
    onnx.save(m, tmp_path / "m.onnx")
    onemodel.convert(tmp_path / "m.onnx", tmp_path / "out.onnx",
                     external_data="w.safetensors", threshold=0)
    h, raw = _header(tmp_path / "w.safetensors")
    types = json.loads(h.metadata["onemodel.types"])
    original = {t.name: t for t in m.graph.initializer}
    # safetensors reads numpy dtypes by name: lend it ml_dtypes' float8 types
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                 "float8_e8m0fnu"):
        monkeypatch.setattr(np, name, getattr(ml_dtypes, name), raising=False)
    with safe_open(str(tmp_path / "w.safetensors"), "np") as f:
        for code in RAW_TYPES:
            name = f"t_{INFO[code].name}"
            e = h[name]
            src = original[name].raw_data
            assert types[name] == INFO[code].name
            if code in NATIVE:
                assert (e.dtype, list(e.shape)) == (NATIVE[code], [5, 7])
            else:  # INT4, UINT4, INT2, UINT2, COMPLEX128, FLOAT4E2M1, FLOAT6*: octets
                assert (e.dtype, list(e.shape)) == ("U8", [len(src)])
            assert raw[e.begin:e.end] == src
            got = f.get_tensor(name)
            assert got.dtype == _ml(code) and got.tobytes() == src
    # STRING and the small tensor stay inline
    out = {t.name: t for t in onnx.load(str(tmp_path / "out.onnx"),
                                        load_external_data=False).graph.initializer}
    assert out["words"].data_location != onnx.TensorProto.EXTERNAL
    assert "words" not in h and "small" in h
    with onemodel.load(tmp_path / "out.onnx") as back:
        got = {t.name: bytes(t.raw_view()) for t in back.graph.initializers if t.name != "words"}
    assert got == {n: t.raw_data for n, t in original.items() if n != "words"}


def test_small_tensors_stay_inline_under_the_threshold(tmp_path):
    onnx.save(mlp_model(), tmp_path / "m.onnx")  # w0 7680, b0 160, w1 3840, b1 96 bytes
    onemodel.convert(tmp_path / "m.onnx", tmp_path / "out.onnx",
                     external_data="w.safetensors", threshold=200)
    assert set(_refs(tmp_path / "out.onnx")) == {"w0", "w1"}
    h, _ = _header(tmp_path / "w.safetensors")
    assert {e.name for e in h.entries} - set(json.loads(
        h.metadata.get("onemodel.padding", "[]"))) == {"w0", "w1"}


def test_names_that_collide_get_unique_keys_recorded_in_the_metadata(tmp_path):
    onnx.save(colliding_model(), tmp_path / "m.onnx")
    onemodel.convert(tmp_path / "m.onnx", tmp_path / "out.onnx",
                     external_data="w.safetensors", threshold=0)
    h, raw = _header(tmp_path / "w.safetensors")
    names = json.loads(h.metadata["onemodel.names"])
    keys = {e.name for e in h.entries}
    assert len(keys) == 3 and "w" in keys and "w.2" in keys
    (other,) = keys - {"w", "w.2"}
    assert names == {other: "w"}  # the second "w" of the graphs; "w.2" kept its own name
    values = sorted(np.frombuffer(raw[h[k].begin:h[k].end], np.float32)[0] for k in keys)
    assert values == [0.0, 1.0, 2.0]  # main w.2 starts at 0, then/else are 1 and 2
    assert "onemodel.padding" not in h.metadata  # 256-byte tensors need no padding at 64
    assert onemodel.verify(tmp_path / "m.onnx", tmp_path / "out.onnx").equal


def test_a_tensor_named_like_padding_gets_another_key():
    from onemodel.formats.safetensors.layout import plan

    header, offsets, keys = plan([("__pad0__", 1, [3], 12), ("b", 1, [1], 4)], 64)
    n = struct.unpack("<Q", header[:8])[0]
    h = parse_header(header + bytes(offsets[-1] + 4 - len(header)), offsets[-1] + 4)
    assert keys == ["__pad0__.2", "b"] and len(header) == 8 + n
    assert json.loads(h.metadata["onemodel.names"]) == {"__pad0__.2": "__pad0__"}
    assert json.loads(h.metadata["onemodel.padding"]) == ["__pad0__"]
    assert offsets == [len(header), len(header) + 64]


def test_bad_options_are_refused(tmp_path):
    onnx.save(mlp_model(), tmp_path / "m.onnx")
    with pytest.raises(UnsupportedError, match="align must be a power of two"):
        onemodel.convert(tmp_path / "m.onnx", tmp_path / "o.onnx",
                         external_data="w.safetensors", align=3 << 20)
    with pytest.raises(UnsupportedError, match="external_data names the data file"):
        onemodel.convert(tmp_path / "m.onnx", tmp_path / "o.onnx", layout="per_tensor",
                         external_data="w.safetensors")
    assert not (tmp_path / "o.onnx").exists() and not (tmp_path / "w.safetensors").exists()
