"""Fixtures of the check tests: the local HTTP Range server (a model checked from a URL)."""

from servers.fixtures import http_server, http_server_session  # noqa: F401
