"""Signing with a certificate (``onemodel sign --key --certificate --certificate-chain``) and
verifying with a certificate chain (issue 27): the stock ``model_signing verify certificate``
accepts the bundle, onemodel verifies it in another layout, and a chain to another root, a
certificate of another key and a key in place of the chain are refused. A generated PKI:
root CA -> intermediate CA -> leaf (digitalSignature), all EC P-256."""

from __future__ import annotations

import datetime
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

import onemodel
from tests.signing.helpers import MODELS, _key_pair, cli


def _cert(subject, key, issuer, issuer_key, *, ca: bool, path: Path,
          signs: bool = True) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=not ca and signs, content_commitment=False,
                key_encipherment=not signs,
                data_encipherment=False, key_agreement=False, key_cert_sign=ca, crl_sign=ca,
                encipher_only=False, decipher_only=False), critical=True)
            .sign(issuer_key, hashes.SHA256()))
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert


def _pki(d: Path, name: str):
    """``(leaf private key path, leaf certificate, intermediate certificate, root
    certificate)`` of a fresh PKI named ``name`` under ``d``."""
    root_key, mid_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(
        ec.SECP256R1())
    _cert(f"{name} root", root_key, f"{name} root", root_key, ca=True, path=d / f"{name}-root.pem")
    _cert(f"{name} mid", mid_key, f"{name} root", root_key, ca=True, path=d / f"{name}-mid.pem")
    private, _ = _key_pair(d, stem=f"{name}-leaf")
    leaf_key = serialization.load_pem_private_key(private.read_bytes(), None)
    _cert(f"{name} signer", leaf_key, f"{name} mid", mid_key, ca=False,
          path=d / f"{name}-leaf.pem")
    return private, d / f"{name}-leaf.pem", d / f"{name}-mid.pem", d / f"{name}-root.pem"


@pytest.fixture
def signed(tmp_path):
    model = tmp_path / "m" / "cnn.onnx"
    model.parent.mkdir()
    shutil.copyfile(MODELS / "cnn_dynamo.onnx", model)
    private, leaf, mid, root = _pki(tmp_path, "good")
    r = cli("sign", model, "--key", private, "--certificate", leaf, "--certificate-chain", mid,
            "--certificate-chain", root, "-o", tmp_path / "cnn.sig")
    assert r.exit_code == 0, r.output
    return model, tmp_path / "cnn.sig", (private, leaf, mid, root)


def test_the_stock_command_line_accepts_a_certificate_bundle(signed):
    model, sig, (_, _, mid, root) = signed
    tool = Path(sys.executable).with_name("model_signing")
    cmd = [str(tool), "verify", "certificate", str(model), "--signature", str(sig),
           "--certificate_chain", str(root), "--certificate_chain", str(mid)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    data = bytearray(model.read_bytes())
    data[-1] ^= 1
    model.write_bytes(bytes(data))
    assert subprocess.run(cmd, capture_output=True, text=True, timeout=120).returncode != 0


def test_a_certificate_bundle_verifies_in_another_layout_and_names_a_change(signed, tmp_path):
    model, sig, (_, _, mid, root) = signed
    chain = ["--certificate-chain", root, "--certificate-chain", mid]
    r = cli("verify-signature", model, "--signature", sig, *chain)
    assert r.exit_code == 0 and "files byte-exact" in r.output, r.output
    other = tmp_path / "cnn.onemodel"
    onemodel.save(onemodel.load(str(model)), str(other))
    r = cli("verify-signature", other, "--signature", sig, *chain)
    assert r.exit_code == 0 and "another layout" in r.output, r.output
    m = onemodel.load(str(model))
    t = m.graph.initializers[0]
    values = bytearray(bytes(t.raw_data))
    values[0] ^= 0x01
    t.raw_data = bytes(values)
    onemodel.save(m, str(tmp_path / "tampered.onemodel"))
    r = cli("verify-signature", tmp_path / "tampered.onemodel", "--signature", sig, *chain)
    assert r.exit_code == 1 and t.name in r.output, r.output


def test_a_chain_to_another_root_or_a_key_is_refused(signed, tmp_path):
    model, sig, (private, _, _, _) = signed
    _, _, other_mid, other_root = _pki(tmp_path, "other")
    r = cli("verify-signature", model, "--signature", sig, "--certificate-chain", other_root,
            "--certificate-chain", other_mid)
    assert r.exit_code == 1 and "signature is not valid" in r.output, r.output
    assert "does not chain to the certificates given" in r.output, r.output
    public = tmp_path / "good-leaf.public.pem"
    r = cli("verify-signature", model, "--signature", sig, "--key", public)
    assert r.exit_code == 1 and "signed with a certificate" in r.output, r.output
    r = cli("verify-signature", model, "--signature", sig)
    assert r.exit_code == 2 and "one of a public key" in r.output, r.output


def test_a_certificate_of_another_key_and_a_chain_without_certificate_are_refused(tmp_path):
    model = tmp_path / "cnn.onnx"
    shutil.copyfile(MODELS / "cnn_dynamo.onnx", model)
    private, leaf, mid, root = _pki(tmp_path, "good")
    other, _ = _key_pair(tmp_path, stem="stranger")
    r = cli("sign", model, "--key", other, "--certificate", leaf, "--certificate-chain", root)
    assert r.exit_code == 2 and "not the private key's" in r.output, r.output
    r = cli("sign", model, "--key", private, "--certificate-chain", root)
    assert r.exit_code == 2 and "signing certificate" in r.output, r.output
    r = cli("sign", model, "--key", private, "--certificate", model)  # not a PEM certificate
    assert r.exit_code == 2 and "not a PEM certificate" in r.output, r.output
    assert not (tmp_path / "cnn.onnx.sig").exists()


def test_a_certificate_that_may_not_sign_is_refused_when_signing(tmp_path):
    # keyUsage keyEncipherment only: model-signing's verifier refuses such a bundle ("cannot be
    # used for signing"), so sign refuses to make it
    model = tmp_path / "cnn.onnx"
    shutil.copyfile(MODELS / "cnn_dynamo.onnx", model)
    private, _, mid, root = _pki(tmp_path, "good")
    mid_key = ec.generate_private_key(ec.SECP256R1())
    leaf_key = serialization.load_pem_private_key(private.read_bytes(), None)
    _cert("no signer", leaf_key, "good mid", mid_key, ca=False, signs=False,
          path=tmp_path / "enc.pem")
    r = cli("sign", model, "--key", private, "--certificate", tmp_path / "enc.pem",
            "--certificate-chain", mid, "--certificate-chain", root)
    assert r.exit_code == 2 and "may not sign" in r.output, r.output
    assert not (tmp_path / "cnn.onnx.sig").exists()
