"""Test-data and input files are read as models are (issue 24, item 4): a regular file only,
opened without blocking, every declared size checked against the file before anything is
allocated. Each hostile file is one ``Io`` or ``Malformed`` line (exit 2), never an internal
error (exit 70), a MemoryError or a hang; each test runs under a time and memory guard."""

from __future__ import annotations

import os
import struct
import sys

import numpy as np
import onnx
import pytest
from guards import bounded
from onnx import TensorProto as TP
from onnx import helper, numpy_helper
from servers.fifo import run_guarded
from typer.testing import CliRunner

import onemodel
from onemodel.cli import app
from onemodel.cli.run_inputs import read_input
from onemodel.errors import InvalidModelError, IoError, MalformedError
from onemodel.value_files import read_pb

posix = pytest.mark.skipif(sys.platform == "win32" or not hasattr(os, "mkfifo"),
                           reason="FIFOs and /dev/zero are POSIX")
MiB = 1 << 20


def _model(tmp_path):
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TP.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    return path


def _data_set(tmp_path, name="set"):
    d = tmp_path / name
    d.mkdir()
    want = numpy_helper.from_array(np.zeros(2, np.float32)).SerializeToString()
    (d / "output_0.pb").write_bytes(want)
    return d


def _cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def _one_line(r, line: str) -> None:
    assert r.exit_code == 2, r.output
    assert r.stderr == line + "\n"


@posix
def test_an_input_pb_linked_to_dev_zero_is_refused_unread(tmp_path):
    model, d = _model(tmp_path), _data_set(tmp_path)
    os.symlink("/dev/zero", d / "input_0.pb")
    with bounded(seconds=20, peak=16 * MiB):
        r = _cli("run", model, "--test-data", d)
        with pytest.raises(IoError) as e:
            read_pb(d / "input_0.pb")
    _one_line(r, f"Io: cannot open: it is a character device, not a regular file in "
                 f"{d / 'input_0.pb'}")
    assert e.value.message == "cannot open: it is a character device, not a regular file"
    with bounded(seconds=20, peak=16 * MiB):  # --input NAME=FILE.pb and a .npy alike
        r = _cli("run", model, "--input", f"x={d / 'input_0.pb'}")
        os.symlink("/dev/zero", tmp_path / "zero.npy")
        r2 = _cli("run", model, "--input", f"x={tmp_path / 'zero.npy'}")
    _one_line(r, f"Io: cannot open: it is a character device, not a regular file in "
                 f"{d / 'input_0.pb'}")
    _one_line(r2, f"Io: cannot read input 'x': cannot open: it is a character device, not a "
                  f"regular file in {tmp_path / 'zero.npy'}")


@posix
def test_an_input_pb_that_is_a_fifo_without_a_writer_does_not_block(tmp_path):
    model, d = _model(tmp_path), _data_set(tmp_path)
    fifo = d / "input_0.pb"
    os.mkfifo(fifo)
    with bounded(seconds=30, peak=16 * MiB):
        r = run_guarded(lambda: _cli("run", model, "--test-data", d), fifo)
    _one_line(r, f"Io: cannot open: it is a FIFO, not a regular file in {fifo}")
    npy = tmp_path / "x.npy"
    os.mkfifo(npy)
    with bounded(seconds=30, peak=16 * MiB):
        r = run_guarded(lambda: _cli("run", model, "--input", f"x={npy}"), npy)
    _one_line(r, f"Io: cannot read input 'x': cannot open: it is a FIFO, not a regular file "
                 f"in {npy}")


def _npy(shape: str, body: bytes, descr: str = "<f8") -> bytes:
    """A version 1.0 .npy file: magic, header of ``shape`` (Python tuple syntax), ``body``."""
    head = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}"
    head += " " * (-(10 + len(head) + 1) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode() + body


def test_a_npy_header_claiming_eight_tebibytes_is_malformed_before_allocating(tmp_path):
    model = _model(tmp_path)
    path = tmp_path / "big.npy"
    path.write_bytes(_npy("(1099511627776,)", bytes(40)))  # 2^40 float64 elements: 168 bytes
    line = ("Malformed: input 'x': the .npy header declares shape [1099511627776] of float64 "
            f"(8.0 TiB), but the file holds 40 bytes after its header in {path}")
    with bounded(seconds=20, peak=16 * MiB):
        r = _cli("run", model, "--input", f"x={path}")
        with onemodel.load(model) as m, pytest.raises(MalformedError) as e:
            read_input(m, "x", str(path))
    _one_line(r, line)
    assert str(e.value) == line


def test_a_npy_body_shorter_or_longer_than_its_header_is_malformed(tmp_path):
    model = _model(tmp_path)
    with onemodel.load(model) as m:
        for extra, held in ((-8, 8), (8, 24)):
            path = tmp_path / f"n{held}.npy"
            body = np.array([1.5, -2.0]).tobytes()
            path.write_bytes(_npy("(2,)", body[:extra] if extra < 0 else body + bytes(extra)))
            with pytest.raises(MalformedError) as e:
                read_input(m, "x", str(path))
            assert e.value.message == (f"input 'x': the .npy header declares shape [2] of "
                                       f"float64 (16 bytes), but the file holds "
                                       f"{held} bytes after its header")
        path = tmp_path / "ok.npy"
        path.write_bytes(_npy("(2,)", np.array([1.5, -2.0]).tobytes()))
        assert read_input(m, "x", str(path)).tolist() == [1.5, -2.0]  # exactly right: read


def test_a_pb_tensor_claiming_more_elements_than_its_bytes_is_refused(tmp_path):
    """A TensorProto whose dims say 2^40 floats but whose raw_data holds 8 bytes: the decoder's
    tensor check refuses it against the bytes it has, before any array is made."""
    t = onnx.TensorProto(data_type=TP.FLOAT, dims=[1 << 40], raw_data=bytes(8))
    path = tmp_path / "input_0.pb"
    path.write_bytes(t.SerializeToString())
    with bounded(seconds=20, peak=16 * MiB), pytest.raises(InvalidModelError) as e:
        read_pb(path)
    assert e.value.source == str(path)
    assert "raw_data" in str(e.value) or "bytes" in str(e.value)
