"""Content digests carried in OneModel (issue 14, Build 3; docs/format-extension.md section 9):
written with ``digests=True`` / ``convert --digests``, checked on first use of a tensor, locally
and over HTTP, by a server that answers one range with other bytes of the right length."""

import hashlib
import json
import struct

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import onemodel
from onemodel.content_digest import TENSOR_PREFIX, digest
from onemodel.errors import IoError, MalformedError, UnsupportedError
from onemodel.formats.container import read_bytes, write_bytes
from onemodel.formats.container.header import HEADER_SIZE, parse_header
from onemodel.storage.blob import CheckedBlob

W_SHAPE = (256, 128)  # 128 KiB of float32: past the 64 KiB a remote reader fetches first
#: where in w the server changes a byte: past the first 64 KiB of the file, which the remote
#: reader fetches on opening (the head), so the answer changed is the one of w's range
PAST_HEAD = 80_000


def _model():
    rng = np.random.default_rng(7)
    w = rng.standard_normal(W_SHAPE).astype(np.float32)
    b = np.arange(128, dtype=np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])],
        "g", [helper.make_tensor_value_info("x", T.FLOAT, ["N", W_SHAPE[0]])],
        [helper.make_tensor_value_info("y", T.FLOAT, ["N", W_SHAPE[1]])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"),
         helper.make_tensor("s", T.STRING, [2], [b"ab", b""])])
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    return onemodel.load(proto.SerializeToString()), w, b


def _manifest(data: bytes):
    h = parse_header(data[:HEADER_SIZE], len(data))
    return h, json.loads(data[HEADER_SIZE:HEADER_SIZE + h.manifest_length])


def _expected(arr: np.ndarray, code: int) -> str:
    """The tensor digest from its definition, independently of onemodel."""
    head = TENSOR_PREFIX + struct.pack(f"<qq{arr.ndim}q", code, arr.ndim, *arr.shape)
    return "sha256:" + hashlib.sha256(head + arr.astype("<f4").tobytes()).hexdigest()


def _flip(data: bytes, name: str) -> tuple[bytes, int, int]:
    """``data`` with the first byte of tensor ``name``'s range inverted, and that range."""
    h, man = _manifest(data)
    t = next(t for t in man["graph"]["initializers"] if t.get("name") == name)
    start = h.data_offset + t["data"]["offset"]
    out = bytearray(data)
    out[start + 5] ^= 0xFF
    return bytes(out), start, start + t["data"]["length"]


def test_digests_are_recorded_in_the_manifest():
    m, w, b = _model()
    data = write_bytes(m, digests=True)
    _, man = _manifest(data)
    inits = {t["name"]: t for t in man["graph"]["initializers"]}
    assert inits["w"]["data"]["digest"] == _expected(w, T.FLOAT)
    assert inits["b"]["data"]["digest"] == _expected(b, T.FLOAT)
    assert "data" not in inits["s"]  # a STRING tensor's elements are in the manifest itself
    assert man["digests"] == {"version": 1, "model": digest(m).hex}
    # the preservation extension stays the last key of the top-level object
    assert list(man)[-1] in ("digests", "onnx")
    # without the option nothing is recorded, and the data region is the same
    plain = write_bytes(m)
    h0, man0 = _manifest(plain)
    assert "digests" not in man0 and "digest" not in json.dumps(man0)
    h, _ = _manifest(data)
    assert data[h.data_offset:] == plain[h0.data_offset:]
    # a plain v1 reader ignores unknown keys (format section 1.2): without the two keys the
    # manifest is the plain file's, so such a reader sees the same model and the same bytes
    del man["digests"]
    for t in man["graph"]["initializers"]:
        t.get("data", {}).pop("digest", None)
    assert man == man0


def test_a_plain_reading_of_the_file_is_the_same_model():
    m, _, _ = _model()
    with_d, without = read_bytes(write_bytes(m, digests=True)), read_bytes(write_bytes(m))
    assert onemodel.compare_models(with_d, without) == []
    assert digest(with_d) == digest(m) == digest(without)


def test_a_mapped_file_checks_a_tensor_lazily_once(tmp_path, monkeypatch):
    m, w, b = _model()
    bad, start, end = _flip(write_bytes(m, digests=True), "w")
    p = tmp_path / "m.onemodel"
    p.write_bytes(bad)
    calls = []
    real = CheckedBlob._verify_digest

    def counting(self, h):
        calls.append(self.offset)
        return real(self, h)

    monkeypatch.setattr(CheckedBlob, "_verify_digest", counting)
    with onemodel.load(str(p)) as got:  # nothing is hashed on load
        assert calls == []
        by = {t.name: t for t in got.graph.initializers}
        np.testing.assert_array_equal(by["b"].numpy(), b)
        np.testing.assert_array_equal(by["b"].numpy(), b)
        assert len(calls) == 1  # checked on the first view only
        with pytest.raises(IoError) as e:
            by["w"].numpy()
    msg = str(e.value)
    assert "'w'" in msg and f"[{start}, {end})" in msg
    assert e.value.path == "manifest.graph.initializers[0]"
    assert e.value.offset == start


def test_a_mapped_file_over_the_map_threshold_is_checked(tmp_path):
    m, w, _ = _model()
    m.graph.initializers[0].raw_data = np.tile(w, (8, 1)).tobytes()  # 1 MiB: mapped
    m.graph.initializers[0].dims = [W_SHAPE[0] * 8, W_SHAPE[1]]
    m.graph.inputs[0].type.tensor_type.shape.dims[1].dim_value = W_SHAPE[0] * 8
    data = write_bytes(m, digests=True)
    assert len(data) >= 1 << 20
    p = tmp_path / "m.onemodel"
    p.write_bytes(_flip(data, "w")[0])
    with onemodel.load(str(p)) as got, pytest.raises(IoError, match="'w'"):
        got.graph.initializers[0].raw_view()
    p.write_bytes(data)
    with onemodel.load(str(p)) as got:
        assert got.graph.initializers[0].raw_view() == np.tile(w, (8, 1)).tobytes()


def test_remote_other_bytes_of_the_right_length_fail_with_io_naming_the_tensor(http_server):
    m, w, b = _model()
    good = write_bytes(m, digests=True)
    _, start, end = _flip(good, "w")
    http_server.files["m.onemodel"] = good
    plain = write_bytes(m)
    http_server.files["plain.onemodel"] = plain
    # without digests the wrong bytes go unnoticed: the reader returns them
    http_server.mode, http_server.flip_at = "other_bytes", _flip(plain, "w")[1] + PAST_HEAD
    with onemodel.load(http_server.url("plain.onemodel")) as got:
        wrong = got.graph.initializers[0].numpy()
    assert wrong.shape == w.shape and not np.array_equal(wrong, w)
    # with digests: Io, naming the tensor and its range
    http_server.mode, http_server.flip_at = "other_bytes", start + PAST_HEAD
    with onemodel.load(http_server.url("m.onemodel")) as got:
        np.testing.assert_array_equal(got.graph.initializers[1].numpy(), b)
        with pytest.raises(IoError) as e:
            got.graph.initializers[0].numpy()
    assert "'w'" in str(e.value) and f"[{start}, {end})" in str(e.value)
    assert http_server.mode == "normal"  # the server changed exactly one answer
    # the same file served honestly reads correctly
    with onemodel.load(http_server.url("m.onemodel")) as got:
        np.testing.assert_array_equal(got.graph.initializers[0].numpy(), w)


def test_remote_prefetch_and_convert_check_every_fetched_range(http_server, tmp_path):
    from onemodel.storage import prefetch

    m, w, _ = _model()
    good = write_bytes(m, digests=True)
    _, start, _ = _flip(good, "w")
    http_server.files["m.onemodel"] = good
    http_server.mode, http_server.flip_at = "other_bytes", start + PAST_HEAD
    with onemodel.load(http_server.url("m.onemodel")) as got:
        prefetch([t.raw_data for t in got.graph.initializers])
        with pytest.raises(IoError, match="'w'"):
            got.graph.initializers[0].raw_view()
    http_server.mode, http_server.flip_at = "other_bytes", start + PAST_HEAD
    out = tmp_path / "copy.onnx"
    with pytest.raises(IoError, match="'w'"):
        onemodel.convert(http_server.url("m.onemodel"), str(out))
    assert not out.exists()  # nothing is committed


def test_cli_convert_digests(tmp_path):
    from typer.testing import CliRunner

    from onemodel.cli import app

    m, w, _ = _model()
    src = tmp_path / "m.onnx"
    onemodel.save(m, str(src))
    dst = tmp_path / "m.onemodel"
    r = CliRunner().invoke(app, ["convert", str(src), str(dst), "--digests", "--quiet"])
    assert r.exit_code == 0, r.output
    _, man = _manifest(dst.read_bytes())
    assert man["digests"]["model"] == digest(str(src)).hex
    assert man["graph"]["initializers"][0]["data"]["digest"] == _expected(w, T.FLOAT)
    r = CliRunner().invoke(app, ["convert", str(src), str(tmp_path / "x.onnx"), "--digests"])
    assert r.exit_code == 2 and "--digests" in r.output


def test_digests_with_strict_v1_are_refused():
    m, _, _ = _model()
    with pytest.raises(UnsupportedError, match="strict_v1"):
        write_bytes(m, digests=True, strict_v1=True)


@pytest.mark.parametrize("value", ["sha256:" + "0" * 63, "md5:" + "0" * 64, 7,
                                   "sha256:" + "A" * 64])
def test_a_bad_recorded_digest_is_malformed_with_its_path(value):
    m, _, _ = _model()
    data = write_bytes(m, digests=True)
    h, man = _manifest(data)
    old = man["graph"]["initializers"][1]["data"]["digest"]
    text = data[HEADER_SIZE:HEADER_SIZE + h.manifest_length]
    new = text.replace(json.dumps(old).encode(), json.dumps(value).encode().ljust(
        len(json.dumps(old)), b" "))
    assert len(new) == len(text)
    with pytest.raises(MalformedError) as e:
        read_bytes(data[:HEADER_SIZE] + new + data[HEADER_SIZE + len(text):])
    assert e.value.path == "manifest.graph.initializers[1].data.digest"


def test_verify_compares_recorded_digests_first(tmp_path):
    from typer.testing import CliRunner

    from onemodel.cli import app
    from onemodel.verify import verify

    m, w, _ = _model()
    a, b, plain = tmp_path / "a.onemodel", tmp_path / "b.onemodel", tmp_path / "p.onemodel"
    a.write_bytes(write_bytes(m, digests=True))
    plain.write_bytes(write_bytes(m))
    a2 = tmp_path / "a2.onemodel"
    a2.write_bytes(a.read_bytes())
    # equal recorded digests: each side's bytes checked against its digest, not compared
    r = verify(str(a), str(a2))
    assert r.equal and r.tensors_by_digest == 2  # w and b; the STRING tensor by its elements
    out = CliRunner().invoke(app, ["verify", str(a), str(a2)])
    assert out.exit_code == 0 and "(2 tensors by their recorded digests)" in out.output
    # a bad byte in w of a copy whose manifest still records w's digest: equal records say
    # nothing of the bytes, the check of b's bytes is an Io error naming w (exit 2)
    b.write_bytes(_flip(a.read_bytes(), "w")[0])
    with pytest.raises(IoError, match="'w'"):
        verify(str(a), str(b))
    out = CliRunner().invoke(app, ["verify", str(a), str(b)])
    assert out.exit_code == 2 and "'w'" in out.output
    # one side without digests: bytes compared (and w's bad byte found by the check)
    r = verify(str(a), str(plain))
    assert r.equal and r.tensors_by_digest == 0
    with pytest.raises(IoError, match="'w'"):
        verify(str(b), str(plain))
    # different weights, both with digests: the digests differ, the bytes name the element
    m.graph.initializers[0].raw_data = (w + np.float32(1)).tobytes()
    c = tmp_path / "c.onemodel"
    c.write_bytes(write_bytes(m, digests=True))
    r = verify(str(a), str(c))
    assert not r.equal and r.tensors_by_digest == 1
    assert r.first.path == "graph.initializers[0].contents"
    assert "first at byte 0 (element 0)" in r.first.message


def test_a_conversion_never_copies_bytes_that_break_their_recorded_digest(tmp_path):
    m, _, _ = _model()
    good = write_bytes(m, digests=True)
    bad = tmp_path / "bad.onemodel"
    bad.write_bytes(_flip(good, "w")[0])
    for out in ("bad.onnx", "bad2.onemodel", "bad.onemodel.zst"):
        with pytest.raises(IoError, match="'w'"):
            onemodel.convert(str(bad), str(tmp_path / out))
        assert not (tmp_path / out).exists()  # nothing written
    ok = tmp_path / "good.onemodel"
    ok.write_bytes(good)
    onemodel.convert(str(ok), str(tmp_path / "good.onnx"))
    assert digest(str(tmp_path / "good.onnx")) == digest(str(ok))


def test_check_full_reports_a_digest_mismatch_and_plain_check_hashes_nothing(tmp_path,
                                                                             monkeypatch):
    from onemodel.validation import check

    m, w, _ = _model()
    good = write_bytes(m, digests=True)
    bad, start, end = _flip(good, "w")
    p, q = tmp_path / "bad.onemodel", tmp_path / "good.onemodel"
    p.write_bytes(bad)
    q.write_bytes(good)
    assert [f.code for f in check(str(q), full=True).findings] == []
    r = check(str(p), full=True)
    (f,) = [f for f in r.findings if f.code == "OM207"]
    assert f.severity == "error" and not r.ok
    assert f.path == "manifest.graph.initializers[0]" and f.offset == start
    assert "'w'" in f.message and f"[{start}, {end})" in f.message
    # without --full nothing is hashed: no finding, no hash of any tensor
    import hashlib

    calls = []
    real = hashlib.sha256
    monkeypatch.setattr(hashlib, "sha256", lambda *a: calls.append(1) or real(*a))
    assert [f.code for f in check(str(p)).findings if f.code == "OM207"] == []
    assert calls == []


def test_check_full_compares_the_recorded_model_digest(tmp_path):
    from onemodel.validation import check

    m, _, _ = _model()
    data = write_bytes(m, digests=True)
    h, man = _manifest(data)
    text = data[HEADER_SIZE:HEADER_SIZE + h.manifest_length]
    other = "sha256:" + "0" * 64
    new = text.replace(man["digests"]["model"].encode(), other.encode())
    p = tmp_path / "m.onemodel"
    p.write_bytes(data[:HEADER_SIZE] + new + data[HEADER_SIZE + len(text):])
    (f,) = [f for f in check(str(p), full=True).findings if f.code == "OM207"]
    assert f.path == "manifest.digests.model"
    assert digest(m).hex in f.message and other in f.message


def test_hash_of_a_file_with_digests_confirms_them_without_hashing_twice(tmp_path, monkeypatch):
    import hashlib

    m, w, _ = _model()
    good = write_bytes(m, digests=True)
    p = tmp_path / "m.onemodel"
    p.write_bytes(good)
    sizes = []
    real = hashlib.sha256

    class Counting:
        def __init__(self, data=b""):
            self.h = real(data)

        def update(self, data):
            sizes.append(len(memoryview(data).cast("B")))
            self.h.update(data)

        def digest(self):
            return self.h.digest()

        def hexdigest(self):
            return self.h.hexdigest()

    want = digest(m)
    monkeypatch.setattr(hashlib, "sha256", Counting)
    assert digest(str(p)) == want
    # w's bytes went through one hash (the tensor digest), not a second one for the check
    assert sizes.count(w.nbytes) == 1
    monkeypatch.setattr(hashlib, "sha256", real)
    p.write_bytes(_flip(good, "w")[0])
    with pytest.raises(IoError, match="'w'.*recorded digest"):
        digest(str(p))


def test_check_full_of_a_remote_file_reports_the_range_a_server_changed(http_server):
    from onemodel.validation import check

    m, _, _ = _model()
    good = write_bytes(m, digests=True)
    _, start, end = _flip(good, "w")
    http_server.files["m.onemodel"] = good
    assert check(http_server.url("m.onemodel"), full=True).findings == []
    http_server.mode, http_server.flip_at = "other_bytes", start + PAST_HEAD
    (f,) = [f for f in check(http_server.url("m.onemodel"), full=True).findings
            if f.code == "OM207"]
    assert f.path == "manifest.graph.initializers[0]" and f"[{start}, {end})" in f.message


def test_converting_with_digests_confirms_the_recorded_ones(tmp_path):
    m, _, _ = _model()
    good = write_bytes(m, digests=True)
    src, out = tmp_path / "bad.onemodel", tmp_path / "out.onemodel"
    src.write_bytes(_flip(good, "w")[0])
    with pytest.raises(IoError, match="'w'"):
        onemodel.convert(str(src), str(out), digests=True)
    assert not out.exists()
    src.write_bytes(good)
    onemodel.convert(str(src), str(out), digests=True)
    assert out.read_bytes() == good  # the same model, the same digests, the same file
    onemodel.convert(str(src), str(out))
    assert "digest" not in _manifest(out.read_bytes())[1]["graph"]["initializers"][0]["data"]
