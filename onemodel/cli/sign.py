"""``onemodel sign``: sign a model once with an OpenSSF model-signing bundle (onemodel.signing;
docs/signing.md)."""

from __future__ import annotations

from typing import List, Optional

import typer

from .application import (
    DebugOpt,
    OutsideOpt,
    StorageOpt,
    _errors,
    _read_options,
    _storage,
    app,
    out,
)
from .redact import shown


def _prompt() -> str | None:
    """The passphrase of an encrypted key, asked on the terminal (None without one)."""
    import getpass
    import sys

    if not sys.stdin.isatty():
        return None
    return getpass.getpass("passphrase of the private key: ")


@app.command("sign")
def sign_cmd(
    model: str = typer.Argument(..., metavar="MODEL", help="A local model file."),
    key: str = typer.Option(..., "--key", metavar="PRIVATE.pem",
                            help="EC P-256/P-384 private key (PEM); an encrypted key's "
                            "passphrase comes from ONEMODEL_SIGNING_PASSPHRASE or a prompt."),
    output: Optional[str] = typer.Option(None, "-o", "--output", metavar="MODEL.sig",
                                         help="The bundle to write (default MODEL.sig)."),
    allow_outside: bool = OutsideOpt,
    debug: bool = DebugOpt,
):
    """Sign MODEL (its file and external data files) into an OpenSSF model-signing bundle that
    the stock `model_signing verify key` accepts, with the model's content digest added."""
    from ..signing import sign

    with _errors(debug):
        written = sign(model, key, output, prompt=_prompt, **_read_options(allow_outside))
        out.line(f"signed {model} -> {written}")


@app.command("verify-signature")
def verify_signature_cmd(
    model: str = typer.Argument(..., metavar="MODEL", help="Model file or URL, any layout."),
    signature: str = typer.Option(..., "--signature", metavar="MODEL.sig",
                                  help="The model-signing bundle."),
    key: str = typer.Option(..., "--key", metavar="PUBLIC.pem",
                            help="EC P-256/P-384 public key (PEM)."),
    allow_outside: bool = OutsideOpt,
    storage_option: Optional[List[str]] = StorageOpt,
    debug: bool = DebugOpt,
):
    """Check MODEL against a model-signing bundle: the signature, then the files byte-exact as
    signed, or for another layout (inline, external data, OneModel, .zst, URL) the content
    digest and each tensor's. Exit 0 valid, 1 signature invalid or model differs, 2 malformed."""
    from ..signing import verify_signature

    with _errors(debug):
        options = _storage(storage_option, model)
        r = verify_signature(model, signature, key, storage_options=options,
                             **_read_options(allow_outside))
        if r.valid:
            how = "files byte-exact" if r.how == "files" else "same content, another layout"
            out.line(f"valid: {shown(model)} is the model signed ({how})")
            return
        for p in r.problems:
            out.line(f"invalid: {p}")
        raise typer.Exit(1)
