"""The content digest (onemodel.digest, docs/content-digest.md): one digest for every layout of
a model, a different one for any change of content (issue 14)."""

import hashlib
import struct

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import onemodel
from onemodel.content_digest import (
    MODEL_PREFIX,
    TENSOR_PREFIX,
    digest,
    model_digest,
    structure,
    tensor_digest,
)


def _proto(big: int = 4096):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((big // 4, 4)).astype(np.float32), "w")
    b = numpy_helper.from_array(np.arange(4, dtype=np.float32), "b")
    i4 = helper.make_tensor("q", T.INT4, [5], [-8, -1, 0, 3, 7])
    s = helper.make_tensor("s", T.STRING, [2], [b"ab", b""])
    c = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(
        np.array([1.5, 2.5], np.float32)))
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"]),
         c], "g", [helper.make_tensor_value_info("x", T.FLOAT, ["N", big // 4])],
        [helper.make_tensor_value_info("y", T.FLOAT, ["N", 4])], [w, b, i4, s])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21),
                                               helper.make_opsetid("ai.onnx.ml", 3)])


def _layouts(tmp_path):
    src = tmp_path / "m.onnx"
    src.write_bytes(_proto().SerializeToString())
    out = {"inline": src}
    for name, opts in (("file", {"layout": "file", "threshold": 16}),
                       ("per_tensor", {"layout": "per_tensor", "threshold": 16}),
                       ("aligned", {"layout": "file", "threshold": 16, "align": 64})):
        d = tmp_path / name
        d.mkdir()
        onemodel.convert(str(src), str(d / "m.onnx"), **opts)
        out[name] = d / "m.onnx"
    onemodel.convert(str(src), str(tmp_path / "m.onemodel"))
    out["onemodel"] = tmp_path / "m.onemodel"
    onemodel.convert(str(src), str(tmp_path / "m.onemodel.zst"))
    out["onemodel.zst"] = tmp_path / "m.onemodel.zst"
    onemodel.convert(str(src), str(tmp_path / "z.onnx.zst"))
    out["onnx.zst"] = tmp_path / "z.onnx.zst"
    return out


def test_every_layout_has_the_same_digest(tmp_path):
    paths = _layouts(tmp_path)
    digests = {k: digest(str(p)).hex for k, p in paths.items()}
    assert len(set(digests.values())) == 1, digests
    # the layouts really differ: external data in one file, in one file per tensor
    assert onemodel.load(str(paths["file"])).graph.initializers[0].is_external
    assert len(list(paths["per_tensor"].parent.iterdir())) >= 3
    assert paths["inline"].read_bytes() != paths["file"].read_bytes()


def test_typed_and_raw_storage_of_the_same_values_have_one_digest():
    a = _proto()
    b = _proto()
    t = b.graph.initializer[1]  # b: arange(4) float32, stored raw by from_array
    t.float_data.extend(np.frombuffer(t.raw_data, np.float32).tolist())
    t.ClearField("raw_data")
    ma, mb = onemodel.load(a.SerializeToString()), onemodel.load(b.SerializeToString())
    assert ma.graph.initializers[1].raw_data is not None and mb.graph.initializers[1].float_data \
        is not None
    assert digest(ma) == digest(mb)


def _changed(edit):
    p = _proto()
    edit(p)
    return digest(onemodel.load(p.SerializeToString())).hex


def test_any_change_of_content_changes_the_digest():
    base = _changed(lambda p: None)

    def flip_bit(p):
        raw = bytearray(p.graph.initializer[0].raw_data)
        raw[1000] ^= 0x10
        p.graph.initializer[0].raw_data = bytes(raw)

    def rename(p):
        p.graph.node[1].output[0] = "z"
        p.graph.output[0].name = "z"

    def reorder_opsets(p):
        a, b = list(p.opset_import)
        del p.opset_import[:]
        p.opset_import.extend([b, a])

    def reorder_nodes(p):
        n = list(p.graph.node)
        del p.graph.node[:]
        p.graph.node.extend([n[2], n[0], n[1]])

    edits = {
        "one bit of one weight": flip_bit,
        "an attribute's tensor": lambda p: setattr(
            p.graph.node[2].attribute[0].t, "raw_data", np.array([1.5, 2.0], np.float32).tobytes()),
        "an attribute's name": lambda p: setattr(p.graph.node[2].attribute[0], "name", "value_x"),
        "a value's name": rename,
        "an initializer's name": lambda p: setattr(p.graph.initializer[1], "name", "b2"),
        "the order of opset imports": reorder_opsets,
        "the order of nodes": reorder_nodes,
        "a string element": lambda p: p.graph.initializer[3].string_data.__setitem__(1, b"x"),
        "an int4 element": lambda p: p.graph.initializer[2].int32_data.__setitem__(0, 0x7f),
        "a dim of an input": lambda p: setattr(p.graph.input[0].type.tensor_type.shape.dim[0],
                                               "dim_param", "M"),
        "the producer name": lambda p: setattr(p, "producer_name", "other"),
        "a doc_string": lambda p: setattr(p.graph, "doc_string", "d"),
    }
    seen = {base: "base"}
    for what, edit in edits.items():
        h = _changed(edit)
        assert h not in seen, f"{what} gives the digest of {seen.get(h)}"
        seen[h] = what


def test_tensor_digest_is_the_documented_formula():
    arr = np.array([[1.0, -2.0, 3.5]], np.float32)
    t = onemodel.Tensor.from_numpy(arr, name="t")
    want = hashlib.sha256(TENSOR_PREFIX + struct.pack("<qqqq", T.FLOAT, 2, 1, 3)
                          + arr.astype("<f4").tobytes()).digest()
    assert tensor_digest(t) == want
    # strings: each element's int64 LE length, then its octets
    m = onemodel.load(_proto().SerializeToString())
    s = m.graph.initializers[3]
    want = hashlib.sha256(TENSOR_PREFIX + struct.pack("<qqq", T.STRING, 1, 2)
                          + struct.pack("<q", 2) + b"ab" + struct.pack("<q", 0)).digest()
    assert tensor_digest(s) == want
    # int4: the raw layout of Clause 6.3.4, two elements per octet, low nibble first
    q = m.graph.initializers[2]
    nib = [v & 0xF for v in (-8, -1, 0, 3, 7)] + [0]
    packed = bytes(nib[i] | nib[i + 1] << 4 for i in range(0, 6, 2))
    want = hashlib.sha256(TENSOR_PREFIX + struct.pack("<qqq", T.INT4, 1, 5) + packed).digest()
    assert tensor_digest(q) == want


def test_model_digest_is_sha256_of_the_stubbed_encoding():
    from onemodel.formats.onnx.wire_encode import encode
    from onemodel.ir.walk import iter_tensors

    p = _proto()
    p_orig = p.SerializeToString()
    m = onemodel.load(p_orig)
    # the stubbed model built with onnx: each tensor's storage replaced by raw_data = digest
    tensors = dict(iter_tensors(m))
    for path, t in tensors.items():
        d = tensor_digest(t)
        if path.startswith("graph.initializers"):
            proto_t = p.graph.initializer[int(path.split("[")[1].rstrip("]"))]
        else:
            proto_t = p.graph.node[2].attribute[0].t
        for f in ("float_data", "int32_data", "string_data", "int64_data", "double_data",
                  "uint64_data", "external_data"):
            proto_t.ClearField(f)
        proto_t.ClearField("data_location")
        proto_t.raw_data = d
    want = hashlib.sha256(MODEL_PREFIX + p.SerializeToString()).hexdigest()
    assert digest(m).hex == "sha256:" + want
    # structure() is that stubbed encoding, octet for octet (what a bundle signs)
    assert structure(m, digest(m).tensors) == p.SerializeToString()
    assert encode(m) == p_orig
    assert len(m.graph.initializers[0].raw_data) == 4096 * 4  # the model is unchanged


@pytest.mark.parametrize("workers", [1, 2])
def test_parallel_hashing_gives_the_same_digest(workers):
    m = onemodel.load(_proto(big=4 << 20).SerializeToString())
    assert digest(m, workers=workers) == digest(m, workers=1)


def test_known_digests_are_used_without_reading_those_tensors(monkeypatch):
    """model_digest(known=...): the digests given stand for those tensors, whose bytes are not
    read; the model digest is the same when they are right, another when one is wrong."""
    from onemodel.formats import content_digest as cd

    m = onemodel.load(_proto().SerializeToString())
    full = digest(m)
    known = {p: d for p, (_, d) in full.tensors.items() if p != "graph.initializers[1]"}
    read = []
    real = cd.tensor_digest

    def counted(t, **kw):
        read.append(t.name)
        return real(t, **kw)

    monkeypatch.setattr(cd, "tensor_digest", counted)
    assert model_digest(m, known=known) == full
    assert read == ["b"]  # only the tensor not known was hashed
    known["graph.initializers[0]"] = bytes(32)
    r = model_digest(m, known=known)
    assert r != full and r.tensors["graph.initializers[0]"][1] == bytes(32)
