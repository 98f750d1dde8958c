"""Reading a model-signing bundle and checking a public-key signature over its DSSE envelope.

A bundle signed with an EC key (``model_signing sign key``, ``onemodel sign --key``) is checked
here with ``cryptography`` alone: the checks model-signing 1.1's key verifier makes, in the same
order, without importing model-signing (whose import, 0.3-0.7 s, would exceed the verification
of a model of a few GB; docs/performance.md, "Signing"). Bundles signed with a certificate or
by Sigstore are checked by model-signing's own verifiers (:mod:`.verify`).

The checks (DSSE protocol v1; in-toto Statement v1; model-signing's v1.0 predicate):

1. the bundle is JSON with ``dsseEnvelope.payload`` (base64), ``payloadType`` and one
   signature ``sig`` (base64);
2. when the bundle's ``verificationMaterial.publicKey.hint`` is set, it is the hex SHA-256 of
   the key's SubjectPublicKeyInfo PEM (else the bundle names another key);
3. ``sig`` is an ECDSA signature, by the key, of the pre-authentication encoding
   ``"DSSEv1" SP len(type) SP type SP len(body) SP body`` with the type
   ``application/vnd.in-toto+json`` (SHA-256 for a P-256 key, SHA-384 for P-384);
4. the payload type is that type, the payload an in-toto Statement v1 with predicate type
   ``https://model_signing/signature/v1.0`` and one subject whose ``sha256`` is the SHA-256 of
   the resources' digests concatenated in order (model-signing's manifest consistency).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json

from ..errors import MalformedError

#: The DSSE payload type of an in-toto statement.
PAYLOAD_TYPE = "application/vnd.in-toto+json"
#: The in-toto statement type.
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
#: Predicate type of model-signing v1.0, the only one accepted.
PREDICATE_TYPE = "https://model_signing/signature/v1.0"


class Envelope:
    """A bundle's DSSE envelope and its decoded statement, not yet verified.

    Attributes:
        payload: the octets signed (the statement's JSON).
        payload_type: the envelope's ``payloadType``.
        signature: the octets of the first signature.
        key_hint: the bundle's ``verificationMaterial.publicKey.hint`` (hex), or ``None``.
        certificates: True when the bundle carries an X.509 chain or a Sigstore certificate
            (it is verified with a certificate chain or an identity, not a key).
        statement: the decoded statement (a dict).
    """

    __slots__ = ("payload", "payload_type", "signature", "key_hint", "certificates",
                 "statement")


def _b64(value, what: str, path: str) -> bytes:
    if not isinstance(value, str):
        raise MalformedError(f"not a model-signing bundle: {what} is not a base64 string",
                             path=path)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise MalformedError(f"not a model-signing bundle: {what} is not base64",
                             path=path) from None


def read_envelope(data: bytes, path: str) -> Envelope:
    """The :class:`Envelope` of the bundle octets ``data`` (the file ``path``, for messages).
    Raises MalformedError, naming what is missing, for octets that are not a JSON Sigstore
    bundle with a DSSE envelope holding an in-toto statement of model-signing v1.0 (item 1 and
    the types of item 4 of the module's list)."""
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise MalformedError(f"not a model-signing bundle: not JSON ({e})", path=path) from None
    env = raw.get("dsseEnvelope") if isinstance(raw, dict) else None
    if not isinstance(env, dict):
        raise MalformedError("not a model-signing bundle: no dsseEnvelope", path=path)
    sigs = env.get("signatures")
    if not isinstance(sigs, list) or not sigs or not isinstance(sigs[0], dict):
        raise MalformedError("not a model-signing bundle: the envelope has no signature",
                             path=path)
    e = Envelope()
    e.payload = _b64(env.get("payload"), "dsseEnvelope.payload", path)
    e.payload_type = env.get("payloadType")
    e.signature = _b64(sigs[0].get("sig"), "dsseEnvelope.signatures[0].sig", path)
    material = raw.get("verificationMaterial")
    material = material if isinstance(material, dict) else {}
    hint = (material.get("publicKey") or {}).get("hint") \
        if isinstance(material.get("publicKey"), dict) else None
    e.key_hint = hint if isinstance(hint, str) and hint else None
    e.certificates = any(k in material for k in ("x509CertificateChain", "certificate"))
    try:
        statement = json.loads(e.payload)
    except (ValueError, UnicodeDecodeError) as err:
        raise MalformedError(f"not a model-signing bundle: the payload is not JSON ({err})",
                             path=path) from None
    if not isinstance(statement, dict) or statement.get("predicateType") != PREDICATE_TYPE:
        got = statement.get("predicateType") if isinstance(statement, dict) else None
        raise MalformedError(f"the bundle's predicate type is {got!r}, not {PREDICATE_TYPE}",
                             path=path)
    e.statement = statement
    return e


def pae(payload_type: str, payload: bytes) -> bytes:
    """The DSSE v1 pre-authentication encoding of ``payload`` with ``payload_type``."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def key_problem(envelope: Envelope, public_key) -> str | None:
    """Why ``envelope`` is not validly signed by the EC ``public_key`` (a cryptography key of
    P-256 or P-384), one sentence, or None when it is: items 2 to 4 of the module's list."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    pem = public_key.public_bytes(serialization.Encoding.PEM,
                                  serialization.PublicFormat.SubjectPublicKeyInfo)
    if envelope.key_hint is not None and envelope.key_hint != hashlib.sha256(pem).hexdigest():
        return "the bundle was signed with another key (its key hint is not this key's)"
    digest = hashes.SHA384() if public_key.curve.key_size > 256 else hashes.SHA256()
    try:
        public_key.verify(envelope.signature, pae(PAYLOAD_TYPE, envelope.payload),
                          ec.ECDSA(digest))
    except InvalidSignature:
        return "its ECDSA signature does not verify"
    return statement_problem(envelope)


def statement_problem(envelope: Envelope) -> str | None:
    """Why the signed statement of ``envelope`` is not a consistent model-signing v1.0
    statement (item 4 of the module's list), or None."""
    s = envelope.statement
    if envelope.payload_type != PAYLOAD_TYPE:
        return f"the envelope's payload type is {envelope.payload_type!r}, not {PAYLOAD_TYPE}"
    if s.get("_type") != STATEMENT_TYPE:
        return f"the payload is not an in-toto statement ({s.get('_type')!r})"
    subjects = s.get("subject")
    predicate = s.get("predicate")
    if not isinstance(subjects, list) or len(subjects) != 1 or not isinstance(predicate, dict):
        return "the statement does not have one subject and a predicate"
    try:
        expected = subjects[0]["digest"]["sha256"]
        h = hashlib.sha256()
        for r in predicate["resources"]:
            h.update(bytes.fromhex(r["digest"]))
    except (KeyError, TypeError, ValueError, AttributeError):
        return "the statement's subject or resources are malformed"
    if h.hexdigest() != expected:
        return "the statement is inconsistent: its resources do not hash to its subject's digest"
    return None


__all__ = ["Envelope", "read_envelope", "pae", "key_problem", "statement_problem",
           "PAYLOAD_TYPE", "STATEMENT_TYPE", "PREDICATE_TYPE"]
