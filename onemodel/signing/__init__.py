"""Signing a model once with an OpenSSF model-signing bundle (issue 27; docs/signing.md).

The bundle is model-signing's own (an in-toto statement, predicate
``https://model_signing/signature/v1.0``, in a DSSE envelope in a Sigstore bundle), built by the
model-signing library (the ``sign`` extra); onemodel adds one predicate field, ``onemodel``,
carrying the model's content manifest (:func:`onemodel.content_digest.manifest`), which a stock
verifier ignores. model-signing is imported only here, never at ``import onemodel``.
"""

from .sign import PREDICATE_FIELD, sign
from .verify import SignatureResult, verify_signature

__all__ = ["PREDICATE_FIELD", "SignatureResult", "sign", "verify_signature"]
