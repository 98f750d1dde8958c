"""ONNX test data: values in ``.pb`` files, and outputs compared within the Clause 11.5
tolerances.

The ONNX test sets store each input and expected output of a model in its own file,
``test_data_set_N/input_J.pb`` and ``output_J.pb``, holding the Annex B message of the graph
value's type: a ``TensorProto`` (Annex B.2.18), ``SequenceProto``, ``MapProto`` or
``OptionalProto`` (Annex B.4). The file does not say which: the model's type of the graph input
or output it stands for does (:func:`message_kind`). Values are the evaluator's: an ndarray for
a tensor, a list for a sequence, a dict for a map, the element or ``None`` for an optional.

Tolerances (Part 1, Clause 11.5; the rules docs/conformance.md states, and the ONNX backend test
harness applies, ``onnx.backend.test.runner.Runner.assert_similar_outputs``) are defined once
here, :func:`tolerance` and :data:`RULES`:

* float32, float64, float16, complex: ``|got - want| <= atol + rtol * |want|``, ``rtol`` 1e-3
  and ``atol`` 1e-7 unless the test states others; NaN equals NaN, an infinity the same
  infinity;
* bfloat16: the same with ``rtol = max(rtol, 2**-6)`` (two bfloat16 ulps);
* float8, float6, float4, float8e8m0: the same on the float32 values (one ulp of these is more
  than 1e-3 relative, so the values must be equal);
* integers of every width (int4/int2 included) and bool: exactly equal; strings: equal as text.

Writing (:func:`write_pb`, :func:`to_record`) gives the messages numpy cannot hold: a tensor
of a type ``np.save`` writes but numpy cannot load back (:func:`numpy_can_store`: bfloat16,
float8, int4, int2, float4, float6), and sequences, maps and optionals.
"""

from __future__ import annotations

import dataclasses
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

#: Default tolerances of a comparison (the ONNX test loader's, Clause 11.5).
RTOL, ATOL = 1e-3, 1e-7

#: The rtol floor of bfloat16 (two bfloat16 ulps, as the harness has it).
BFLOAT16_RTOL = 2.0 ** -6

NARROW_FLOATS = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
                 "float8_e8m0fnu", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn")

#: The comparison rule of each element type, as docs/conformance.md prints them.
RULES = [
    ("float32", "harness: abs(got - want) <= atol + rtol * abs(want); NaN = NaN"),
    ("float64", "harness, as float32"),
    ("float16", "harness, as float32"),
    ("bfloat16", "harness with rtol = max(rtol, 2^-6) (two bfloat16 ulps)"),
    ("complex64", "harness on complex values"),
    ("complex128", "harness on complex values"),
    ("float8_e4m3fn", "harness on the float32 values (an ulp > rtol: same value)"),
    ("float8_e4m3fnuz", "as float8_e4m3fn"),
    ("float8_e5m2", "as float8_e4m3fn"),
    ("float8_e5m2fnuz", "as float8_e4m3fn"),
    ("float8_e8m0fnu", "as float8_e4m3fn"),
    ("float4_e2m1fn", "as float8_e4m3fn"),
    ("float6_e2m3fn", "as float8_e4m3fn"),
    ("float6_e3m2fn", "as float8_e4m3fn"),
]


def is_float(dtype) -> bool:
    """True for the element types compared within a tolerance (every float and complex type,
    the ml_dtypes ones included)."""
    return dtype.kind in "fc" or dtype.name == "bfloat16" or dtype.name in NARROW_FLOATS


def element_type(dtype) -> str:
    """The name under which a result is counted: ``float32``, ``bfloat16``, ``int4``,
    ``bool``, ``string`` (object and text arrays) ..."""
    return "string" if dtype.kind in "OUS" else dtype.name


def tolerance(dtype, rtol: float = RTOL, atol: float = ATOL) -> tuple[float, float] | None:
    """``(rtol, atol)`` a tensor of ``dtype`` is compared with (Clause 11.5, this module's
    docstring), or None when its elements must be equal."""
    if not is_float(dtype):
        return None
    return (max(rtol, BFLOAT16_RTOL) if dtype.name == "bfloat16" else rtol), atol


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


# -- comparing -------------------------------------------------------------------------------

@dataclasses.dataclass
class Difference:
    """How one compared value (an output, or an element of a sequence or map) differs.

    ``problem`` is a structural difference (kind, length, keys, shape, dtype) when set, and
    then the numbers are not. Otherwise ``count`` of ``size`` elements are out of tolerance,
    the first at index ``index`` (``flat`` in C order; ``got`` and ``want`` its values),
    ``max_abs``/``max_rel`` the largest absolute and relative differences over the finite
    elements (0 for exact types, where any difference counts), ``rtol``/``atol`` the tolerance
    used (None: exact).
    """

    path: str
    problem: str | None = None
    count: int = 0
    size: int = 0
    index: tuple = ()
    flat: int = 0
    got: Any = None
    want: Any = None
    max_abs: float = 0.0
    max_rel: float = 0.0
    rtol: float | None = None
    atol: float | None = None

    def text(self) -> str:
        """One line: the problem, or the counts, differences and first element."""
        if self.problem:
            return f"{self.path}: {self.problem}"
        tol = "exact" if self.rtol is None else f"rtol {self.rtol:g}, atol {self.atol:g}"
        return (f"{self.path}: {self.count} of {self.size} elements out of tolerance ({tol}); "
                f"max abs diff {self.max_abs:.6g}, max rel diff {self.max_rel:.6g}; first: element "
                f"{self.flat} at {list(self.index)}: got {self.got}, expected {self.want}")


def _tensor_diff(got, want, rtol: float, atol: float, path: str) -> Difference | None:
    if got.shape != want.shape:
        return Difference(path, f"shape {list(got.shape)}, expected {list(want.shape)}")
    if element_type(want.dtype) == "string":
        if element_type(got.dtype) != "string":
            return Difference(path, f"dtype {got.dtype}, expected string")
        g = np.array([x.decode("utf-8", "surrogateescape") if isinstance(x, bytes) else str(x)
                      for x in got.reshape(-1)], dtype=object)
        w = np.array([x.decode("utf-8", "surrogateescape") if isinstance(x, bytes) else str(x)
                      for x in want.reshape(-1)], dtype=object)
        bad = g != w
        tol = None
        diff = None
    else:
        if got.dtype != want.dtype:
            return Difference(path, f"dtype {got.dtype}, expected {want.dtype}")
        tol = tolerance(want.dtype, rtol, atol)
        if tol is None:
            wide = np.bool_ if want.dtype.kind == "b" else np.int64
            g = got.astype(wide).reshape(-1)
            w = want.astype(wide).reshape(-1)
            bad = g != w
            diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
        else:
            wide = np.complex128 if want.dtype.kind == "c" else np.float64
            g = got.astype(wide).reshape(-1)
            w = want.astype(wide).reshape(-1)
            bad = ~np.isclose(g, w, rtol=tol[0], atol=tol[1], equal_nan=True)
            finite = np.isfinite(g) & np.isfinite(w)
            with np.errstate(invalid="ignore", over="ignore"):
                diff = np.where(finite, np.abs(g - w), 0.0)
    if not bad.any():
        return None
    first = int(np.flatnonzero(bad)[0])
    d = Difference(path, count=int(bad.sum()), size=int(bad.size), flat=first,
                   index=tuple(int(i) for i in np.unravel_index(first, want.shape))
                   if want.shape else (), got=got.reshape(-1)[first],
                   want=want.reshape(-1)[first])
    if tol is not None:
        d.rtol, d.atol = tol
    if diff is not None and diff.size:
        d.max_abs = float(diff.max())
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(np.abs(w) > 0, diff / np.abs(w), np.where(diff > 0, np.inf, 0.0))
        rel = rel.real if rel.dtype.kind == "c" else rel
        d.max_rel = float(np.where(np.isnan(rel), 0.0, rel).max())
    return d


def compare(got: Any, want: Any, rtol: float = RTOL, atol: float = ATOL,
            path: str = "output") -> list[Difference]:
    """Every difference of ``got`` from ``want`` under the Clause 11.5 rules of this module's
    docstring (``rtol``/``atol`` the test's, bfloat16's floor applied): an empty list when they
    match. Sequences compare element by element, maps key by key, an optional's element as
    itself (``None``: empty)."""
    if want is None:
        return [] if got is None else [Difference(path, "expected an empty optional")]
    if isinstance(want, list):
        if not isinstance(got, list):
            return [Difference(path, f"expected a sequence, got {_kind(got)}")]
        if len(got) != len(want):
            return [Difference(path, f"{len(got)} elements, expected {len(want)}")]
        return [d for i, (g, w) in enumerate(zip(got, want))
                for d in compare(g, w, rtol, atol, f"{path}[{i}]")]
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return [Difference(path, f"expected a map, got {_kind(got)}")]
        if set(got) != set(want):
            return [Difference(path, f"keys {sorted(got)}, expected {sorted(want)}")]
        return [d for k in want for d in compare(np.asarray(got[k]), np.asarray(want[k]),
                                                 rtol, atol, f"{path}[{k!r}]")]
    if not isinstance(got, np.ndarray):
        return [Difference(path, f"expected a tensor, got {_kind(got)}")]
    want = np.asarray(want)
    d = _tensor_diff(got, want, rtol, atol, path)
    return [d] if d else []


def _kind(value) -> str:
    if value is None:
        return "an empty optional"
    if isinstance(value, list):
        return "a sequence"
    if isinstance(value, dict):
        return "a map"
    return "a tensor" if isinstance(value, np.ndarray) else type(value).__name__


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
