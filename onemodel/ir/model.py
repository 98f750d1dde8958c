"""Model, graph, node, attribute, function and their companions (Clause 5, Annex B.2).

Each class mirrors one ONNX message field for field, with list fields named in the plural
(``Node.inputs``, ``Graph.initializers``). Optional fields that are absent are ``None``, so a
model that was read and is written again keeps the difference between an absent field and one
explicitly set to ``""`` or ``0``.
"""

from __future__ import annotations

import enum
from typing import Any, Callable, Iterator

from ..lazy import np
from .entries import normalize_domain
from .record import (
    ARRAY,
    BYTES,
    F32,
    INT,
    LIST_BYTES,
    LIST_INT,
    LIST_MSG,
    LIST_STR,
    MSG,
    STR,
    Float32,
    Record,
)
from .tensor import SparseTensor, Tensor
from .types import Type


class AttributeType(enum.IntEnum):
    """``AttributeProto.AttributeType`` (Table B.4)."""

    UNDEFINED = 0
    FLOAT = 1
    INT = 2
    STRING = 3
    TENSOR = 4
    GRAPH = 5
    FLOATS = 6
    INTS = 7
    STRINGS = 8
    TENSORS = 9
    GRAPHS = 10
    SPARSE_TENSOR = 11
    SPARSE_TENSORS = 12
    TYPE_PROTO = 13
    TYPE_PROTOS = 14


#: Attribute type -> the field of AttributeProto that carries its value.
VALUE_FIELD = {
    AttributeType.FLOAT: "f", AttributeType.INT: "i", AttributeType.STRING: "s",
    AttributeType.TENSOR: "t", AttributeType.GRAPH: "g", AttributeType.FLOATS: "floats",
    AttributeType.INTS: "ints", AttributeType.STRINGS: "strings", AttributeType.TENSORS: "tensors",
    AttributeType.GRAPHS: "graphs", AttributeType.SPARSE_TENSOR: "sparse_tensor",
    AttributeType.SPARSE_TENSORS: "sparse_tensors", AttributeType.TYPE_PROTO: "tp",
    AttributeType.TYPE_PROTOS: "type_protos",
}


class ValueInfo(Record):
    """A value's name, declared type and documentation (``ValueInfoProto``, Annex B.2.3)."""

    FIELDS = (
        ("name", STR, None),
        ("type", MSG, "Type"),
        ("doc_string", STR, None),
        ("metadata_props", LIST_MSG, "StringStringEntry"),
    )


class Attribute(Record):
    """A named attribute of a node or a function default (``AttributeProto``, Clause 7.4).

    ``type`` is the :class:`AttributeType` code; the value is in the field :data:`VALUE_FIELD`
    names (``f`` a :class:`~.record.Float32`, ``floats`` a float32 ndarray, ``ints`` a list of
    int, ``s`` and ``strings`` bytes, ...). A non-empty ``ref_attr_name`` makes the attribute a
    reference to an attribute of the enclosing function (Clause 8.4). :attr:`value` gives the
    value.
    """

    FIELDS = (
        ("name", STR, None),
        ("f", F32, None),
        ("i", INT, None),
        ("s", BYTES, None),
        ("t", MSG, "Tensor"),
        ("g", MSG, "Graph"),
        ("floats", ARRAY, "<f4"),
        ("ints", LIST_INT, None),
        ("strings", LIST_BYTES, None),
        ("tensors", LIST_MSG, "Tensor"),
        ("graphs", LIST_MSG, "Graph"),
        ("doc_string", STR, None),
        ("tp", MSG, "Type"),
        ("type_protos", LIST_MSG, "Type"),
        ("type", INT, None),
        ("ref_attr_name", STR, None),
        ("sparse_tensor", MSG, "SparseTensor"),
        ("sparse_tensors", LIST_MSG, "SparseTensor"),
    )

    @property
    def value(self):
        """The value for ``type``: float, int, bytes, Tensor, Graph, SparseTensor, Type, or a list.

        FLOAT gives a Python float, FLOATS a list of floats (use ``floats`` for the bit-exact
        float32 array). An UNDEFINED type gives ``None``; a reference (``ref_attr_name``) holds
        no value, so it gives the type's default. :func:`decode_attribute` without converters.
        """
        return decode_attribute(self)

    def subgraphs(self) -> "list[tuple[str, Graph]] | tuple[()]":
        """The graphs this attribute holds, with their field paths: ``("g", g)`` for a GRAPH,
        ``("graphs[k]", g)`` for each of GRAPHS (Clause 7.4). Empty (and falsy) for an attribute
        without graphs. The one place that knows which fields hold subgraphs: the walks over
        If branches, Loop and Scan bodies (ir.walk, ir.order, the reading rules, the evaluator's
        planner) go through it or :meth:`Node.subgraphs`.
        """
        g, graphs = self.g, self.graphs
        if g is None:
            return [(f"graphs[{k}]", x) for k, x in enumerate(graphs)] if graphs else ()
        out = [("g", g)]
        out += [(f"graphs[{k}]", x) for k, x in enumerate(graphs)]
        return out

    @classmethod
    def make(cls, name: str, value, type: int | None = None) -> "Attribute":
        """An attribute holding ``value``; the type is inferred when not given.

        float -> FLOAT, int -> INT, str/bytes -> STRING, Tensor/ndarray -> TENSOR, Graph -> GRAPH,
        SparseTensor, Type, and lists of those -> the plural type. Raises TypeError for other
        values or an empty list without ``type``.
        """
        A = AttributeType
        if type is None:
            probe = value[0] if isinstance(value, (list, tuple)) and value else value
            plural = isinstance(value, (list, tuple))
            if plural and not value:
                raise TypeError("an empty list needs an explicit attribute type")
            if isinstance(probe, (bool, int, np.integer)):
                type = A.INTS if plural else A.INT
            elif isinstance(probe, (float, np.floating)):
                type = A.FLOATS if plural else A.FLOAT
            elif isinstance(probe, (str, bytes)):
                type = A.STRINGS if plural else A.STRING
            elif isinstance(probe, (Tensor, np.ndarray)):
                type = A.TENSORS if plural else A.TENSOR
            elif isinstance(probe, Graph):
                type = A.GRAPHS if plural else A.GRAPH
            elif isinstance(probe, SparseTensor):
                type = A.SPARSE_TENSORS if plural else A.SPARSE_TENSOR
            elif isinstance(probe, Type):
                type = A.TYPE_PROTOS if plural else A.TYPE_PROTO
            else:
                raise TypeError(f"cannot infer an attribute type for {value!r}")
        type = A(type)
        attr = cls(name=name, type=int(type))
        field = VALUE_FIELD[type]
        if type == A.FLOAT:
            value = Float32(value)
        elif type == A.FLOATS:
            value = np.asarray(value, dtype=np.float32)
        elif type == A.INT:
            value = int(value)
        elif type == A.INTS:
            value = [int(x) for x in value]
        elif type == A.STRING:
            value = value.encode() if isinstance(value, str) else bytes(value)
        elif type == A.STRINGS:
            value = [x.encode() if isinstance(x, str) else bytes(x) for x in value]
        elif type == A.TENSOR and isinstance(value, np.ndarray):
            value = Tensor.from_numpy(value)
        elif type == A.TENSORS:
            value = [Tensor.from_numpy(x) if isinstance(x, np.ndarray) else x for x in value]
        elif type in (A.GRAPHS, A.SPARSE_TENSORS, A.TYPE_PROTOS):
            value = list(value)
        setattr(attr, field, value)
        return attr


def decode_attribute(attr: Attribute, *, string: Callable[[bytes], Any] | None = None,
                     tensor: Callable[[Any], Any] | None = None):
    """The value of ``attr`` for its ``type`` (Clause 7.4, Table B.4): the one attribute decoder.

    The field :data:`VALUE_FIELD` names for the type is read, an absent scalar read as its
    default: FLOAT -> float (0.0), INT -> int (0), STRING -> bytes (``b""``), FLOATS -> list of
    float (each float32 value widened exactly), INTS -> list of int, STRINGS -> list of bytes,
    TENSOR / SPARSE_TENSOR -> the :class:`~.tensor.Tensor` / :class:`~.tensor.SparseTensor` or
    None, GRAPH -> Graph or None, TYPE_PROTO -> Type or None, and the plural types -> their list.
    An UNDEFINED or unknown type gives ``None``. A reference (``ref_attr_name``, Clause 8.4) sets
    no value field, so it reads as that default. Without converters the lists are the
    attribute's own.

    ``string`` is applied to each STRING / STRINGS value, ``tensor`` to each TENSOR, TENSORS,
    SPARSE_TENSOR and SPARSE_TENSORS value (a converted plural type is a new list). The evaluator
    passes UTF-8 decoding and the tensor's ndarray (``onemodel.evaluate.context``); it raises
    what the converters raise, nothing itself.
    """
    try:
        field = VALUE_FIELD[AttributeType(attr.type or 0)]
    except (KeyError, ValueError):
        return None
    v = getattr(attr, field)
    if field == "f":
        return 0.0 if v is None else float(v)
    if field == "i":
        return 0 if v is None else v
    if field == "s":
        v = b"" if v is None else v
        return v if string is None else string(v)
    if field == "floats":
        return [] if v is None else np.asarray(v, dtype=np.float32).tolist()
    if field == "strings" and string is not None:
        return [string(x) for x in v]
    if tensor is not None:
        if field in ("t", "sparse_tensor"):
            return None if v is None else tensor(v)
        if field in ("tensors", "sparse_tensors"):
            return [tensor(x) for x in v]
    return v


class SimpleShardedDim(Record):
    """``SimpleShardedDimProto``: a dim (``dim_value`` or ``dim_param``) and ``num_shards``."""

    FIELDS = (("dim_value", INT, None), ("dim_param", STR, None), ("num_shards", INT, None))


class ShardedDim(Record):
    """``ShardedDimProto``: the ``axis`` sharded and how (``simple_sharding``)."""

    FIELDS = (("axis", INT, None), ("simple_sharding", LIST_MSG, "SimpleShardedDim"))


class ShardingSpec(Record):
    """``ShardingSpecProto``: how one tensor is sharded over devices (Annex B.2.7)."""

    FIELDS = (
        ("tensor_name", STR, None),
        ("device", LIST_INT, None),
        ("index_to_device_group_map", LIST_MSG, "IntIntListEntry"),
        ("sharded_dim", LIST_MSG, "ShardedDim"),
    )


class NodeDeviceConfiguration(Record):
    """``NodeDeviceConfigurationProto``: a node's placement under one device configuration."""

    FIELDS = (
        ("configuration_id", STR, None),
        ("sharding_spec", LIST_MSG, "ShardingSpec"),
        ("pipeline_stage", INT, None),
    )


class DeviceConfiguration(Record):
    """``DeviceConfigurationProto``: a named multi-device configuration (Annex B.2.12)."""

    FIELDS = (("name", STR, None), ("num_devices", INT, None), ("devices", LIST_STR, None))


class Node(Record):
    """One operator invocation (``NodeProto``, Clause 7.3).

    ``inputs`` and ``outputs`` are value names; ``""`` leaves an optional operand unsupplied.
    The operator is ``(domain, op_type)`` at the version the model imports for ``domain``.
    """

    FIELDS = (
        ("inputs", LIST_STR, None),
        ("outputs", LIST_STR, None),
        ("name", STR, None),
        ("op_type", STR, None),
        ("attributes", LIST_MSG, "Attribute"),
        ("doc_string", STR, None),
        ("domain", STR, None),
        ("overload", STR, None),
        ("metadata_props", LIST_MSG, "StringStringEntry"),
        ("device_configurations", LIST_MSG, "NodeDeviceConfiguration"),
    )

    def attribute(self, name: str) -> Attribute | None:
        """The attribute called ``name``, or ``None``."""
        for a in self.attributes:
            if a.name == name:
                return a
        return None

    def attrs(self) -> dict:
        """Attribute name -> :attr:`Attribute.value`."""
        return {a.name: a.value for a in self.attributes}

    def subgraphs(self) -> Iterator["Graph"]:
        """Every graph in this node's attributes (If branches, Loop and Scan bodies), in
        attribute order: :meth:`Attribute.subgraphs` of each, without the paths."""
        for a in self.attributes:
            for _, g in a.subgraphs():
                yield g


class TensorAnnotation(Record):
    """``TensorAnnotation``: quantization parameter tensor names of one tensor (Annex B.2.14)."""

    FIELDS = (
        ("tensor_name", STR, None),
        ("quant_parameter_tensor_names", LIST_MSG, "StringStringEntry"),
    )


class Graph(Record):
    """A graph (``GraphProto``, Clause 7): nodes, inputs, outputs, initializers, value types."""

    FIELDS = (
        ("nodes", LIST_MSG, "Node"),
        ("name", STR, None),
        ("initializers", LIST_MSG, "Tensor"),
        ("doc_string", STR, None),
        ("inputs", LIST_MSG, "ValueInfo"),
        ("outputs", LIST_MSG, "ValueInfo"),
        ("value_info", LIST_MSG, "ValueInfo"),
        ("quantization_annotations", LIST_MSG, "TensorAnnotation"),
        ("sparse_initializers", LIST_MSG, "SparseTensor"),
        ("metadata_props", LIST_MSG, "StringStringEntry"),
    )

    def initializer_map(self) -> dict[str, Tensor]:
        """Initializer name -> tensor (the last one wins for a duplicated name)."""
        return {t.name or "": t for t in self.initializers}


class TrainingInfo(Record):
    """``TrainingInfoProto``: initialization and training algorithm graphs (Annex B.2.10)."""

    FIELDS = (
        ("initialization", MSG, "Graph"),
        ("algorithm", MSG, "Graph"),
        ("initialization_binding", LIST_MSG, "StringStringEntry"),
        ("update_binding", LIST_MSG, "StringStringEntry"),
    )


class Function(Record):
    """A model-local function (``FunctionProto``, Clause 8.4).

    Identified by ``(domain, name, overload)``. ``attribute_names`` are attribute parameters
    without a default; ``attribute_defaults`` are attributes with their default values.
    """

    FIELDS = (
        ("name", STR, None),
        ("inputs", LIST_STR, None),
        ("outputs", LIST_STR, None),
        ("attribute_names", LIST_STR, None),
        ("nodes", LIST_MSG, "Node"),
        ("doc_string", STR, None),
        ("opset_imports", LIST_MSG, "OperatorSetId"),
        ("domain", STR, None),
        ("attribute_defaults", LIST_MSG, "Attribute"),
        ("value_info", LIST_MSG, "ValueInfo"),
        ("overload", STR, None),
        ("metadata_props", LIST_MSG, "StringStringEntry"),
    )


class Model(Record):
    """A model (``ModelProto``, Clause 5.3): IR version, opset imports, graph, functions, metadata.

    A model read from a file may hold memory maps of that file and its external data files;
    use it as a context manager, or call :meth:`close`, to release them. Arrays obtained from
    tensors stay valid after ``close`` (the map is released when the last of them is gone).
    """

    FIELDS = (
        ("ir_version", INT, None),
        ("producer_name", STR, None),
        ("producer_version", STR, None),
        ("domain", STR, None),
        ("model_version", INT, None),
        ("doc_string", STR, None),
        ("graph", MSG, "Graph"),
        ("opset_imports", LIST_MSG, "OperatorSetId"),
        ("metadata_props", LIST_MSG, "StringStringEntry"),
        ("training_info", LIST_MSG, "TrainingInfo"),
        ("functions", LIST_MSG, "Function"),
        ("configurations", LIST_MSG, "DeviceConfiguration"),
    )
    #: ``resources``: objects with ``close()`` (maps, files) this model's tensors view.
    #: ``source``: the path or URL it was read from. ``base_dir``: where external data resolves.
    #: ``format``: the name of the format it was read from (``onnx``, ``onemodel``).
    EXTRA = ("resources", "source", "base_dir", "format")

    def opset_version(self, domain: str = "") -> int | None:
        """The imported version of ``domain`` (``""`` and ``"ai.onnx"`` are the same), or None."""
        want = normalize_domain(domain)
        for o in self.opset_imports:
            if normalize_domain(o.domain) == want:
                return o.version
        return None

    def close(self) -> None:
        """Release the maps and files this model reads from. Safe to call more than once.

        The tensors hold their bytes as Blobs (ranges of those files), which keep no view of a
        map, so the maps are unmapped and the descriptors closed now; reading a tensor's contents
        afterwards raises IoError (the closed source refuses the read). An array taken from a
        tensor before stays valid: its map is then unmapped when the array goes.
        """
        res, self.resources = self.resources or [], None
        for r in reversed(res):
            r.close()

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["AttributeType", "VALUE_FIELD", "ValueInfo", "Attribute", "decode_attribute", "Node",
           "Graph", "Function", "Model", "TrainingInfo", "TensorAnnotation", "DeviceConfiguration",
           "NodeDeviceConfiguration", "ShardingSpec", "ShardedDim", "SimpleShardedDim"]
