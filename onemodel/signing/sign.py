"""Signing a local model with an EC key into an OpenSSF model-signing bundle (the library
builds the statement, envelope and bundle; onemodel adds the ``onemodel`` predicate field)."""

from __future__ import annotations

import os
import pathlib

#: The predicate field onemodel adds to model-signing's v1.0 predicate: the content manifest
#: (docs/content-digest.md, "Manifest"), which no layout of the model changes.
PREDICATE_FIELD = "onemodel"
#: The format of the ``structure`` entry of :data:`PREDICATE_FIELD`: the base64 of ``encode(M')``
#: (docs/content-digest.md: the model with each tensor's contents replaced by its digest).
STRUCTURE_FORMAT = "onnx-stub-model"


def content_field(model: str, **load_options) -> dict:
    """The :data:`PREDICATE_FIELD` of the local model ``model``: its content manifest
    (:func:`onemodel.content_digest.manifest`: the model digest, each tensor's path, name and
    digest) and ``structure``: ``{"format": STRUCTURE_FORMAT, "base64": ...}``, the octets the
    model digest hashes after its prefix, from which a verifier names a structural change (the
    node and attribute, the opset import, the metadata entry). Reads every tensor once. Raises
    the errors of :func:`onemodel.load` and :func:`onemodel.content_digest.model_digest`."""
    import base64

    from ..api import load
    from ..content_digest import manifest, model_digest, structure

    with load(model, **load_options) as m:
        d = model_digest(m)
        body = structure(m, d.tensors)
    content = manifest(d, os.path.basename(model))
    content["structure"] = {"format": STRUCTURE_FORMAT,
                            "base64": base64.b64encode(body).decode("ascii")}
    return content


#: The environment variable holding a Sigstore identity token (sigstore-python's name).
IDENTITY_TOKEN_ENV = "SIGSTORE_ID_TOKEN"


def _signer(key: str | None, certificate: str | None, certificate_chain, sigstore: bool,
            staging: bool, prompt):
    """The model-signing signer of the arguments of :func:`sign` (one of ``key``, with or
    without ``certificate``, and ``sigstore``)."""
    from ..errors import UsageError
    from .keys import load_private_key

    if (key is None) == (not sigstore):
        raise UsageError("sign with a private key or with Sigstore, one of the two")
    if sigstore:
        if certificate is not None or certificate_chain:
            raise UsageError("a Sigstore signature takes no certificate: Sigstore issues one")
        from model_signing._signing import sign_sigstore

        return sign_sigstore.Signer(identity_token=os.environ.get(IDENTITY_TOKEN_ENV) or None,
                                    use_ambient_credentials=True, use_staging=staging)
    if certificate_chain and certificate is None:
        raise UsageError("a certificate chain goes with the signing certificate it completes")
    _, password = load_private_key(key, prompt=prompt)
    secret = password.encode() if password is not None else None  # (octets, as cryptography)
    if certificate is None:
        from model_signing._signing import sign_ec_key

        return sign_ec_key.Signer(pathlib.Path(key), secret)
    return _certificate_signer(key, secret, certificate, list(certificate_chain or []))


def _may_sign(cert, x509) -> bool:
    """Whether ``cert`` may sign, by the rule model-signing's certificate verifier applies: a
    KeyUsage with digitalSignature, or an ExtendedKeyUsage with codeSigning."""
    try:
        if cert.extensions.get_extension_for_class(x509.KeyUsage).value.digital_signature:
            return True
    except x509.ExtensionNotFound:
        pass
    try:
        usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        return x509.oid.ExtendedKeyUsageOID.CODE_SIGNING in usage
    except x509.ExtensionNotFound:
        return False


def _certificate_signer(key: str, secret: bytes | None, certificate: str, chain: list[str]):
    """model-signing's certificate signer for the PEM ``certificate`` and its ``chain``, with an
    encrypted key's passphrase too (model-signing's own takes none). Raises MalformedError for
    a file without a PEM certificate and for a certificate whose public key is not the key's."""
    from cryptography import x509
    from model_signing._signing import sign_certificate, sign_ec_key

    from ..errors import MalformedError
    from .keys import read_file

    certs = []
    for path in [certificate, *chain]:
        try:
            certs.append(x509.load_pem_x509_certificates(read_file(path)))
        except ValueError as e:
            raise MalformedError(f"not a PEM certificate file ({e})", path=path) from None
    signer = sign_certificate.Signer.__new__(sign_certificate.Signer)
    sign_ec_key.Signer.__init__(signer, pathlib.Path(key), secret)
    if certs[0][0].public_key() != signer._private_key.public_key():
        raise MalformedError("the certificate's public key is not the private key's",
                             path=certificate)
    if not _may_sign(certs[0][0], x509):  # (no verifier would accept the bundle)
        raise MalformedError("the certificate may not sign: its key usage has no "
                             "digitalSignature and its extended key usage no codeSigning",
                             path=certificate)
    signer._signing_certificate = certs[0][0]
    signer._trust_chain = [c for group in certs[1:] for c in group]
    return signer


def sign(model: str, key: str | None = None, output: str | None = None, *,
         certificate: str | None = None, certificate_chain: list[str] | None = None,
         sigstore: bool = False, staging: bool = False, prompt=None, **load_options) -> str:
    """Sign the local model ``model`` (an ONNX file, inline or with its external data files, or
    a OneModel file); write the Sigstore bundle to ``output`` (default ``MODEL.sig``) and
    return its path. The signer is one of:

    - ``key``: an EC P-256/P-384 PEM private key (``model_signing sign key``); an encrypted
      key's passphrase comes from :data:`onemodel.signing.keys.PASSPHRASE_ENV`, else
      ``prompt()``;
    - ``key`` with ``certificate`` (its PEM signing certificate) and ``certificate_chain``
      (PEM files of the intermediate and root certificates): ``model_signing sign
      certificate``; the bundle carries the chain;
    - ``sigstore``: Sigstore keyless signing by model-signing (an identity token from
      :data:`IDENTITY_TOKEN_ENV`, else ambient credentials, else the browser's OpenID Connect
      flow; ``staging`` for Sigstore's staging instance). Needs a network: untested here.

    The bundle's resources are the model's files (:func:`onemodel.signing.files.model_files`),
    each one SHA-256 (model-signing's ``files`` serialization: the one the stock
    ``model_signing verify`` commands check): for a single file, that file (the stock
    ``model_signing verify key MODEL`` accepts it); with data files, the model's directory
    limited to those files (``--ignore_unsigned_files`` when the directory holds others). The
    predicate's :data:`PREDICATE_FIELD` holds the content manifest. Raises UsageError for a URL
    or a wrong combination of signers, the errors of :func:`onemodel.load` and of
    :func:`onemodel.signing.keys.load_private_key`, MalformedError for a certificate that is
    not PEM or not the key's, UnsupportedError when the ``sign`` extra is not installed."""
    from ..errors import UsageError
    from .files import model_files
    from .keys import sign_extra

    sign_extra("model_signing.signing")  # (the library, and the pyOpenSSL it imports)
    from model_signing import hashing
    from model_signing._signing import signing as ms_signing

    if "://" in model:  # model-signing hashes local files; a URL is verified, not signed
        raise UsageError(f"sign takes a local model file, not a URL ({model.split('://')[0]}://"
                         "...): download it first")
    signer = _signer(key, certificate, certificate_chain, sigstore, staging, prompt)
    names = model_files(model, **load_options)
    target = pathlib.Path(model)
    config = hashing.Config().use_file_serialization()
    if len(names) == 1:
        files = None
    else:
        target = target.parent
        files = [target / n for n in names]
    out = output or model + ".sig"
    if files is not None:  # the bundle in the signed directory is no resource of it (the path
        # recorded relative to the directory, so the stock verifier skips it wherever it lies)
        rel = os.path.relpath(os.path.abspath(out), os.path.abspath(target))
        if not rel.startswith(os.pardir):
            config.add_ignored_paths(model_path=target, paths=[rel])
    # the files' digests (model-signing, one thread per file) while the content digest hashes
    # the tensors (threads of its own): the two read the same pages at about the same time,
    # and take the time of the longer, not of both (docs/performance.md, "Signing")
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        hashed = pool.submit(config.hash, target, files_to_hash=files)
        try:
            content = content_field(model, **load_options)
        finally:
            m = hashed.result()
    payload = ms_signing.Payload(m)
    payload.statement.pb.predicate.update({PREDICATE_FIELD: content})
    signer.sign(payload).write(pathlib.Path(out))
    return out
