"""Fixtures of the scan tests: a fleet of small generated models, local and on S3.

* :func:`~_models.make_models` (tests/scan/_models.py): small valid ONNX models.
* :func:`model_files`: 30 of them in a temporary directory (module-scoped fixture).
* :func:`s3_fleet`: a module-scoped fixture that uploads :data:`FLEET_SIZE` of them to a bucket
  of the moto S3 server the tests start (``s3_server``, tests/servers/fixtures.py).

The stand-in tasks the tests run over them are in tests/scan/_tasks.py.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from _models import make_models

#: Models the S3 fleet holds.
FLEET_SIZE = 500


@dataclass
class Fleet:
    """Models uploaded to a bucket: ``models`` maps each ``s3://`` URL to its bytes."""

    server: object
    bucket: str
    models: dict[str, bytes]

    @property
    def storage_options(self) -> dict:
        return self.server.storage_options


@pytest.fixture(scope="module")
def s3_fleet(s3_server) -> Fleet:
    """:data:`FLEET_SIZE` generated models (:func:`make_models`) under ``models/`` of a fresh
    bucket of the session's moto server; tests read them, none changes them."""
    bucket = s3_server.create_bucket("fleet-" + uuid.uuid4().hex[:12])
    models = {f"s3://{bucket}/models/{name}": data
              for name, data in make_models(FLEET_SIZE).items()}
    s3_server.filesystem().pipe({url[len("s3://"):]: data for url, data in models.items()})
    return Fleet(s3_server, bucket, models)


@pytest.fixture(scope="module")
def model_files(tmp_path_factory) -> dict[str, bytes]:
    """30 generated models (2 KiB of weights each) in a temporary directory, ten to a folder:
    ``{path: bytes}``."""
    root = tmp_path_factory.mktemp("models")
    files = {}
    for name, data in make_models(30, weight_bytes=2048).items():
        path = root / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data)
        files[str(path)] = data
    return files
