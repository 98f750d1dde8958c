"""A real S3-compatible HTTP server for tests: moto's standalone server (``moto_server``, from
the dev extra) in a child process on 127.0.0.1 and a free port, reached through s3fs.

    server = MotoS3().start()            # raises RuntimeError when moto cannot start
    server.create_bucket("models")
    src = open_source("s3://models/m.onemodel", storage_options=server.storage_options)
    server.stop()

``recording()`` records the requests the server answers (moto's request recorder), so a test
can count the object bytes a client asked for (:func:`object_bytes_requested`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MotoS3:
    """moto_server in a child process; ``storage_options`` are the s3fs options reaching it."""

    def __init__(self):
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self._recording_dir = tempfile.TemporaryDirectory(prefix="moto-recording-")

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
        env = dict(os.environ, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                   MOTO_RECORDER_FILEPATH=os.path.join(self._recording_dir.name, "requests"))
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

    def _recorder(self, action: str) -> bytes:
        with urllib.request.urlopen(urllib.request.Request(
                f"{self.endpoint}/moto-api/recorder/{action}",
                method="GET" if action == "download-recording" else "POST"), timeout=30) as r:
            return r.read()

    @contextlib.contextmanager
    def recording(self):
        """Record the requests answered inside the ``with``; yields a list that holds them
        afterwards (moto's entries: ``method``, ``url``, ``headers``). One recording at a
        time per server."""
        entries: list[dict] = []
        self._recorder("reset-recording")
        self._recorder("start-recording")
        try:
            yield entries
        finally:
            self._recorder("stop-recording")
            entries.extend(json.loads(line) for line in
                           self._recorder("download-recording").decode().splitlines() if line)

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


def object_bytes_requested(entries: list[dict], sizes: dict[str, int]) -> int:
    """Object bytes the recorded GET requests asked for: the extent of each ``Range:
    bytes=a-b`` (``a-`` and ``-n`` too) clipped to the object, the whole object for a GET
    without one. ``sizes`` maps ``/bucket/key`` paths to object sizes; requests for other paths
    (listings, HEADs) count nothing."""
    total = 0
    for e in entries:
        path = re.sub(r"^https?://[^/]+", "", e["url"]).split("?", 1)[0]
        size = sizes.get(urllib.request.unquote(path))
        if e["method"] != "GET" or size is None:
            continue
        rng = {k.lower(): v for k, v in e["headers"].items()}.get("range")
        m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng or "")
        if not m:
            total += size
        elif m[1] == "":
            total += min(int(m[2]), size)
        else:
            end = size - 1 if m[2] == "" else min(int(m[2]), size - 1)
            total += max(0, end - int(m[1]) + 1)
    return total
