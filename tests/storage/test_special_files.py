"""A FIFO, socket or device given as a model path is refused at once, never waited on.

``open()`` of a FIFO without a writer blocks forever; the sources open without blocking and
refuse anything but a regular file with IoError naming its kind (docs/storage.md). Every FIFO
test runs under a guard (tests/servers/fifo.py, or a subprocess timeout), so a regression fails
instead of hanging the suite.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from servers.fifo import run_guarded

import onemodel
from onemodel.errors import IoError
from onemodel.storage import open_source
from onemodel.storage.local import LocalSource

posix = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "model.onnx"
    os.mkfifo(path)
    return str(path)


@posix
def test_load_of_a_fifo_is_io_error_at_once(fifo):
    with pytest.raises(IoError) as e:
        run_guarded(lambda: onemodel.load(fifo), fifo)
    assert "it is a FIFO, not a regular file" in str(e.value)
    assert e.value.source == fifo


@posix
def test_open_source_of_a_fifo_is_io_error_at_once(fifo):
    with pytest.raises(IoError, match="it is a FIFO, not a regular file"):
        run_guarded(lambda: open_source(fifo), fifo)


@posix
@pytest.mark.parametrize("command", [["info"], ["convert"]])
def test_cli_on_a_fifo_is_one_line_exit_2(fifo, tmp_path, command):
    args = command + [fifo] + ([str(tmp_path / "out.onemodel")] if command == ["convert"] else [])
    try:
        proc = subprocess.run([sys.executable, "-m", "onemodel", *args], capture_output=True,
                              text=True, timeout=60)
    except subprocess.TimeoutExpired:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"onemodel {command[0]} blocked on a FIFO")
    assert proc.returncode == 2
    assert "it is a FIFO, not a regular file" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out.onemodel").exists()


@posix
def test_a_socket_is_refused_naming_its_kind(tmp_path):
    path = str(tmp_path / "s")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(path)
        with pytest.raises(IoError, match="it is a socket, not a regular file"):
            LocalSource(path)
    finally:
        server.close()


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="needs /dev/null")
def test_a_character_device_is_refused_naming_its_kind():
    with pytest.raises(IoError, match="it is a character device, not a regular file"):
        LocalSource("/dev/null")


def test_a_directory_is_refused_naming_its_kind(tmp_path):
    with pytest.raises(IoError, match="it is a directory, not a regular file"):
        LocalSource(str(tmp_path))


def test_a_regular_file_is_opened_blocking(tmp_path):
    import fcntl

    path = tmp_path / "m.bin"
    path.write_bytes(b"abc")
    from onemodel.storage.local import open_regular
    fd = open_regular(str(path))
    try:
        assert not fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK  # the flag was cleared
        assert os.read(fd, 10) == b"abc"
    finally:
        os.close(fd)


@posix
def test_a_fifo_destination_is_refused_not_replaced(tmp_path):
    from onemodel.storage import open_sink

    path = tmp_path / "out.onnx"
    os.mkfifo(path)
    with pytest.raises(IoError, match="cannot write: it is a FIFO, not a regular file"):
        open_sink(str(path))
    assert os.path.exists(path) and not path.is_file()  # still the FIFO
    assert os.listdir(tmp_path) == ["out.onnx"]          # no temporary file left


def test_a_descriptor_opened_without_blocking_is_cleared(tmp_path):
    # external data is opened by a confined walk with O_NONBLOCK; the source clears it
    import fcntl

    path = tmp_path / "d.bin"
    path.write_bytes(bytes(2 << 20))  # mapped: the source keeps its descriptor
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    src = LocalSource(str(path), fd=fd)
    try:
        assert src.fileno() == fd and not fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK
    finally:
        src.close()


def _cli_guarded(args, fifo) -> subprocess.CompletedProcess:
    """``onemodel ARGS`` in a fresh process; a run that blocks on ``fifo`` fails the test."""
    try:
        return subprocess.run([sys.executable, "-m", "onemodel", *map(str, args)],
                              capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"onemodel {args[0]} blocked on the FIFO {fifo}")


@posix
def test_the_two_fifos_are_two_kinds_on_every_command(tmp_path):
    """A FIFO as the model path is Io (the file cannot be read); a FIFO as a model's external
    data file is InvalidModel (Clause 15.3: a location SHALL name a regular file, so the model
    is wrong, not the disk). Each message says what the file is, on every command that opens
    it, without blocking."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    w = numpy_helper.from_array(np.arange(1024, dtype=np.float32), "w")
    g = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", 1, [1024])], [w])
    model = tmp_path / "m.onnx"
    onnx.save_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]),
                    str(model), save_as_external_data=True, location="w.bin", size_threshold=0)
    os.remove(tmp_path / "w.bin")
    os.mkfifo(tmp_path / "w.bin")
    pipe = tmp_path / "pipe.onnx"
    os.mkfifo(pipe)
    out = tmp_path / "out.onemodel"
    for target, fifo, line in (
            (model, tmp_path / "w.bin",
             "InvalidModel: tensor 'w', external data location 'w.bin': 'w.bin' is a FIFO, "
             "not a regular file [ModelProto.graph.initializer[0]]"),
            (pipe, pipe, "Io: cannot open: it is a FIFO, not a regular file")):
        for args in (["info", target], ["convert", target, out], ["run", target],
                     ["verify", target, target]):
            r = _cli_guarded(args, fifo)
            assert r.returncode == 2, (args, r.stderr)
            assert r.stderr.count("\n") == 1 and r.stderr.startswith(line), (args, r.stderr)
            assert str(fifo if fifo == pipe else model) in r.stderr, (args, r.stderr)
            assert not out.exists()
