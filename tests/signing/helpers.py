"""What the signing tests share: the command line, a generated EC key pair, the stock
model-signing verifier."""

from __future__ import annotations

import pathlib

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from typer.testing import CliRunner

from onemodel.cli import app

MODELS = pathlib.Path(__file__).resolve().parents[2] / "testdata" / "models"
runner = CliRunner()


def cli(*args):
    return runner.invoke(app, [str(a) for a in args])


def _key_pair(directory: pathlib.Path, curve=ec.SECP256R1, stem="k", password=None):
    key = ec.generate_private_key(curve())
    enc = (serialization.BestAvailableEncryption(password) if password
           else serialization.NoEncryption())
    private = directory / f"{stem}.private.pem"
    public = directory / f"{stem}.public.pem"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8, enc))
    public.write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


def _stock_verify(model, signature, public):
    from model_signing import hashing, verifying

    v = verifying.Config().use_elliptic_key_verifier(public_key=public)
    v.set_hashing_config(hashing.Config().use_file_serialization())
    v.verify(pathlib.Path(model), pathlib.Path(signature))
