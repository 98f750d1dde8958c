"""Fixtures of the command-line tests: the local HTTP Range server (for URLs on the command
line, with credentials and presigned queries the server ignores) and the moto S3 server."""

from servers.fixtures import http_server, http_server_session, s3, s3_server  # noqa: F401
