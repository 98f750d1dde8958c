"""Running the ONNX node conformance cases (ONNX 1-3) through onemodel's evaluator.

Test helper, shared by ``tests/evaluate/test_conformance_nodes.py`` (which asserts) and
``docs/make_conformance.py`` (which writes ``docs/conformance.md``), so that both count the same
way. It reads every file with onemodel's own decoder (:func:`decode_message`); ``onnx`` is only
used by ``conformance_data`` to generate the cache.

Comparison (:func:`compare`) follows the ONNX backend test harness
(``onnx.backend.test.runner.Runner.assert_similar_outputs``), element type by element type:

* same structure (a list for a sequence, a dict for a map, ``None`` for an empty optional), same
  shape, same dtype;
* float32, float64, float16, complex: ``|got - want| <= atol + rtol * |want|`` with the case's
  ``rtol``/``atol`` (1e-3 / 1e-7 unless the case states others); NaN equals NaN, an infinity
  equals the same infinity (``numpy.testing.assert_allclose``);
* bfloat16: the same with ``rtol = max(rtol, 2**-6)`` (two bfloat16 ulps, as the harness does);
* float8, float6, float4 and float8e8m0: compared as float32 values with the case's tolerance
  (which, at these widths, means the same value: one ulp is more than 1e-3 relative);
* integers (all widths, int4/int2 included), bool: exactly equal; strings: equal as text.

Casts into the narrow types: onnx generates the expected outputs of the Cast and CastLike cases
from FLOAT or FLOAT16 into INT4, UINT4, INT2, UINT2, FLOAT4E2M1 and the four float8 types with
``astype`` of the installed ml_dtypes, whose out-of-range results changed between releases (0.6.0
wraps -9 to INT4 7, 0.7.0 gives 0). Comparing with them would check ml_dtypes against itself, so
for these cases (:func:`narrow_cast_target`) the expected outputs are computed from the format
definitions by ``narrow_reference.cast`` (itself checked against fixed bit patterns in
test_cast.py); the case's own outputs are not used.

Non-deterministic operators (Clause 11.6): the ONNX operator definitions of the random
generators (``Bernoulli``, ``RandomUniform``, ``RandomUniformLike``, ``RandomNormal``,
``RandomNormalLike``, ``Multinomial``, and ``Dropout`` when it runs in training mode) do not fix
the generator, so their expected outputs cannot be matched value for value. For them the criterion
is :func:`check_random`: every output has the expected shape and dtype, and values in the range
the definition gives (``[low, high]`` for RandomUniform*, finite for RandomNormal*, ``{0, 1}`` for
Bernoulli, and 0 where the probability is 0, 1 where it is 1, ``[0, classes)`` for Multinomial,
and for Dropout every element either 0 or ``x/(1-r)`` with the mask marking the kept ones).
"""

from __future__ import annotations

import dataclasses
import re
import time
from typing import Any

import narrow_reference
import numpy as np

from onemodel.errors import OneModelError, UnsupportedError
from onemodel.evaluate import Session
from onemodel.evaluate.context import tensor_value
from onemodel.formats.onnx import decode_message, decode_model
from onemodel.ir import MapValue, OptionalValue, SequenceValue
from onemodel.ir.values import ValueKind

MESSAGE = {"tensor": "TensorProto", "sequence": "SequenceProto", "map": "MapProto",
           "optional": "OptionalProto"}

#: Operators whose ONNX definition leaves the random generator unspecified (Clause 11.6).
RANDOM_OPERATORS = frozenset(("Bernoulli", "RandomUniform", "RandomUniformLike", "RandomNormal",
                              "RandomNormalLike", "Multinomial"))

_NARROW_FLOATS = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
                  "float8_e8m0fnu", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn")


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind in "fc" or dtype.name == "bfloat16" or dtype.name in _NARROW_FLOATS


def element_type(dtype: np.dtype) -> str:
    """The name under which a result is counted in the tolerance table: ``float32``,
    ``bfloat16``, ``float8_e4m3fn``, ``int64``, ``bool``, ``string`` ..."""
    if dtype.kind in "OUS":
        return "string"
    return dtype.name


def to_value(record) -> Any:
    """The evaluator's value of a decoded ``.pb`` message: an ndarray for a TensorProto, a list
    for a SequenceProto, a dict for a MapProto, the element or ``None`` for an OptionalProto."""
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


def read_value(path, kind: str) -> Any:
    """Decode one ``.pb`` file of message kind ``kind`` (tensor, sequence, map, optional)."""
    data = path.read_bytes()
    return to_value(decode_message(data, MESSAGE[kind], source=str(path)))


@dataclasses.dataclass
class Stats:
    """What the compared outputs achieved, per element type (Clause 11.5).

    ``by_type[etype] = [outputs, bit-identical outputs, max |got - want|, rtol needed]`` where
    "rtol needed" is the smallest relative tolerance that, with each case's ``atol``, would still
    pass every output: the largest ``(|got - want| - atol) / |want|`` over the elements (NaN and
    infinities compared as equal values, as the harness does).
    """

    by_type: dict = dataclasses.field(default_factory=dict)

    def add(self, etype: str, got: np.ndarray, want: np.ndarray, atol: float) -> None:
        row = self.by_type.setdefault(etype, [0, 0, 0.0, 0.0])
        row[0] += 1
        if got.tobytes() == want.tobytes():
            row[1] += 1
            return
        if not _is_float(got.dtype) or not got.size:
            return
        g = got.astype(np.complex128 if got.dtype.kind == "c" else np.float64)
        w = want.astype(g.dtype)
        finite = np.isfinite(g) & np.isfinite(w)
        if not finite.any():
            return
        diff = np.abs(g[finite] - w[finite])
        row[2] = max(row[2], float(diff.max()))
        excess = diff - atol
        scale = np.abs(w[finite])
        over = excess > 0
        if over.any():
            with np.errstate(divide="ignore"):
                row[3] = max(row[3], float((excess[over] / scale[over]).max()))


def compare(got: Any, want: Any, rtol: float, atol: float, path: str = "output",
            stats: Stats | None = None) -> str | None:
    """None when ``got`` matches ``want`` under the harness rules of this module's docstring,
    else a one-line description of the first mismatch."""
    if want is None:
        return None if got is None else f"{path}: expected an empty optional"
    if isinstance(want, list):
        if not isinstance(got, list):
            return f"{path}: expected a sequence, got {type(got).__name__}"
        if len(got) != len(want):
            return f"{path}: {len(got)} elements, expected {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            d = compare(g, w, rtol, atol, f"{path}[{i}]", stats)
            if d:
                return d
        return None
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return f"{path}: expected a map, got {type(got).__name__}"
        if set(got) != set(want):
            return f"{path}: keys {sorted(got)} != {sorted(want)}"
        for k in want:
            d = compare(got[k], want[k], rtol, atol, f"{path}[{k!r}]", stats)
            if d:
                return d
        return None
    if not isinstance(got, np.ndarray):
        return f"{path}: expected a tensor, got {type(got).__name__}"
    if got.shape != want.shape:
        return f"{path}: shape {got.shape}, expected {want.shape}"
    if want.dtype == object:
        if got.dtype != object or got.tolist() != want.tolist():
            return f"{path}: string elements differ"
        if stats is not None:
            stats.add("string", np.zeros(0), np.zeros(0), atol)
        return None
    if got.dtype != want.dtype:
        return f"{path}: dtype {got.dtype}, expected {want.dtype}"
    etype = element_type(want.dtype)
    if not _is_float(want.dtype):
        g = got if got.dtype.kind == "b" else got.astype(np.int64)
        w = want if want.dtype.kind == "b" else want.astype(np.int64)
        if not np.array_equal(g, w):
            bad = int(np.flatnonzero(g.reshape(-1) != w.reshape(-1))[0])
            return (f"{path}: element {bad} is {got.reshape(-1)[bad]}, expected "
                    f"{want.reshape(-1)[bad]} (exact)")
    else:
        r = max(rtol, 2.0 ** -6) if etype == "bfloat16" else rtol
        wide = np.complex128 if want.dtype.kind == "c" else np.float64
        g, w = got.astype(wide), want.astype(wide)
        ok = np.isclose(g, w, rtol=r, atol=atol, equal_nan=True)
        if not ok.all():
            bad = int(np.flatnonzero(~ok.reshape(-1))[0])
            return (f"{path}: element {bad} is {got.reshape(-1)[bad]}, expected "
                    f"{want.reshape(-1)[bad]} (rtol {r:g}, atol {atol:g}; "
                    f"{int((~ok).sum())} of {ok.size} differ)")
    if stats is not None:
        stats.add(etype, got, want, atol)
    return None


_NARROW_CAST = re.compile(r"^test_cast(?:like)?_(no_saturate_)?(?:FLOAT|FLOAT16)_to_"
                          r"(INT4|UINT4|INT2|UINT2|FLOAT4E2M1|FLOAT8E4M3FN|FLOAT8E4M3FNUZ|"
                          r"FLOAT8E5M2|FLOAT8E5M2FNUZ)(?:_expanded)?$")


def narrow_cast_target(name: str) -> tuple[str, bool] | None:
    """(target type name, saturate) of a Cast/CastLike case into a narrow type whose expected
    output onnx generated with the installed ml_dtypes, or None for every other case."""
    m = _NARROW_CAST.match(name)
    return (m.group(2), not m.group(1)) if m else None


def _node_ops(model) -> list[tuple[str, str, int]]:
    """(domain, op_type, opset) of every node of the main graph, in order, without repeats."""
    opsets = {(o.domain or ""): int(o.version or 0) for o in model.opset_imports}
    out = []
    for n in model.graph.nodes:
        dom = n.domain if n.domain and n.domain != "ai.onnx" else ""
        key = (dom or "ai.onnx", n.op_type or "", opsets.get(dom, 0))
        if key not in out:
            out.append(key)
    return out


def base_name(name: str) -> str:
    """The case a ``*_expanded`` case expands (``test_x_expanded_ver18`` -> ``test_x``)."""
    return name.split("_expanded")[0]


def operator_of(case, by_name: dict) -> tuple[str, str, int]:
    """The operator a node case tests, ``(domain, op_type, opset)``: the one node of the case's
    model, or for an ``_expanded`` case (the function body of an operator) the one node of the
    case it expands. ``by_name`` maps case names to cases."""
    base = by_name.get(base_name(case.name), case)
    model = decode_model(base.model_path.read_bytes(), source=str(base.model_path))
    ops = _node_ops(model)
    return ops[-1] if ops else ("ai.onnx", "", 0)


def _input(model, inputs: list, name: str):
    names = [v.name for v in model.graph.inputs]
    if name and name in names and names.index(name) < len(inputs):
        return inputs[names.index(name)]
    return None


def random_kind(op_type: str, model, inputs: list) -> str | None:
    """The non-deterministic operator a case tests (Clause 11.6), or None: a random generator,
    or Dropout run with ``training_mode`` true and a nonzero ratio."""
    if op_type in RANDOM_OPERATORS:
        return op_type
    if op_type == "Dropout":
        for n in model.graph.nodes:
            if n.op_type == "Dropout" and len(n.inputs) >= 3:
                mode = _input(model, inputs, n.inputs[2])
                ratio = _input(model, inputs, n.inputs[1])
                ratio = 0.5 if ratio is None else float(np.asarray(ratio))
                if mode is not None and bool(np.asarray(mode).reshape(-1)[0]) and ratio > 0:
                    return "Dropout"
    return None


def _attr(node, name, default):
    for a in node.attributes:
        if a.name == name:
            if a.f is not None:
                return float(a.f)
            if a.i is not None:
                return int(a.i)
    return default


def check_random(op_type: str, model, inputs: list, got: list, want: list) -> str | None:
    """The Clause 11.6 criterion of this module's docstring; None when it holds."""
    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        if not isinstance(g, np.ndarray) or g.shape != w.shape or g.dtype != w.dtype:
            return (f"output {i}: {getattr(g, 'shape', None)} {getattr(g, 'dtype', None)}, "
                    f"expected {w.shape} {w.dtype}")
    node = next((n for n in model.graph.nodes if n.op_type == op_type), None)
    y = got[0]
    if op_type in ("RandomUniform", "RandomUniformLike"):
        lo, hi = (_attr(node, "low", 0.0), _attr(node, "high", 1.0)) if node else (0.0, 1.0)
        v = y.astype(np.float64)
        if not ((v >= lo) & (v <= hi)).all():
            return f"values outside [{lo}, {hi}]"
    elif op_type in ("RandomNormal", "RandomNormalLike"):
        if not np.isfinite(y.astype(np.float64)).all():
            return "non-finite values"
    elif op_type == "Bernoulli":
        v = y.astype(np.float64)
        p = np.asarray(inputs[0]).astype(np.float64)
        if not np.isin(v, (0.0, 1.0)).all():
            return "values other than 0 and 1"
        if (v[p == 0] != 0).any() or (v[p == 1] != 1).any():
            return "a draw contradicts a probability of 0 or 1"
    elif op_type == "Multinomial":
        classes = np.asarray(inputs[0]).shape[-1]
        if not ((y >= 0) & (y < classes)).all():
            return f"classes outside [0, {classes})"
    elif op_type == "Dropout":
        x = np.asarray(inputs[0]).astype(np.float64)
        ratio = _input(model, inputs, node.inputs[1]) if len(node.inputs) > 1 else None
        ratio = 0.5 if ratio is None else float(np.asarray(ratio))
        kept = x / (1.0 - ratio)
        v = y.astype(np.float64)
        ok = np.isclose(v, kept, rtol=1e-3, atol=1e-7) | (v == 0)
        if not ok.all():
            return "an element is neither 0 nor x / (1 - ratio)"
        if len(got) > 1 and not np.isclose(np.where(got[1], kept, 0.0), v, rtol=1e-3,
                                           atol=1e-7).all():
            return "the mask does not mark the kept elements"
    return None


@dataclasses.dataclass
class Result:
    """The outcome of one case: ``status`` is ``passed``, ``failed`` or ``unsupported``."""

    case: Any
    status: str
    operator: tuple
    detail: str = ""
    random: str | None = None
    seconds: float = 0.0
    #: where the expected outputs came from: "case" (the case's .pb files) or "definition"
    #: (narrow_reference, for the casts of :func:`narrow_cast_target`)
    expected: str = "case"


def run_case(case, operator: tuple, stats: Stats | None = None) -> Result:
    """Run every data set of one node case; see the module docstring for what passes.

    ``unsupported``: the evaluator refuses the model before running it (UnsupportedError from
    :class:`Session`), which is how it reports an operator it does not claim (Clause 4.4).
    ``failed``: a claimed case whose run raises or whose outputs do not match.
    ``operator`` is the case's :func:`operator_of`.
    """
    start = time.perf_counter()
    model = decode_model(case.model_path.read_bytes(), source=str(case.model_path))
    ops = operator
    try:
        session = Session(model)
    except UnsupportedError as e:
        return Result(case, "unsupported", ops, str(e), seconds=time.perf_counter() - start)
    except OneModelError as e:
        return Result(case, "failed", ops, f"prepare: {e}", seconds=time.perf_counter() - start)
    rnd = None
    narrow = narrow_cast_target(case.name)
    outputs = [v.name for v in model.graph.outputs]
    for k, (in_paths, out_paths) in enumerate(case.data_sets):
        inputs = [read_value(p, kind) for p, kind in zip(in_paths, case.input_kinds)]
        want = [read_value(p, kind) for p, kind in zip(out_paths, case.output_kinds)]
        if narrow is not None:
            want = [narrow_reference.cast(inputs[0], narrow[0], narrow[1])]
        feeds = dict(zip(case.input_names, inputs))
        try:
            res = session.run(feeds, outputs[:len(want)])
        except OneModelError as e:
            return Result(case, "failed", ops, f"data set {k}: {e}",
                          seconds=time.perf_counter() - start)
        got = [res[n] for n in outputs[:len(want)]]
        rnd = random_kind(operator[1], model, inputs)
        if rnd is not None:
            problem = check_random(rnd, model, inputs, got, want)
        else:
            problem = None
            for i, (g, w) in enumerate(zip(got, want)):
                problem = compare(g, w, case.rtol, case.atol, f"output {i} ({outputs[i]})",
                                  stats)
                if problem:
                    break
        if problem:
            return Result(case, "failed", ops, f"data set {k}: {problem}", rnd,
                          seconds=time.perf_counter() - start)
    return Result(case, "passed", ops, random=rnd, seconds=time.perf_counter() - start,
                  expected="definition" if narrow is not None else "case")


def run_all(cases, stats: Stats | None = None) -> list[Result]:
    """:func:`run_case` over ``cases`` (node kind), in order."""
    by_name = {c.name: c for c in cases}
    return [run_case(c, operator_of(c, by_name), stats) for c in cases]
