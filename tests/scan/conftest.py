"""Fixtures of the scan tests: the HTTP Range server (bytes read without --hash)."""

from servers.fixtures import http_server, http_server_session  # noqa: F401
