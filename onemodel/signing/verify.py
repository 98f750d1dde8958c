"""Verifying a model against a model-signing bundle: the envelope's signature first (by the
model-signing library), then the model's files byte-exact as signed, or, for another layout of
the same model, its content digest and per-tensor digests (the ``onemodel`` predicate field)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import pathlib

from ..errors import MalformedError
from .sign import PREDICATE_FIELD

#: Predicate type of model-signing v1.0, the only one accepted.
PREDICATE_TYPE = "https://model_signing/signature/v1.0"


class SignatureResult:
    """The outcome of :func:`verify_signature`.

    Attributes:
        valid: True when the signature is valid and the model is the one signed.
        how: ``"files"`` (the files are byte-exact as signed), ``"content"`` (another layout of
            the same model: content digest equal), or ``None`` when not valid.
        problems: what is wrong, one sentence each (the signature, a tensor by name and path,
            or the structure); empty when valid.
    """

    __slots__ = ("valid", "how", "problems")

    def __init__(self, valid: bool, how: str | None, problems: list[str]):
        self.valid = valid
        self.how = how
        self.problems = problems

    def __repr__(self):
        return f"SignatureResult(valid={self.valid}, how={self.how!r}, problems={self.problems})"


def _read_bundle(signature: str):
    """The model-signing Signature of the bundle file and its decoded in-toto statement
    (unverified). Raises MalformedError for a file that is not such a bundle, IoError for a
    file that cannot be read."""
    from model_signing._signing import sign_sigstore_pb

    from .keys import read_file

    data = read_file(signature)
    try:
        # the library's reader (it adapts bundles of earlier releases); the file was readable
        sig = sign_sigstore_pb.Signature.read(pathlib.Path(signature))
        raw = json.loads(data)
        statement = json.loads(base64.b64decode(raw["dsseEnvelope"]["payload"]))
    except Exception as e:  # json, base64, pydantic validation: all one kind, malformed
        raise MalformedError(f"not a model-signing bundle ({type(e).__name__}: "
                             f"{str(e).splitlines()[0][:200] if str(e) else ''})",
                             path=signature) from None
    if not isinstance(statement, dict) or statement.get("predicateType") != PREDICATE_TYPE:
        got = statement.get("predicateType") if isinstance(statement, dict) else None
        raise MalformedError(f"the bundle's predicate type is {got!r}, not {PREDICATE_TYPE}",
                             path=signature)
    return sig, statement


def verify_signature(model: str, signature: str, key: str, *,
                     storage_options: dict | None = None, **load_options) -> SignatureResult:
    """Verify ``model`` (a path or URL, any layout) against the bundle ``signature`` with the EC
    PEM public key ``key``. The envelope's signature is checked first (invalid: ``valid`` False,
    nothing else read); then, for a local model, its files against the signed file digests; if
    they differ, the model's content digest against the ``onemodel`` predicate field, naming
    each tensor whose digest differs, or the structure when only the rest differs.

    Raises MalformedError for a bundle that is not a v1.0 model-signing bundle or a key that is
    not a PEM public key, UnsupportedError for a key of another curve, and the errors of
    :func:`onemodel.load` reading the model."""
    from model_signing._signing import sign_ec_key

    from .keys import load_public_key

    load_public_key(key)
    sig, statement = _read_bundle(signature)
    try:
        sign_ec_key.Verifier(pathlib.Path(key)).verify(sig)
    except Exception as e:  # InvalidSignature, the key-hint mismatch, an inconsistent manifest
        why = type(e).__name__ + (f": {e}" if str(e) else "")
        return SignatureResult(False, None, [f"the signature is not valid for this key ({why})"])
    predicate = statement.get("predicate") or {}
    if _files_match(model, statement):
        return SignatureResult(True, "files", [])
    content = predicate.get(PREDICATE_FIELD)
    if not isinstance(content, dict):
        return SignatureResult(False, None, ["the files differ from those signed, and the bundle "
                                             "has no onemodel content digest to compare"])
    return _compare_content(model, content, storage_options, load_options)


def _files_match(model: str, statement: dict) -> bool:
    """True when ``model`` is a local file and every resource of the statement, relative to the
    model (a single file) or its directory, has the signed SHA-256."""
    if "://" in model or not os.path.isfile(model):
        return False
    resources = statement["predicate"].get("resources") or []
    subject = (statement.get("subject") or [{}])[0].get("name")
    base = pathlib.Path(model)
    if not (len(resources) == 1 and resources[0].get("name") == "."):
        base = base.parent
    elif subject != base.name:
        return False
    for r in resources:
        p = base if r.get("name") == "." else base / r.get("name", "")
        if r.get("algorithm") != "sha256" or not p.is_file():
            return False
        h = hashlib.sha256()
        with open(p, "rb") as f:
            while chunk := f.read(8 << 20):
                h.update(chunk)
        if h.hexdigest() != r.get("digest"):
            return False
    return True


def _compare_content(model, content, storage_options, load_options) -> SignatureResult:
    from ..content_digest import digest

    try:
        signed_model = content["model"]["digest"]["value"]
        signed_tensors = {t["path"]: (t["name"], t["digest"]["value"])
                          for t in content["tensors"]}
    except (KeyError, TypeError) as e:
        raise MalformedError(f"the onemodel predicate field lacks {e}") from None
    r = digest(model, storage_options=storage_options, **load_options)
    if r.digest.hex() == signed_model:
        return SignatureResult(True, "content", [])
    problems = []
    actual = {p: (n, d.hex()) for p, (n, d) in r.tensors.items()}
    for p, (n, d) in signed_tensors.items():
        if p not in actual:
            problems.append(f"tensor {n or '(unnamed)'} at {p} is missing")
        elif actual[p][1] != d:
            problems.append(f"tensor {n or '(unnamed)'} at {p} differs")
    for p, (n, _) in actual.items():
        if p not in signed_tensors:
            problems.append(f"tensor {n or '(unnamed)'} at {p} was not signed")
    if not problems:
        problems.append("the structure differs (graph, nodes, attributes or metadata); "
                        "every tensor is as signed")
    return SignatureResult(False, None, problems)
