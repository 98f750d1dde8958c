"""The HTTP and S3 test servers for the conversions from and to remote places."""

from servers.fixtures import http_server, http_server_session, s3, s3_server  # noqa: F401
