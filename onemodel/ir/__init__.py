"""The in-memory model: one representation of the whole of ONNX IR version 14 (Annex B).

Formats read bytes into these records and write them back; the records do no I/O of their own
with one exception: tensor contents that are a storage Blob (``raw_data``, ``Tensor.external``)
are fetched when used. :meth:`Tensor.numpy` and :meth:`Tensor.raw_view` go through
:func:`~.record.buffer_view` to ``Blob.view()``, which slices a mapped or in-memory source, reads
a remote one (once, then kept), and raises IoError once the model is closed.
"""

from .dtypes import INFO, DataType, TypeInfo
from .entries import IntIntListEntry, OperatorSetId, StringStringEntry, normalize_domain
from .model import (
                    VALUE_FIELD,
                    Attribute,
                    AttributeType,
                    DeviceConfiguration,
                    Function,
                    Graph,
                    Model,
                    Node,
                    NodeDeviceConfiguration,
                    ShardedDim,
                    ShardingSpec,
                    SimpleShardedDim,
                    TensorAnnotation,
                    TrainingInfo,
                    ValueInfo,
)
from .opsets import Operator, OperatorSet
from .record import Float32, Record, buffer_nbytes, buffer_view, f32_bits, is_blob, record_class
from .tensor import EXTERNAL, Segment, SparseTensor, Tensor
from .types import (
                    Dimension,
                    MapType,
                    OpaqueType,
                    OptionalType,
                    SequenceType,
                    Shape,
                    SparseTensorType,
                    TensorType,
                    Type,
)
from .values import MapValue, OptionalValue, SequenceValue, ValueKind
from .walk import all_tensors, graph_tensors, iter_graphs, iter_tensors

__all__ = [
    "INFO", "DataType", "TypeInfo", "IntIntListEntry", "OperatorSetId", "StringStringEntry",
    "VALUE_FIELD", "Attribute", "AttributeType", "DeviceConfiguration", "Function", "Graph",
    "Model", "Node", "NodeDeviceConfiguration", "ShardedDim", "ShardingSpec", "SimpleShardedDim",
    "TensorAnnotation", "TrainingInfo", "ValueInfo", "Operator", "OperatorSet",
    "Record", "Float32", "f32_bits", "buffer_nbytes", "buffer_view", "is_blob", "record_class",
    "EXTERNAL", "Segment", "SparseTensor", "Tensor",
    "Dimension", "MapType", "OpaqueType", "OptionalType", "SequenceType", "Shape",
    "SparseTensorType", "TensorType", "Type", "MapValue", "OptionalValue", "SequenceValue",
    "ValueKind", "all_tensors", "graph_tensors", "iter_graphs", "iter_tensors", "normalize_domain",
]
