"""The test vectors of docs/content-digest.md (testdata/digest/vectors.json): onemodel gives the
committed digests, and an independent computation with onnx's serializer, numpy and hashlib
(what another implementation would write from the document) gives the same."""

import hashlib
import json
import pathlib
import struct

import onnx
import pytest
from onnx import numpy_helper

from onemodel.content_digest import digest

TESTDATA = pathlib.Path(__file__).resolve().parents[2] / "testdata"
VECTORS = json.loads((TESTDATA / "digest" / "vectors.json").read_text())


@pytest.mark.parametrize("rel", sorted(VECTORS))
def test_committed_vectors(rel):
    d = digest(str(TESTDATA / rel))
    assert d.hex == VECTORS[rel]["digest"]
    assert {p: [n, h] for p, (n, h) in d.tensor_hex().items()} == VECTORS[rel]["tensors"]


def test_one_digest_for_the_inline_and_the_external_vector():
    assert VECTORS["digest/tiny.onnx"]["digest"] == VECTORS["digest/external/tiny.onnx"]["digest"]


def _independent_tensor_digest(t: onnx.TensorProto) -> bytes:
    # float32 and int64 only (the nested vector's types): raw layout = little-endian values
    arr = numpy_helper.to_array(t)
    dt = {onnx.TensorProto.FLOAT: "<f4", onnx.TensorProto.INT64: "<i8"}[t.data_type]
    head = struct.pack(f"<qq{len(t.dims)}q", t.data_type, len(t.dims), *t.dims)
    return hashlib.sha256(b"onemodel-content-digest/v1 tensor\n" + head +
                          arr.astype(dt).tobytes()).digest()


def _stub(t: onnx.TensorProto) -> None:
    d = _independent_tensor_digest(t)
    for f in ("float_data", "int32_data", "string_data", "int64_data", "double_data",
              "uint64_data", "external_data", "data_location", "raw_data"):
        t.ClearField(f)
    t.raw_data = d


def test_nested_vector_recomputed_independently():
    m = onnx.load(str(TESTDATA / "digest" / "nested.onnx"))
    for st in m.graph.sparse_initializer:
        _stub(st.values)
        _stub(st.indices)
    for node in m.graph.node:
        for a in node.attribute:
            if a.HasField("t"):
                _stub(a.t)
            for g in ([a.g] if a.HasField("g") else []):
                for n in g.node:
                    for b in n.attribute:
                        if b.HasField("t"):
                            _stub(b.t)
    want = hashlib.sha256(b"onemodel-content-digest/v1 model\n" + m.SerializeToString())
    assert VECTORS["digest/nested.onnx"]["digest"] == "sha256:" + want.hexdigest()
