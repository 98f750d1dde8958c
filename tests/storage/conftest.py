"""Fixtures of the storage tests: the HTTP Range server and the moto S3 server."""

from servers.fixtures import http_server, http_server_session, s3, s3_server  # noqa: F401
