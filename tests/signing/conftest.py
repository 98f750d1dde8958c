"""Fixtures of the signing tests: the local HTTP Range server (a signed model verified from a
URL)."""

from servers.fixtures import http_server, http_server_session  # noqa: F401
