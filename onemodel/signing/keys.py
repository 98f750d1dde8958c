"""Loading the EC key a model is signed with: PEM, P-256 or P-384, the passphrase of an
encrypted key from the environment or a prompt (never an argument)."""

from __future__ import annotations

import os

from ..errors import IoError, MalformedError, UnsupportedError

#: The environment variable holding the passphrase of an encrypted private key.
PASSPHRASE_ENV = "ONEMODEL_SIGNING_PASSPHRASE"
#: The curves accepted (model-signing's names): P-256 and P-384.
CURVES = ("secp256r1", "secp384r1")


def sign_extra(module: str):
    """The module ``module`` (of model-signing or cryptography, the ``sign`` extra), imported.
    Raises UnsupportedError naming the extra to install when it, or a module it imports, is
    missing."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise UnsupportedError(f"signing needs the sign extra ({e.name or module} is missing): "
                               "pip install 'onemodel-onnx[sign]'") from None


def read_file(path: str) -> bytes:
    """The octets of the local file ``path`` (a key or a bundle: small). Raises IoError naming
    the file when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise IoError(f"cannot read the file ({e.strerror or type(e).__name__})",
                      path=path) from None


def _is_encrypted(pem: bytes) -> bool:
    return b"ENCRYPTED" in pem.split(b"\n", 1)[0] or b"Proc-Type: 4,ENCRYPTED" in pem


def load_private_key(path: str, *, prompt=None):
    """The EC private key of the PEM file ``path`` (a cryptography key object) and its
    passphrase (``None`` for an unencrypted key). The passphrase of an encrypted key comes from
    :data:`PASSPHRASE_ENV`, else from ``prompt()`` (a callable returning it; ``None``: refused).
    Raises MalformedError for a file that is not a PEM private key or a wrong passphrase,
    UnsupportedError for another key type or curve, IoError for a file that cannot be read."""
    sign_extra("cryptography.hazmat.primitives.asymmetric.ec")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    pem = read_file(path)
    password = None
    if _is_encrypted(pem):
        password = os.environ.get(PASSPHRASE_ENV)
        if password is None and prompt is not None:
            password = prompt()
        if password is None:
            raise MalformedError(f"the private key is encrypted: set {PASSPHRASE_ENV} or "
                                 "run interactively to be asked its passphrase", path=path)
    try:
        key = serialization.load_pem_private_key(
            pem, password.encode() if password is not None else None)
    except (ValueError, TypeError) as e:
        raise MalformedError(f"not a PEM private key, or a wrong passphrase ({e})",
                             path=path) from None
    _check_curve(key, path, ec)
    return key, password


def load_public_key(path: str):
    """The EC public key of the PEM file ``path`` (SubjectPublicKeyInfo). Raises MalformedError
    for a file that is not a PEM public key, UnsupportedError for another type or curve,
    IoError for a file that cannot be read."""
    sign_extra("cryptography.hazmat.primitives.asymmetric.ec")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    try:
        key = serialization.load_pem_public_key(read_file(path))
    except (ValueError, TypeError) as e:
        raise MalformedError(f"not a PEM public key ({e})", path=path) from None
    _check_curve(key, path, ec)
    return key


def _check_curve(key, path, ec) -> None:
    if not isinstance(key, (ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey)):
        raise UnsupportedError("the key is not an elliptic-curve key (P-256 or P-384)", path=path)
    if key.curve.name not in CURVES:
        raise UnsupportedError(f"the key's curve {key.curve.name} is not P-256 or P-384",
                               path=path)
