"""Issue 27, Show: every testdata model signed once, its bundle accepted by the stock
model-signing verifier for the files as signed, and verified by onemodel against six layouts of
the same model (the file as signed, OneModel, one external data file, a data file per tensor,
safetensors, .onnx.zst). Tampering is tests/signing/test_tamper.py's."""

from __future__ import annotations

import shutil

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from tests.signing.helpers import MODELS, _key_pair, _stock_verify, cli

NAMES = sorted(p.stem for p in MODELS.glob("*.onnx")) + ["external/mlp_dynamo"]

#: layout -> (file name, the convert options that make it from the model as signed)
LAYOUTS = {
    "onemodel": ("m.onemodel", []),
    "one data file": ("m.onnx", ["--external-data", "m.onnx.data", "--threshold", "0"]),
    "per tensor": ("m.onnx", ["--external-data-per-tensor", "--threshold", "0"]),
    "safetensors": ("m.onnx", ["--layout", "safetensors"]),
    "zst": ("m.onnx.zst", []),
}


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    return _key_pair(tmp_path_factory.mktemp("keys"), ec.SECP256R1)


@pytest.mark.parametrize("name", NAMES)
def test_a_signed_model_verifies_in_six_layouts(name, keys, tmp_path):
    private, public = keys
    src = MODELS / f"{name}.onnx"
    signed = tmp_path / "signed"
    signed.mkdir()
    for f in src.parent.glob(src.name + "*"):  # the model and its data file
        shutil.copyfile(f, signed / f.name)
    model = signed / src.name
    r = cli("sign", model, "--key", private, "-o", tmp_path / "m.sig")
    assert r.exit_code == 0, r.output
    sig = tmp_path / "m.sig"
    # a model with a data file is signed as its directory, a single file as itself
    _stock_verify(signed if any(signed.glob("*.data")) else model, sig, public)
    r = cli("verify-signature", model, "--signature", sig, "--key", public)
    assert r.exit_code == 0 and "files byte-exact" in r.output, r.output
    for layout, (file, options) in LAYOUTS.items():
        d = tmp_path / layout.replace(" ", "_")
        d.mkdir()
        r = cli("convert", model, d / file, *options)
        assert r.exit_code == 0, (layout, r.output)
        r = cli("verify-signature", d / file, "--signature", sig, "--key", public)
        assert r.exit_code == 0 and "same content, another layout" in r.output, \
            (layout, r.output)


@pytest.mark.parametrize("name", ["cnn_dynamo", "external/mlp_dynamo"])
def test_the_stock_command_line_accepts_the_bundle(name, keys, tmp_path):
    # the console script `model_signing verify key`, as a user runs it (not its Python API)
    import subprocess
    import sys
    from pathlib import Path

    private, public = keys
    src = MODELS / f"{name}.onnx"
    d = tmp_path / "m"
    d.mkdir()
    for f in src.parent.glob(src.name + "*"):
        shutil.copyfile(f, d / f.name)
    assert cli("sign", d / src.name, "--key", private, "-o", tmp_path / "m.sig").exit_code == 0
    tool = Path(sys.executable).with_name("model_signing")
    target = d if any(d.glob("*.data")) else d / src.name
    r = subprocess.run([str(tool), "verify", "key", str(target), "--signature",
                        str(tmp_path / "m.sig"), "--public_key", str(public)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    data = bytearray((d / src.name).read_bytes())
    data[-1] ^= 1  # one bit of the model file flipped
    (d / src.name).write_bytes(bytes(data))
    r = subprocess.run([str(tool), "verify", "key", str(target), "--signature",
                        str(tmp_path / "m.sig"), "--public_key", str(public)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
