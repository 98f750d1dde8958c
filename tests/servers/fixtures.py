"""pytest fixtures for the test servers; import them into a conftest to use them."""

from __future__ import annotations

import uuid

import pytest

from .http_range import RangeServer
from .s3 import MotoS3


@pytest.fixture(scope="session")
def http_server_session():
    server = RangeServer().start()
    yield server
    server.stop()


@pytest.fixture
def http_server(http_server_session):
    """The session's :class:`~servers.http_range.RangeServer`, reset (no files, normal mode,
    empty log) for each test."""
    http_server_session.reset()
    http_server_session.files.clear()
    yield http_server_session
    http_server_session.reset()


@pytest.fixture(scope="session")
def s3_server():
    """moto_server on 127.0.0.1 for the whole session; skipped when moto or s3fs is missing."""
    pytest.importorskip("moto.server", reason="moto[server] (dev extra) is not installed")
    pytest.importorskip("s3fs", reason="s3fs (s3 extra) is not installed")
    server = MotoS3().start()
    yield server
    server.stop()


@pytest.fixture
def s3(s3_server):
    """``(server, bucket)``: a fresh, empty bucket on the session's moto server."""
    bucket = "t-" + uuid.uuid4().hex[:12]
    s3_server.create_bucket(bucket)
    return s3_server, bucket
