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


def sign(model: str, key: str, output: str | None = None, *, prompt=None,
         **load_options) -> str:
    """Sign the local model ``model`` (an ONNX file, inline or with its external data files, or
    a OneModel file) with the EC P-256/P-384 PEM private key ``key``; write the Sigstore bundle
    to ``output`` (default ``MODEL.sig``) and return its path.

    The bundle's resources are the model's files (:func:`onemodel.signing.files.model_files`):
    for a single file, that file (the stock ``model_signing verify key MODEL`` accepts it); with
    data files, the model's directory limited to those files (``--ignore_unsigned_files`` when
    the directory holds others). The predicate's :data:`PREDICATE_FIELD` holds the content
    manifest. An encrypted key's passphrase: :data:`onemodel.signing.keys.PASSPHRASE_ENV`, else
    ``prompt()``. Raises UsageError for a URL, the errors of :func:`onemodel.load` and of
    :func:`onemodel.signing.keys.load_private_key`."""
    from model_signing import hashing
    from model_signing._signing import sign_ec_key
    from model_signing._signing import signing as ms_signing

    from ..errors import UsageError
    from .files import model_files
    from .keys import load_private_key

    if "://" in model:  # model-signing hashes local files; a URL is verified, not signed
        raise UsageError(f"sign takes a local model file, not a URL ({model.split('://')[0]}://"
                         "...): download it first")
    _, password = load_private_key(key, prompt=prompt)
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
    # model-signing hands the password to cryptography as it is: octets (its hint says str)
    signer = sign_ec_key.Signer(pathlib.Path(key),
                                password.encode() if password is not None else None)
    signer.sign(payload).write(pathlib.Path(out))
    return out
