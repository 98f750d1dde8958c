"""onemodel sign / verify-signature (issue 27): the bundle is accepted by the stock model-signing
verifier, checked by onemodel against other layouts of the same model, and refused, naming what
differs, for a tampered model, another key, a truncated bundle or another predicate type."""

from __future__ import annotations

import json
import pathlib
import shutil

import numpy as np
import onnx
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from onnx import numpy_helper

import onemodel
from tests.signing.helpers import MODELS, _key_pair, _stock_verify, cli


@pytest.fixture
def signed(tmp_path):
    model = tmp_path / "cnn.onnx"
    shutil.copyfile(MODELS / "cnn_legacy.onnx", model)
    private, public = _key_pair(tmp_path, ec.SECP384R1)
    r = cli("sign", model, "--key", private)
    assert r.exit_code == 0, r.output
    return model, tmp_path / "cnn.onnx.sig", public


def test_stock_verifier_accepts_and_bundle_carries_the_content_digest(signed):
    model, sig, public = signed
    _stock_verify(model, sig, public)
    import base64

    statement = json.loads(base64.b64decode(json.loads(sig.read_text())
                                            ["dsseEnvelope"]["payload"]))
    assert statement["predicateType"] == "https://model_signing/signature/v1.0"
    assert statement["predicate"]["serialization"]["method"] == "files"
    extra = statement["predicate"]["onemodel"]
    d = onemodel.digest(str(model))
    assert extra["model"]["digest"]["value"] == d.digest.hex()
    assert [t["digest"]["value"] for t in extra["tensors"]] == [
        v.hex() for _, v in d.tensors.values()]


def test_external_data_model_signed_and_stock_verified(tmp_path, monkeypatch):
    shutil.copytree(MODELS / "external", tmp_path / "ext")
    private, public = _key_pair(tmp_path)
    monkeypatch.chdir(tmp_path)  # a relative model path, as typed on a command line
    sig = tmp_path / onemodel.signing.sign("ext/mlp_dynamo.onnx", str(private))
    model = tmp_path / "ext" / "mlp_dynamo.onnx"
    # the directory (the model and its data file), moved after signing: the bundle in it is
    # ignored by its path relative to the directory
    moved = tmp_path / "moved"
    shutil.copytree(model.parent, moved)
    _stock_verify(moved, moved / "mlp_dynamo.onnx.sig", public)
    predicate = json.loads(__import__("base64").b64decode(json.loads(
        pathlib.Path(sig).read_text())["dsseEnvelope"]["payload"]))["predicate"]
    names = [r["name"] for r in predicate["resources"]]
    assert sorted(names) == ["mlp_dynamo.onnx", "mlp_dynamo.onnx.data"]
    # the bundle's path relative to the signed directory, valid wherever it is moved
    assert "mlp_dynamo.onnx.sig" in predicate["serialization"]["ignore_paths"]
    r = cli("verify-signature", model, "--signature", sig, "--key", public)
    assert r.exit_code == 0 and "files byte-exact" in r.output


def test_other_layouts_verify_by_content(signed, tmp_path):
    model, sig, public = signed
    r = cli("verify-signature", model, "--signature", sig, "--key", public)
    assert r.exit_code == 0 and "files byte-exact" in r.output, r.output
    om = tmp_path / "cnn.onemodel"
    onemodel.convert(str(model), str(om))
    ext = tmp_path / "extd"
    ext.mkdir()
    m = onnx.load(str(model))
    onnx.save(m, str(ext / "cnn.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="cnn.onnx.data", size_threshold=0)
    for other in (om, ext / "cnn.onnx"):
        r = cli("verify-signature", other, "--signature", sig, "--key", public)
        assert r.exit_code == 0, r.output
        assert "same content, another layout" in r.output


def test_flipped_weight_bit_names_the_tensor(signed, tmp_path):
    model, sig, public = signed
    m = onnx.load(str(model))
    init = m.graph.initializer[2]
    a = numpy_helper.to_array(init).copy()
    flat = a.reshape(-1).view(np.uint32)
    flat[0] ^= 1
    init.CopyFrom(numpy_helper.from_array(a, init.name))
    bad = tmp_path / "bad.onnx"
    onnx.save(m, str(bad))
    r = cli("verify-signature", bad, "--signature", sig, "--key", public)
    assert r.exit_code == 1
    assert f"tensor {init.name} at graph.initializers[2] differs" in r.output
    assert r.output.count("invalid:") == 1


def test_changed_attribute_names_the_structure(signed, tmp_path):
    model, sig, public = signed
    m = onnx.load(str(model))
    node = next(n for n in m.graph.node if n.op_type == "Conv")
    pads = next(a for a in node.attribute if a.name == "pads")
    pads.ints[:] = [p + 1 for p in pads.ints]  # the weights stay as signed
    bad = tmp_path / "bad.onnx"
    onnx.save(m, str(bad))
    r = cli("verify-signature", bad, "--signature", sig, "--key", public)
    assert r.exit_code == 1
    assert r.output.strip() == ("invalid: structure: graph node 0 (Conv '/stem/stem.0/Conv') "
                                "attribute 3 (pads) ints: pads: [1, 1, 1, 1] vs [2, 2, 2, 2]")


def test_another_key_is_refused(signed, tmp_path):
    model, sig, _ = signed
    _, other = _key_pair(tmp_path, stem="other")
    r = cli("verify-signature", model, "--signature", sig, "--key", other)
    assert r.exit_code == 1 and "signature is not valid" in r.output


def test_truncated_bundle_is_malformed(signed, tmp_path):
    model, sig, public = signed
    cut = tmp_path / "cut.sig"
    cut.write_bytes(sig.read_bytes()[: len(sig.read_bytes()) // 2])
    r = cli("verify-signature", model, "--signature", cut, "--key", public)
    assert r.exit_code == 2
    assert "not a model-signing bundle" in r.output and len(r.output.strip().splitlines()) == 1


def test_other_predicate_type_is_refused(tmp_path):
    from model_signing import hashing
    from model_signing._signing import sign_ec_key
    from model_signing._signing import signing as ms_signing

    model = tmp_path / "cnn.onnx"
    shutil.copyfile(MODELS / "cnn_legacy.onnx", model)
    private, public = _key_pair(tmp_path)
    payload = ms_signing.Payload(hashing.Config().use_file_serialization().hash(model))
    payload.statement.pb.predicate_type = "https://example.com/other/v1"
    sig = tmp_path / "other.sig"
    sign_ec_key.Signer(private).sign(payload).write(sig)
    r = cli("verify-signature", model, "--signature", sig, "--key", public)
    assert r.exit_code == 2 and "predicate type" in r.output


def test_encrypted_key_passphrase_from_environment(tmp_path, monkeypatch):
    model = tmp_path / "cnn.onnx"
    shutil.copyfile(MODELS / "cnn_legacy.onnx", model)
    private, public = _key_pair(tmp_path, password=b"s3cret")
    monkeypatch.delenv("ONEMODEL_SIGNING_PASSPHRASE", raising=False)
    r = cli("sign", model, "--key", private)
    assert r.exit_code == 2 and "ONEMODEL_SIGNING_PASSPHRASE" in r.output
    monkeypatch.setenv("ONEMODEL_SIGNING_PASSPHRASE", "wrong")
    assert cli("sign", model, "--key", private).exit_code == 2
    monkeypatch.setenv("ONEMODEL_SIGNING_PASSPHRASE", "s3cret")
    r = cli("sign", model, "--key", private, "-o", tmp_path / "m.sig")
    assert r.exit_code == 0, r.output
    _stock_verify(model, tmp_path / "m.sig", public)


def test_zst_and_safetensors_layouts(signed, tmp_path):
    model, sig, public = signed
    zst = tmp_path / "cnn.onnx.zst"
    assert cli("convert", model, zst).exit_code == 0
    r = cli("verify-signature", zst, "--signature", sig, "--key", public)
    assert r.exit_code == 0 and "same content, another layout" in r.output, r.output
    sf = tmp_path / "sf"
    sf.mkdir()
    assert cli("convert", model, sf / "cnn.onnx", "--layout", "safetensors").exit_code == 0
    r = cli("verify-signature", sf / "cnn.onnx", "--signature", sig, "--key", public)
    assert r.exit_code == 0 and "same content, another layout" in r.output, r.output
    # the safetensors layout signed itself: its two files, accepted by the stock verifier
    private, public2 = _key_pair(tmp_path, stem="sf")
    assert cli("sign", sf / "cnn.onnx", "--key", private).exit_code == 0
    _stock_verify(sf, sf / "cnn.onnx.sig", public2)


def test_missing_key_or_bundle_is_one_line_exit_2(signed, tmp_path):
    model, sig, public = signed
    for args in (("sign", model, "--key", tmp_path / "nope.pem"),
                 ("verify-signature", model, "--signature", tmp_path / "nope.sig",
                  "--key", public),
                 ("verify-signature", model, "--signature", sig, "--key", tmp_path / "nope.pem")):
        r = cli(*args)
        assert r.exit_code == 2, r.output
        assert "cannot read the file" in r.output and "nope" in r.output
        assert len(r.output.strip().splitlines()) == 1


def test_a_url_verifies_by_content(signed, http_server, tmp_path):
    model, sig, public = signed
    om = tmp_path / "cnn.onemodel"
    onemodel.convert(str(model), str(om))
    http_server.files["cnn.onemodel"] = om.read_bytes()
    r = cli("verify-signature", http_server.url("cnn.onemodel"), "--signature", sig,
            "--key", public)
    assert r.exit_code == 0 and "same content, another layout" in r.output, r.output
    bad = bytearray(om.read_bytes())  # the last octet: in the last tensor's contents
    http_server.files["cnn.onemodel"] = bytes(bad[:-1]) + bytes([bad[-1] ^ 1])
    r = cli("verify-signature", http_server.url("cnn.onemodel"), "--signature", sig,
            "--key", public)
    assert r.exit_code == 1, r.output
    last = list(onemodel.digest(str(model)).tensors.items())[-1]
    assert r.output.strip() == f"invalid: tensor {last[1][0]} at {last[0]} differs"


def test_sign_refuses_a_url(tmp_path):
    private, _ = _key_pair(tmp_path)
    r = cli("sign", "https://example.invalid/m.onnx", "--key", private)
    assert r.exit_code == 2 and "sign takes a local model file, not a URL" in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_a_key_of_another_curve_is_refused(tmp_path):
    model = tmp_path / "cnn.onnx"
    shutil.copyfile(MODELS / "cnn_legacy.onnx", model)
    private, _ = _key_pair(tmp_path, ec.SECP521R1)
    r = cli("sign", model, "--key", private)
    assert r.exit_code == 2 and "secp521r1 is not P-256 or P-384" in r.output, r.output
    assert not (tmp_path / "cnn.onnx.sig").exists()
