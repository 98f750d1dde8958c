"""The command line when its surroundings end it: SIGTERM undoes the writes in progress, a
closed stdout ends it quietly with the status of SIGPIPE (141), never 1 (verify: different)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

MODELS = Path(__file__).resolve().parents[2] / "testdata" / "models"
CLI = [sys.executable, "-m", "onemodel"]


@pytest.mark.parametrize("layout", [[], ["--external-data", "w.bin"]], ids=["onemodel", "onnx"])
def test_sigterm_during_a_write_leaves_nothing_behind(tmp_path, layout):
    """The process sends itself SIGTERM while the first tensor is copied (model file or data
    file): exit 143, one line, and no destination and no temporary file in the directory."""
    dst = tmp_path / ("m.onnx" if layout else "m.onemodel")
    src = MODELS / "transformer_dynamo.onnx"
    code = textwrap.dedent(f"""
        import os, signal, sys
        from onemodel.storage import base, local
        def kill_self(self, *a, **k):
            os.kill(os.getpid(), signal.SIGTERM)
            raise AssertionError("SIGTERM was not delivered")
        base.Sink.write_zeros = kill_self  # padding comes before the first tensor's bytes
        local.LocalSink.write_zeros = kill_self
        sys.argv = ["onemodel", "convert", {str(src)!r}, {str(dst)!r}] + {layout!r}
        from onemodel.cli import main
        main()
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 143, done.stderr
    assert done.stderr.strip() == "terminated"
    assert os.listdir(tmp_path) == []


def _closed_stdout(args) -> subprocess.CompletedProcess:
    """Run the CLI with stdout a pipe whose reading end is already closed."""
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run(CLI + [str(a) for a in args], stdout=w, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    finally:
        os.close(w)


@pytest.mark.parametrize("args", [
    ["--version"],
    ["info", MODELS / "cnn_legacy.onnx"],  # rich tables
    ["info", "--json", MODELS / "cnn_legacy.onnx"],
    ["verify", MODELS / "cnn_legacy.onnx", MODELS / "cnn_dynamo.onnx"],  # would exit 1
], ids=["version", "info", "info-json", "verify"])
def test_a_closed_stdout_ends_quietly_with_141(args):
    done = _closed_stdout(args)
    assert done.returncode == 141 and done.stderr == ""
