"""Reading faults as findings (OM2xx): three bad tensors give three findings, each with its
path and the byte offset of its TensorProto; external data refused or missing; a file that
cannot be read at all stays one error."""

from __future__ import annotations

import pytest
from check_models import model, save
from onnx import TensorProto, helper

import onemodel
from onemodel.validation.codes import CODES


def _bad(name, n):
    t = helper.make_tensor(name, TensorProto.FLOAT, [4], [0.0] * 4)
    t.raw_data = b"\0" * n  # 4 floats need 16 bytes
    del t.float_data[:]
    return t


def test_three_bad_tensors_give_three_findings(tmp_path):
    inits = [_bad("a", 12), helper.make_tensor("ok", TensorProto.FLOAT, [1], [1.0]),
             _bad("b", 4), _bad("c", 20)]
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    p = save(tmp_path, model(nodes, initializers=inits))
    r = onemodel.check(p)
    got = [(f.code, f.severity, f.path) for f in r.findings]
    assert got == [("OM201", "error", "graph.initializer[0]"),
                   ("OM201", "error", "graph.initializer[2]"),
                   ("OM201", "error", "graph.initializer[3]")]
    data = open(p, "rb").read()
    for f, t in zip(r.findings, (inits[0], inits[2], inits[3])):
        # the offset of the field holding the TensorProto: its key and length (one byte each)
        assert f.offset is not None and data.find(t.SerializeToString()) == f.offset + 2
    with pytest.raises(onemodel.InvalidModelError):  # the reader itself still refuses
        onemodel.load(p)


def _external(tmp_path, length, location="w.bin", checksum=None):
    t = helper.make_tensor("w", TensorProto.FLOAT, [4], [0.0] * 4)
    del t.float_data[:]
    t.data_location = TensorProto.EXTERNAL
    entries = [("location", location), ("offset", "0"), ("length", str(length))]
    for k, v in entries + ([("checksum", checksum)] if checksum else []):
        e = t.external_data.add()
        e.key, e.value = k, v
    (tmp_path / "w.bin").write_bytes(b"\0" * 16)
    nodes = [helper.make_node("Add", ["x", "w"], ["y"])]
    return save(tmp_path, model(nodes, initializers=[t]))


def test_external_data_findings(tmp_path):
    assert onemodel.check(_external(tmp_path, 16)).ok
    f, = onemodel.check(_external(tmp_path, 8)).findings
    assert (f.code, f.severity, f.path) == ("OM203", "error", "graph.initializer[0]")
    assert "length 8 does not match" in f.message
    f, = onemodel.check(_external(tmp_path, 16, "gone.bin")).findings
    assert (f.code, f.path) == ("OM204", "graph.initializer[0]")
    f, = onemodel.check(_external(tmp_path, 16, "../w.bin")).findings
    assert (f.code, f.path) == ("OM203", "graph.initializer[0]")


def test_checksums_are_verified_only_by_full(tmp_path, monkeypatch):
    """check reads structure only: a checksum is one info finding per data file (the file is
    not read); --full verifies it (OM203 on a mismatch)."""
    import hashlib

    from onemodel.formats.onnx import external

    good = hashlib.sha1(b"\0" * 16).hexdigest()
    bad = hashlib.sha1(b"other").hexdigest()
    p = _external(tmp_path, 16, checksum=bad)
    reads = []
    monkeypatch.setattr(external, "_sha1_of", lambda src: reads.append(src) or bad)
    f, = onemodel.check(p).findings
    assert (f.code, f.severity, f.path) == ("OM206", "info", "graph.initializer[0]")
    assert "'w.bin'" in f.message and "1 tensor was not verified" in f.message
    assert reads == [] and onemodel.check(p).ok
    monkeypatch.undo()
    r = onemodel.check(p, full=True)
    # (x [2] + w [4] do not broadcast: --full's inference says so too, OM410)
    assert [(f.code, f.path) for f in r.errors] == [("OM203", "graph.initializer[0]"),
                                                   ("OM410", "graph.node[0]")]
    assert "checksum mismatch" in r.errors[0].message
    r = onemodel.check(_external(tmp_path, 16, checksum=good), full=True)
    assert [f.code for f in r.findings] == ["OM410"]  # verified: only the broadcast


def test_an_unreadable_file_raises(tmp_path):
    p = tmp_path / "m.onnx"
    p.write_bytes(b"\x08\x07\x12\xff\xff")  # ir_version, then a field running past the end
    with pytest.raises(onemodel.MalformedError):
        onemodel.check(str(p))


def test_three_bad_tensors_of_a_onemodel_file_give_three_findings(tmp_path):
    """The OneModel reader collects tensor faults under check, as the ONNX reader does: every
    tensor whose byte length does not match its dims is an OM205 at its own manifest path."""
    inits = [helper.make_tensor(n, TensorProto.FLOAT, [4], [float(k)] * 4)
             for k, n in enumerate("abcd")]
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    om = tmp_path / "m.onemodel"
    onemodel.convert(save(tmp_path, model(nodes, initializers=inits)), str(om))
    data = om.read_bytes()
    assert data.count(b'"length":16') == 4, "the manifest's tensor lengths as written"
    cut = data.split(b'"length":16')  # tensors a, c, d claim 12 bytes (same width: 16 -> 12)
    om.write_bytes(cut[0] + b'"length":12' + cut[1] + b'"length":16' + cut[2]
                   + b'"length":12' + cut[3] + b'"length":12' + cut[4])
    r = onemodel.check(str(om))
    got = [(f.code, f.severity, f.path) for f in r.findings]
    assert got == [("OM205", "error", f"manifest.graph.initializers[{k}].data.length")
                   for k in (0, 2, 3)], r.findings
    assert all("byte length 12 does not match dims and dtype (16 bytes)" == f.message
               for f in r.findings)
    with pytest.raises(onemodel.InvalidModelError):  # the reader itself still refuses
        onemodel.load(str(om))


def test_count_messages_word_it_once(tmp_path):
    short = helper.make_tensor("s", TensorProto.FLOAT, [4], [0.0] * 4)
    del short.float_data[2:]
    packed = helper.make_tensor("p", TensorProto.INT4, [5], [0] * 5)
    packed.ClearField("raw_data")
    packed.int32_data[:] = [0] * 5  # 5 INT4 elements pack into 3 int32_data values
    inits = [_bad("a", 12), short, packed]
    p = save(tmp_path, model([helper.make_node("Relu", ["x"], ["y"])], initializers=inits))
    got = [f.message for f in onemodel.check(p).findings]
    assert got == ["raw_data holds 12 bytes; dims [4] of FLOAT need 16",
                   "2 values in float_data for 4 elements of FLOAT",
                   "5 values in int32_data for 5 elements of INT4 (3 expected)"]
    assert CODES["OM201"].example == got[0]  # docs/check.md's example is a real message
