"""The messages of ONNX Part 1, Annex B, mapped onto the records of :mod:`onemodel.ir`.

One line per field: ``tag  proto_name  type  [repeated|packed]  [-> ir_name]  [oneof=group]``.
``type`` is a scalar type of Clause 12 (``string``, ``bytes``, ``int64``, ``int32``, ``uint64``,
``float``, ``double``), ``enum:<Name>`` for a closed enumeration, ``raw`` for ``raw_data`` (kept
as a storage Blob of the bytes' range in the source, :func:`onemodel.ir.is_blob`), or a message
name. ``packed`` marks the repeated fields that
Annex B records in packed form (Clause 12.3.3); other repeated fields are written unpacked. A
field's record attribute is ``ir_name`` when given, else ``proto_name``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...ir import record as R
from ...ir.record import record_class

# wire kinds
STRING, BYTES, RAW, INT64, INT32, UINT64, ENUM, FLOAT, DOUBLE, MESSAGE = range(10)

#: Makes the value of a singular FLOAT field from its 32-bit pattern (both decoders call it).
FLOAT_VALUE = R.Float32.from_bits
_SCALARS = {"string": STRING, "bytes": BYTES, "raw": RAW, "int64": INT64, "int32": INT32,
            "uint64": UINT64, "float": FLOAT, "double": DOUBLE}
WIRE_OF = {STRING: 2, BYTES: 2, RAW: 2, INT64: 0, INT32: 0, UINT64: 0, ENUM: 0, FLOAT: 5,
           DOUBLE: 1, MESSAGE: 2}

#: Values of the closed enumerations (Tables B.4, B.20, B.33). In proto2 a value outside the
#: enumeration is kept as an unknown field, and so it is here.
ENUMS = {
    "AttributeType": frozenset(range(15)),
    "DataLocation": frozenset((0, 1)),
    "OperatorStatus": frozenset((0, 1)),
}

SCHEMA = {
    "ModelProto": ("Model", """
        1 ir_version int64
        8 opset_import OperatorSetIdProto repeated -> opset_imports
        2 producer_name string
        3 producer_version string
        4 domain string
        5 model_version int64
        6 doc_string string
        7 graph GraphProto
        14 metadata_props StringStringEntryProto repeated
        20 training_info TrainingInfoProto repeated
        25 functions FunctionProto repeated
        26 configuration DeviceConfigurationProto repeated -> configurations
    """),
    "GraphProto": ("Graph", """
        1 node NodeProto repeated -> nodes
        2 name string
        5 initializer TensorProto repeated -> initializers
        15 sparse_initializer SparseTensorProto repeated -> sparse_initializers
        10 doc_string string
        11 input ValueInfoProto repeated -> inputs
        12 output ValueInfoProto repeated -> outputs
        13 value_info ValueInfoProto repeated
        14 quantization_annotation TensorAnnotation repeated -> quantization_annotations
        16 metadata_props StringStringEntryProto repeated
    """),
    "NodeProto": ("Node", """
        1 input string repeated -> inputs
        2 output string repeated -> outputs
        3 name string
        4 op_type string
        7 domain string
        8 overload string
        5 attribute AttributeProto repeated -> attributes
        6 doc_string string
        9 metadata_props StringStringEntryProto repeated
        10 device_configurations NodeDeviceConfigurationProto repeated
    """),
    "AttributeProto": ("Attribute", """
        1 name string
        21 ref_attr_name string
        13 doc_string string
        20 type enum:AttributeType
        2 f float
        3 i int64
        4 s bytes
        5 t TensorProto
        6 g GraphProto
        22 sparse_tensor SparseTensorProto
        14 tp TypeProto
        7 floats float repeated
        8 ints int64 repeated
        9 strings bytes repeated
        10 tensors TensorProto repeated
        11 graphs GraphProto repeated
        23 sparse_tensors SparseTensorProto repeated
        15 type_protos TypeProto repeated
    """),
    "ValueInfoProto": ("ValueInfo", """
        1 name string
        2 type TypeProto
        3 doc_string string
        4 metadata_props StringStringEntryProto repeated
    """),
    "IntIntListEntryProto": ("IntIntListEntry", """
        1 key int64
        2 value int64 repeated
    """),
    "NodeDeviceConfigurationProto": ("NodeDeviceConfiguration", """
        1 configuration_id string
        2 sharding_spec ShardingSpecProto repeated
        3 pipeline_stage int32
    """),
    "ShardingSpecProto": ("ShardingSpec", """
        1 tensor_name string
        2 device int64 repeated
        3 index_to_device_group_map IntIntListEntryProto repeated
        4 sharded_dim ShardedDimProto repeated
    """),
    "ShardedDimProto": ("ShardedDim", """
        1 axis int64
        2 simple_sharding SimpleShardedDimProto repeated
    """),
    "SimpleShardedDimProto": ("SimpleShardedDim", """
        1 dim_value int64 oneof=dim
        2 dim_param string oneof=dim
        3 num_shards int64
    """),
    "TrainingInfoProto": ("TrainingInfo", """
        1 initialization GraphProto
        2 algorithm GraphProto
        3 initialization_binding StringStringEntryProto repeated
        4 update_binding StringStringEntryProto repeated
    """),
    "DeviceConfigurationProto": ("DeviceConfiguration", """
        1 name string
        2 num_devices int32
        3 device string repeated -> devices
    """),
    "StringStringEntryProto": ("StringStringEntry", """
        1 key string
        2 value string
    """),
    "TensorAnnotation": ("TensorAnnotation", """
        1 tensor_name string
        2 quant_parameter_tensor_names StringStringEntryProto repeated
    """),
    "TensorProto": ("Tensor", """
        1 dims int64 repeated
        2 data_type int32
        3 segment TensorProto.Segment
        4 float_data float packed
        5 int32_data int32 packed
        6 string_data bytes repeated
        7 int64_data int64 packed
        8 name string
        12 doc_string string
        9 raw_data raw
        13 external_data StringStringEntryProto repeated
        14 data_location enum:DataLocation
        10 double_data double packed
        11 uint64_data uint64 packed
        16 metadata_props StringStringEntryProto repeated
    """),
    "TensorProto.Segment": ("Segment", """
        1 begin int64
        2 end int64
    """),
    "SparseTensorProto": ("SparseTensor", """
        1 values TensorProto
        2 indices TensorProto
        3 dims int64 repeated
    """),
    "TensorShapeProto": ("Shape", """
        1 dim TensorShapeProto.Dimension repeated -> dims
    """),
    "TensorShapeProto.Dimension": ("Dimension", """
        1 dim_value int64 oneof=value
        2 dim_param string oneof=value
        3 denotation string
    """),
    "TypeProto": ("Type", """
        1 tensor_type TypeProto.Tensor oneof=value
        4 sequence_type TypeProto.Sequence oneof=value
        5 map_type TypeProto.Map oneof=value
        9 optional_type TypeProto.Optional oneof=value
        8 sparse_tensor_type TypeProto.SparseTensor oneof=value
        7 opaque_type TypeProto.Opaque oneof=value
        6 denotation string
    """),
    "TypeProto.Tensor": ("TensorType", """
        1 elem_type int32
        2 shape TensorShapeProto
    """),
    "TypeProto.Sequence": ("SequenceType", """
        1 elem_type TypeProto
    """),
    "TypeProto.Map": ("MapType", """
        1 key_type int32
        2 value_type TypeProto
    """),
    "TypeProto.Optional": ("OptionalType", """
        1 elem_type TypeProto
    """),
    "TypeProto.SparseTensor": ("SparseTensorType", """
        1 elem_type int32
        2 shape TensorShapeProto
    """),
    "TypeProto.Opaque": ("OpaqueType", """
        1 domain string
        2 name string
    """),
    "OperatorSetIdProto": ("OperatorSetId", """
        1 domain string
        2 version int64
    """),
    "FunctionProto": ("Function", """
        1 name string
        4 input string repeated -> inputs
        5 output string repeated -> outputs
        6 attribute string repeated -> attribute_names
        11 attribute_proto AttributeProto repeated -> attribute_defaults
        7 node NodeProto repeated -> nodes
        8 doc_string string
        9 opset_import OperatorSetIdProto repeated -> opset_imports
        10 domain string
        13 overload string
        12 value_info ValueInfoProto repeated
        14 metadata_props StringStringEntryProto repeated
    """),
    "OperatorProto": ("Operator", """
        1 op_type string
        2 since_version int64
        3 status enum:OperatorStatus
        10 doc_string string
    """),
    "OperatorSetProto": ("OperatorSet", """
        1 magic string
        2 ir_version int64
        3 ir_version_prerelease string
        7 ir_build_metadata string
        4 domain string
        5 opset_version int64
        6 doc_string string
        8 operator OperatorProto repeated -> operators
        9 functions FunctionProto repeated
    """),
    "SequenceProto": ("SequenceValue", """
        1 name string
        2 elem_type int32
        3 tensor_values TensorProto repeated
        4 sparse_tensor_values SparseTensorProto repeated
        5 sequence_values SequenceProto repeated
        6 map_values MapProto repeated
        7 optional_values OptionalProto repeated
    """),
    "MapProto": ("MapValue", """
        1 name string
        2 key_type int32
        3 keys int64 repeated
        4 string_keys bytes repeated
        5 values SequenceProto
    """),
    "OptionalProto": ("OptionalValue", """
        1 name string
        2 elem_type int32
        3 tensor_value TensorProto
        4 sparse_tensor_value SparseTensorProto
        5 sequence_value SequenceProto
        6 map_value MapProto
        7 optional_value OptionalProto
    """),
}


@dataclass
class Field:
    """One field of a message: its tag, names, wire kind and form."""

    tag: int
    proto_name: str
    name: str  # the record attribute
    kind: int
    wire: int
    repeated: bool
    packed: bool
    message: "Message | None" = None
    oneof: str | None = None
    enum_values: frozenset | None = None
    array_dtype: object = None  # numpy dtype when the record keeps this repeated field as ARRAY
    key: bytes = b""


@dataclass
class Message:
    """A message of Annex B: its proto name, record class and fields."""

    proto_name: str
    cls: type
    fields: list[Field] = field(default_factory=list)
    by_tag: dict[int, Field] = field(default_factory=dict)
    oneofs: dict[str, list[str]] = field(default_factory=dict)


def _build() -> tuple[dict[str, Message], dict[type, Message]]:
    from ... import ir  # noqa: F401  (registers every record class)
    from ..protobuf import key

    messages = {p: Message(p, record_class(c)) for p, (c, _) in SCHEMA.items()}
    for pname, (_, text) in SCHEMA.items():
        msg = messages[pname]
        kinds = msg.cls.KIND
        for line in text.strip().splitlines():
            parts = line.split()
            tag, proto_name, typ = int(parts[0]), parts[1], parts[2]
            rest = parts[3:]
            repeated = "repeated" in rest or "packed" in rest
            packed = "packed" in rest
            name = rest[rest.index("->") + 1] if "->" in rest else proto_name
            oneof = next((r.split("=", 1)[1] for r in rest if r.startswith("oneof=")), None)
            sub = None
            enum_values = None
            if typ in _SCALARS:
                kind = _SCALARS[typ]
            elif typ.startswith("enum:"):
                kind, enum_values = ENUM, ENUMS[typ[5:]]
            else:
                kind, sub = MESSAGE, messages[typ]
            if name not in kinds:
                raise AssertionError(f"{pname}.{proto_name}: record {msg.cls.__name__} has no "
                                     f"field {name}")
            array_dtype = None
            if kinds[name] == R.ARRAY:
                array_dtype = next(f[2] for f in msg.cls.FIELDS if f[0] == name)
            wire = WIRE_OF[kind]
            f = Field(tag, proto_name, name, kind, wire, repeated, packed, sub, oneof,
                      enum_values, array_dtype, key(tag, 2 if packed else wire))
            msg.fields.append(f)
            msg.by_tag[tag] = f
            if oneof:
                msg.oneofs.setdefault(oneof, []).append(name)
        msg.fields.sort(key=lambda f: f.tag)  # the order protobuf serializers write
    return messages, {m.cls: m for m in messages.values()}


MESSAGES, BY_CLASS = _build()
