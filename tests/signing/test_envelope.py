"""onemodel checks a key-signed bundle's envelope itself (onemodel.signing.envelope, without
importing model-signing): on the same bundles it must decide as model-signing 1.1's own key
verifier does (``sign_ec_key.Verifier``, the reference here: its verdict is exact by
construction, a boolean). Bundles: as signed, by another key, with the payload or the signature
changed, without the key hint, with an inconsistent statement re-signed."""

from __future__ import annotations

import base64
import json
import pathlib
import shutil

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from onemodel.errors import MalformedError
from onemodel.signing.envelope import PAYLOAD_TYPE, key_problem, pae, read_envelope
from tests.signing.helpers import MODELS, _key_pair, cli


def _stock_accepts(bundle: pathlib.Path, public: pathlib.Path) -> bool:
    from model_signing._signing import sign_ec_key, sign_sigstore_pb

    try:
        sign_ec_key.Verifier(public).verify(sign_sigstore_pb.Signature.read(bundle))
    except Exception:
        return False
    return True


def _ours_accepts(bundle: pathlib.Path, public: pathlib.Path) -> bool:
    key = serialization.load_pem_public_key(public.read_bytes())
    return key_problem(read_envelope(bundle.read_bytes(), str(bundle)), key) is None


def _edit(bundle: pathlib.Path, out: pathlib.Path, change, *, resign_with=None):
    raw = json.loads(bundle.read_text())
    env = raw["dsseEnvelope"]
    statement = json.loads(base64.b64decode(env["payload"]))
    if change(raw, statement):  # the statement changed: encoded anew
        env["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    payload = base64.b64decode(env["payload"])
    if resign_with is not None:
        key = serialization.load_pem_private_key(resign_with.read_bytes(), None)
        env["signatures"][0]["sig"] = base64.b64encode(
            key.sign(pae(PAYLOAD_TYPE, payload), ec.ECDSA(hashes.SHA384()))).decode()
    out.write_text(json.dumps(raw))
    return out


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    d = tmp_path_factory.mktemp("env")
    shutil.copyfile(MODELS / "cnn_legacy.onnx", d / "m.onnx")
    private, public = _key_pair(d, ec.SECP384R1)
    assert cli("sign", d / "m.onnx", "--key", private).exit_code == 0
    return d, d / "m.onnx.sig", private, public


def _set_digest(raw, st):
    st["predicate"]["resources"][0]["digest"] = "00" * 32
    return True


def _drop_hint(raw, st):
    raw["verificationMaterial"]["publicKey"].pop("hint")


def _flip_signature(raw, st):
    sig = bytearray(base64.b64decode(raw["dsseEnvelope"]["signatures"][0]["sig"]))
    sig[-1] ^= 1
    raw["dsseEnvelope"]["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()


CASES = {  # name: (edit, re-signed, accepted)
    "as signed": (lambda raw, st: False, False, True),
    "payload changed": (_set_digest, False, False),
    "signature changed": (_flip_signature, False, False),
    "no key hint": (_drop_hint, False, True),
    "inconsistent statement re-signed": (_set_digest, True, False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_envelope_check_decides_as_model_signing_does(bundle, case):
    d, sig, private, public = bundle
    edit, resign, accepted = CASES[case]
    edited = _edit(sig, d / "edited.sig", edit, resign_with=private if resign else None)
    assert _stock_accepts(edited, public) is accepted
    assert _ours_accepts(edited, public) is accepted


def test_another_key_is_refused_by_both(bundle, tmp_path):
    _, sig, _, _ = bundle
    _, other = _key_pair(tmp_path, ec.SECP384R1, stem="other")
    assert not _stock_accepts(sig, other) and not _ours_accepts(sig, other)


@pytest.mark.parametrize("octets, why", [
    (b"", "not JSON"), (b"[]", "no dsseEnvelope"),
    (b'{"dsseEnvelope": {"payload": "e30=", "signatures": []}}', "no signature"),
    (b'{"dsseEnvelope": {"payload": "!!", "signatures": [{"sig": ""}]}}', "not base64"),
    (b'{"dsseEnvelope": {"payload": "e30=", "signatures": [{"sig": ""}]}}', "predicate type"),
])
def test_a_malformed_bundle_is_malformed(octets, why):
    with pytest.raises(MalformedError, match=why):
        read_envelope(octets, "x.sig")


def test_verifying_a_key_bundle_does_not_import_model_signing(bundle):
    # model-signing's import (0.3-0.7 s) is what a key verification saves (docs/performance.md)
    import subprocess
    import sys

    d, sig, _, public = bundle
    code = ("import sys, onemodel\n"
            f"r = onemodel.verify_signature({str(d / 'm.onnx')!r}, {str(sig)!r}, "
            f"{str(public)!r})\n"
            "print(r.valid, r.how, 'model_signing' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.split() == ["True", "files", "False"], r.stdout + r.stderr


def test_sigstore_signing_takes_no_key_or_certificate(bundle):
    d, _, private, _ = bundle
    for extra in (["--key", private], ["--certificate", private]):
        r = cli("sign", d / "m.onnx", "--sigstore", *extra, "-o", d / "never.sig")
        assert r.exit_code == 2, r.output
    assert not (d / "never.sig").exists()
