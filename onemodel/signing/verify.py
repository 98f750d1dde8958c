"""Verifying a model against a model-signing bundle: the envelope's signature first (by the
model-signing library), then the model's files byte-exact as signed, or, for another layout of
the same model, its content digest and per-tensor digests (the ``onemodel`` predicate field)."""

from __future__ import annotations

import hashlib
import os
import pathlib

from ..errors import MalformedError
from .sign import PREDICATE_FIELD


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


class Trust:
    """Whom a signature must come from: exactly one of

    Attributes:
        key: path of the EC P-256/P-384 PEM public key (a bundle signed with ``--key``);
        certificate_chain: paths of PEM certificates ending at a root the signing certificate
            must chain to (a bundle signed with ``--certificate``); model-signing's verifier
            (pyOpenSSL) checks the chain at the signing certificate's start of validity and its
            key usage;
        identity, oidc_issuer: the Sigstore identity (an e-mail or workload URI) and its OpenID
            Connect issuer (a bundle signed keyless, ``--sigstore``); model-signing's Sigstore
            verifier checks the certificate, the transparency log entry and the identity
            (production Sigstore, or staging with ``staging``). Needs a network; untested here.
    """

    __slots__ = ("key", "certificate_chain", "identity", "oidc_issuer", "staging")

    def __init__(self, key: str | None = None, *, certificate_chain: list[str] | None = None,
                 identity: str | None = None, oidc_issuer: str | None = None,
                 staging: bool = False):
        from ..errors import UsageError

        given = [key is not None, bool(certificate_chain), identity is not None]
        if sum(given) != 1:
            raise UsageError("give one of a public key, a certificate chain or a Sigstore "
                             "identity to verify the signature with")
        if identity is not None and not oidc_issuer:
            raise UsageError("a Sigstore identity needs its OpenID Connect issuer")
        self.key = key
        self.certificate_chain = list(certificate_chain or [])
        self.identity = identity
        self.oidc_issuer = oidc_issuer
        self.staging = staging


def _signature_problem(signature: str, envelope, trust: Trust) -> str | None:
    """Why the bundle ``signature`` (read as ``envelope``) is not validly
    signed as ``trust`` asks, or None: a key bundle is checked by :mod:`.envelope`, a
    certificate or Sigstore bundle by model-signing's verifier of that kind."""
    from .envelope import key_problem
    from .keys import load_public_key

    if trust.key is not None:
        public = load_public_key(trust.key)
        if envelope.certificates:
            return ("the bundle was signed with a certificate: verify it with its certificate "
                    "chain or Sigstore identity, not a key")
        why = key_problem(envelope, public)
        return None if why is None else f"the signature is not valid for this key: {why}"
    keys = _read_certificates(trust.certificate_chain) if trust.certificate_chain else None
    import logging

    from .keys import sign_extra

    sign_extra("model_signing.verifying")
    quiet = logging.getLogger("model_signing")  # (its warnings, on stderr, are ours to say)
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        if keys is not None:
            from model_signing._signing import sign_certificate, sign_sigstore_pb

            sig = sign_sigstore_pb.Signature.read(pathlib.Path(signature))
            sign_certificate.Verifier([pathlib.Path(c) for c in keys]).verify(sig)
        else:
            from model_signing._signing import sign_sigstore

            sig = sign_sigstore.Signature.read(pathlib.Path(signature))
            sign_sigstore.Verifier(identity=trust.identity, oidc_issuer=trust.oidc_issuer,
                                   use_staging=trust.staging).verify(sig)
    except Exception as e:  # the chain, the identity, the signature: all "not valid"
        first = str(e).splitlines()[0][:300] if str(e) else ""
        why = f"{type(e).__name__}{': ' + first if first else ''}"
        if type(e).__name__ == "X509StoreContextError":
            return ("the signature is not valid: the bundle's signing certificate does not "
                    f"chain to the certificates given ({why})")
        return f"the signature is not valid ({why})"
    finally:
        quiet.setLevel(level)
    return None


def _read_certificates(paths: list[str]) -> list[str]:
    """``paths`` once each is a readable file of PEM certificates. Raises IoError for a file
    that cannot be read, MalformedError for one without a PEM certificate."""
    from .keys import read_file

    for p in paths:
        if b"-----BEGIN CERTIFICATE-----" not in read_file(p):
            raise MalformedError("not a PEM certificate file", path=p)
    return paths


def verify_signature(model: str, signature: str, key: str | None = None, *,
                     certificate_chain: list[str] | None = None, identity: str | None = None,
                     oidc_issuer: str | None = None, staging: bool = False,
                     tensors: list[str] | None = None, sample: float | None = None,
                     seed: int = 0, storage_options: dict | None = None,
                     **load_options) -> SignatureResult:
    """Verify ``model`` (a path or URL, any layout) against the bundle ``signature``, signed
    with the EC PEM public key ``key``, or by a certificate chaining to ``certificate_chain``
    (PEM files), or keyless by the Sigstore ``identity`` of ``oidc_issuer`` (:class:`Trust`;
    exactly one). The envelope's signature is checked first (invalid: ``valid`` False,
    nothing else read); then, for a local model, its files against the signed file or shard
    digests (SHA-256, the shards in parallel); if they differ, the model's content digest
    against the ``onemodel`` predicate field, naming each tensor whose digest differs and each
    structural difference (the node and attribute, the opset import, the metadata entry:
    docs/signing.md, "What a difference is named by").

    Partial verification (``tensors`` or ``sample``; the files are then not hashed): the
    structure is checked whole (the model digest computed with the signed digests of the
    tensors not chosen) and only the chosen tensors' bytes are read (range requests for a URL).
    ``tensors``: names of signed tensors; ``sample``: a fraction in (0, 1] of the signed
    tensors, ``ceil(sample * N)`` of them (at least one), the first in the order of
    SHA-256(int64 LE ``seed`` || signed model digest || tensor path): the same tensors for the
    same seed and signed model, on any machine.

    Raises MalformedError for a bundle that is not a v1.0 model-signing bundle, a key that is
    not a PEM public key or a chain file without a PEM certificate, UnsupportedError for a key
    of another curve or without the ``sign`` extra (cryptography; model-signing for a
    certificate or Sigstore bundle), UsageError for no or several of key, chain and
    identity, a name of ``tensors`` that was not signed, a ``sample`` outside (0, 1] or a
    ``seed`` outside the int64 range, and the errors of :func:`onemodel.load` reading the
    model."""
    from ..errors import UsageError
    from .envelope import read_envelope
    from .keys import read_file

    trust = Trust(key, certificate_chain=certificate_chain, identity=identity,
                  oidc_issuer=oidc_issuer, staging=staging)
    if tensors is not None and sample is not None:
        raise UsageError("give tensors or sample, not both")
    if sample is not None and not (0 < sample <= 1):
        raise UsageError(f"sample is a fraction of the tensors in (0, 1], not {sample}")
    if not -(1 << 63) <= seed < (1 << 63):
        raise UsageError(f"seed is a 64-bit signed integer, not {seed}")
    envelope = read_envelope(read_file(signature), signature)
    problem = _signature_problem(signature, envelope, trust)
    if problem is not None:
        return SignatureResult(False, None, [problem])
    statement = envelope.statement
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
    model (a single file) or its directory, has the signed SHA-256: a whole file (method
    ``files``) or a byte range of one (``shards``: the ranges of each file must cover it
    exactly). The resources are hashed in parallel, one thread each (hashlib releases the
    interpreter lock), at most one per CPU."""
    from concurrent.futures import ThreadPoolExecutor

    if "://" in model or not os.path.isfile(model):
        return False
    predicate = statement["predicate"]
    ranges = _signed_ranges(predicate.get("resources") or [],
                            (predicate.get("serialization") or {}).get("method"))
    if ranges is None:
        return False
    subject = (statement.get("subject") or [{}])[0].get("name")
    base = pathlib.Path(model)
    if {name for name, *_ in ranges} != {"."}:
        base = base.parent
    elif subject != base.name:
        return False
    spans: dict[pathlib.Path, list[tuple[int, int]]] = {}
    tasks = []
    for name, start, end, digest in ranges:
        p = base if name == "." else base / name
        if not p.is_file():
            return False
        size = p.stat().st_size
        end = size if end is None else end
        spans.setdefault(p, []).append((start, end))
        tasks.append((p, start, end, digest))
    for p, s in spans.items():  # each file covered exactly, no byte unsigned or signed twice
        s.sort()
        if s[0][0] != 0 or s[-1][1] != p.stat().st_size or any(
                a[1] != b[0] for a, b in zip(s, s[1:])):
            return False
    workers = max(1, min(len(tasks), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return all(pool.map(lambda t: _sha256_range(*t[:3]) == t[3], tasks))


def _signed_ranges(resources: list, method) -> list[tuple] | None:
    """``(name, start, end, hex digest)`` of each resource (``end`` None: to the end of a whole
    file), or None for a serialization other than SHA-256 files or shards."""
    out = []
    for r in resources:
        if not isinstance(r, dict):
            return None
        name, alg = str(r.get("name", "")), str(r.get("algorithm", ""))
        if method == "files" and alg == "sha256":
            out.append((name, 0, None, r.get("digest")))
        elif method == "shards" and alg.startswith("sha256-sharded-"):
            name, _, span = name.rpartition(":")
            name, _, first = name.rpartition(":")
            if not (first.isdigit() and span.isdigit()) or int(first) >= int(span):
                return None
            out.append((name, int(first), int(span), r.get("digest")))
        else:
            return None
    return out or None


def _sha256_range(path: pathlib.Path, start: int, end: int) -> str:
    """The hex SHA-256 of octets ``[start, end)`` of the file ``path``, read 8 MiB at a time."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(start)
        left = end - start
        while left > 0:
            chunk = f.read(min(left, 8 << 20))
            if not chunk:
                break
            h.update(chunk)
            left -= len(chunk)
    return h.hexdigest()


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
