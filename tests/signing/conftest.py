"""Fixtures of the signing tests: the local HTTP Range server and the moto S3 server (a signed
model verified from a URL)."""

from servers.fixtures import http_server, http_server_session, s3, s3_server  # noqa: F401
