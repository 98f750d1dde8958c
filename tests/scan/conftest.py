"""Fixtures of the scan tests: the HTTP Range server (bytes read without --hash) and the moto
S3 server (a bucket prefix listed)."""

from servers.fixtures import http_server, http_server_session, s3, s3_server  # noqa: F401
