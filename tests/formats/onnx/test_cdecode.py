"""The C decoder (_cdecode.c) against the pure-Python one (wire_decode._decode), which specifies it.

For every input both must give equal records, with values of the same types, the same
(tensor, offset) list for the checks, the same ``raw_data`` Blobs (or views), or both must raise
MalformedError with the same message, field path and offset (Clause 12). Inputs: the conformance
files of the installed onnx package, models made with onnx.helper that set every message and field,
and hypothesis-made octets (field soups of every wire type, mutations, hostile lengths and depths).

The C tests are skipped when the extension is not built; ``test_c_decoder_is_built`` fails then if
ONEMODEL_REQUIRE_C=1 (``make test`` sets it, so CI proves the build works).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import pathlib
import tracemalloc

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from wire import f32, key, ld, model_with_initializer, tensor, varint, vint

from onemodel.errors import MalformedError, OneModelError
from onemodel.formats.onnx.checks import check_tensors
from onemodel.formats.onnx.schema import (
    BYTES,
    DOUBLE,
    ENUM,
    FLOAT,
    INT32,
    INT64,
    MESSAGE,
    MESSAGES,
    RAW,
    STRING,
    UINT64,
)
from onemodel.ir import Float32, Graph, Model, Record, Segment, Tensor
from onemodel.ir.record import ARRAY, BUFFER, LIST_KINDS, LIST_MSG, MSG
from onemodel.storage.base import MemorySource
from onemodel.storage.blob import Blob

D = importlib.import_module("onemodel.formats.onnx.wire_decode")
C = D._C
needs_c = pytest.mark.skipif(C is None, reason=f"C decoder not built ({D._C_ERROR})")
ONNX_DATA = pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data"
TESTDATA = pathlib.Path(__file__).resolve().parents[3] / "testdata" / "models"


def test_c_decoder_is_built():
    """With ONEMODEL_REQUIRE_C=1 a missing or unusable extension is a failure, not a skip."""
    if os.environ.get("ONEMODEL_REQUIRE_C") != "1":
        pytest.skip("ONEMODEL_REQUIRE_C is not set")
    assert C is not None, f"the C decoder is not in use: {D._C_ERROR}"


# -- running both paths ----------------------------------------------------------------------
@contextlib.contextmanager
def _pure(flag: bool):
    old = os.environ.get("ONEMODEL_PURE_PYTHON")
    if flag:
        os.environ["ONEMODEL_PURE_PYTHON"] = "1"
    else:
        os.environ.pop("ONEMODEL_PURE_PYTHON", None)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("ONEMODEL_PURE_PYTHON", None)
        else:
            os.environ["ONEMODEL_PURE_PYTHON"] = old


def _run(data, message, pure, raw=None, blob_source=None):
    """``("ok", record, tensors)`` or ``("error", kind, text, path, offset)``."""
    seen = []
    with _pure(pure):
        try:
            obj = D.decode(data, message, raw=raw, blob_source=blob_source,
                           check=lambda root, tensors: seen.append(list(tensors)))
        except MalformedError as e:
            return ("error", type(e), e.message, e.path, e.offset)
    return ("ok", obj, seen[0])


def _paths(root) -> dict:
    """id(record) -> its path, for every record under ``root`` (the last path when shared)."""
    out, stack = {}, [(root, "")]
    while stack:
        obj, path = stack.pop()
        out[id(obj)] = path
        for name, kind, _ in obj.FIELDS:
            v = getattr(obj, name)
            if kind == MSG and v is not None:
                stack.append((v, f"{path}.{name}"))
            elif kind == LIST_MSG:
                stack.extend((x, f"{path}.{name}[{i}]") for i, x in enumerate(v))
    return out


def _same_types(a, b, path="") -> None:
    """Every field of ``a`` and ``b`` holds a value of the same type (and dtype), recursively;
    a raw_data Blob names the same range of the same source; EXTRA slots agree too."""
    assert type(a) is type(b), path
    for name, kind, _ in a.FIELDS:
        va, vb = getattr(a, name), getattr(b, name)
        where = f"{path}.{name}"
        assert type(va) is type(vb), (where, type(va), type(vb))
        if kind == ARRAY and va is not None:
            assert va.dtype == vb.dtype and va.ndim == 1, where
        elif kind == BUFFER and isinstance(va, Blob):
            assert va == vb and not va.loaded and not vb.loaded, where
        elif kind == MSG and va is not None:
            _same_types(va, vb, where)
        elif kind in LIST_KINDS:
            assert len(va) == len(vb), where
            for i, (x, y) in enumerate(zip(va, vb)):
                if isinstance(x, Record):
                    _same_types(x, y, f"{where}[{i}]")
                else:
                    assert type(x) is type(y), (f"{where}[{i}]", type(x), type(y))
    assert type(a.unknown) is bytes and type(b.unknown) is bytes, path
    for name in a.EXTRA:
        va, vb = getattr(a, name), getattr(b, name)
        assert va is None and vb is None, (path, name)


def _compare(data, message="ModelProto", raw=None, blobs=None):
    """Decode with both paths and assert the outcomes are the same. Returns the outcome.
    ``blobs``: the Source whose bytes ``data`` are (True: a MemorySource over ``data``), so
    raw_data values are Blobs of it."""
    if blobs is True:
        blobs = MemorySource(data)
    got_c = _run(data, message, False, raw, blobs)
    got_py = _run(data, message, True, raw, blobs)
    if got_c[0] == "error" or got_py[0] == "error":
        assert got_c == got_py
        return got_c
    _, obj_c, tensors_c = got_c
    _, obj_py, tensors_py = got_py
    assert obj_c == obj_py
    _same_types(obj_c, obj_py, message)
    pc, pp = _paths(obj_c), _paths(obj_py)
    assert [(pc[id(t)], off) for t, off in tensors_c] == [(pp[id(t)], off) for t, off in tensors_py]
    return got_c


@needs_c
def test_decode_uses_the_c_path(monkeypatch):
    calls = []

    class Spy:
        def decode(self, *args):
            calls.append(args[1])
            return C.decode(*args)

    monkeypatch.setattr(D, "_C", Spy())
    monkeypatch.delenv("ONEMODEL_PURE_PYTHON", raising=False)
    m = D.decode(model_with_initializer(tensor((2,), 1, b"\0" * 8)))
    assert calls == ["ModelProto"] and m.graph.initializers[0].dims == [2]
    monkeypatch.setenv("ONEMODEL_PURE_PYTHON", "1")
    D.decode(model_with_initializer(tensor((2,), 1, b"\0" * 8)))
    assert calls == ["ModelProto"]


# -- conformance files and real models -------------------------------------------------------
def _files(suffix):
    return sorted(str(p.relative_to(ONNX_DATA)) for p in ONNX_DATA.rglob(f"*{suffix}"))


@needs_c
@pytest.mark.parametrize("name", _files(".onnx"))
def test_onnx_backend_models(name):
    data = (ONNX_DATA / name).read_bytes()
    out = _compare(data, "ModelProto", blobs=True)
    assert out[0] == "ok"  # the conformance models are valid ONNX


@needs_c
def test_onnx_backend_pb_files():
    """Every .pb vector, read as each message it can be (TensorProto, SequenceProto, MapProto,
    OptionalProto); the two decoders agree on all of them."""
    files = _files(".pb")
    assert len(files) > 100
    ok = 0
    for name in files:
        data = (ONNX_DATA / name).read_bytes()
        for message in ("TensorProto", "SequenceProto", "MapProto", "OptionalProto"):
            ok += _compare(data, message)[0] == "ok"
    assert ok >= len(files)  # each file is at least valid as its own message


@needs_c
@pytest.mark.parametrize("name", sorted(p.name for p in TESTDATA.glob("*.onnx")))
def test_real_models(name):
    from onemodel.storage import LocalSource

    with LocalSource(str(TESTDATA / name), mmap_threshold=0) as src:
        out = _compare(src.whole(), blobs=src)
        assert out[0] == "ok"
        del out


# -- every message and field, made with onnx.helper ----------------------------------------
def _full_model() -> onnx.ModelProto:
    """A model setting every message of Annex B and every field kind at least once."""
    f32a = np.array([1.5, -0.0, np.inf], np.float32)
    t_raw = numpy_helper.from_array(f32a, "t_raw")
    t_raw.doc_string = "raw"
    t_raw.metadata_props.add(key="k", value="v")
    t_float = helper.make_tensor("t_float", TensorProto.FLOAT, [3], [1.0, 2.0, float("nan")])
    t_i32 = helper.make_tensor("t_i32", TensorProto.INT8, [3], [-128, 0, 127])
    t_i64 = helper.make_tensor("t_i64", TensorProto.INT64, [2], [-(1 << 62), 7])
    t_f64 = helper.make_tensor("t_f64", TensorProto.DOUBLE, [2], [1e300, -2.5])
    t_u64 = helper.make_tensor("t_u64", TensorProto.UINT64, [2], [(1 << 64) - 1, 3])
    t_str = helper.make_tensor("t_str", TensorProto.STRING, [2], [b"a\xff", b""])
    t_ext = TensorProto(name="t_ext", data_type=TensorProto.FLOAT, dims=[4])
    t_ext.data_location = TensorProto.EXTERNAL
    t_ext.external_data.add(key="location", value="w.bin")
    t_seg = TensorProto(name="t_seg", data_type=TensorProto.FLOAT, dims=[4], float_data=[1, 2])
    t_seg.segment.begin, t_seg.segment.end = 0, 2
    sparse = helper.make_sparse_tensor(
        helper.make_tensor("sp", TensorProto.FLOAT, [2], [1.0, 2.0]),
        helper.make_tensor("sp_i", TensorProto.INT64, [2], [0, 3]), [2, 2])

    sub = helper.make_graph([helper.make_node("Identity", ["a"], ["b"])], "body",
                            [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N"])],
                            [helper.make_tensor_value_info("b", TensorProto.FLOAT, None)])
    tp = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [1, "M"]))
    attrs = [
        helper.make_attribute("f", 0.25), helper.make_attribute("i", -3),
        helper.make_attribute("s", b"bytes\x00\xff"), helper.make_attribute("t", t_raw),
        helper.make_attribute("g", sub), helper.make_attribute("floats", [1.0, -2.0]),
        helper.make_attribute("ints", [1, -1, 1 << 40]),
        helper.make_attribute("strings", [b"x", b"y"]),
        helper.make_attribute("tensors", [t_float, t_i64]),
        helper.make_attribute("graphs", [sub, sub]),
        helper.make_attribute("sparse_tensor", sparse),
        helper.make_attribute("sparse_tensors", [sparse]),
        helper.make_attribute("tp", tp), helper.make_attribute("type_protos", [tp, tp]),
        helper.make_attribute_ref("ref", onnx.AttributeProto.FLOAT, doc_string="ref doc"),
    ]
    node = helper.make_node("Custom", ["x", ""], ["y"], name="n0", domain="d", doc_string="nd",
                            overload="ov")
    node.attribute.extend(attrs)
    node.metadata_props.add(key="mk", value="mv")
    dc = node.device_configurations.add(configuration_id="cfg", pipeline_stage=2)
    spec = dc.sharding_spec.add(tensor_name="x", device=[0, 1])
    spec.index_to_device_group_map.add(key=0, value=[0, 1])
    sd = spec.sharded_dim.add(axis=0)
    sd.simple_sharding.add(dim_value=4, num_shards=2)
    sd.simple_sharding.add(dim_param="B", num_shards=2)

    types = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "N", None]),
        helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, [2]),
        helper.make_value_info("map", helper.make_map_type_proto(
            TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, [1]))),
        helper.make_value_info("opt", helper.make_optional_type_proto(
            helper.make_tensor_type_proto(TensorProto.INT32, []))),
        helper.make_sparse_tensor_value_info("sp_in", TensorProto.FLOAT, [2, 2]),
    ]
    opaque = onnx.ValueInfoProto(name="opq", doc_string="opaque")
    opaque.type.opaque_type.domain, opaque.type.opaque_type.name = "dom", "Thing"
    opaque.type.denotation = "IMAGE"
    opaque.metadata_props.add(key="a", value="b")
    types.append(opaque)
    types[0].type.tensor_type.shape.dim[0].denotation = "DATA_BATCH"

    graph = helper.make_graph([node], "main", types[:3], [helper.make_tensor_value_info(
        "y", TensorProto.FLOAT, [1])], [t_raw, t_float, t_i32, t_i64, t_f64, t_u64, t_str, t_ext,
                                        t_seg], doc_string="graph doc", value_info=types[3:],
        sparse_initializer=[sparse])
    qa = graph.quantization_annotation.add(tensor_name="x")
    qa.quant_parameter_tensor_names.add(key="SCALE_TENSOR", value="s")
    graph.metadata_props.add(key="gk", value="gv")

    fn = helper.make_function("local", "fn", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])],
                              [helper.make_opsetid("", 21)], attributes=["alpha"],
                              attribute_protos=[helper.make_attribute("beta", 2.0)],
                              doc_string="fn doc")
    fn.overload = "o1"
    fn.value_info.extend([helper.make_tensor_value_info("a", TensorProto.FLOAT, [1])])
    fn.metadata_props.add(key="fk", value="fv")

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid("local", 1)],
                              producer_name="p", producer_version="1", domain="dom",
                              model_version=5, doc_string="model doc", functions=[fn])
    model.metadata_props.add(key="mk", value="mv")
    model.training_info.append(helper.make_training_info(
        sub, [("a", "b")], sub, [("c", "d")]))
    model.configuration.add(name="cfg", num_devices=2, device=["cpu0", "cpu1"])
    return model


@needs_c
def test_full_model_every_field():
    data = _full_model().SerializeToString()
    src = MemorySource(data)
    out = _compare(data, blobs=src)
    assert out[0] == "ok"
    m = out[1]
    attrs = {a.name: a for a in m.graph.nodes[0].attributes}
    assert type(attrs["f"].f) is Float32 and attrs["f"].f == 0.25
    assert attrs["f"].f.bits == 0x3E800000
    assert attrs["floats"].floats.dtype == np.float32 and attrs["floats"].floats.tolist() == [1, -2]
    assert attrs["ints"].ints == [1, -1, 1 << 40] and type(attrs["ints"].ints[2]) is int
    assert attrs["s"].s == b"bytes\x00\xff" and attrs["ref"].ref_attr_name == "ref"
    init = {t.name: t for t in m.graph.initializers}
    raw = init["t_raw"]
    assert type(raw.raw_data) is Blob and bytes(raw.raw_data) == np.array(
        [1.5, -0.0, np.inf], np.float32).tobytes()
    assert raw.raw_data.source is src and raw.raw_data.nbytes == 12
    assert data[raw.raw_data.offset:raw.raw_data.offset + 12] == bytes(raw.raw_data)
    assert init["t_u64"].uint64_data.dtype == np.uint64
    assert init["t_u64"].uint64_data.tolist() == [(1 << 64) - 1, 3]
    assert init["t_i32"].int32_data.dtype == np.int32
    assert init["t_i64"].int64_data.tolist() == [-(1 << 62), 7]
    assert init["t_f64"].double_data.dtype == np.float64
    assert init["t_str"].string_data == [b"a\xff", b""]
    assert init["t_seg"].segment == Segment(begin=0, end=2)
    assert init["t_ext"].data_location == 1 and init["t_ext"].external_data[0].value == "w.bin"
    dims = m.graph.inputs[0].type.tensor_type.shape.dims
    assert (dims[0].dim_value, dims[1].dim_param, dims[0].denotation) == (1, "N", "DATA_BATCH")
    spec = m.graph.nodes[0].device_configurations[0].sharding_spec[0]
    assert spec.sharded_dim[0].simple_sharding[1].dim_param == "B"
    assert m.configurations[0].devices == ["cpu0", "cpu1"] and m.functions[0].overload == "o1"


@needs_c
@pytest.mark.parametrize("message,proto", [
    ("SequenceProto", lambda: helper.make_sequence("s", onnx.SequenceProto.TENSOR, [
        numpy_helper.from_array(np.arange(3, dtype=np.int64))])),
    ("MapProto", lambda: helper.make_map("m", TensorProto.INT64, [1, 2], helper.make_sequence(
        "v", onnx.SequenceProto.TENSOR, [numpy_helper.from_array(np.ones(1, np.float32))] * 2))),
    ("OptionalProto", lambda: helper.make_optional("o", onnx.OptionalProto.TENSOR,
                                                   numpy_helper.from_array(np.ones(2, np.int8)))),
    ("TensorProto", lambda: numpy_helper.from_array(np.arange(6, dtype=np.float16).reshape(2, 3))),
    ("OperatorSetProto", lambda: onnx.OperatorSetProto(
        magic="ONNXOPSET", ir_version=10, domain="d", opset_version=3, doc_string="x",
        operator=[onnx.OperatorProto(op_type="Op", since_version=1, status=1, doc_string="o")],
        functions=[onnx.FunctionProto(name="f", domain="d")])),
])
def test_other_messages(message, proto):
    out = _compare(proto().SerializeToString(), message)
    assert out[0] == "ok"


@needs_c
def test_raw_factory_and_blob_source_are_used_alike():
    data = _full_model().SerializeToString()
    src = MemorySource(data)
    calls_by_mode = {}
    for pure in (False, True):
        calls = calls_by_mode[pure] = []

        def raw(start, end, calls=calls):
            calls.append((start, end))
            return bytes(data[start:end])

        with _pure(pure):
            m = D.decode(data, raw=raw, blob_source=src)  # the factory comes first
            blob = D.decode(data, blob_source=src).graph.initializers[0].raw_data
        t = m.graph.initializers[0]
        start = blob.offset
        assert type(blob) is Blob and blob == Blob(src, start, 12)
        assert type(t.raw_data) is bytes and bytes(blob) == t.raw_data
        assert (start, start + 12) in calls and t.raw_data == data[start:start + 12]
    assert calls_by_mode[True] == calls_by_mode[False]  # the same ranges asked, in the same order


# -- hand-made edge cases ------------------------------------------------------------------
def _deep(depth: int) -> bytes:
    t = ld(1, vint(1, 1))
    for _ in range(depth):
        t = ld(4, ld(1, t))  # TypeProto{sequence_type{elem_type: t}}
    return t


EDGE = [
    ("ModelProto", b""),
    ("ModelProto", vint(1, 10) + key(5, 3)),
    ("ModelProto", vint(1, 10) + key(7, 4)),
    ("ModelProto", key(9, 6) + b"\x00"),
    ("ModelProto", key(9, 7)),
    ("ModelProto", key(0, 2) + b"\x00"),
    ("ModelProto", key(1, 0) + b"\xff" * 10 + b"\x01"),  # 11-octet varint
    ("ModelProto", key(1, 0) + b"\xff" * 9 + b"\x7f"),  # 10 octets, 2^64 or more: refused
    ("ModelProto", key(1, 0) + b"\xff" * 9 + b"\x01"),  # 2^64 - 1, the largest varint
    ("ModelProto", key(1, 0) + b"\x80" * 9 + b"\x02"),  # 2^64 exactly
    ("ModelProto", key(1, 0) + b"\x80" * 9 + b"\x00"),  # a ten-octet 0 (not minimal, valid)
    ("ModelProto", key(1, 0) + b"\xff" * 9),  # truncated before the tenth octet
    ("ModelProto", key(7, 2) + b"\x82" + b"\x80" * 8 + b"\x02" + ld(2, b"")),  # length 2^64+2
    ("ModelProto", key(99, 2) + b"\x82" + b"\x80" * 8 + b"\x02" + b"ab"),
    ("ModelProto", key(99, 0) + b"\xff" * 9 + b"\x02"),
    ("ModelProto", b"\xff" * 9 + b"\x02"),  # a key of 2^64 or more
    ("ModelProto", key((1 << 29) - 1, 0) + b"\x01"),  # the largest tag: an unknown field
    ("ModelProto", key(1 << 29, 0) + b"\x01"),
    ("ModelProto", varint((1 << 32) | (7 << 3 | 2)) + ld(2, b"")),  # past 32 bits, not graph
    ("TensorProto", ld(7, varint(3) + b"\xff" * 9 + b"\x02")),
    ("TensorProto", ld(11, b"\xff" * 9 + b"\x01" + b"\xff" * 9 + b"\x7f")),
    ("TensorProto", ld(1, b"\x80" * 9 + b"\x00" + b"\xff" * 9 + b"\x80\x01")),
    ("ModelProto", key(1, 0) + b"\xff\xff"),
    ("ModelProto", key(1, 0)),
    ("ModelProto", b"\xff" * 10 + b"\x01"),
    ("ModelProto", b"\x80"),
    ("ModelProto", key(7, 2) + varint((1 << 64) - 1)),
    ("ModelProto", key(7, 2) + varint(1 << 62) + b"abc"),
    ("ModelProto", key(99, 2) + varint(1 << 40)),
    ("ModelProto", key(99, 1) + b"1234567"),
    ("ModelProto", key(99, 5) + b"123"),
    ("ModelProto", key(99, 0) + b"\x80"),
    ("ModelProto", key(99, 1) + b"12345678" + key(98, 5) + b"1234" + vint(97, 5) + ld(96, b"x")),
    ("ModelProto", key(1, 2) + varint(3) + b"\x01\x02\x03"),  # wrong wire for a known tag
    ("ModelProto", key(2, 0) + varint(5)),  # string field as varint: unknown
    ("TensorProto", vint(2, 1 << 31)),
    ("TensorProto", vint(2, -(1 << 31))),
    ("TensorProto", vint(2, -(1 << 31) - 1)),
    ("TensorProto", ld(5, varint(1) + varint((1 << 31) - 1) + varint(-(1 << 31)))),
    ("TensorProto", ld(5, varint(1 << 31))),
    ("TensorProto", ld(5, b"\xff" * 11 + b"\x01")),
    ("TensorProto", ld(5, b"\x01\x80")),
    ("TensorProto", ld(7, b"")),
    ("TensorProto", ld(4, b"")),
    ("TensorProto", ld(4, b"\0" * 7)),
    ("TensorProto", ld(10, b"\0" * 12)),
    ("TensorProto", key(4, 5) + b"\x01\x00\x80\x7f" + ld(4, b"\x00\x00\xc0\x7f") + key(4, 5)
     + b"\x00\x00\x80\xff"),  # signalling NaN, unpacked and packed mixed
    ("TensorProto", key(10, 1) + b"\x01" * 8 + key(10, 1) + b"\x02" * 7),
    ("TensorProto", vint(11, (1 << 64) - 1) + ld(11, varint(1) + varint(1 << 63)) + vint(11, 0)),
    ("TensorProto", vint(7, -1) + ld(7, varint(5)) + vint(7, 2)),
    ("TensorProto", vint(1, 1) + ld(1, varint(2) + varint(3)) + vint(1, 4)),  # dims in order
    ("TensorProto", vint(14, 1) + vint(14, 2) + vint(14, 0) + vint(14, -1)),  # closed enum
    ("TensorProto", ld(3, vint(1, 1)) + ld(3, vint(2, 5)) + ld(3, vint(1, 7))),  # merge
    ("TensorProto", ld(9, b"abc") + ld(9, b"")),
    ("TensorProto", ld(8, b"\xff\xfe name \xc3\x28") + ld(8, b"last")),
    ("AttributeProto", f32(2, 1.0) + f32(2, float("nan")) + key(2, 5) + b"\x01\x00\x80\x7f"),
    ("AttributeProto", key(2, 5) + b"\x00\x00"),
    ("AttributeProto", vint(20, 15) + vint(20, 14) + vint(20, 99) + vint(20, 1 << 32)),
    ("AttributeProto", ld(7, b"\0" * 8) + f32(7, 2.0) + ld(7, b"")),
    ("AttributeProto", ld(8, varint(-5) + varint(6)) + vint(8, 7)),
    ("AttributeProto", ld(5, vint(1, 2) + ld(4, b"\0" * 8)) + ld(5, ld(4, b"\x01" * 4))),
    ("TypeProto", ld(1, vint(1, 1)) + ld(4, b"") + ld(1, b"") + ld(6, b"d")),
    ("TypeProto", ld(4, ld(1, ld(1, b""))) + ld(4, ld(1, ld(5, b"")))),
    ("TensorShapeProto", ld(1, vint(1, 3) + ld(2, b"N")) + ld(1, ld(2, b"M") + vint(1, -1))),
    ("SimpleShardedDimProto", vint(1, 3) + ld(2, b"x") + vint(1, 4)),
    ("OperatorProto", vint(3, 1) + vint(3, 2) + vint(3, 1 << 31)),
    ("DeviceConfigurationProto", vint(2, 1 << 33)),
    ("MapProto", ld(3, varint(1) + b"\xff") + vint(3, 2)),
    ("TypeProto", _deep(98)),
    ("TypeProto", _deep(99)),
    ("TypeProto", _deep(100)),
    ("TypeProto", _deep(10_000)),
    ("ModelProto", vint(1, 10) + ld(7, ld(1, ld(5, ld(1, b"a") + key(2, 5) + b"\x00\x00")))),
    ("ModelProto", model_with_initializer(vint(2, 1 << 40))),
    ("ModelProto", model_with_initializer(vint(1, 1) + vint(2, 6) + ld(5, varint(1 << 35)))),
    ("ModelProto", model_with_initializer(ld(1, b"\x02\x80"))),
    ("ModelProto", vint(1, 10) + ld(7, ld(1, key(4, 2) + varint(50) + b"Relu"))),
    ("ModelProto", ld(7, ld(1, b"") + ld(1, ld(5, b"") + ld(5, key(3, 0) + b"\x80")))),
]


@needs_c
@pytest.mark.parametrize("message,data", EDGE, ids=[f"{i}-{m}" for i, (m, _) in enumerate(EDGE)])
def test_edge_cases(message, data):
    _compare(data, message, blobs=True)


@needs_c
def test_edge_case_outcomes():
    """A few outcomes stated outright, so that a shared mistake of both decoders shows too."""
    out = _compare(vint(1, 10) + key(5, 3))
    assert out[1:] == (MalformedError, "wire type 3 (group) is not allowed (Clause 12.2.1)",
                       "ModelProto", 2)
    out = _compare(_deep(10_000), "TypeProto")
    assert out[0] == "error" and out[2] == "messages nested deeper than 100"
    # 99 messages open below the root, the 100th is refused
    assert out[3] == "TypeProto" + ".sequence_type.elem_type" * 49 + ".sequence_type"
    out = _compare(ld(5, varint(1 << 31)), "TensorProto")
    assert out[1:] == (MalformedError, "int32 field int32_data out of range",
                       "TensorProto.int32_data", 0)
    out = _compare(vint(1, 1) + ld(1, varint(2) + varint(3)) + vint(1, 4), "TensorProto")
    assert out[1].dims == [1, 2, 3, 4]
    out = _compare(vint(14, 1) + vint(14, 2), "TensorProto")
    assert out[1].data_location == 1 and out[1].unknown == vint(14, 2)
    sig = b"\x01\x00\x80\x7f"
    out = _compare(key(4, 5) + sig + ld(4, sig * 2), "TensorProto")
    assert out[1].float_data.tobytes() == sig * 3
    out = _compare(ld(3, vint(1, 1)) + ld(3, vint(2, 5)) + ld(3, vint(1, 7)), "TensorProto")
    assert (out[1].segment.begin, out[1].segment.end) == (7, 5)


@needs_c
def test_wide_varints_and_tags_outcomes():
    """Clause 12.2.2: a tenth octet above 1 is 2^64 or more, refused at the varint's first octet
    (it used to wrap: a length of 2^64 + 2 read as 2); a tag above 2^29 - 1 is refused."""
    wide = "varint encodes 2^64 or more (tenth octet 0x{}; at most 2^64 - 1, Clause 12.2.2)"
    out = _compare(key(1, 0) + b"\xff" * 9 + b"\x7f")
    assert out[1:] == (MalformedError, wide.format("7F"), "ModelProto.ir_version", 1)
    out = _compare(key(7, 2) + b"\x82" + b"\x80" * 8 + b"\x02" + ld(2, b""))
    assert out[1:] == (MalformedError, wide.format("02"), "ModelProto.graph", 1)
    out = _compare(ld(11, b"\xff" * 9 + b"\x01" + b"\xff" * 9 + b"\x7f"), "TensorProto")
    assert out[1:] == (MalformedError, wide.format("7F"), "TensorProto.uint64_data", 12)
    out = _compare(ld(1, b"\x80" * 9 + b"\x00" + b"\xff" * 9 + b"\x80\x01"), "TensorProto")
    assert out[1:] == (MalformedError, "varint longer than 10 octets", "TensorProto.dims", 12)
    out = _compare(key(1, 0) + b"\xff" * 9 + b"\x01" + key(1 << 28, 0) + b"\x00")
    assert out[0] == "ok" and out[1].ir_version == -1 and out[1].unknown == key(1 << 28, 0) + b"\0"
    out = _compare(vint(1, 3) + key(1 << 29, 0) + b"\x01")
    assert out[1:] == (MalformedError, "field tag 536870912 is above 536870911 (2^29 - 1), the "
                       "largest tag", "ModelProto", 2)
    out = _compare(varint((1 << 32) | (7 << 3 | 2)) + ld(2, b""))
    assert out[1:] == (MalformedError, "field tag 536870919 is above 536870911 (2^29 - 1), the "
                       "largest tag", "ModelProto", 0)


# -- hypothesis: field soups for every message ---------------------------------------------
_INTS = st.one_of(
    st.integers(-(1 << 63), (1 << 64) - 1),
    st.sampled_from([0, 1, 2, 14, 15, 16, -1, (1 << 31) - 1, 1 << 31, -(1 << 31),
                     -(1 << 31) - 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]))


def _varint_octets(draw) -> bytes:
    v = draw(_INTS)
    form = draw(st.integers(0, 9))
    enc = varint(v)
    if form == 0 and len(enc) < 10:  # non-minimal but valid
        return enc[:-1] + bytes([enc[-1] | 0x80, 0])
    if form == 1:  # 11 octets
        return b"\xff" * 10 + b"\x01"
    if form == 2:  # ten octets, 2^64 or more
        return b"\xff" * 9 + bytes([draw(st.integers(2, 0x7F))])
    return enc


@st.composite
def _field(draw, msg, depth):
    f = draw(st.sampled_from(msg.fields))
    tag = f.tag
    wire = f.wire if draw(st.integers(0, 9)) else draw(st.integers(0, 7))
    if wire != f.wire:
        return key(tag, wire) + draw(st.binary(max_size=10))
    if f.kind == MESSAGE:
        body = draw(_message(f.message, depth - 1)) if depth > 0 else b""
        return ld(tag, body)
    if f.kind in (STRING, BYTES, RAW):
        return ld(tag, draw(st.binary(max_size=12)))
    if f.kind in (INT64, INT32, UINT64, ENUM):
        if f.repeated and draw(st.booleans()):
            return ld(tag, b"".join(_varint_octets(draw) for _ in range(draw(st.integers(0, 4)))))
        return key(tag, 0) + _varint_octets(draw)
    width = 4 if f.kind == FLOAT else 8
    assert f.kind in (FLOAT, DOUBLE)
    if f.repeated and draw(st.booleans()):
        n = draw(st.integers(0, 4)) * width + (draw(st.integers(0, width - 1))
                                               if draw(st.integers(0, 5)) == 0 else 0)
        return ld(tag, draw(st.binary(min_size=n, max_size=n)))
    return key(tag, wire) + draw(st.binary(min_size=width, max_size=width))


@st.composite
def _message(draw, msg, depth):
    parts = []
    for _ in range(draw(st.integers(0, 5))):
        r = draw(st.integers(0, 11))
        if r < 8:
            parts.append(draw(_field(msg, depth)))
        elif r == 8:  # an unknown field of any wire type
            tag = draw(st.integers(0, 2000))
            wire = draw(st.integers(0, 7))
            body = {0: varint(draw(_INTS)), 1: b"\x01" * 8, 5: b"\x02" * 4,
                    2: ld(0, b"xy")[1:]}.get(wire, b"")
            parts.append(key(tag, wire) + body)
        elif r == 9:  # a huge or short length
            parts.append(key(draw(st.sampled_from(msg.fields)).tag, 2) +
                         varint(draw(st.sampled_from([1 << 62, (1 << 64) - 1, 1 << 31, 5]))))
        else:
            parts.append(draw(st.binary(max_size=6)))
    return b"".join(parts)


_NAMES = sorted(MESSAGES)


@needs_c
@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_random_field_soups(data):
    name = data.draw(st.sampled_from(_NAMES))
    octets = data.draw(_message(MESSAGES[name], 3))
    _compare(octets, name, blobs=True)


_SEED_MODEL = None


def _seed() -> bytes:
    global _SEED_MODEL
    if _SEED_MODEL is None:
        _SEED_MODEL = _full_model().SerializeToString()
    return _SEED_MODEL


@needs_c
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_mutated_models(data):
    """Truncations, bit flips, insertions and deletions of a model that sets every field."""
    b = bytearray(_seed())
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.integers(0, 3))
        i = data.draw(st.integers(0, len(b)))
        if op == 0:
            del b[i:]
        elif op == 1 and i < len(b):
            b[i] ^= 1 << data.draw(st.integers(0, 7))
        elif op == 2:
            b[i:i] = data.draw(st.binary(min_size=1, max_size=11))
        else:
            del b[i:i + data.draw(st.integers(1, 20))]
    _compare(bytes(b), blobs=True)


_NESTING = [n for n in _NAMES if any(f.kind == MESSAGE for f in MESSAGES[n].fields)]


@needs_c
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(_NESTING), st.one_of(st.integers(95, 105), st.just(10_000)),
       st.randoms(use_true_random=False), st.data())
def test_random_deep_nesting(root, depth, rnd, data):
    """Chains of embedded messages through random message fields, around the depth limit and far
    past it, with a random innermost message."""
    msg, chain = MESSAGES[root], []
    for _ in range(depth):
        subs = [f for f in msg.fields if f.kind == MESSAGE and
                any(g.kind == MESSAGE for g in f.message.fields)]
        if not subs:
            break
        f = rnd.choice(subs)
        chain.append(f)
        msg = f.message
    body = data.draw(_message(msg, 1))
    for f in reversed(chain):
        body = ld(f.tag, body)
    out = _compare(body, root, blobs=True)
    if len(chain) >= 100:
        assert out[0] == "error" and out[2] == "messages nested deeper than 100"


@needs_c
@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.binary(max_size=64), st.sampled_from(_NAMES))
def test_random_octets(octets, name):
    _compare(octets, name)


# -- the tensor checks: C prefilter + Python against Python alone ------------------------------
@st.composite
def _tensor(draw):
    t = Tensor()
    t.dims = draw(st.lists(st.one_of(st.integers(0, 6), st.sampled_from(
        [-1, 0, 1 << 31, (1 << 31) - 1, 1 << 40, 1 << 62])), max_size=3))
    t.data_type = draw(st.one_of(st.none(), st.integers(0, 30)))
    n = draw(st.integers(0, 40))
    form = draw(st.integers(0, 6))
    if form == 0:
        t.raw_data = bytes(n)
    elif form == 1:
        t.raw_data = memoryview(bytes(n))
    elif form == 2:
        t.raw_data = memoryview(bytes(n * 4)).cast("I")
    elif form == 3:
        t.float_data = np.zeros(n, np.float32)
    elif form == 4:
        t.string_data = [b"x"] * n
    elif form == 5:
        t.int64_data = np.zeros(n, np.int64)
    if draw(st.integers(0, 5)) == 0:
        t.data_location = draw(st.sampled_from([0, 1]))
    if draw(st.integers(0, 5)) == 0:
        t.segment = Segment(begin=0, end=1)
    if draw(st.integers(0, 5)) == 0:
        t.int32_data = np.zeros(draw(st.integers(0, 2)), np.int32)
    return t


def _check_outcome(model, tensors, pure):
    with _pure(pure):
        try:
            check_tensors(model, tensors, "src")
        except OneModelError as e:
            return type(e), str(e)
    return None


@needs_c
@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_tensor(), min_size=1, max_size=6))
def test_tensor_checks_same_outcome(tensors):
    model = Model(graph=Graph(initializers=tensors))
    pairs = [(t, i * 10) for i, t in enumerate(tensors)]
    assert _check_outcome(model, pairs, False) == _check_outcome(model, pairs, True)


@needs_c
def test_first_unchecked_passes_only_plain_tensors():
    from onemodel.formats.onnx.checks import _BITS

    ok = Tensor(dims=[2, 3], data_type=1, raw_data=memoryview(bytes(24)))
    int4 = Tensor(dims=[3], data_type=22, raw_data=b"\0\0")
    short = Tensor(dims=[2, 3], data_type=1, raw_data=bytes(23))
    typed = Tensor(dims=[1], data_type=1, float_data=np.zeros(1, np.float32))
    pairs = [(ok, 0), (int4, 5), (short, 9), (ok, 11), (typed, 20)]
    assert C.first_unchecked(pairs, 0, _BITS) == 2
    assert C.first_unchecked(pairs, 3, _BITS) == 4
    assert C.first_unchecked(pairs[:2], 0, _BITS) == 2


# -- memory: buffers kept alive and released, no leaks, GC state --------------------------------
@needs_c
def test_raw_data_keeps_the_buffer_alive_and_the_decoder_releases_it():
    buf = bytearray(model_with_initializer(tensor((2,), 1, b"\x01\x02\x03\x04" * 2)))
    with _pure(False):
        m = D.decode(memoryview(buf))
    raw = m.graph.initializers[0].raw_data
    assert bytes(raw) == b"\x01\x02\x03\x04" * 2
    with pytest.raises(BufferError):
        buf.extend(b"x")  # the raw_data view pins the bytearray
    del m, raw
    gc.collect()
    buf.extend(b"x")  # nothing (the decoder's own Py_buffer included) holds it any more
    with _pure(False), pytest.raises(MalformedError):
        D.decode(memoryview(buf))  # an error path releases it too
    buf.extend(b"x")


@needs_c
def test_no_leaks():
    good = _seed()
    bad = [_deep(10_000), bytes(_seed()[:-3]), model_with_initializer(ld(1, b"\x02\x80")),
           ld(5, varint(1 << 31)), vint(14, 7) + ld(4, b"\0" * 5)]
    msgs = ["TypeProto", "ModelProto", "ModelProto", "TensorProto", "TensorProto"]

    def round_():
        tl = []
        C.decode(memoryview(good), "ModelProto", None, "o", tl)
        C.decode(memoryview(good), "ModelProto", lambda s, e: b"r", None, tl)
        for data, msg in zip(bad, msgs):
            try:
                C.decode(memoryview(data), msg, None, None, [])
            except D.WireError:
                pass

    for _ in range(20):
        round_()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(300):
            round_()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, grown  # one leaked record per round would be > 100 KB


@needs_c
def test_gc_state_is_restored():
    data = model_with_initializer(tensor((2,), 1, b"\0" * 8))
    assert gc.isenabled()
    C.decode(memoryview(data), "ModelProto", None, None, [])
    assert gc.isenabled()
    with pytest.raises(D.WireError):
        C.decode(memoryview(b"\x80"), "ModelProto", None, None, [])
    assert gc.isenabled()
    gc.disable()
    try:
        C.decode(memoryview(data), "ModelProto", None, None, [])
        assert not gc.isenabled()
    finally:
        gc.enable()


@needs_c
def test_objects_frozen_by_others_stay_frozen():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        C.decode(memoryview(_seed()), "ModelProto", None, None, [])
        # frozen objects that die in the meantime leave the count, so it may drop a little;
        # an unfreeze() by the decoder would have emptied it
        assert gc.get_freeze_count() > frozen // 2
    finally:
        gc.unfreeze()


def _relu_chain(n: int) -> bytes:
    nodes = [helper.make_node("Relu", [f"x{i}"], [f"x{i + 1}"]) for i in range(n)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x0", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info(f"x{n}", TensorProto.FLOAT, [1])])
    return helper.make_model(g).SerializeToString()


@needs_c
def test_only_a_decode_of_many_records_moves_them_out_of_the_young_generation():
    # a large model's records go to the oldest generation (young collections would walk them
    # over and over); a small one's stay young: the move asks gc.get_freeze_count(), which walks
    # every frozen object (100 us per decode after the command line's gc.freeze())
    # (where gc.unfreeze() puts objects is CPython's own: its oldest generation up to 3.12;
    # 3.13's collector lays generations out otherwise, so there only the small case is asked)
    import sys

    cases = ((10, True), (6000, False)) if sys.version_info < (3, 13) else ((10, True),)
    for nodes, young in cases:
        gc.collect()
        m = C.decode(memoryview(_relu_chain(nodes)), "ModelProto", None, None, [])
        assert any(o is m for o in gc.get_objects(generation=0)) is young, nodes


@needs_c
def test_bad_arguments_raise_type_errors():
    with pytest.raises(TypeError):
        C.decode(b"\x08\x01", "ModelProto", None, None, [])
    with pytest.raises(TypeError):
        C.decode(memoryview(b"\0" * 8).cast("I"), "ModelProto", None, None, [])
    with pytest.raises(TypeError):
        C.decode(memoryview(b""), "ModelProto", None, None, ())
    with pytest.raises(KeyError):
        C.decode(memoryview(b""), "NoSuchProto", None, None, [])
    with pytest.raises(BufferError):
        C.decode(memoryview(b"\x08\x01\x08\x01")[::2], "ModelProto", None, None, [])


@needs_c
def test_non_contiguous_input_takes_the_python_path():
    data = memoryview(bytes([8, 0, 7, 0]))[::2]  # octets 08 07: ir_version 7
    with _pure(False):
        assert D.decode(data).ir_version == 7
