"""Writing and reading through storage: determinism, atomicity, zero-copy maps, remote sources,
streaming copies, write-time refusals (nothing written), the plugin and the limits."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest
from container_models import OPSETS, simple_model, sink_model, vi

import onemodel
from onemodel import formats
from onemodel.errors import InvalidModelError, IoError, OneModelError, UnsupportedError
from onemodel.formats.container import PLUGIN, read, read_bytes, write, write_bytes
from onemodel.formats.container.header import Header, parse_header
from onemodel.formats.container.manifest import json_depth
from onemodel.ir import Attribute, Graph, Model, Node, SequenceType, Tensor, Type
from onemodel.ir.record import buffer_view
from onemodel.limits import MAX_MANIFEST_BYTES
from onemodel.storage import BytesSink, LocalSink, LocalSource, MemorySource
from onemodel.storage.base import Sink, Source
from onemodel.storage.blob import Blob


def test_writing_is_deterministic_and_stable_through_a_read():
    a = write_bytes(sink_model())
    b = write_bytes(sink_model())
    assert a == b
    # a model read from a file writes the same file (sink_model shares one tensor object
    # between two attributes; read back, they are two objects with a range each)
    b = write_bytes(read_bytes(a))
    assert len(b) > len(a) and write_bytes(read_bytes(b)) == b
    m = simple_model()
    m.graph.nodes[0].metadata_props = sink_model().metadata_props
    a = write_bytes(m)
    assert write_bytes(read_bytes(a)) == a


class _Boom(Source):
    """A remote file whose reads fail, as one might half way through a write."""

    name, size = "remote://boom", 1 << 20

    def read(self, offset, length):
        raise IoError("connection reset while fetching tensor bytes")


def test_a_failed_write_leaves_no_file(tmp_path):
    dest = tmp_path / "m.onemodel"
    m = simple_model(np.ones(1 << 16, np.float32))
    m.graph.initializers.append(Tensor(name="late", data_type=1, dims=[4],
                                       raw_data=Blob(_Boom(), 0, 16)))
    with pytest.raises(IoError):
        with LocalSink(str(dest)) as sink:
            write(m, sink)
    assert os.listdir(tmp_path) == []
    # an existing destination is left as it was
    dest.write_bytes(b"old")
    with pytest.raises(IoError):
        with LocalSink(str(dest)) as sink:
            write(m, sink)
    assert dest.read_bytes() == b"old" and os.listdir(tmp_path) == ["m.onemodel"]


class _NoWriteSink(Sink):
    def write(self, data):
        raise AssertionError("a refused model must not write anything")

    def tell(self):
        return 0


def _with_node(**node_fields):
    m = simple_model()
    for k, v in node_fields.items():
        setattr(m.graph.nodes[0], k, v)
    return m


def _nested_graphs(depth):
    g = Graph(name="leaf")
    for _ in range(depth - 1):
        g = Graph(nodes=[Node(op_type="If", attributes=[Attribute(name="then_branch", type=5,
                                                                  g=g)])])
    return Model(ir_version=10, opset_imports=OPSETS, graph=g)


def _nested_types(depth):
    t = Type.tensor(1)
    for _ in range(depth - 1):
        t = Type(sequence_type=SequenceType(elem_type=t))
    m = simple_model()
    m.graph.value_info = [vi("s")]
    m.graph.value_info[0].type = t
    return m


def _refused():
    m = simple_model()
    cases = {}
    bad = simple_model()
    bad.graph.initializers[0].data_type = 0
    cases["dtype-0"] = (bad, UnsupportedError, "graph.initializers[0].data_type")
    bad = simple_model()
    bad.graph.initializers[0].data_type = 29
    cases["dtype-29"] = (bad, UnsupportedError, "graph.initializers[0].data_type")
    cases["name-not-utf8"] = (_with_node(outputs=["y\udcff"]), UnsupportedError,
                              "graph.nodes[0].outputs[0]")
    bad = simple_model()
    bad.graph.initializers[0].name = "w\udc80"
    cases["initializer-name-not-utf8"] = (bad, UnsupportedError, "graph.initializers[0].name")
    bad = simple_model()
    bad.graph.inputs.append(vi("x"))
    cases["duplicate"] = (bad, InvalidModelError, "graph.inputs[1].name")
    cases["undefined"] = (_with_node(inputs=["x", "nope"]), InvalidModelError,
                          "graph.nodes[0].inputs[1]")
    cases["cycle"] = (_with_node(inputs=["x", "y"]), InvalidModelError, "graph.nodes[0]")
    cases["domain"] = (_with_node(domain="nowhere"), InvalidModelError, "graph.nodes[0].domain")
    cases["graph-nesting"] = (_nested_graphs(65), UnsupportedError, None)
    cases["type-nesting"] = (_nested_types(64), UnsupportedError,
                             "graph.value_info[0].type" + ".sequence_type.elem_type" * 63)
    bad = simple_model()
    bad.graph.initializers[0].dims = [-3]
    cases["negative-dim"] = (bad, InvalidModelError, "graph.initializers[0].dims[0]")
    bad = simple_model()
    bad.graph.initializers[0].raw_data = b"\0" * 8
    cases["raw-length"] = (bad, InvalidModelError, "graph.initializers[0]")
    bad = simple_model()
    bad.graph.initializers[0] = Tensor(name="w", data_type=1, dims=[3], data_location=1)
    cases["unresolved-external"] = (bad, InvalidModelError, "graph.initializers[0]")
    bad = simple_model()
    bad.graph.initializers[0] = Tensor(name="w", data_type=1, dims=[3],
                                       int64_data=np.arange(3, dtype="<i8"))
    cases["typed-field-mismatch"] = (bad, InvalidModelError, "graph.initializers[0].int64_data")
    cases["int-range"] = (_with_node(attributes=[Attribute(name="a", type=2, i=1 << 63)]),
                          UnsupportedError, "graph.nodes[0].attributes[0].i")
    bad = simple_model()
    bad.graph.initializers[0] = Tensor(name="w", data_type=2, dims=[1 << 31], raw_data=b"")
    cases["too-big"] = (bad, UnsupportedError, "graph.initializers[0]")
    del m
    return cases


REFUSED = _refused()


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_unwritable_models_are_refused_before_anything_is_written(case):
    model, kind, path = REFUSED[case]
    with pytest.raises(kind) as info:
        write(model, _NoWriteSink())
    if path is not None:
        assert info.value.path == path
    else:
        assert info.value.path.startswith("graph.nodes[0].attributes[0].g")


def test_big_file_tensors_are_read_only_views_of_the_map(tmp_path):
    w = np.arange(1 << 19, dtype=np.float32)  # 2 MiB
    path = str(tmp_path / "big.onemodel")
    with LocalSink(path) as sink:
        write(simple_model(w), sink)
    assert os.path.getsize(path) >= 1 << 20
    source = LocalSource(path)
    assert source.mapped
    model = read(source)
    t = model.graph.initializers[0]
    arr = t.numpy()
    whole = np.frombuffer(source.whole(), dtype=np.uint8)
    assert np.shares_memory(arr, whole) and not arr.flags.writeable
    assert isinstance(t.raw_data, Blob) and buffer_view(t.raw_data).readonly
    start = t.raw_data.offset
    assert start % 64 == 0 and t.raw_data.source is source
    assert np.array_equal(arr, w)
    assert model.resources == [source] and model.source == path
    model.close()
    assert np.array_equal(arr, w)  # arrays stay valid after close


class _RecordingSink(BytesSink):
    def __init__(self):
        super().__init__()
        self.copies = []

    def copy_from(self, source, offset, length):
        self.copies.append((source, offset, length))
        super().copy_from(source, offset, length)


def test_tensors_read_from_a_file_are_copied_from_the_source_when_rewritten():
    m = simple_model(np.arange(100, dtype=np.float32))
    data = write_bytes(m)
    src = MemorySource(data)
    back = read(src)
    sink = _RecordingSink()
    write(back, sink)
    assert sink.getvalue() == data
    (data_offset,) = struct.unpack_from("<Q", data, 32)
    assert sink.copies == [(src, data_offset, 400)]
    # a tensor whose raw_data was replaced is written from its new bytes
    back.graph.initializers[0].raw_data = np.zeros(100, np.float32).view(np.uint8)
    sink = _RecordingSink()
    write(back, sink)
    assert sink.copies == []
    assert read_bytes(sink.getvalue()).graph.initializers[0].numpy().sum() == 0


class _Remote(Source):
    """A source without a local view: every read is a range request."""

    def __init__(self, data):
        self._data = bytes(data)
        self.size = len(self._data)
        self.name = "remote://m.onemodel"
        self.reads = []

    def read(self, offset, length):
        self._check_range(offset, length)
        self.reads.append((offset, length))
        return memoryview(self._data)[offset:offset + length]


def test_remote_tensors_are_lazy_ranges():
    m = sink_model()
    data = write_bytes(m)
    src = _Remote(data)
    back = read(src)
    inits = {t.name: t for t in back.graph.initializers}
    w0 = inits["w0"]
    assert isinstance(w0.raw_data, Blob) and not w0.raw_data.loaded
    ext = inits["ext_w"]
    assert isinstance(ext.external, Blob) and ext.raw_data is None
    n_reads = len(src.reads)
    assert w0.numpy().tolist() == [1.0, 2.0, 3.0] and len(src.reads) == n_reads + 1
    assert back == m
    # writing it again streams the ranges not fetched yet, and writes the fetched one
    sink = _RecordingSink()
    write(back, sink)
    assert sink.copies and all(c[0] is src for c in sink.copies)
    assert (src, w0.raw_data.offset, 12) not in sink.copies
    assert (src, ext.external.offset, 16) in sink.copies
    assert read_bytes(sink.getvalue()) == m


def test_plugin_and_registry():
    assert PLUGIN.name == "onemodel" and PLUGIN.suffixes == (".onemodel",)
    data = write_bytes(simple_model())
    assert PLUGIN.sniff(data[:16]) and not PLUGIN.sniff(b"\x08\x07")
    assert formats.by_name("onemodel") is PLUGIN
    assert formats.detect(data[:16]) is PLUGIN
    assert formats.detect(None, "x.onemodel") is PLUGIN
    assert write(simple_model(), BytesSink(), strict_v1=True) == [
        'manifest.opsets[0].domain: explicitly "" in the ONNX file; a plain reader reads it as '
        'absent (same meaning, only its presence differs)']
    assert PLUGIN.read(MemorySource(data)) == read_bytes(data)
    # a OneModel file has no external data: reader options of ONNX are refused, not ignored
    with pytest.raises(UnsupportedError, match="base_dir does not apply to onemodel input"):
        onemodel.load(data, base_dir="/tmp")


def test_header_limits_without_a_huge_file():
    h = Header.for_layout(MAX_MANIFEST_BYTES + 1, 0)
    with pytest.raises(UnsupportedError) as info:
        parse_header(h.pack(), h.file_length)
    assert info.value.path == "header.manifest_length"
    h = Header.for_layout(100, 64)
    assert parse_header(h.pack(), h.file_length) == h
    assert h.data_offset == 192 and h.file_length == 256


def test_json_depth_scan_skips_strings_and_stops_at_the_limit():
    assert json_depth(b'{"a":"[[[[{{{","b":[[1]]}') == (3, None)
    assert json_depth(b'["\\"[[[", [[]]]') == (3, None)
    deep = b"[" * 2000 + b"]" * 2000
    depth, where = json_depth(deep, limit=1024)
    assert depth == 2000 and where == 1024


@pytest.mark.parametrize("copies", [1, 40_000], ids=["loop", "numpy"])
def test_json_depth_counts_alike_below_and_above_the_loop_size(copies):
    """Up to 65,536 brackets a Python loop counts them, beyond numpy: the same answers."""
    from onemodel.formats.container import manifest
    body = b'{"a":[{"b":[1,"]]"]}],"c":{}}'  # 8 brackets outside the string, depth 4
    assert (len(body) - 2) * copies > manifest._SMALL_BRACKETS or copies == 1
    data = b"[" + b",".join([body] * copies) + b"]"
    assert json_depth(data) == (5, None)
    deep = b"[" + b",".join([body] * copies + [b"[" * 1030 + b"]" * 1030]) + b"]"
    assert json_depth(deep, limit=1024) == (1031, deep.index(b"[" * 1030) + 1023)


def test_errors_name_the_source_and_are_one_of_the_kinds(tmp_path):
    path = tmp_path / "bad.onemodel"
    data = bytearray(write_bytes(simple_model()))
    data[12] = 1  # flags
    path.write_bytes(bytes(data))
    with LocalSource(str(path)) as src, pytest.raises(OneModelError) as info:
        read(src)
    assert str(info.value) == (f"Unsupported: flags 0x1 are not supported (version 1 has none) "
                               f"[header.flags] at offset 0xc in {path}")
