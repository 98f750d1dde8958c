"""A fixed sample of the ONNX node conformance cases of the adapters' operators, converted
up and down to other operator sets: each conversion either is refused (ConversionRefused, with
every node named) or passes ``check`` and reproduces the case's expected outputs within the
Clause 11.5 tolerances (the case's rtol/atol, as tests/evaluate/node_conformance.py compares);
and a conversion down and back up computes the same."""

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


def _reproduces(case, m) -> str | None:
    """None when ``m`` gives the case's expected outputs on every data set, else why not."""
    try:
        session = Session(m)
    except UnsupportedError as e:
        return f"not runnable: {e}"
    outputs = [v.name for v in m.graph.outputs]
    for ins, outs in case.data_sets:
        feeds = {n: value_files.read_pb(p, k)
                 for n, p, k in zip(case.input_names, ins, case.input_kinds)}
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
