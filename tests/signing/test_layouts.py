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
