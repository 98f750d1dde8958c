"""ONNX test data: values in ``.pb`` files.

The ONNX test sets store each input and expected output of a model in its own file,
``test_data_set_N/input_J.pb`` and ``output_J.pb``, holding the Annex B message of the graph
value's type: a ``TensorProto`` (Annex B.2.18), ``SequenceProto``, ``MapProto`` or
``OptionalProto`` (Annex B.4). The file does not say which: the model's type of the graph input
or output it stands for does (:func:`message_kind`). Values are the evaluator's: an ndarray for
a tensor, a list for a sequence, a dict for a map, the element or ``None`` for an optional.
:func:`data_sets` finds the sets of a directory; outputs are compared with the expected ones
within the Clause 11.5 tolerances of :mod:`onemodel.tolerances`.

Writing (:func:`write_pb`, :func:`to_record`) gives the messages numpy cannot hold: a tensor
of a type ``np.save`` writes but numpy cannot load back (:func:`numpy_can_store`: bfloat16,
float8, int4, int2, float4, float6), and sequences, maps and optionals.
"""

from __future__ import annotations

import pathlib
import re
from typing import Any

from .errors import InvalidModelError, IoError, quote
from .formats.onnx import decode_message
from .formats.onnx.writer import encode_message
from .ir import MapValue, OptionalValue, SequenceValue, Tensor
from .ir.attribute_values import tensor_value
from .ir.dtypes import DataType, code_of_dtype
from .ir.values import ValueKind
from .lazy import np

#: Message of each value kind (Annex B.2.18, B.4).
MESSAGE = {"tensor": "TensorProto", "sequence": "SequenceProto", "map": "MapProto",
           "optional": "OptionalProto"}

def numpy_can_store(dtype) -> bool:
    """True when ``np.save`` writes ``dtype`` in a file numpy loads back: numpy's own types
    (strings as text); False for the ml_dtypes types (bfloat16, float8, int4, int2, float4,
    float6), which it writes as opaque void data."""
    if dtype.kind not in "biufcOUS":  # (the ml_dtypes types are kind "V", opaque to numpy)
        return False
    try:  # the header np.save writes names the dtype by its descr: numpy must read it back
        import numpy as np

        return dtype.type.__module__ == "numpy" and np.dtype(dtype.str) == dtype
    except TypeError:
        return False


# -- reading ---------------------------------------------------------------------------------

def to_value(record) -> Any:
    """The evaluator's value of a decoded message: an ndarray for a TensorProto, a list for a
    SequenceProto, a dict for a MapProto (values as ``numpy_helper.to_dict`` gives them), the
    element or ``None`` for an OptionalProto."""
    if isinstance(record, SequenceValue):
        kind = record.elem_type or 0
        if kind == ValueKind.TENSOR:
            return [tensor_value(t) for t in record.tensor_values]
        if kind == ValueKind.SPARSE_TENSOR:
            return [tensor_value(t) for t in record.sparse_tensor_values]
        if kind == ValueKind.SEQUENCE:
            return [to_value(s) for s in record.sequence_values]
        if kind == ValueKind.MAP:
            return [to_value(m) for m in record.map_values]
        if kind == ValueKind.OPTIONAL:
            return [to_value(o) for o in record.optional_values]
        return []
    if isinstance(record, MapValue):
        keys = ([k.decode("utf-8", "surrogateescape") for k in record.string_keys]
                if record.string_keys else list(record.keys))
        values = to_value(record.values) if record.values is not None else []
        if isinstance(values, list) and values and isinstance(values[0], np.ndarray) \
                and len(values) == 1 and len(keys) != 1:
            values = list(values[0])
        return dict(zip(keys, values))
    if isinstance(record, OptionalValue):
        for field in ("tensor_value", "sparse_tensor_value", "sequence_value", "map_value",
                      "optional_value"):
            inner = getattr(record, field)
            if inner is not None:
                return to_value(inner)
        return None
    return tensor_value(record)


def message_kind(value_type) -> str:
    """The message kind (``tensor``, ``sequence``, ``map``, ``optional``) a test file holds for
    a graph value of type ``value_type`` (an ir Type; None or a sparse tensor: ``tensor``)."""
    kind = value_type.kind if value_type is not None else None
    return kind if kind in ("sequence", "map", "optional") else "tensor"


def read_pb(path, kind: str = "tensor") -> Any:
    """The value in the ``.pb`` file ``path``, decoded as message kind ``kind`` (tensor,
    sequence, map, optional) by onemodel's own decoder and turned into the evaluator's value
    (:func:`to_value`). The file is opened as a model is (:class:`onemodel.storage.LocalSource`:
    without blocking, a regular file only, mapped when large), so its size bounds what is read,
    and every tensor's size is checked against its dims before an array is made.

    Raises IoError when the file cannot be read or is not a regular file (a FIFO, a device such
    as ``/dev/zero``, a directory: naming what it is), MalformedError (Clause 12) or
    InvalidModelError/UnsupportedError for its contents, naming the field path."""
    from .storage.local import LocalSource

    source = LocalSource(str(path))  # (IoError naming the file)
    try:
        return to_value(decode_message(source.whole(), MESSAGE[kind], source=str(path)))
    finally:
        source.close()  # (arrays viewing a mapped file keep the map until they go)


_INDEXED = re.compile(r"^(input|output)_(\d+)\.pb$")


def data_sets(directory) -> list[tuple[pathlib.Path, list[pathlib.Path], list[pathlib.Path]]]:
    """The data sets of a test directory: ``[(dir, inputs, outputs)]``, each list in index order
    (``input_0.pb``, ``input_1.pb``, ... ``input_10.pb``). ``directory`` is either one data set
    (it holds ``input_*.pb``) or a test case holding ``test_data_set_*`` directories, taken in
    numeric order. Raises IoError when it is neither."""
    root = pathlib.Path(directory)
    if not root.is_dir():
        raise IoError("the test data directory does not exist", source=str(root))

    def one(d):
        found: dict = {"input": {}, "output": {}}
        for p in d.iterdir():
            m = _INDEXED.match(p.name)
            if m:
                found[m.group(1)][int(m.group(2))] = p
        return (d, [found["input"][i] for i in sorted(found["input"])],
                [found["output"][i] for i in sorted(found["output"])])

    sets = [one(root)]
    if not sets[0][1] and not sets[0][2]:
        subs = [p for p in root.iterdir() if p.is_dir() and p.name.startswith("test_data_set_")]
        subs.sort(key=lambda p: int(p.name.rsplit("_", 1)[1]) if p.name.rsplit("_", 1)[1]
                  .isdigit() else -1)
        sets = [one(p) for p in subs]
    if not sets or not any(s[1] or s[2] for s in sets):
        raise IoError("no input_*.pb or output_*.pb files, nor test_data_set_* directories "
                      "holding them", source=str(root))
    return sets


# -- writing ---------------------------------------------------------------------------------

def _tensor_record(value, name=None) -> Tensor:
    arr = np.asarray(value)
    if arr.dtype.kind == "O":
        arr = np.array([x if isinstance(x, bytes) else str(x).encode("utf-8", "surrogateescape")
                        for x in arr.reshape(-1)], dtype=object).reshape(arr.shape)
    return Tensor.from_numpy(arr, name=name)


def _kind_code(value) -> int:
    if isinstance(value, list):
        return int(ValueKind.SEQUENCE)
    if isinstance(value, dict):
        return int(ValueKind.MAP)
    return int(ValueKind.TENSOR)


def _sequence(values: list, name=None) -> SequenceValue:
    kinds = {_kind_code(v) for v in values if v is not None}
    if any(v is None for v in values):
        return SequenceValue(name=name, elem_type=int(ValueKind.OPTIONAL),
                             optional_values=[to_record(v) for v in values])
    kind = kinds.pop() if len(kinds) == 1 else int(ValueKind.TENSOR)
    if len(kinds) > 0:
        raise InvalidModelError(f"sequence {quote(name or '')} mixes element kinds")
    seq = SequenceValue(name=name, elem_type=kind)
    if kind == ValueKind.SEQUENCE:
        seq.sequence_values = [_sequence(v) for v in values]
    elif kind == ValueKind.MAP:
        seq.map_values = [_map(v) for v in values]
    else:
        seq.tensor_values = [_tensor_record(v) for v in values]
    return seq


def _map(value: dict, name=None) -> MapValue:
    keys = list(value)
    if keys and all(isinstance(k, str) for k in keys):
        m = MapValue(name=name, key_type=int(DataType.STRING),
                     string_keys=[k.encode("utf-8", "surrogateescape") for k in keys])
    else:
        karr = np.asarray(keys) if keys else np.zeros(0, np.int64)
        code = code_of_dtype(karr.dtype) if karr.dtype.kind in "iu" else None
        if code is None:
            raise InvalidModelError(f"map {quote(name or '')}: keys of type {karr.dtype} "
                                    "(a MapProto holds integer or string keys)")
        m = MapValue(name=name, key_type=int(code), keys=[int(k) for k in keys])
    m.values = _sequence([value[k] for k in keys])
    return m


def to_record(value, name: str | None = None, kind: str | None = None):
    """The message record of an evaluator value: a Tensor for an ndarray (Annex B.2.18, raw
    storage, narrow types packed), a SequenceValue for a list, a MapValue for a dict (keys of
    an integer type or strings, values in a sequence as ``numpy_helper.from_dict`` writes
    them), an OptionalValue for ``None`` (elem_type UNDEFINED: empty). Raises
    UnsupportedError for a dtype ONNX has no element type for, InvalidModelError for a map
    whose keys are neither. ``kind`` ``optional`` (the declared type of the value, as
    :func:`message_kind` gives it) wraps a value that is not ``None`` in an OptionalValue."""
    if value is None:
        return OptionalValue(name=name, elem_type=int(ValueKind.UNDEFINED))
    if kind == "optional":
        inner = to_record(value)
        field = {SequenceValue: "sequence_value", MapValue: "map_value"}.get(type(inner),
                                                                            "tensor_value")
        return OptionalValue(name=name, elem_type=_kind_code(value), **{field: inner})
    if isinstance(value, list):
        return _sequence(value, name)
    if isinstance(value, dict):
        return _map(value, name)
    return _tensor_record(value, name)


def message_of(record) -> str:
    """The Annex B message name of a record :func:`to_record` gives."""
    return {SequenceValue: "SequenceProto", MapValue: "MapProto",
            OptionalValue: "OptionalProto"}.get(type(record), "TensorProto")


def write_pb(path, value, name: str | None = None, kind: str | None = None) -> str:
    """Write ``value`` (:func:`to_record`, ``kind`` as there) as its message to ``path``;
    returns the message name (``TensorProto``, ``SequenceProto``, ...). Raises IoError when the
    file cannot be written."""
    record = to_record(value, name, kind)
    data = encode_message(record)
    try:
        pathlib.Path(path).write_bytes(data)
    except OSError as e:
        raise IoError(f"cannot write {quote(str(path))}: {e.strerror or e}",
                      source=str(path)) from None
    return message_of(record)
