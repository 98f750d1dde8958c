"""The sign extra (model-signing + pyOpenSSL, pyproject.toml) is installed by `make test` (the dev
extra lists it) and works there: the stock library imports (model-signing 1.1 imports pyOpenSSL
through sigstore without declaring it) and signs and verifies a testdata model with an EC P-256 key
made in the test. This is the baseline onemodel's `sign` builds on (issue 27)."""

from __future__ import annotations

import json
import pathlib
import shutil

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

MODEL = pathlib.Path(__file__).resolve().parents[2] / "testdata" / "models" / "cnn_legacy.onnx"


def _write_key_pair(directory: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    private = directory / "private.pem"
    public = directory / "public.pem"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


def test_model_signing_imports_with_the_sign_extra():
    import model_signing  # noqa: F401 (the import itself is what is tested)
    import OpenSSL  # noqa: F401
    from model_signing import signing, verifying

    assert callable(signing.Config().use_elliptic_key_signer)
    assert callable(verifying.Config().use_elliptic_key_verifier)


def test_stock_library_signs_and_verifies_a_testdata_model(tmp_path):
    from model_signing import hashing, signing, verifying

    model = tmp_path / "model.onnx"
    shutil.copyfile(MODEL, model)
    private, public = _write_key_pair(tmp_path)
    signature = tmp_path / "model.onnx.sig"
    signing.Config().use_elliptic_key_signer(private_key=private).sign(model, signature)

    bundle = json.loads(signature.read_text())
    assert bundle["mediaType"].startswith("application/vnd.dev.sigstore.bundle")
    assert bundle["dsseEnvelope"]["payloadType"] == "application/vnd.in-toto+json"

    verifier = verifying.Config().use_elliptic_key_verifier(public_key=public)
    verifier.set_hashing_config(hashing.Config().use_file_serialization())
    verifier.verify(model, signature)

    data = bytearray(model.read_bytes())
    data[-1] ^= 1
    model.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="Signature mismatch"):
        verifier.verify(model, signature)


@pytest.mark.parametrize("missing", ["model_signing", "cryptography", "OpenSSL"])
def test_without_the_sign_extra_the_commands_say_what_to_install(tmp_path, missing):
    # a clean install without the extra: the import of the missing package fails (a None entry
    # in sys.modules makes `import` raise ImportError). sign exits 2 with one line naming the
    # extra, never an internal error; verify-signature of a key bundle needs cryptography
    # alone (onemodel.signing.envelope), so it runs without model-signing and pyOpenSSL
    import subprocess
    import sys

    from onemodel.signing import sign

    private, public = _write_key_pair(tmp_path)
    bundle = sign(str(MODEL), str(private), str(tmp_path / "made.sig"))
    code = (f"import sys; sys.modules[{missing!r}] = None\n"
            "from onemodel.entry import main; main()")

    def cli(*args):
        return subprocess.run([sys.executable, "-c", code, *map(str, args)],
                              capture_output=True, text=True, timeout=120)

    r = cli("sign", MODEL, "--key", private, "-o", tmp_path / "m.sig")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "onemodel-onnx[sign]" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "m.sig").exists()
    r = cli("verify-signature", MODEL, "--signature", bundle, "--key", public)
    if missing == "cryptography":
        assert r.returncode == 2 and "onemodel-onnx[sign]" in r.stderr, (r.stdout, r.stderr)
    else:
        assert r.returncode == 0 and "valid" in r.stdout, (r.stdout, r.stderr)
