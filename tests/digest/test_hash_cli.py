"""``onemodel hash``: the content digest of files and URLs, per tensor, as JSON, as a manifest."""

import json

import numpy as np
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from typer.testing import CliRunner

import onemodel
from onemodel.cli import app
from onemodel.content_digest import digest

runner = CliRunner()


def cli(*args):
    return runner.invoke(app, [str(a) for a in args])


def _save(tmp_path):
    w = numpy_helper.from_array(np.arange(2048, dtype=np.float32).reshape(512, 4), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", T.FLOAT, ["N", 512])],
                          [helper.make_tensor_value_info("y", T.FLOAT, ["N", 4])], [w])
    p = tmp_path / "m.onnx"
    p.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
                  .SerializeToString())
    return p


def test_hash_prints_one_digest_per_file_whatever_the_layout(tmp_path):
    p = _save(tmp_path)
    (tmp_path / "ext").mkdir()
    onemodel.convert(str(p), str(tmp_path / "ext" / "m.onnx"), layout="file", threshold=16)
    onemodel.convert(str(p), str(tmp_path / "m.onemodel.zst"))
    r = cli("hash", p, tmp_path / "ext" / "m.onnx", tmp_path / "m.onemodel.zst")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    want = digest(str(p)).hex
    assert lines == [f"{want}  {p}", f"{want}  {tmp_path / 'ext' / 'm.onnx'}",
                     f"{want}  {tmp_path / 'm.onemodel.zst'}"]


def test_hash_tensors_and_json(tmp_path):
    p = _save(tmp_path)
    d = digest(str(p))
    r = cli("hash", p, "--tensors")
    assert r.exit_code == 0, r.output
    (path, (name, h)), = d.tensor_hex().items()
    assert r.output.splitlines()[1] == f"  {h}  w  graph.initializers[0]"
    doc = json.loads(cli("hash", p, "--tensors", "--json").output)
    assert doc == {"file": str(p), "digest": d.hex, "version": 1,
                   "tensors": [{"path": "graph.initializers[0]", "name": "w", "digest": h}]}


def test_manifest_names_digests_and_no_layout(tmp_path):
    p = _save(tmp_path)
    out = tmp_path / "manifest.json"
    r = cli("hash", p, "--manifest", out)
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    d = digest(str(p))
    assert doc == {"format": "onemodel-content-manifest", "version": 1,
                   "model": {"name": "m.onnx",
                             "digest": {"algorithm": "sha256", "value": d.digest.hex()}},
                   "tensors": [{"path": "graph.initializers[0]", "name": "w",
                                "digest": {"algorithm": "sha256",
                                           "value": d.tensors["graph.initializers[0]"][1].hex()}}]}
    assert cli("hash", p, p, "--manifest", out).exit_code == 2


def test_a_url_hashes_like_the_file(http_server, tmp_path):
    p = _save(tmp_path)
    onemodel.convert(str(p), str(tmp_path / "m.onemodel"))
    http_server.files["m.onemodel"] = (tmp_path / "m.onemodel").read_bytes()
    r = cli("hash", http_server.url("m.onemodel"))
    assert r.exit_code == 0, r.output
    assert r.output.split()[0] == digest(str(p)).hex


def test_unreadable_input_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x0a\xff")
    r = cli("hash", bad)
    assert r.exit_code == 2 and "Malformed" in r.output and "Traceback" not in r.output


def test_a_url_with_storage_options_and_a_local_manifest(http_server, tmp_path):
    """The options are for the URL they were given for: hashing a remote model that needs
    them, with the manifest written to a local file, used to exit 2 ('storage options are for
    URLs') because they were checked against the manifest's path alone (issue 23, item 9)."""
    p = _save(tmp_path)
    http_server.files["m.onnx"] = p.read_bytes()
    out = tmp_path / "manifest.json"
    r = cli("hash", http_server.url("m.onnx"), "--manifest", out,
            "--storage-option", 'headers={"Authorization": "Bearer sesame"}')
    assert r.exit_code == 0, r.output
    assert r.output.split()[0] == digest(str(p)).hex
    assert "sesame" not in r.output
    assert http_server.log and all(req.headers.get("Authorization") == "Bearer sesame"
                                   for req in http_server.log)
    doc = json.loads(out.read_text())
    assert doc["model"] == {"name": "m.onnx",
                            "digest": {"algorithm": "sha256", "value": digest(str(p)).digest.hex()}}
    # every file local: the options would be ignored, so they are still refused
    r = cli("hash", p, "--manifest", out, "--storage-option", "key=k")
    assert r.exit_code == 2 and "storage options are for URLs" in r.output
