"""Models built in code for the container tests: one that uses every field and feature of the
in-memory model, and small helpers. Only onemodel.ir is used (no onnx)."""

from __future__ import annotations

import numpy as np

from onemodel.ir import (
    Attribute,
    AttributeType,
    DeviceConfiguration,
    Dimension,
    Function,
    Graph,
    IntIntListEntry,
    MapType,
    Model,
    Node,
    NodeDeviceConfiguration,
    OpaqueType,
    OperatorSetId,
    OptionalType,
    Segment,
    SequenceType,
    Shape,
    ShardedDim,
    ShardingSpec,
    SimpleShardedDim,
    SparseTensor,
    SparseTensorType,
    StringStringEntry,
    Tensor,
    TensorAnnotation,
    TensorType,
    TrainingInfo,
    Type,
    ValueInfo,
)
from onemodel.ir.dtypes import INFO, DataType, pack_bits

A = AttributeType
OPSETS = [OperatorSetId(domain="", version=21), OperatorSetId(domain="custom", version=1)]


def vi(name, elem=1, shape=None):
    return ValueInfo(name=name, type=Type.tensor(elem, shape))


def all_dtype_tensors() -> list[Tensor]:
    """One raw-storage tensor of every element type (STRING as string_data), 2x3 elements
    (sub-byte types: 5 elements, so the last octet is partly used)."""
    out = []
    rng = np.random.default_rng(7)
    for code, info in sorted(INFO.items()):
        name = f"t_{DataType(code).name.lower()}"
        if code == DataType.STRING:
            out.append(Tensor(name=name, data_type=code, dims=[2, 2],
                              string_data=[b"", b"a", "\u00e9".encode(), b"\xff\x00"]))
            continue
        if info.subbyte:
            codes = rng.integers(0, 1 << info.bits, size=5).astype(np.uint8)
            out.append(Tensor(name=name, data_type=code, dims=[5],
                              raw_data=pack_bits(codes, info.bits).tobytes()))
            continue
        raw = rng.integers(0, 256, size=6 * info.bits // 8, dtype=np.uint8).tobytes()
        out.append(Tensor(name=name, data_type=code, dims=[2, 3], raw_data=raw))
    return out


def typed_tensors() -> list[Tensor]:
    """Tensors in typed storage: derivable from raw bytes and not (values out of range, NaN
    payloads). (raw_data and typed storage at once is refused: see
    test_container_reader_checks.py.)"""
    nan = np.array([0x7FC00001], dtype="<u4").view("<f4")
    return [
        Tensor(name="ty_float", data_type=1, dims=[3],
               float_data=np.array([1.5, -0.0, nan[0]], dtype="<f4")),
        Tensor(name="ty_int8", data_type=3, dims=[2], int32_data=np.array([-3, 7], "<i4")),
        Tensor(name="ty_uint8_wide", data_type=2, dims=[2],
               int32_data=np.array([300, 1], "<i4")),  # not derivable from the raw byte 44
        Tensor(name="ty_f16", data_type=10, dims=[2],
               int32_data=np.array([0x3C00, 0xFC00], "<i4")),
        Tensor(name="ty_bool", data_type=9, dims=[3], int32_data=np.array([1, 0, 2], "<i4")),
        Tensor(name="ty_int64", data_type=7, dims=[2],
               int64_data=np.array([-(1 << 62), 5], "<i8")),
        Tensor(name="ty_double", data_type=11, dims=[1], double_data=np.array([2.25], "<f8")),
        Tensor(name="ty_uint32", data_type=12, dims=[2],
               uint64_data=np.array([4000000000, 3], "<u8")),
        Tensor(name="ty_uint64", data_type=13, dims=[1],
               uint64_data=np.array([(1 << 64) - 1], "<u8")),
        Tensor(name="ty_c64", data_type=14, dims=[1], float_data=np.array([1, 2], "<f4")),
        Tensor(name="ty_int4", data_type=22, dims=[3], int32_data=np.array([0x2F, 0x07], "<i4")),
        Tensor(name="ty_f6", data_type=27, dims=[2], int32_data=np.array([5, 63], "<i4")),
        Tensor(name="ty_f16_wide", data_type=10, dims=[1],
               int32_data=np.array([0x13C00], "<i4")),  # bits above the 16 of the element
        Tensor(name="ty_empty", data_type=1, dims=[0]),
        Tensor(name="ty_empty_arr", data_type=6, dims=[0], int32_data=np.zeros(0, "<i4")),
    ]


def external_tensor() -> Tensor:
    t = Tensor(name="ext_w", data_type=1, dims=[4], data_location=1,
               external_data=[StringStringEntry(key="location", value="w.bin"),
                              StringStringEntry(key="offset", value="0"),
                              StringStringEntry(key="length", value="16")])
    t.external = np.arange(4, dtype="<f4").view(np.uint8)
    return t


def every_type() -> list[Type]:
    """One Type of every kind, with shapes, dim_param, unknown dims and denotations."""
    shape = Shape(dims=[Dimension(dim_value=3, denotation="DATA_CHANNEL"),
                        Dimension(dim_param="N", denotation="DATA_BATCH"), Dimension(),
                        Dimension(dim_value=0)])
    return [
        Type(tensor_type=TensorType(elem_type=1, shape=shape), denotation="IMAGE"),
        Type(tensor_type=TensorType(elem_type=7)),  # unknown rank
        Type(tensor_type=TensorType(elem_type=6, shape=Shape())),  # rank 0
        Type(sparse_tensor_type=SparseTensorType(elem_type=1, shape=Shape.of([4, None]))),
        Type(sequence_type=SequenceType(elem_type=Type.tensor(1, ["N"]))),
        Type(map_type=MapType(key_type=8, value_type=Type(sequence_type=SequenceType(
            elem_type=Type(map_type=MapType(key_type=7, value_type=Type.tensor(1))))))),
        Type(optional_type=OptionalType(elem_type=Type(sequence_type=SequenceType(
            elem_type=Type.tensor(10, [2]))))),
        Type(opaque_type=OpaqueType(domain="com.example", name="Blob")),
        Type(sequence_type=SequenceType()),  # no element type
        Type(),  # no kind at all
        Type(tensor_type=TensorType(elem_type=1), sequence_type=SequenceType(
            elem_type=Type.tensor(2))),  # two kinds set
        Type(tensor_type=TensorType(shape=Shape(dims=[
            Dimension(dim_value=2, dim_param="both"), Dimension(dim_value=-1),
            Dimension(dim_param="")]))),
    ]


def every_attribute(lvl_graph: Graph) -> list[Attribute]:
    """All 14 attribute types, plus attributes with fields beyond their type's, without a type,
    with bit patterns that a decimal float would lose."""
    nan = np.array([0x7FA00001], dtype="<u4").view("<f4")[0]
    t = Tensor.from_numpy(np.arange(6, dtype=np.int16).reshape(2, 3), name="at")
    st = SparseTensor(values=Tensor.from_numpy(np.array([1.0, 2.0], np.float32), name="sv"),
                      indices=Tensor.from_numpy(np.array([0, 3], np.int64)), dims=[5])
    return [
        Attribute(name="f", type=A.FLOAT, f=nan),
        Attribute(name="f0", type=A.FLOAT, f=np.float32(-0.0)),
        Attribute(name="i", type=A.INT, i=-(1 << 63)),
        Attribute(name="s", type=A.STRING, s=b"\x00\xffbytes"),
        Attribute(name="t", type=A.TENSOR, t=t),
        Attribute(name="g", type=A.GRAPH, g=lvl_graph),
        Attribute(name="floats", type=A.FLOATS,
                  floats=np.array([1.0, np.inf, -0.0, nan], dtype="<f4")),
        Attribute(name="ints", type=A.INTS, ints=[1, -2, (1 << 63) - 1]),
        Attribute(name="strings", type=A.STRINGS, strings=[b"", b"x"]),
        Attribute(name="tensors", type=A.TENSORS,
                  tensors=[Tensor.from_numpy(np.array([True, False])), t]),
        Attribute(name="graphs", type=A.GRAPHS, graphs=[Graph(name="empty")]),
        Attribute(name="sparse", type=A.SPARSE_TENSOR, sparse_tensor=st),
        Attribute(name="sparses", type=A.SPARSE_TENSORS, sparse_tensors=[st]),
        Attribute(name="tp", type=A.TYPE_PROTO, tp=every_type()[5]),
        Attribute(name="tps", type=A.TYPE_PROTOS, type_protos=every_type()[:3]),
        # presence and oddities
        Attribute(name="untyped", i=4),
        Attribute(name="nothing"),
        Attribute(name="int_absent", type=A.INT),
        Attribute(name="extra", type=A.INT, i=1, f=np.float32(2.5), s=b"",
                  t=Tensor.from_numpy(np.array([9], np.uint8)), tp=Type.tensor(1),
                  doc_string="two fields"),
        Attribute(name="floats_empty", type=A.FLOATS, floats=np.zeros(0, "<f4")),
        Attribute(name="graph_absent", type=A.GRAPH),
        Attribute(name="tensor_absent", type=A.TENSOR),
        Attribute(name="weird_type", type=99, i=3),
        Attribute(name="", type=A.STRING, s=b""),
    ]


def sink_model() -> Model:
    """A model that uses every field and feature of onemodel.ir that ONNX can carry."""
    meta = [StringStringEntry(key="k", value="v"), StringStringEntry(key="", value=None)]
    # If with branches reading outer-scope names
    then_g = Graph(name="then", outputs=[vi("then_out")],
                   nodes=[Node(op_type="Add", inputs=["x", "w0"], outputs=["then_out"])])
    else_g = Graph(name="else", outputs=[vi("else_out")],
                   nodes=[Node(op_type="Identity", inputs=["sum"], outputs=["else_out"])])
    body = Graph(name="body", inputs=[vi("iter", 7, []), vi("cond", 9, []), vi("acc")],
                 outputs=[vi("cond_out", 9, []), vi("acc_out")],
                 nodes=[Node(op_type="Identity", inputs=["cond"], outputs=["cond_out"]),
                        Node(op_type="Add", inputs=["acc", "x"], outputs=["acc_out"])])
    attr_graph = Graph(name="attr_graph", inputs=[vi("ai")], outputs=[vi("ai")])
    nodes = [
        Node(name="n_if", op_type="If", inputs=["c"], outputs=["y_if"],
             attributes=[Attribute(name="then_branch", type=A.GRAPH, g=then_g),
                         Attribute(name="else_branch", type=A.GRAPH, g=else_g)],
             metadata_props=[StringStringEntry(key="node", value="meta")]),
        Node(name="n_add", op_type="Add", inputs=["x", "w0"], outputs=["sum"], domain="",
             doc_string="adds", overload=""),
        Node(name="n_loop", op_type="Loop", inputs=["", "", "x"], outputs=["y_loop"],
             attributes=[Attribute(name="body", type=A.GRAPH, g=body)],
             device_configurations=[NodeDeviceConfiguration(
                 configuration_id="cfg", pipeline_stage=1, sharding_spec=[ShardingSpec(
                     tensor_name="x", device=[0, 1],
                     index_to_device_group_map=[IntIntListEntry(key=0, value=[0, 1])],
                     sharded_dim=[ShardedDim(axis=0, simple_sharding=[SimpleShardedDim(
                         dim_param="N", num_shards=2)])])])]),
        Node(name="n_custom", op_type="Everything", domain="custom",
             inputs=["y_if", "y_loop"], outputs=["y", ""],
             attributes=every_attribute(attr_graph)),
        Node(name="n_fn", op_type="MyFn", domain="custom", inputs=["y"], outputs=["z"],
             attributes=[Attribute(name="alpha", type=A.FLOAT, f=np.float32(0.5))]),
    ]
    types = every_type()
    graph = Graph(
        name="main", doc_string="the graph",
        inputs=[ValueInfo(name="x", type=Type.tensor(1, ["N", 3]), doc_string="input x",
                          metadata_props=meta),
                vi("c", 9, []), vi("w0", 1, [3])],
        outputs=[vi("z", 1, ["N", 3]), ValueInfo(name="sum")],
        value_info=[ValueInfo(name=f"vi{i}", type=t) for i, t in enumerate(types)]
        + [ValueInfo(name="y")],
        initializers=[Tensor.from_numpy(np.array([1, 2, 3], np.float32), name="w0")]
        + all_dtype_tensors() + typed_tensors() + [external_tensor()] + [
            Tensor(name="seg", data_type=1, dims=[1], raw_data=b"\0\0\0\0",
                   segment=Segment(begin=0, end=1), doc_string="segmented",
                   metadata_props=meta, data_location=0)],
        sparse_initializers=[SparseTensor(
            values=Tensor.from_numpy(np.array([5, 6], np.int32), name="sp"),
            indices=Tensor.from_numpy(np.array([[0, 1], [2, 3]], np.int64)), dims=[3, 4])],
        nodes=nodes,
        quantization_annotations=[TensorAnnotation(
            tensor_name="w0", quant_parameter_tensor_names=[
                StringStringEntry(key="SCALE_TENSOR", value="s")])],
        metadata_props=meta,
        unknown=b"\xa2\x06\x03abc",
    )
    fn = Function(
        name="MyFn", domain="custom", overload="",
        inputs=["a"], outputs=["b"], attribute_names=["beta"],
        attribute_defaults=[Attribute(name="alpha", type=A.FLOAT, f=np.float32(1.0)),
                            Attribute(name="table", type=A.TENSOR, t=Tensor.from_numpy(
                                np.array([7], np.int64), name="tbl"))],
        nodes=[Node(op_type="Mul", inputs=["a", "a"], outputs=["m"],
                    attributes=[Attribute(name="alpha", type=A.FLOAT, ref_attr_name="alpha"),
                                Attribute(name="beta", ref_attr_name="beta")]),
               Node(op_type="Identity", inputs=["m"], outputs=["b"])],
        opset_imports=[OperatorSetId(domain="", version=21)],
        value_info=[vi("m", 1, ["N"])], doc_string="a function",
        metadata_props=meta, unknown=b"\x08\x01")
    training = TrainingInfo(
        initialization=Graph(name="init", initializers=[
            Tensor.from_numpy(np.array([3.0], np.float64), name="lr")]),
        algorithm=Graph(name="algo"),
        initialization_binding=[StringStringEntry(key="w0", value="w0")],
        update_binding=[StringStringEntry(key="w0", value="w0_new")])
    return Model(
        ir_version=None, producer_name="tests", producer_version="",
        domain=None, model_version=0,
        doc_string="not utf-8: \udcff\udcfe",
        graph=graph, opset_imports=OPSETS + [OperatorSetId(domain="ai.onnx.ml")],
        metadata_props=meta, training_info=[training], functions=[fn],
        configurations=[DeviceConfiguration(name="cfg", num_devices=2,
                                            devices=["gpu0", "gpu1"])],
        unknown=b"\x92\x01\x00",
    )


def simple_model(weights: np.ndarray | None = None) -> Model:
    """x + w -> y, with w an initializer (default float32 [3])."""
    w = np.arange(3, dtype=np.float32) if weights is None else weights
    g = Graph(name="g", inputs=[vi("x", 1, list(w.shape))], outputs=[vi("y", 1, list(w.shape))],
              initializers=[Tensor.from_numpy(w, name="w")],
              nodes=[Node(name="add", op_type="Add", inputs=["x", "w"], outputs=["y"])])
    return Model(ir_version=10, opset_imports=[OperatorSetId(domain="", version=21)], graph=g)


__all__ = ["sink_model", "simple_model", "every_type", "every_attribute", "all_dtype_tensors",
           "typed_tensors", "external_tensor", "vi", "OPSETS"]
