"""Fixtures of the safetensors layout tests: the HTTP Range server (remote files)."""

from servers.fixtures import http_server, http_server_session  # noqa: F401
