"""The ONNX node conformance cases whose nodes are all of the element-wise, activation, cast,
loss and training families (rules/elementwise.py, activations.py, cast.py, loss.py,
training.py): inference finds no contradiction with the declared types, every output is
inferred completely (element type and every extent), and its element type, extents and known
elements equal those of the reference output the case ships (Clause 9.4: nothing that is not
so)."""

from __future__ import annotations

import math

import conformance_data as cd
import onnx
import pytest

import onemodel
from onemodel.inference import Expr, infer_model
from onemodel.inference.registry import lookup

FAMILIES = {"elementwise", "activations", "cast", "loss", "training"}


def _family(node, opsets) -> str | None:
    domain = node.domain or ""
    fn = lookup(domain, node.op_type, opsets.get(domain, 1))
    return fn.__module__.rsplit(".", 1)[-1] if fn is not None else None


def cases_of(conformance_cases, families) -> list:
    """The (case, model) pairs of the node cases whose nodes all have rules in ``families``
    (rule module names)."""
    out = []
    for case in conformance_cases:
        if case.kind != "node":
            continue
        m = onemodel.load(str(case.model_path))
        opsets = {o.domain or "": o.version for o in m.opset_imports}
        if m.graph.nodes and all(_family(n, opsets) in families for n in m.graph.nodes):
            out.append((case, m))
    return out


@pytest.fixture(scope="module")
def family_cases(conformance_cases):
    return cases_of(conformance_cases, FAMILIES)


def _mismatch(v, arr, t) -> str | None:
    if v.elem is not None and v.elem != t.data_type:
        return f"element type {v.elem}, reference {t.data_type}"
    if v.shape is None:
        return None
    if len(v.shape) != arr.ndim:
        return f"rank of {v}, reference {arr.shape}"
    for a, b in zip(v.shape, arr.shape):
        if type(a) is int and a != b:
            return f"{v}, reference {arr.shape}"
    if v.data is not None:
        for x, y in zip(v.data, arr.reshape(-1).tolist()):
            if x is None or isinstance(x, Expr):
                continue
            if isinstance(x, float) and math.isnan(x) and math.isnan(y):
                continue
            if x != y:
                return f"elements {v.data[:6]}, reference {arr.reshape(-1)[:6]}"
    return None


def reference_mismatches(family_cases) -> tuple[list[str], int]:
    """(what differs from the reference outputs, number of tensor outputs compared) for
    ``(case, model)`` pairs: contradictions, outputs not inferred completely, element types or
    extents or known elements unlike the reference's."""
    wrong, compared = [], 0
    for case, m in family_cases:
        res = infer_model(m)
        if res.contradictions:
            wrong.append(f"{case.name}: {res.contradictions[0].message}")
            continue
        _, outs = case.data_sets[0]
        for name, path, kind in zip(case.output_names, outs, case.output_kinds):
            if kind != "tensor":
                continue
            t = cd.read_message(path, kind)
            v = res.values[name]
            if not v.complete:  # every input is typed with a shape: so is every output
                wrong.append(f"{case.name} {name}: only {v} inferred")
            why = _mismatch(v, onnx.numpy_helper.to_array(t), t)
            if why:
                wrong.append(f"{case.name} {name}: {why}")
            compared += 1
    return wrong, compared


def test_family_cases_infer_what_the_reference_outputs_are(family_cases):
    assert len(family_cases) >= 600   # 604 with onnx 1.23
    wrong, compared = reference_mismatches(family_cases)
    assert not wrong, "\n".join(wrong[:30])
    assert compared >= 630   # 637 with onnx 1.23

