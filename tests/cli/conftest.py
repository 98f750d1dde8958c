"""Fixtures of the command-line tests: the local HTTP Range server (for URLs on the command
line, with credentials and presigned queries the server ignores)."""

from servers.fixtures import http_server, http_server_session  # noqa: F401
