"""Fixtures of the digest tests: the local HTTP Range server (a model hashed from a URL)."""

from servers.fixtures import http_server, http_server_session  # noqa: F401
