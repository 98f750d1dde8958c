"""Running the ONNX node conformance cases (ONNX 1-3) through onemodel's evaluator.

Test helper, shared by ``tests/evaluate/test_conformance_nodes.py`` (which asserts) and
``docs/make_conformance.py`` (which writes ``docs/conformance.md``), so that both count the same
way. It reads every file with onemodel's own decoder (:func:`decode_message`); ``onnx`` is only
used by ``conformance_data`` to generate the cache.

Comparison (:func:`compare`) follows the ONNX backend test harness
(``onnx.backend.test.runner.Runner.assert_similar_outputs``), element type by element type, by
the rules :mod:`onemodel.tolerances` defines (Clause 11.5; the same as ``onemodel run
--test-data``): same structure, shape and dtype; floats within ``atol + rtol * |want|`` with the
case's ``rtol``/``atol`` (bfloat16 with ``rtol >= 2**-6``; the narrow floats as float32 values);
integers, bool and strings exactly equal.

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

from onemodel import tolerances, value_files
from onemodel.errors import OneModelError, UnsupportedError
from onemodel.evaluate import Session
from onemodel.formats.onnx import decode_model

#: Operators whose ONNX definition leaves the random generator unspecified (Clause 11.6).
RANDOM_OPERATORS = frozenset(("Bernoulli", "RandomUniform", "RandomUniformLike", "RandomNormal",
                              "RandomNormalLike", "Multinomial"))

def read_value(path, kind: str) -> Any:
    """Decode one ``.pb`` file of message kind ``kind`` (tensor, sequence, map, optional)."""
    return value_files.read_pb(path, kind)


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
        if not tolerances.is_float(got.dtype) or not got.size:
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


def _leaves(got: Any, want: Any):
    """The (got, want) tensor pairs of two values of the same structure."""
    if isinstance(want, list):
        for g, w in zip(got, want):
            yield from _leaves(g, w)
    elif isinstance(want, dict):
        for k in want:
            yield from _leaves(np.asarray(got[k]), np.asarray(want[k]))
    elif want is not None:
        yield got, want


def compare(got: Any, want: Any, rtol: float, atol: float, path: str = "output",
            stats: Stats | None = None) -> str | None:
    """None when ``got`` matches ``want`` under the Clause 11.5 rules of
    :mod:`onemodel.tolerances` (the package's, which ``run --test-data`` applies too), else a
    one-line description of the first mismatch; matching tensors are counted in ``stats``."""
    problems = tolerances.compare(got, want, rtol, atol, path)
    if problems:
        return problems[0].text()
    if stats is not None:
        for g, w in _leaves(got, want):
            etype = tolerances.element_type(w.dtype)
            if etype == "string":
                stats.add("string", np.zeros(0), np.zeros(0), atol)
            else:
                stats.add(etype, g, w, atol)
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


def run_case(case, operator: tuple, stats: Stats | None = None, model=None) -> Result:
    """Run every data set of one node case; see the module docstring for what passes.
    ``model`` runs in place of the case's own model (the same case converted to another
    operator set, tools/opset_sweep.py); its graph inputs and outputs must be the case's.

    ``unsupported``: the evaluator refuses the model before running it (UnsupportedError from
    :class:`Session`), which is how it reports an operator it does not claim (Clause 4.4).
    ``failed``: a claimed case whose run raises or whose outputs do not match.
    ``operator`` is the case's :func:`operator_of`.
    """
    start = time.perf_counter()
    if model is None:
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
