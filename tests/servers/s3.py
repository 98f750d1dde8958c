"""A real S3-compatible HTTP server for tests: moto's standalone server (``moto_server``, from
the dev extra) in a child process on 127.0.0.1 and a free port, reached through s3fs.

    server = MotoS3().start()            # raises RuntimeError when moto cannot start
    server.create_bucket("models")
    src = open_source("s3://models/m.onemodel", storage_options=server.storage_options)
    server.stop()
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MotoS3:
    """moto_server in a child process; ``storage_options`` are the s3fs options reaching it."""

    def __init__(self):
        self.port = 0
        self.proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def storage_options(self) -> dict:
        """s3fs options for this server (dummy credentials, us-east-1)."""
        return {"key": "testing", "secret": "testing", "endpoint_url": self.endpoint,
                "client_kwargs": {"region_name": "us-east-1"}}

    def start(self, timeout: float = 30.0) -> "MotoS3":
        self.port = free_port()
        env = dict(os.environ, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
            start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto_server exited with status {self.proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("moto_server did not start listening")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def client(self):
        """A boto3 S3 client for this server (to create buckets and inspect uploads)."""
        import boto3
        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id="testing",
                            aws_secret_access_key="testing", region_name="us-east-1")

    def create_bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name

    def filesystem(self):
        """A fresh s3fs filesystem for this server (no instance cache, no listing cache)."""
        import s3fs
        return s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False,
                                 **self.storage_options)
