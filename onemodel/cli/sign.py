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
    key: Optional[str] = typer.Option(
        None, "--key", metavar="PRIVATE.pem",
        help="EC P-256/P-384 private key (PEM); an encrypted key's passphrase comes from "
        "ONEMODEL_SIGNING_PASSPHRASE or a prompt."),
    certificate: Optional[str] = typer.Option(
        None, "--certificate", metavar="CERT.pem",
        help="The signing certificate of --key (PEM): the bundle carries it and the chain."),
    certificate_chain: Optional[List[str]] = typer.Option(
        None, "--certificate-chain", metavar="CHAIN.pem",
        help="PEM intermediate and root certificates of --certificate (repeat)."),
    sigstore: bool = typer.Option(
        False, "--sigstore", help="Sign keyless with Sigstore (needs a network): the identity "
        "token from SIGSTORE_ID_TOKEN, ambient credentials, or a browser sign-in."),
    staging: bool = typer.Option(False, "--sigstore-staging",
                                 help="Use Sigstore's staging instance."),
    output: Optional[str] = typer.Option(None, "-o", "--output", metavar="MODEL.sig",
                                         help="The bundle to write (default MODEL.sig)."),
    allow_outside: bool = OutsideOpt,
    debug: bool = DebugOpt,
):
    """Sign MODEL (its file and external data files) into an OpenSSF model-signing bundle that
    the stock `model_signing verify` accepts, with the model's content digest added: with a
    key (--key), a certificate (--key --certificate --certificate-chain) or Sigstore."""
    from ..signing import sign

    with _errors(debug):
        written = sign(model, key, output, certificate=certificate,
                       certificate_chain=certificate_chain, sigstore=sigstore, staging=staging,
                       prompt=_prompt, **_read_options(allow_outside))
        out.line(f"signed {model} -> {written}")


@app.command("verify-signature")
def verify_signature_cmd(
    model: str = typer.Argument(..., metavar="MODEL", help="Model file or URL, any layout."),
    signature: str = typer.Option(..., "--signature", metavar="MODEL.sig",
                                  help="The model-signing bundle."),
    key: Optional[str] = typer.Option(None, "--key", metavar="PUBLIC.pem",
                                      help="EC P-256/P-384 public key (PEM)."),
    certificate_chain: Optional[List[str]] = typer.Option(
        None, "--certificate-chain", metavar="CHAIN.pem",
        help="PEM certificates the bundle's signing certificate must chain to (repeat)."),
    identity: Optional[str] = typer.Option(
        None, "--identity", metavar="WHO", help="The Sigstore identity that signed (keyless)."),
    identity_provider: Optional[str] = typer.Option(
        None, "--identity-provider", metavar="URL",
        help="The OpenID Connect issuer of --identity."),
    staging: bool = typer.Option(False, "--sigstore-staging",
                                 help="Use Sigstore's staging instance."),
    tensors: Optional[List[str]] = typer.Option(
        None, "--tensors", metavar="NAME",
        help="Check the structure and only these signed tensors (repeat, or NAME,NAME): "
        "only their bytes are read."),
    sample: Optional[float] = typer.Option(
        None, "--sample", metavar="FRACTION",
        help="Check the structure and ceil(FRACTION x N) of the N signed tensors, chosen by "
        "--seed and the signed model digest: only their bytes are read."),
    seed: int = typer.Option(0, "--seed", help="Seed of the --sample choice (the same "
                             "tensors for the same seed and signature)."),
    allow_outside: bool = OutsideOpt,
    storage_option: Optional[List[str]] = StorageOpt,
    debug: bool = DebugOpt,
):
    """Check MODEL against a model-signing bundle (signed with --key, a certificate chaining to
    --certificate-chain, or the Sigstore --identity): the signature, then the files byte-exact as
    signed, or for another layout (inline, external data, OneModel, .zst, URL) the content
    digest and each tensor's; with --tensors or --sample, the structure and only some tensors.
    Exit 0 valid, 1 signature invalid or model differs (what differs named), 2 malformed."""
    from ..signing import verify_signature

    names = [n for t in tensors for n in t.split(",") if n] if tensors else None
    with _errors(debug):
        options = _storage(storage_option, model)
        r = verify_signature(model, signature, key, certificate_chain=certificate_chain,
                             identity=identity, oidc_issuer=identity_provider, staging=staging,
                             tensors=names, sample=sample, seed=seed,
                             storage_options=options, **_read_options(allow_outside))
        if r.valid:
            how = {"files": "files byte-exact", "content": "same content, another layout",
                   "partial": f"structure and {len(r.checked)} tensors checked, the others "
                   "not read"}[r.how]
            out.line(f"valid: {shown(model)} is the model signed ({how})")
            return
        for p in r.problems:
            out.line(f"invalid: {p}")
        raise typer.Exit(1)
