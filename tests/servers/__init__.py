"""Servers the tests start on 127.0.0.1: an HTTP Range server with fault modes
(:mod:`servers.http_range`) and moto's S3 server (:mod:`servers.s3`).

:mod:`servers.fixtures` holds the pytest fixtures; a conftest imports the ones it needs:
``from servers.fixtures import http_server, s3_server, s3  # noqa: F401``.
"""
