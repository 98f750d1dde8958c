"""A fixed sample of the ONNX node conformance cases of the adapters' operators, converted
up and down to other operator sets: each conversion either is refused (ConversionRefused, with
every node named) or passes ``check`` and reproduces the case's expected outputs within the
Clause 11.5 tolerances (the case's rtol/atol, as tests/evaluate/node_conformance.py compares);
and a conversion down and back up computes the same. The first test converts the cases of the
operators of :data:`OPS` to a grid of versions; the second shows every operator that has an
adapter or a conversion (and a single-node case) reproduced up and down at least once, its
computed axes/pads/scales inputs made constants where the older definition needs attributes,
and the few it cannot (:data:`NOT_SHOWN`) asserted with the reason. The whole sweep is
tools/opset_sweep.py."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

import onemodel
from onemodel import tolerances, value_files
from onemodel.errors import UnsupportedError
from onemodel.evaluate import Session
from onemodel.formats.onnx import decode_model
from onemodel.opset_convert import ConversionRefused, convert

#: the operators of the first batch of adapters, and elementwise ones of types-only changes
OPS = ("Softmax", "LogSoftmax", "Hardmax", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceL2",
       "ReduceProd", "Squeeze", "Unsqueeze", "Split", "Clip", "Pad", "Slice", "TopK", "Add",
       "Sub", "Mul", "Div", "Relu", "ArgMax", "Gather", "Reshape", "Shape", "Concat", "Flatten",
       "Cast", "Resize", "Constant", "LayerNormalization", "GreaterOrEqual", "LessOrEqual",
       "BatchNormalization", "Dropout", "MaxPool", "AveragePool", "Conv", "Gemm",
       "QuantizeLinear", "DequantizeLinear", "Tile", "OneHot", "Upsample", "PRelu",
       "Max", "Sum", "Equal", "Pow")
#: the operator set versions each case is converted to (those where its operator exists)
TARGETS = (7, 10, 11, 12, 13, 17, 18, 21, 25)
#: cases per operator in the sample (the first ones by name)
PER_OPERATOR = 3


def _sample(cases):
    by_op = defaultdict(list)
    for c in cases:
        if c.kind != "node" or "_expanded" in c.name:
            continue
        m = decode_model(c.model_path.read_bytes())
        if len(m.graph.nodes) != 1 or m.graph.nodes[0].domain:
            continue
        op = m.graph.nodes[0].op_type
        if op in OPS and len(by_op[op]) < PER_OPERATOR:
            by_op[op].append((c, m))
    return by_op


def _reproduces(case, m, data_sets=None) -> str | None:
    """None when ``m`` gives the case's expected outputs on every data set (or those of
    ``data_sets``), else why not. Inputs ``m`` has made initializers are not fed."""
    try:
        session = Session(m)
    except UnsupportedError as e:
        return f"not runnable: {e}"
    outputs = [v.name for v in m.graph.outputs]
    inputs = {v.name for v in m.graph.inputs}
    for ins, outs in case.data_sets if data_sets is None else data_sets:
        feeds = {n: value_files.read_pb(p, k)
                 for n, p, k in zip(case.input_names, ins, case.input_kinds) if n in inputs}
        want = [value_files.read_pb(p, k) for p, k in zip(outs, case.output_kinds)]
        got = session.run(feeds, outputs[:len(want)])
        for name, w in zip(outputs, want):
            problems = tolerances.compare(got[name], w, case.rtol, case.atol, name)
            if problems:
                return problems[0].text()
    return None


@pytest.fixture(scope="module")
def sample(conformance_cases):
    return _sample(conformance_cases)


def test_sampled_cases_convert_up_and_down_and_reproduce_their_outputs(sample):
    assert set(sample) == set(OPS), set(OPS) - set(sample)
    tally, failures = Counter(), []
    for op, cases in sample.items():
        for case, m in cases:
            source = m.opset_version("")
            for v in TARGETS:
                if v == source:
                    continue
                try:
                    conv = convert(m, {"": v}).model
                except ConversionRefused as e:
                    assert e.refusals and all(p.startswith("graph.nodes[") for p, _, _ in
                                              e.refusals)
                    tally["refused", "up" if v > source else "down"] += 1
                    continue
                errors = onemodel.check(conv).errors
                if errors:
                    failures.append(f"{case.name} -> {v}: check: {errors[0]}")
                    continue
                problem = _reproduces(case, conv)
                if problem:
                    failures.append(f"{case.name} -> {v}: {problem}")
                    continue
                tally["reproduced", "up" if v > source else "down"] += 1
                if v < source:  # down, then back up: the same outputs again
                    back = convert(conv, {"": source}).model
                    problem = _reproduces(case, back)
                    if problem:
                        failures.append(f"{case.name} -> {v} -> {source}: {problem}")
                    else:
                        tally["round trip"] += 1
    assert not failures, "\n".join(failures[:20])
    # every operator reproduced in both directions somewhere in the sample
    assert tally["reproduced", "up"] >= 300 and tally["reproduced", "down"] >= 500, tally
    assert tally["round trip"] >= 500, tally


def _convertible() -> dict:
    """{(domain, op): reason} of every operator that has an adapter or a conversion: an
    adapter attached (a rewrite, or a decomposition below its first definition), or more than
    one definition (a change between adjacent ones)."""
    from onemodel import schemas
    from onemodel.operators.table import attachments

    out = {}
    for (d, op), entries in attachments("adapter").items():
        out[d, op] = "adapter"
    for d in ("", "ai.onnx.ml"):
        for op in schemas.operators(d):
            if len(schemas.versions(op, d)) > 1:
                out.setdefault((d, op), "adjacent definitions")
    return out


def _one_node_cases(cases) -> dict:
    """{(domain, op): [(case, model)]} of the single-node cases, by name."""
    by_op = defaultdict(list)
    for c in cases:
        if c.kind != "node" or "_expanded" in c.name:
            continue
        m = decode_model(c.model_path.read_bytes())
        if len(m.graph.nodes) != 1:
            continue
        n = m.graph.nodes[0]
        d = "" if n.domain in (None, "", "ai.onnx") else n.domain
        if d in ("", "ai.onnx.ml"):
            by_op[d, n.op_type].append((c, m))
    return by_op


#: operators with an adapter or a conversion whose conformance cases cannot show a conversion
#: both ways: (domain, op) -> (the directions not shown, what the refusal or failure says);
#: asserted: the sample finds exactly these, for this reason
NOT_SHOWN = {
    # random (Clause 11.6): the expected outputs are one draw, not comparable value for value
    ("", "Bernoulli"): (["down", "up"], "not reproduced before conversion"),
    # every case writes the Mean and InvStdDev outputs, which the decomposition does not
    ("", "LayerNormalization"): (["down"], "the Mean and InvStdDev outputs are not written"),
    # the cases are at ml 5 (nothing above); one uses the MEMBER mode, the other double input:
    # neither exists in the TreeEnsembleRegressor/Classifier of ml 1-4
    ("ai.onnx.ml", "TreeEnsemble"): (["down", "up"],
                                     "MEMBER mode, which TreeEnsembleRegressor does not have"),
}
#: conformance cases per operator tried until both directions are shown
TRIES = 4


def _constant_inputs(case, m):
    """``m`` with every graph input but the first made an initializer holding its value in the
    case's first data set (a computed axes, pads or scales input made constant, as an
    exporter writes them), or None when there is none to fold or a value is not a tensor."""
    import numpy as np

    from onemodel.ir import Tensor

    if len(m.graph.inputs) < 2 or any(k != "tensor" for k in case.input_kinds[1:]):
        return None
    ins = case.data_sets[0][0]
    folded = m.copy()
    kept = folded.graph.inputs[:1]
    for vi, p in zip(folded.graph.inputs[1:], ins[1:]):
        t = Tensor.from_numpy(np.asarray(value_files.read_pb(p, "tensor")))
        t.name = vi.name
        folded.graph.initializers.append(t)
    folded.graph.inputs = kept
    return folded


def _targets(m, d: str) -> list:
    """The latest version (up) and the next lower and lowest version where the operator exists
    or decomposes (down), for the one node of ``m``."""
    from onemodel import schemas
    from onemodel.operators.families import UNIMPLEMENTED_VERSIONS
    from onemodel.operators.table import exact
    from onemodel.opset_convert.engine import latest

    src = m.opset_version(d)
    op = m.graph.nodes[0].op_type
    versions = schemas.versions(op, d)
    low = 1 if getattr(exact("adapter", d, op, versions[0]), "decomposition", False) \
        else versions[0]
    # not to a definition the evaluator does not serve (it could not show the outputs)
    while low < src and (d, op, max([s for s in versions if s <= low], default=0)) in \
            UNIMPLEMENTED_VERSIONS:
        low += 1
    return sorted({v for v in (latest(d), src - 1, low) if v != src and low <= v <= latest(d)})


def test_every_converted_operator_is_reproduced_up_and_down(conformance_cases):
    """Every operator that has an adapter or a conversion, and a single-node conformance case:
    one of its cases (the first few by name) converted down (to the version before the case's
    and to the lowest where it exists or decomposes) reproduces the expected outputs, and so
    does one converted up (to the latest, or back up from a conversion down)."""
    from onemodel.opset_convert import convert_checked

    by_op = _one_node_cases(conformance_cases)
    wanted = [k for k in sorted(_convertible()) if k in by_op]
    assert len(wanted) >= 145, len(wanted)
    shown, why_not = defaultdict(set), defaultdict(list)
    for d, op in wanted:
        for case, m in by_op[d, op][:TRIES * 4]:
            if {"up", "down"} <= shown[d, op]:
                break
            if _reproduces(case, m) is not None:
                why_not[d, op].append(f"{case.name}: not reproduced before conversion")
                continue
            src = m.opset_version(d)
            folded = _constant_inputs(case, m)
            for v in _targets(m, d):
                way = "up" if v > src else "down"
                given, data = m, None
                try:
                    try:
                        conv = convert_checked(m, {d: v}).model
                    except ConversionRefused:
                        if folded is None:
                            raise
                        given, data = folded, case.data_sets[:1]
                        conv = convert_checked(folded, {d: v}).model
                except ConversionRefused as e:
                    why_not[d, op].append(f"{case.name} -> {v}: {e.refusals[0][2]}")
                    continue
                problem = _reproduces(case, conv, data)
                assert problem is None, f"{case.name} -> {v}: {problem}"
                shown[d, op].add(way)
                if way == "down":
                    back = convert_checked(conv, {d: given.opset_version(d)}).model
                    problem = _reproduces(case, back, data)
                    assert problem is None, f"{case.name} -> {v} -> {src}: {problem}"
                    shown[d, op].add("up")
    missing = {k: sorted({"up", "down"} - shown[k]) for k in wanted
               if not {"up", "down"} <= shown[k]}
    assert set(missing) == set(NOT_SHOWN), \
        "\n".join(f"{k}: {missing.get(k)} {why_not[k][:2]}" for k in
                  sorted(set(missing) ^ set(NOT_SHOWN)))
    for k, (ways, reason) in NOT_SHOWN.items():
        assert missing[k] == ways and any(reason in w for w in why_not[k]), (k, why_not[k][:3])
    # the operators shown both ways: nearly all of them
    assert len(wanted) - len(missing) >= 140, len(wanted) - len(missing)
