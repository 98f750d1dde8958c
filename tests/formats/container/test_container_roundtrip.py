"""Round trips through the OneModel container: read(write(m)) == m under Record equality
(bit-exact, every field, presence, unknown bytes), and what a plain v1 reading gives."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from container_models import (
    all_dtype_tensors,
    every_attribute,
    every_type,
    simple_model,
    sink_model,
    typed_tensors,
    vi,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onemodel.errors import InvalidModelError
from onemodel.formats.container import read_bytes, write, write_bytes
from onemodel.ir import (
    Attribute,
    Dimension,
    Graph,
    MapType,
    Model,
    Node,
    OperatorSetId,
    OptionalType,
    SequenceType,
    Shape,
    SparseTensor,
    StringStringEntry,
    Tensor,
    TensorType,
    Type,
)
from onemodel.ir.dtypes import INFO, DataType
from onemodel.ir.record import buffer_view
from onemodel.ir.tensor import typed_to_raw
from onemodel.storage.base import BytesSink
from onemodel.storage.blob import Blob


def manifest_of(data: bytes) -> dict:
    (length,) = struct.unpack_from("<Q", data, 24)
    return json.loads(data[64:64 + length])


def test_every_feature_round_trips_bit_exact():
    m = sink_model()
    data = write_bytes(m)
    back = read_bytes(data)
    assert back == m
    # Record equality is the contract; spot-check that it is not vacuous
    assert back.ir_version is None and back.model_version == 0 and back.producer_version == ""
    assert back.doc_string == "not utf-8: \udcff\udcfe"
    assert back.unknown == b"\x92\x01\x00" and back.graph.unknown == b"\xa2\x06\x03abc"
    assert [n.name for n in back.graph.nodes] == [n.name for n in m.graph.nodes]
    inits = {t.name: t for t in back.graph.initializers}
    ext = inits["ext_w"]
    assert ext.raw_data is None and ext.data_location == 1
    assert bytes(ext.external) == np.arange(4, dtype="<f4").tobytes()
    assert inits["ty_uint8_wide"].int32_data.tolist() == [300, 1]
    assert inits["ty_uint8_wide"].raw_data is None
    attrs = {a.name: a for a in back.graph.nodes[3].attributes}
    assert attrs["f"].f.bits == 0x7FA00001  # a signalling NaN, payload kept
    assert attrs["floats"].floats.view(np.uint32)[3] == 0x7FA00001
    assert attrs["extra"].f == np.float32(2.5) and attrs["extra"].t.numpy().tolist() == [9]
    assert attrs["untyped"].type is None and attrs["weird_type"].type == 99
    assert back.graph.value_info[0].type.tensor_type.shape.dims[1].denotation == "DATA_BATCH"
    assert back.training_info[0].initialization.initializers[0].numpy().tolist() == [3.0]


def _records(rec, seen=None):
    """Every record reachable from ``rec`` (each object once)."""
    seen = set() if seen is None else seen
    if id(rec) in seen:
        return
    seen.add(id(rec))
    yield rec
    for name, kind, _ in rec.FIELDS:
        v = getattr(rec, name)
        if kind == "msg" and v is not None:
            yield from _records(v, seen)
        elif kind == "list_msg":
            for x in v:
                yield from _records(x, seen)


def test_unknown_bytes_of_every_record_survive():
    m = sink_model()
    kinds = set()
    for i, rec in enumerate(_records(m)):
        rec.unknown = bytes([0xF8, 0x07, i % 128])  # field 127, varint i
        kinds.add(type(rec).__name__)
    assert len(kinds) == 28  # every record class a Model can hold
    back = read_bytes(write_bytes(m))
    assert back == m
    assert all(r.unknown for r in _records(back))


def test_changing_any_field_breaks_equality():
    """The equality used above sees single-field changes (so the round trip proves something)."""
    m = sink_model()
    back = read_bytes(write_bytes(m))
    back.graph.nodes[3].attributes[0].f = np.float32(np.nan)  # another NaN payload
    assert back != m
    back = read_bytes(write_bytes(m))
    back.graph.value_info[0].type.tensor_type.shape.dims[0].denotation = None
    assert back != m


def test_every_dtype_keeps_values_and_bytes():
    tensors = all_dtype_tensors()
    g = Graph(initializers=tensors)
    m = Model(ir_version=10, opset_imports=[OperatorSetId(domain="", version=21)], graph=g)
    data = write_bytes(m)
    back = read_bytes(data)
    assert len(INFO) == 28 and len(back.graph.initializers) == 28
    for a, b in zip(tensors, back.graph.initializers):
        assert b.data_type == a.data_type and b.dims == a.dims
        if a.data_type == DataType.STRING:
            assert b.string_data == a.string_data
            continue
        assert bytes(b.raw_data) == bytes(a.raw_data)
        assert b.numpy().tobytes() == a.numpy().tobytes()
        assert isinstance(b.raw_data, Blob) and buffer_view(b.raw_data).readonly
    # sub-byte types are packed: 5 int4 elements take 3 bytes
    int4 = next(t for t in manifest_of(data)["graph"]["initializers"] if t["dtype"] == 22)
    assert int4["data"]["length"] == 3


def test_typed_storage_goes_to_the_data_region_in_raw_layout():
    tensors = typed_tensors()
    m = Model(ir_version=10, opset_imports=[OperatorSetId(domain="", version=21)],
              graph=Graph(initializers=tensors))
    data = write_bytes(m)
    man = manifest_of(data)
    (data_offset,) = struct.unpack_from("<Q", data, 32)
    for t, obj in zip(tensors, man["graph"]["initializers"]):
        d = obj["data"]
        got = data[data_offset + d["offset"]:data_offset + d["offset"] + d["length"]]
        if t.raw_data is not None:
            assert got == bytes(t.raw_data)
        else:
            field = t.typed_field()
            if field is None:
                assert got == b""
            else:
                assert got == typed_to_raw(t.data_type, field, getattr(t, field), t.size).tobytes()
    assert read_bytes(data) == m


def test_plain_v1_file_reads_into_the_natural_model():
    m = sink_model()
    sink = BytesSink()
    left_out = write(m, sink, strict_v1=True)
    data = sink.getvalue()
    assert '"onnx"' not in data.decode("latin-1")
    joined = "\n".join(left_out)
    for expect in ("manifest.ir_version: absent in the ONNX file; a plain reader reads 3",
                   "manifest: training_info (1 entry)",
                   "manifest.graph: quantization_annotations (1 entry)",
                   "manifest.graph: node order (the original order; ",
                   "manifest.graph.nodes[1]: metadata_props (1 entry)",
                   "manifest.graph.nodes[3].attributes[18]: f, s, t, tp (values beyond the one "
                   "its v1 type INT selects)",
                   "manifest.graph.initializers[44]: external_data (the reference to 'w.bin'; "
                   "the contents are in the data region)"):
        assert expect in joined
    plain = read_bytes(data)
    assert plain != m
    assert plain.ir_version == 3 and plain.model_version is None and plain.training_info == []
    assert plain.doc_string == "not utf-8: \ufffd\ufffd"
    assert [n.name for n in plain.graph.nodes][:2] == ["n_add", "n_if"]  # dependency order
    inits = {t.name: t for t in plain.graph.initializers}
    assert inits["ext_w"].data_location is None and inits["ext_w"].external_data == []
    assert bytes(inits["ext_w"].raw_data) == np.arange(4, dtype="<f4").tobytes()
    assert inits["ty_float"].float_data is None and inits["ty_float"].raw_data is not None
    assert inits["ty_uint8_wide"].numpy().tolist() == [44, 1]
    assert plain.graph.nodes[0].domain is None  # "" reads as absent
    attrs = {a.name: a for a in plain.graph.nodes[3].attributes}
    assert attrs["extra"].f is None and attrs["extra"].t is None and attrs["extra"].i == 1
    assert attrs["untyped"].type == 2 and attrs["nothing"].type == 7
    # a v1 reading of a plain file leaves nothing else to write back
    assert write(plain, BytesSink(), strict_v1=True) == []
    # tensors only the extension referenced (training_info, attribute fields beyond the type)
    # are not in the plain file's data region: its ranges cover the region exactly
    ranges = set()

    def walk(v):
        if isinstance(v, dict):
            if "data" in v and "dtype" in v and v["data"]["length"]:
                ranges.add((v["data"]["offset"], v["data"]["length"]))
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(manifest_of(data))
    (data_length,) = struct.unpack_from("<Q", data, 40)
    assert sum(-(-n // 64) * 64 for _, n in ranges) == -(-data_length // 64) * 64
    assert len(data) < len(write_bytes(m))


def test_without_extension_a_simple_model_needs_none():
    m = simple_model()
    m.graph.nodes[0].domain = None
    m.opset_imports[0].domain = None
    data = write_bytes(m)
    assert b'"onnx"' not in data
    assert read_bytes(data) == m


def test_manifest_is_compact_and_in_table_order():
    data = write_bytes(sink_model())
    (length,) = struct.unpack_from("<Q", data, 24)
    text = data[64:64 + length].decode("utf-8")
    obj = json.loads(text)
    assert json.dumps(obj, separators=(",", ":"), ensure_ascii=False) == text
    assert list(obj)[:6] == ["format", "version", "ir_version", "producer_name", "doc", "opsets"]
    assert list(obj)[6:9] == ["metadata", "graph", "functions"]
    g = obj["graph"]
    assert list(g)[:8] == ["name", "doc", "inputs", "outputs", "value_info", "initializers",
                           "sparse_initializers", "nodes"]
    node = g["nodes"][0]
    assert list(node)[:8] == ["name", "op", "domain", "overload", "doc", "inputs", "outputs",
                              "attributes"]
    assert "doc" not in g["nodes"][1]  # doc only when non-empty
    assert list(g["initializers"][0]) == ["name", "dtype", "dims", "data"]
    attr = next(a for a in g["nodes"][3]["attributes"] if a["name"] == "extra")
    assert list(attr) == ["name", "type", "doc", "value", "onnx"]
    fn = obj["functions"][0]
    assert list(fn)[:10] == ["name", "domain", "overload", "doc", "inputs", "outputs",
                             "attribute_names", "attribute_defaults", "nodes", "opsets"]
    assert obj["graph"]["inputs"][0]["type"] == {"kind": "tensor", "elem": 1, "shape": ["N", 3]}


def test_shared_tensor_object_gets_one_range_distinct_objects_their_own():
    t = Tensor.from_numpy(np.ones(4, np.float32), name="w")
    same = Tensor.from_numpy(np.ones(4, np.float32), name="w2")
    node = Node(op_type="Custom", domain="", inputs=["w"], outputs=["y"],
                attributes=[Attribute(name="a", type=4, t=t), Attribute(name="b", type=4, t=t)])
    m = Model(ir_version=10, opset_imports=[OperatorSetId(domain="", version=21)],
              graph=Graph(initializers=[t, same], nodes=[node], outputs=[vi("y")]))
    data = write_bytes(m)
    g = manifest_of(data)["graph"]
    ranges = [g["initializers"][0]["data"], g["initializers"][1]["data"],
              g["nodes"][0]["attributes"][0]["value"]["data"],
              g["nodes"][0]["attributes"][1]["value"]["data"]]
    assert ranges[0] == ranges[2] == ranges[3] == {"offset": 0, "length": 16}
    assert ranges[1] == {"offset": 64, "length": 16}
    assert read_bytes(data) == m


def test_subgraph_reads_outer_names_and_order_is_restored():
    m = sink_model()
    back = read_bytes(write_bytes(m))
    then_g = back.graph.nodes[0].attributes[0].g
    assert then_g.nodes[0].inputs == ["x", "w0"]  # names of the enclosing graph
    assert [n.op_type for n in back.graph.nodes] == ["If", "Add", "Loop", "Everything", "MyFn"]


# -- property-based round trips ---------------------------------------------------------------
_names = st.sampled_from([None, "", "a", "\u00e9t\u00e9", "n\udcff"])
_texts = st.one_of(st.none(), st.text(max_size=5))
_entries = st.lists(st.builds(StringStringEntry, key=_texts, value=_texts), max_size=2)
_unknown = st.sampled_from([b"", b"\x08\x01", b"\xfa\x01\x00"])


@st.composite
def tensors(draw, name=None, dims=None):
    code = draw(st.sampled_from(sorted(INFO)))
    info = INFO[code]
    if dims is None:
        dims = draw(st.lists(st.integers(0, 3), max_size=3))
    count = int(np.prod(dims)) if dims else 1
    t = Tensor(name=name, data_type=code, dims=dims, doc_string=draw(_texts),
               metadata_props=draw(_entries), unknown=draw(_unknown))
    if code == DataType.STRING:
        t.string_data = draw(st.lists(st.binary(max_size=3), min_size=count, max_size=count))
        return t
    nbytes = info.raw_nbytes(count)
    # one storage form each: raw_data and typed storage at once is refused (Clause 6.3.4)
    mode = draw(st.sampled_from(["raw", "typed", "external"]))
    raw = draw(st.binary(min_size=nbytes, max_size=nbytes))
    if info.subbyte and nbytes:  # keep the unused high bits of the last octet zero
        from onemodel.ir.dtypes import pack_bits, unpack_bits
        raw = pack_bits(unpack_bits(np.frombuffer(raw, np.uint8), count, info.bits),
                        info.bits).tobytes()
    if mode == "raw":
        t.raw_data = raw
    if mode == "external":
        t.data_location = 1
        t.external_data = [StringStringEntry(key="location", value="x.bin")]
        t.external = raw
    if mode == "typed":
        from onemodel.ir.tensor import raw_to_typed
        field, values = raw_to_typed(code, raw, count)
        if draw(st.booleans()) and values.size:
            values = values.copy()
            values[0] = draw(st.integers(0, 255)) if values.dtype.kind in "iu" else values[0]
        setattr(t, field, values)
    if draw(st.booleans()):
        t.data_location = draw(st.sampled_from([None, 0, 1])) if mode == "external" else 0
        if mode == "external":
            t.data_location = 1
    return t


@st.composite
def sparse_tensors(draw):
    """A valid sparse tensor: values [NNZ] of any element type and storage, INT64 indices
    linear or coordinates at distinct positions in dims (no indices at all when NNZ is 0)."""
    dims = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    count = int(np.prod(dims))
    positions = sorted(draw(st.sets(st.integers(0, count - 1), max_size=count)))
    values = draw(tensors(name=draw(_names.filter(lambda s: s is None or "\udcff" not in s)),
                          dims=[len(positions)]))
    if not positions and draw(st.booleans()):
        return SparseTensor(values=values, dims=dims)
    if draw(st.booleans()):
        idx = np.array(positions, np.int64)
    else:
        idx = np.array(np.unravel_index(np.array(positions, np.intp), dims),
                       np.int64).T.reshape(-1, len(dims))
    return SparseTensor(values=values, indices=Tensor.from_numpy(idx), dims=dims)


_dims = st.builds(Dimension, dim_value=st.one_of(st.none(), st.integers(-2, 5)),
                  dim_param=st.sampled_from([None, "", "N"]),
                  denotation=st.sampled_from([None, "", "DATA_BATCH"]))
_leaf_types = st.builds(
    lambda elem, shape, den, unk: Type(tensor_type=TensorType(elem_type=elem, shape=shape),
                                       denotation=den, unknown=unk),
    st.one_of(st.none(), st.integers(0, 30)),
    st.one_of(st.none(), st.builds(Shape, dims=st.lists(_dims, max_size=3))),
    st.sampled_from([None, "", "IMAGE"]), _unknown)
types = st.recursive(_leaf_types, lambda inner: st.one_of(
    st.builds(lambda x: Type(sequence_type=SequenceType(elem_type=x)), st.one_of(st.none(), inner)),
    st.builds(lambda x: Type(optional_type=OptionalType(elem_type=x)), inner),
    st.builds(lambda k, x: Type(map_type=MapType(key_type=k, value_type=x)),
              st.one_of(st.none(), st.integers(0, 13)), inner),
    st.builds(lambda: Type())), max_leaves=4)


@st.composite
def attributes(draw):
    a = Attribute(name=draw(_names.filter(lambda s: s is None or "\udcff" not in s)),
                  type=draw(st.one_of(st.none(), st.integers(0, 15))),
                  doc_string=draw(_texts), unknown=draw(_unknown),
                  ref_attr_name=draw(st.sampled_from([None, None, "", "r"])))
    for field, strat in (("f", st.integers(0, (1 << 32) - 1).map(
                             lambda b: np.array([b], "<u4").view("<f4")[0])),
                         ("i", st.integers(-(1 << 63), (1 << 63) - 1)),
                         ("s", st.binary(max_size=4)),
                         ("t", tensors()),
                         ("g", st.just(Graph(name="sub"))),
                         ("floats", st.lists(st.integers(0, (1 << 32) - 1), max_size=3).map(
                             lambda b: np.array(b, "<u4").view("<f4"))),
                         ("ints", st.lists(st.integers(-5, 5), max_size=3)),
                         ("strings", st.lists(st.binary(max_size=2), max_size=2)),
                         ("tensors", st.lists(tensors(), max_size=2)),
                         ("tp", types), ("type_protos", st.lists(types, max_size=2)),
                         ("sparse_tensor", sparse_tensors())):
        if draw(st.integers(0, 4)) == 0:
            setattr(a, field, draw(strat))
    return a


def _model_with(initializers=(), attrs=(), value_types=()):
    node = Node(op_type="Custom", domain="", outputs=["y"], attributes=list(attrs))
    g = Graph(initializers=list(initializers), nodes=[node], outputs=[vi("y")],
              value_info=[vi(f"v{i}") for i in range(len(value_types))])
    for v, t in zip(g.value_info, value_types):
        v.type = t
    return Model(ir_version=10, opset_imports=[OperatorSetId(domain="", version=21)], graph=g)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(tensors(), max_size=4))
def test_random_tensors_round_trip(ts):
    for i, t in enumerate(ts):
        t.name = f"t{i}"
    m = _model_with(initializers=ts)
    assert read_bytes(write_bytes(m)) == m


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(attributes(), max_size=4))
def test_random_attributes_round_trip(attrs):
    m = _model_with(attrs=attrs)
    back = read_bytes(write_bytes(m))
    assert back == m


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(types, max_size=4))
def test_random_types_round_trip(ts):
    m = _model_with(value_types=ts)
    assert read_bytes(write_bytes(m)) == m


@settings(max_examples=40, deadline=None)
@given(st.permutations(range(5)))
def test_any_node_order_is_restored(perm):
    # a chain a -> b -> c -> d -> e, stored in a shuffled order
    names = ["x", "a", "b", "c", "d", "e"]
    chain = [Node(op_type="Relu", inputs=[names[i]], outputs=[names[i + 1]]) for i in range(5)]
    nodes = [chain[i] for i in perm]
    m = Model(ir_version=10, opset_imports=[OperatorSetId(domain="", version=21)],
              graph=Graph(inputs=[vi("x")], outputs=[vi("e")], nodes=nodes))
    data = write_bytes(m)
    written = [n["outputs"][0] for n in manifest_of(data)["graph"]["nodes"]]
    assert written == ["a", "b", "c", "d", "e"]  # the file holds the dependency order
    back = read_bytes(data)
    assert back == m
    sink = BytesSink()
    write(m, sink, strict_v1=True)
    assert [n.outputs[0] for n in read_bytes(sink.getvalue()).graph.nodes] == names[1:]


def test_every_attribute_type_in_a_function_default():
    attrs = every_attribute(Graph(name="inner"))[:15]
    assert sorted(a.type for a in attrs) == [1, 1] + list(range(2, 15))
    m = sink_model()
    m.functions[0].attribute_defaults = attrs
    assert read_bytes(write_bytes(m)) == m


def test_every_type_kind_as_attribute_and_value_info():
    ts = every_type()
    m = _model_with(attrs=[Attribute(name="tps", type=14, type_protos=ts)], value_types=ts)
    assert read_bytes(write_bytes(m)) == m


@pytest.mark.parametrize("field", ["name", "doc_string", "domain", "overload"])
def test_node_string_presence(field):
    for value in (None, "", "x"):
        m = simple_model()
        if field == "domain" and value == "x":
            m.opset_imports.append(OperatorSetId(domain="x", version=1))
        setattr(m.graph.nodes[0], field, value)
        assert getattr(read_bytes(write_bytes(m)).graph.nodes[0], field) == value


@pytest.mark.parametrize("where, field, path", [
    ("tensor", "string_data", "graph.initializers[0].string_data"),
    ("tensor", "metadata_props", "graph.initializers[0].metadata_props"),
    ("node", "attributes", "graph.nodes[0].attributes"),
    ("shape", "dims", "graph.inputs[0].type.tensor_type.shape.dims"),
])
def test_a_repeated_field_holding_none_is_refused_never_written_as_null(where, field, path):
    # a repeated field has no absent state (onemodel.ir.record: a list, [] when empty); a null
    # in the manifest made the file unreadable ("an array expected, found null"), so the writer
    # refuses such a record, naming the field, and writes nothing
    m = simple_model()
    rec = {"tensor": m.graph.initializers[0], "node": m.graph.nodes[0],
           "shape": m.graph.inputs[0].type.tensor_type.shape}[where]
    kept = getattr(rec, field)
    setattr(rec, field, None)
    with pytest.raises(InvalidModelError, match="holds None, not a list") as info:
        write_bytes(m)
    assert info.value.path.endswith(path)
    setattr(rec, field, kept)  # the same model with the list back writes and reads back
    assert read_bytes(write_bytes(m)) == simple_model()
