"""A fleet of small generated models, and the stand-in tasks the executor tests run over them.

* :func:`~_models.make_models` (tests/scan/_models.py): small valid ONNX models.
* :func:`model_files`: 30 of them in a temporary directory (module-scoped fixture).
* :func:`s3_fleet`: a module-scoped fixture that uploads :data:`FLEET_SIZE` of them to a bucket
  of the moto S3 server the tests start (``s3_server``, tests/servers/fixtures.py).
* ``read_row`` and the misbehaving tasks (sleep past the time limit, allocate past the memory
  limit, ``os._exit``, a signal, an exception): top-level functions, so that a sandbox process
  or a Dask worker imports them by name from this module (``tests/scan`` is on ``sys.path``).
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
import uuid
from dataclasses import dataclass

import pytest
from _models import make_models

#: Models the S3 fleet holds.
FLEET_SIZE = 500


def expected_row(source: str, data: bytes) -> dict:
    """The row :func:`read_row` gives for ``data`` read from ``source``."""
    return {"source": source, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


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


# --- stand-in tasks --------------------------------------------------------------------------


def read_row(storage_options, source: str) -> dict:
    """Read ``source`` (a path or fsspec URL) whole: :func:`expected_row` of its bytes."""
    import fsspec

    with fsspec.open(source, "rb", **(storage_options or {})) as f:
        return expected_row(source, f.read())


def mapped_row(path: str) -> dict:
    """Map the file ``path`` (as onemodel reads large models) and read a byte of every page:
    ``{"bytes": its size, "sum": the sum of those bytes}``."""
    import mmap

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return {"bytes": len(m), "sum": sum(m[::4096])}


def sleep_row(seconds: float, item) -> dict:
    """Sleep ``seconds``, then ``{"item": item}``."""
    time.sleep(seconds)
    return {"item": item}


def misbehave(item) -> dict:
    """``item`` is ``(what, value)``: ``ok``: ``{"item": value}``; ``sleep``: sleep ``value``
    seconds first; ``alloc``: allocate ``value`` bytes; ``exit``: ``os._exit(value)``;
    ``signal``: send this process signal ``value``; ``raise``: raise KeyError(value);
    ``pidfile``: write this process's id to the file ``value``, then sleep a minute;
    ``killparent``: SIGKILL the parent process (a Dask worker) unless its id is ``value``."""
    what, value = item
    if what == "sleep":
        time.sleep(value)
    elif what == "alloc":
        bytearray(value)
    elif what == "exit":
        os._exit(value)
    elif what == "signal":
        os.kill(os.getpid(), value)
        time.sleep(10)
    elif what == "raise":
        raise KeyError(value)
    elif what == "killparent":  # a Dask worker (the sandbox's parent); never the tests'
        if os.getppid() != value:
            os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(1)
    elif what == "pidfile":
        with open(value, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(60)
    return {"item": [what, value]}


def pid_row(item) -> dict:
    """``{"item": item, "pid": this process's id}``."""
    return {"item": item, "pid": os.getpid()}


def failed(item, kind: str, message: str) -> dict:
    """The ``on_failure`` of the tests: a row naming the item, the kind and the message."""
    return {"item": list(item) if isinstance(item, tuple) else item, "error": kind,
            "message": message}

