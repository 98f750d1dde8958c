"""ONNX external data in a safetensors file (onemodel.formats.safetensors.check, external.py):
read zero-copy as Clause 13 data; the header checked by the format's rules and every reference
checked against the entry it points at; hostile data files refused with a kind and a path."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
import safetensors.numpy as sn
from onnx import TensorProto, helper

import onemodel
from onemodel.errors import InvalidModelError, MalformedError, UnsupportedError
from onemodel.formats.safetensors.header import MAX_HEADER_BYTES
from onemodel.storage.blob import Blob


def _model(tmp_path, refs, location="w.safetensors"):
    """An ONNX model whose initializers are external references into ``location``:
    ``refs`` is ``[(name, element type, dims, offset, length)]``."""
    inits = []
    for name, code, dims, offset, length in refs:
        t = TensorProto(name=name, data_type=code, dims=dims)
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
            e = t.external_data.add()
            e.key, e.value = k, v
        inits.append(t)
    g = helper.make_graph([], "g", [], [helper.make_tensor_value_info(
        refs[0][0], refs[0][1], refs[0][2])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    p = tmp_path / "m.onnx"
    p.write_bytes(m.SerializeToString())
    return p


def _st_file(path, tensors, metadata=None):
    """Write ``tensors`` with safetensors' own writer; ``{name: (begin, end)}`` file offsets."""
    sn.save_file(tensors, str(path), metadata=metadata)
    b = path.read_bytes()
    n = struct.unpack("<Q", b[:8])[0]
    head = json.loads(b[8:8 + n])
    return {k: (8 + n + v["data_offsets"][0], 8 + n + v["data_offsets"][1])
            for k, v in head.items() if k != "__metadata__"}


W = np.arange(24, dtype=np.float32).reshape(4, 6)
B = np.arange(-3, 5, dtype=np.int64)


def test_a_file_safetensors_wrote_reads_zero_copy(tmp_path):
    at = _st_file(tmp_path / "w.safetensors", {"W": W, "B": B})
    p = _model(tmp_path, [("W", TensorProto.FLOAT, [4, 6], at["W"][0], 96),
                          ("B", TensorProto.INT64, [8], at["B"][0], 64)])
    with onemodel.load(p) as m:
        w, b = m.graph.initializers
        assert isinstance(w.external, Blob) and w.external.source is b.external.source
        assert (w.external.offset, b.external.offset) == (at["W"][0], at["B"][0])
        assert np.array_equal(w.numpy(), W) and np.array_equal(b.numpy(), B)


def test_what_the_layout_writes_reads_back_checked(tmp_path):
    from onemodel.formats.safetensors.check import index_of

    arrays = {"W": W, "B": B}
    p = tmp_path / "src.onnx"
    g = helper.make_graph([], "g", [], [helper.make_tensor_value_info(
        "W", TensorProto.FLOAT, [4, 6])], initializer=[
        helper.make_tensor(k, TensorProto.FLOAT if k == "W" else TensorProto.INT64,
                           v.shape, v.tobytes(), raw=True) for k, v in arrays.items()])
    p.write_bytes(helper.make_model(g, ir_version=10, opset_imports=[
        helper.make_opsetid("", 21)]).SerializeToString())
    onemodel.convert(p, tmp_path / "o.onnx", external_data="d.safetensors", threshold=0)
    with onemodel.load(tmp_path / "o.onnx") as m:
        index = index_of(m.graph.initializers[0].external.source)
        assert index is not None and (index.tensors, index.checked) == (2, 2)
        assert {t.name: t.numpy().tolist() for t in m.graph.initializers} == \
            {k: v.tolist() for k, v in arrays.items()}


def _refused(p, kind, *words):
    with pytest.raises(kind) as info:
        onemodel.load(p)
    e = info.value
    assert e.path == "ModelProto.graph.initializer[0]", e.path
    for w in words:
        assert w in e.message, e.message
    return e


INCONSISTENT = {
    "another dtype": (TensorProto.INT32, [4, 6], 0, 96, "dtype F32 does not hold INT32"),
    "another shape": (TensorProto.FLOAT, [6, 4], 0, 96, "shape [4, 6] is not the tensor's dims"),
    "a range inside an entry": (TensorProto.FLOAT, [2, 6], 48, 48, "not the range of any"),
    "a range over two entries": (TensorProto.FLOAT, [40], 0, 160, "not the range of any"),
}


@pytest.mark.parametrize("case", sorted(INCONSISTENT))
def test_a_reference_inconsistent_with_its_entry_is_refused(tmp_path, case):
    at = _st_file(tmp_path / "w.safetensors", {"W": W, "B": B})
    code, dims, delta, length, words = INCONSISTENT[case]
    start = min(at["W"][0], at["B"][0]) if length == 160 else at["W"][0]  # B, W: 64 + 96
    p = _model(tmp_path, [("W", code, dims, start + delta, length)])
    _refused(p, InvalidModelError, words, "w.safetensors")


def test_a_recorded_element_type_must_be_the_tensors(tmp_path):
    raw = np.arange(6, dtype=np.uint8)
    at = _st_file(tmp_path / "w.safetensors", {"q": raw},
                  metadata={"onemodel.types": json.dumps({"q": "INT4"})})
    # U8 [6] with INT4 recorded holds INT4 [12] (6 octets) ...
    p = _model(tmp_path, [("q", TensorProto.INT4, [12], at["q"][0], 6)])
    with onemodel.load(p) as m:
        assert bytes(m.graph.initializers[0].raw_view()) == raw.tobytes()
    # ... not UINT4 [12], nor UINT8 [6]
    for code, dims in ((TensorProto.UINT4, [12]), (TensorProto.UINT8, [6])):
        p = _model(tmp_path, [("q", code, dims, at["q"][0], 6)])
        _refused(p, InvalidModelError, "records element type INT4")


def test_octets_without_a_recorded_type_are_accepted(tmp_path):
    at = _st_file(tmp_path / "w.safetensors", {"q": np.arange(6, dtype=np.uint8)})
    p = _model(tmp_path, [("q", TensorProto.INT4, [12], at["q"][0], 6)])
    with onemodel.load(p) as m:
        assert bytes(m.graph.initializers[0].raw_view()) == bytes(range(6))


def _raw_file(path, header, data: bytes, declared=None):
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    path.write_bytes(struct.pack("<Q", len(h) if declared is None else declared) + h + data)
    return 8 + len(h)


_DUP = (b'{"x":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},'
        b'"x":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}')

HOSTILE = {
    "oversized header": (b'{"x":{}}', b"\0" * 8, MAX_HEADER_BYTES + 1, UnsupportedError,
                         "safetensors.header"),
    "header past the file": (b'{"x":{}}', b"\0" * 8, 4000, MalformedError,
                             "safetensors.header"),
    "overlapping": ({"x": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},
                     "y": {"dtype": "U8", "shape": [8], "data_offsets": [4, 12]}}, b"\0" * 12,
                    None, MalformedError, 'safetensors["y"].data_offsets'),
    "out of the file": ({"x": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},
                         "y": {"dtype": "U8", "shape": [8], "data_offsets": [8, 16]}},
                        b"\0" * 12, None, MalformedError, "safetensors:"),
    "wrong length": ({"x": {"dtype": "F32", "shape": [8], "data_offsets": [0, 8]}}, b"\0" * 8,
                     None, MalformedError, 'safetensors["x"].data_offsets'),
    "duplicate keys": (_DUP, b"\0" * 8, None, MalformedError, 'safetensors["x"]'),
    "not JSON": (b"{nope", b"\0" * 8, None, MalformedError, "safetensors.header"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_safetensors_data_file_is_refused(tmp_path, case):
    header, data, declared, kind, where = HOSTILE[case]
    start = _raw_file(tmp_path / "w.safetensors", header, data, declared)
    p = _model(tmp_path, [("x", TensorProto.UINT8, [8], start, 8)])
    e = _refused(p, kind, where, "w.safetensors")
    assert e.kind == kind.kind


def test_a_raw_data_file_that_only_looks_like_safetensors_is_plain_data(tmp_path):
    # 8 octets of length 7, then "{...": the start of a header, but not a valid one
    data = struct.pack("<Q", 7) + b"{abcdef" + bytes(range(17))
    (tmp_path / "w.bin").write_bytes(data)
    p = _model(tmp_path, [("x", TensorProto.UINT8, [32], 0, 32)], location="w.bin")
    with onemodel.load(p) as m:
        assert bytes(m.graph.initializers[0].raw_view()) == data
