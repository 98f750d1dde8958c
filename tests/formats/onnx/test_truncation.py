"""A cut ONNX file says it is truncated (Clause 12.2.5 at the outermost level), in both decoders.

A read past the end of the top-level message (the whole input) is a truncated file: the error
gives the field path, the offset, the bytes the read needs and the file size. A length past the
end of an inner message stays a malformed length. The C decoder (``_cdecode.c``) and the Python
one (``wire_decode._decode``) must give the same message, path and offset; every case runs both.

Offsets in ``testdata/models/cnn_dynamo.onnx`` (read off its first bytes, ``xxd``):
``08 0a`` ir_version 10 at 0; ``12 07 pytorch`` producer_name at 2 (value 4..11);
``1a 0a 2.13.0+cpu`` producer_version at 11 (value 13..23); ``3a ab c8 03`` graph at 23 (0x17),
length 58411 (three octets at 24..27), value 27..58438; opset_import at 58438 (6 octets, to the
end: 58444).
"""

from __future__ import annotations

import contextlib
import importlib
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner
from wire import key, ld, model_with_initializer, tensor, varint, vint

import onemodel
from onemodel.cli import app
from onemodel.errors import InvalidModelError, MalformedError
from onemodel.formats.onnx import reader
from onemodel.storage.base import MemorySource

D = importlib.import_module("onemodel.formats.onnx.wire_decode")
MODELS = Path(__file__).resolve().parents[3] / "testdata" / "models"
CNN = (MODELS / "cnn_dynamo.onnx").read_bytes()
GRAPH_END = 58438  # 27 + 58411
T = "the file is truncated: "
VARINT = T + "it ends before the end of a varint, the file has {} bytes"

PATHS = [True, False] if D._C is not None else [True]  # pure Python, C


@contextlib.contextmanager
def _pure(flag: bool):
    old = os.environ.get("ONEMODEL_PURE_PYTHON")
    os.environ["ONEMODEL_PURE_PYTHON"] = "1" if flag else "0"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("ONEMODEL_PURE_PYTHON", None)
        else:
            os.environ["ONEMODEL_PURE_PYTHON"] = old


def _error(data: bytes, message: str = "ModelProto"):
    """``(message, path, offset)`` of the MalformedError both decoders raise (asserted equal)."""
    got = []
    for pure in PATHS:
        with _pure(pure), pytest.raises(MalformedError) as info:
            D.decode(data, message)
        got.append((info.value.message, info.value.path, info.value.offset))
    assert all(g == got[0] for g in got), got
    return got[0]


def test_the_c_decoder_runs_here():
    """ONEMODEL_REQUIRE_C=1 (make test): the comparisons below did run the C decoder."""
    if os.environ.get("ONEMODEL_REQUIRE_C") == "1":
        assert len(PATHS) == 2, D._C_ERROR


@pytest.mark.parametrize("cut,expected", [
    # in the header fields
    (1, (VARINT.format(1), "ModelProto.ir_version", 1)),  # the key, not its value
    (5, (T + "field producer_name (length 7) needs 11 bytes, the file has 5",
         "ModelProto.producer_name", 2)),
    (12, (VARINT.format(12), "ModelProto.producer_version", 12)),  # no length octet
    (20, (T + "field producer_version (length 10) needs 23 bytes, the file has 20",
          "ModelProto.producer_version", 11)),
    # in the middle of graph's three-octet length
    (25, (VARINT.format(25), "ModelProto.graph", 24)),
    (26, (VARINT.format(26), "ModelProto.graph", 24)),
    # inside graph: the trial's cuts and the last octet of graph
    (5000, (T + "field graph (length 58411) needs 58438 bytes, the file has 5000",
            "ModelProto.graph", 0x17)),
    (30000, (T + "field graph (length 58411) needs 58438 bytes, the file has 30000",
             "ModelProto.graph", 0x17)),
    (GRAPH_END - 1, (T + f"field graph (length 58411) needs 58438 bytes, the file has "
                         f"{GRAPH_END - 1}", "ModelProto.graph", 0x17)),
    # in the last field, opset_import (length 4)
    (len(CNN) - 1, (T + f"field opset_import (length 4) needs {len(CNN)} bytes, the file has "
                        f"{len(CNN) - 1}", "ModelProto.opset_import", GRAPH_END)),
])
def test_cut_model(cut, expected):
    assert _error(CNN[:cut]) == expected


def test_cut_inside_raw_data_of_an_initializer():
    """The cut lies in an initializer's raw_data: graph, the outermost field around it, is what
    runs past the end."""
    t = onemodel.load(MODELS / "cnn_dynamo.onnx").graph.initializers[2]
    start, n = t.raw_data.offset, t.raw_data.nbytes
    assert start > 27 and start + n < GRAPH_END
    cut = start + n // 2
    assert _error(CNN[:cut]) == (T + f"field graph (length 58411) needs 58438 bytes, the file "
                                 f"has {cut}", "ModelProto.graph", 0x17)


def test_cut_tensor_file_names_raw_data():
    """A TensorProto file (a test vector .pb) cut in its raw_data: raw_data is a top-level
    field there. tensor() writes dims 2, 3 (4 octets), data_type (2), name 't' (3), then raw_data:
    its key at 9, its length 24 at 10, the value at 11 to 35."""
    data = tensor((2, 3), 1, bytes(range(24)))
    assert len(data) == 35
    assert _error(data[:20], "TensorProto") == (
        T + "field raw_data (length 24) needs 35 bytes, the file has 20", "TensorProto.raw_data",
        9)


def test_every_prefix_is_truncated_or_incomplete():
    """Every cut of a real model fails with the truncation message (or, at a field boundary,
    decodes to a model the reader refuses as incomplete); never "runs past the end of its
    message", and both decoders agree."""
    data = (MODELS / "sklearn_pipeline_zipmap.onnx").read_bytes()
    boundaries = 0
    for cut in range(len(data)):
        try:
            for pure in PATHS:
                with _pure(pure):
                    reader.decode_model(data[:cut])
        except MalformedError:
            msg, _, _ = _error(data[:cut])
            assert msg.startswith(T) and f"the file has {cut}" in msg, (cut, msg)
        except InvalidModelError:
            boundaries += 1  # no graph yet, or a tensor not complete
    assert 0 < boundaries < 10  # the cuts at a top-level field boundary: a handful


@pytest.mark.parametrize("data,expected", [
    # the top-level message is an AttributeProto / TensorProto: fixed-width values
    (key(2, 5) + b"\x00\x00", (T + "field f (a 32-bit value) needs 5 bytes, the file has 3",
                               "AttributeProto.f", 0)),
    (key(10, 1) + b"\x01" * 7, (T + "field double_data (a 64-bit value) needs 9 bytes, the file "
                                    "has 8", "TensorProto.double_data", 0)),
    # unknown fields (tag 99: a two-octet key) skipped past the end
    (key(99, 2) + varint(100) + b"abc", (T + "a field of length 100 needs 103 bytes, the file "
                                             "has 6", "ModelProto", 2)),
    (key(99, 5) + b"123", (T + "a 32-bit value needs 6 bytes, the file has 5", "ModelProto", 2)),
    (key(99, 1) + b"1234567", (T + "a 64-bit value needs 10 bytes, the file has 9",
                               "ModelProto", 2)),
    (key(99, 0) + b"\x80", (VARINT.format(3), "ModelProto", 2)),
    (key(99, 2) + b"\x80\x80", (VARINT.format(4), "ModelProto", 2)),
    # a key cut in its middle; a value varint cut after nine octets
    (b"\x80", (VARINT.format(1), "ModelProto", 0)),
    (key(1, 0) + b"\xff" * 9, (VARINT.format(10), "ModelProto.ir_version", 1)),
    # lengths whose end is past 2^64: the decimal sum is exact in C too
    (key(7, 2) + varint((1 << 64) - 1), (T + f"field graph (length {(1 << 64) - 1}) needs "
                                             f"{(1 << 64) + 10} bytes, the file has 11",
                                         "ModelProto.graph", 0)),
    (key(99, 2) + varint((1 << 64) - 1) + b"ab", (T + f"a field of length {(1 << 64) - 1} "
                                                      f"needs {(1 << 64) + 11} bytes, the file "
                                                      "has 14", "ModelProto", 2)),
    (key(7, 2) + varint(1 << 62), (T + f"field graph (length {1 << 62}) needs "  # 9 octets
                                       f"{(1 << 62) + 10} bytes, the file has 10",
                                   "ModelProto.graph", 0)),
])
def test_hand_made_cuts(data, expected):
    message = ("AttributeProto" if expected[1].startswith("AttributeProto") else
               "TensorProto" if expected[1].startswith("TensorProto") else "ModelProto")
    assert _error(data, message) == expected


@pytest.mark.parametrize("data,expected", [
    # node's op_type claims 50 octets; node has 6, the file has far more after graph
    (vint(1, 10) + ld(7, ld(1, key(4, 2) + varint(50) + b"Relu")) + ld(99, b"x" * 200),
     ("length 50 of field op_type runs past the end of its message",
      "ModelProto.graph.node[0].op_type", 6)),
    # the same with nothing after graph: the lengths around node say it ends within the file
    (vint(1, 10) + ld(7, ld(1, key(4, 2) + varint(50) + b"Relu")),
     ("length 50 of field op_type runs past the end of its message",
      "ModelProto.graph.node[0].op_type", 6)),
    # a fixed-width value, a varint and an unknown field at the end of an inner message
    (vint(1, 10) + ld(7, ld(1, ld(5, ld(1, b"a") + key(2, 5) + b"\x00\x00"))),
     ("field f runs past the end of its message", "ModelProto.graph.node[0].attribute[0].f",
      11)),
    (model_with_initializer(key(1, 0) + b"\x80"),
     ("varint runs past the end of its message", "ModelProto.graph.initializer[0].dims", 10)),
    (vint(1, 10) + ld(7, key(99, 2) + varint(5) + b"ab") + ld(99, b"x" * 20),
     ("length 5 runs past the end of its message", "ModelProto.graph", 6)),
])
def test_inner_lengths_stay_malformed(data, expected):
    assert _error(data) == expected


class _Remote(MemorySource):
    """A source without ``whole()``: the reader goes through its block cache (Python path)."""

    def whole(self):
        return None


def test_block_cache_path_says_the_same():
    src = _Remote(CNN[:5000], name="r.onnx")
    with pytest.raises(MalformedError) as info:
        reader.read(src, block_size=1024)
    assert (info.value.message, info.value.path, info.value.offset) == (
        T + "field graph (length 58411) needs 58438 bytes, the file has 5000", "ModelProto.graph",
        0x17)


@pytest.mark.parametrize("cut", [5000, 30000])
def test_cli_line(tmp_path, cut):
    """The trial: ``head -c 5000 cnn_dynamo.onnx > t.onnx; onemodel info t.onnx``."""
    path = tmp_path / "t.onnx"
    path.write_bytes(CNN[:cut])
    r = CliRunner().invoke(app, ["info", str(path)])
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines() == [
        f"Malformed: the file is truncated: field graph (length 58411) needs 58438 bytes, the "
        f"file has {cut} [ModelProto.graph] at offset 0x17 in {path}"]
