"""Sequence, map and optional values (``SequenceProto``, ``MapProto``, ``OptionalProto``;
Annex B.4).

These carry values of the composite types of Clause 6.8 outside a model, for example the inputs
and expected outputs of the ONNX conformance test vectors (``input_0.pb``, ``output_0.pb``).
"""

from __future__ import annotations

import enum

from .record import INT, LIST_BYTES, LIST_INT, LIST_MSG, MSG, STR, Record


class ValueKind(enum.IntEnum):
    """``SequenceProto.DataType`` and ``OptionalProto.DataType`` (Tables B.38, B.41)."""

    UNDEFINED = 0
    TENSOR = 1
    SPARSE_TENSOR = 2
    SEQUENCE = 3
    MAP = 4
    OPTIONAL = 5


class SequenceValue(Record):
    """A sequence of values of one kind (``SequenceProto``); ``elem_type`` is a ValueKind."""

    FIELDS = (
        ("name", STR, None),
        ("elem_type", INT, None),
        ("tensor_values", LIST_MSG, "Tensor"),
        ("sparse_tensor_values", LIST_MSG, "SparseTensor"),
        ("sequence_values", LIST_MSG, "SequenceValue"),
        ("map_values", LIST_MSG, "MapValue"),
        ("optional_values", LIST_MSG, "OptionalValue"),
    )


class MapValue(Record):
    """A map (``MapProto``): integral ``keys`` or ``string_keys``, and ``values`` in a sequence."""

    FIELDS = (
        ("name", STR, None),
        ("key_type", INT, None),
        ("keys", LIST_INT, None),
        ("string_keys", LIST_BYTES, None),
        ("values", MSG, "SequenceValue"),
    )


class OptionalValue(Record):
    """An optional value (``OptionalProto``): at most one of the value fields is set."""

    FIELDS = (
        ("name", STR, None),
        ("elem_type", INT, None),
        ("tensor_value", MSG, "Tensor"),
        ("sparse_tensor_value", MSG, "SparseTensor"),
        ("sequence_value", MSG, "SequenceValue"),
        ("map_value", MSG, "MapValue"),
        ("optional_value", MSG, "OptionalValue"),
    )
