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
        valid: True when the signature is valid and the model is the one signed (partly
            checked: the structure and the tensors read are as signed).
        how: ``"files"`` (the files are byte-exact as signed), ``"content"`` (another layout of
            the same model: content digest equal), ``"partial"`` (``tensors`` or ``sample``:
            the structure and the tensors read are as signed), or ``None`` when not valid.
        problems: what is wrong, one sentence each (the signature, a tensor by name and path,
            or the structure: the node and attribute, opset import or metadata entry); empty
            when valid.
        checked: the paths of the tensors whose bytes were read and compared (every tensor
            unless ``tensors`` or ``sample`` was given; empty for ``"files"``).
    """

    __slots__ = ("valid", "how", "problems", "checked")

    def __init__(self, valid: bool, how: str | None, problems: list[str],
                 checked: list[str] | None = None):
        self.valid = valid
        self.how = how
        self.problems = problems
        self.checked = checked or []

    def __repr__(self):
        return (f"SignatureResult(valid={self.valid}, how={self.how!r}, "
                f"problems={self.problems}, checked={len(self.checked)} tensors)")


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
                     tensors: list[str] | None = None, sample: float | None = None,
                     seed: int = 0, storage_options: dict | None = None,
                     **load_options) -> SignatureResult:
    """Verify ``model`` (a path or URL, any layout) against the bundle ``signature`` with the EC
    PEM public key ``key``. The envelope's signature is checked first (invalid: ``valid`` False,
    nothing else read); then, for a local model, its files against the signed file digests; if
    they differ, the model's content digest against the ``onemodel`` predicate field, naming
    each tensor whose digest differs and each structural difference (the node and attribute,
    the opset import, the metadata entry: docs/signing.md, "What a difference is named by").

    Partial verification (``tensors`` or ``sample``; the files are then not hashed): the
    structure is checked whole (the model digest computed with the signed digests of the
    tensors not chosen) and only the chosen tensors' bytes are read (range requests for a URL).
    ``tensors``: names of signed tensors; ``sample``: a fraction in (0, 1] of the signed
    tensors, ``ceil(sample * N)`` of them (at least one), the first in the order of
    SHA-256(int64 LE ``seed`` || signed model digest || tensor path): the same tensors for the
    same seed and signed model, on any machine.

    Raises MalformedError for a bundle that is not a v1.0 model-signing bundle or a key that is
    not a PEM public key, UnsupportedError for a key of another curve, UsageError for a name
    of ``tensors`` that was not signed, a ``sample`` outside (0, 1] or a ``seed`` outside the
    int64 range, and the errors of
    :func:`onemodel.load` reading the model."""
    from model_signing._signing import sign_ec_key

    from ..errors import UsageError
    from .keys import load_public_key

    if tensors is not None and sample is not None:
        raise UsageError("give tensors or sample, not both")
    if sample is not None and not (0 < sample <= 1):
        raise UsageError(f"sample is a fraction of the tensors in (0, 1], not {sample}")
    if not -(1 << 63) <= seed < (1 << 63):
        raise UsageError(f"seed is a 64-bit signed integer, not {seed}")
    load_public_key(key)
    sig, statement = _read_bundle(signature)
    try:
        sign_ec_key.Verifier(pathlib.Path(key)).verify(sig)
    except Exception as e:  # InvalidSignature, the key-hint mismatch, an inconsistent manifest
        why = type(e).__name__ + (f": {e}" if str(e) else "")
        return SignatureResult(False, None, [f"the signature is not valid for this key ({why})"])
    predicate = statement.get("predicate") or {}
    partial = tensors is not None or sample is not None
    if not partial and _files_match(model, statement):
        return SignatureResult(True, "files", [])
    content = predicate.get(PREDICATE_FIELD)
    if not isinstance(content, dict):
        return SignatureResult(False, None, ["the files differ from those signed, and the bundle "
                                             "has no onemodel content digest to compare"])
    signed = _Signed(content)
    chosen = (signed.named(tensors) if tensors is not None
              else signed.sample(sample, seed) if sample is not None else None)
    return _compare_content(model, signed, chosen, storage_options, load_options)


class _Signed:
    """The ``onemodel`` predicate field read: the model digest, each tensor's (path, name,
    digest) in order, and the structure octets (None in a bundle without them)."""

    def __init__(self, content: dict):
        import base64

        from ..content_digest import MODEL_PREFIX

        try:
            self.digest = bytes.fromhex(content["model"]["digest"]["value"])
            self.tensors = {t["path"]: (t["name"], bytes.fromhex(t["digest"]["value"]))
                            for t in content["tensors"]}
            st = content.get("structure")
            self.structure = (base64.b64decode(st["base64"], validate=True)
                              if st is not None else None)
        except (KeyError, TypeError, ValueError) as e:
            raise MalformedError(f"the onemodel predicate field is malformed "
                                 f"({type(e).__name__}: {e})") from None
        if (self.structure is not None
                and hashlib.sha256(MODEL_PREFIX + self.structure).digest() != self.digest):
            raise MalformedError("the onemodel predicate field's structure does not hash to "
                                 "its model digest")

    def named(self, names: list[str]) -> set[str]:
        """The paths of the signed tensors named ``names`` (UsageError for a name not signed)."""
        from ..errors import UsageError

        by_name: dict[str, list[str]] = {}
        for p, (n, _) in self.tensors.items():
            by_name.setdefault(n, []).append(p)
        missing = [n for n in names if n not in by_name]
        if missing:
            raise UsageError(f"no tensor named {missing[0]!r} was signed")
        return {p for n in names for p in by_name[n]}

    def sample(self, fraction: float, seed: int) -> set[str]:
        """``ceil(fraction * N)`` signed tensor paths (at least one), the first in the order of
        SHA-256(int64 LE seed || model digest || path)."""
        import math
        import struct

        prefix = struct.pack("<q", seed) + self.digest

        def rank(p: str) -> bytes:
            return hashlib.sha256(prefix + p.encode("utf-8")).digest()

        k = min(len(self.tensors), max(1, math.ceil(fraction * len(self.tensors))))
        return set(sorted(self.tensors, key=rank)[:k])


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


def _compare_content(model, signed: _Signed, chosen: set[str] | None, storage_options,
                     load_options) -> SignatureResult:
    from ..api import load
    from ..content_digest import model_digest
    from ..ir.walk import iter_tensors
    from .differences import differences

    with load(model, storage_options=storage_options, **load_options) as m:
        known = {}
        if chosen is not None:  # the others: the signed digest, or (not signed) a placeholder
            # that cannot match, their bytes unread
            known = {p: signed.tensors[p][1] if p in signed.tensors else bytes(32)
                     for p, _ in iter_tensors(m) if p not in chosen}
        r = model_digest(m, known=known)
        checked = [p for p in r.tensors if p not in known]
        if r.digest == signed.digest:
            return SignatureResult(True, "content" if chosen is None else "partial", [],
                                   checked)
        problems = differences(m, r.tensors, set(checked), signed)
    return SignatureResult(False, None, problems, checked)
