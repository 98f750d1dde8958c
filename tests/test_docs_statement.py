"""docs/conformance-statement.md (ONNX Part 1, Annex A) is what docs/make_statement.py makes
from the code, and the facts it takes from the code are right: the operators it says the
evaluator refuses are refused, every resource limit is described, the codes it maps to the
conditions of Clause 10 exist, the figures it quotes are those of docs/conformance.md."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from onnx import TensorProto, helper

from onemodel import errors, limits, schemas
from onemodel.evaluate import Session
from onemodel.formats.onnx import decode_model
from onemodel.operators import table
from onemodel.validation.codes import CODES

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("make_statement",
                                               ROOT / "docs" / "make_statement.py")
ms = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ms)


def test_statement_is_up_to_date():
    text = (ROOT / "docs" / "conformance-statement.md").read_text()
    assert text == ms.render((ROOT / "docs" / "conformance.md").read_text()), \
        "run: .venv/bin/python docs/make_statement.py (make docs)"


def test_ir_version_is_that_of_the_schema_tables_onnx():
    import onnx

    if onnx.__version__ != schemas.onnx_version():
        pytest.skip(f"the schema table is of onnx {schemas.onnx_version()}")
    assert ms.IR_VERSION == onnx.IR_VERSION


def test_every_limit_is_described_once():
    constants = {n for n, v in vars(limits).items()
                 if n.isupper() and type(v) is int and n not in ("KiB", "MiB", "GiB")}
    assert set(limits.DESCRIPTIONS) == constants
    for name, (what, unit, kind) in limits.DESCRIPTIONS.items():
        assert what and unit in ("bytes", "count") and (kind in errors.KINDS or kind == "-"), name


@pytest.mark.parametrize("value, unit, shown", [
    (512 << 20, "bytes", "512 MiB"), (64 << 30, "bytes", "64 GiB"), (1 << 20, "bytes", "1 MiB"),
    ((1 << 31) - 1, "bytes", "2^31 - 1"), (4096, "bytes", "4096"), (3 * (1 << 20) + 1, "bytes",
                                                                     "3145729"),
    (1 << 60, "count", "2^60"), ((1 << 63) - 1, "count", "2^63 - 1"), (1024, "count", "1024"),
    (100, "count", "100"), (1 << 30, "count", "2^30"),
])
def test_shown_value(value, unit, shown):
    assert ms.shown_value(value, unit) == shown


def test_clause_10_codes_exist_and_are_errors():
    for clause, condition, codes, _how in ms.CLAUSE_10:
        assert clause in ("10.2", "10.3", "10.4") and condition
        for c in codes:
            # a custom domain's operator has no definition to check: a warning, by design
            assert CODES[c].severity == ("warning" if c == "OM304" else "error"), c


def _one_node(domain, op, version):
    n = helper.make_node(op, ["x"], ["y"], domain=domain)
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    opsets = [helper.make_opsetid(domain, version)] + ([helper.make_opsetid("", 13)]
                                                      if domain else [])
    m = helper.make_model(g, opset_imports=opsets)
    m.ir_version = 10
    return decode_model(m.SerializeToString())


def test_operators_said_unsupported_are_refused_and_the_next_version_is_not():
    sets = ms.operator_sets()
    assert [d for d, *_ in sets] == list(schemas.domains())
    gaps = {(s.domain, op): missing for s in sets for op, missing in s.refused}
    assert gaps[("", "ImageDecoder")][0] == 20
    assert gaps[("ai.onnx.preview.training", "Gradient")] == [1]
    for (domain, op), missing in gaps.items():
        for v in (missing[0], missing[-1]):
            with pytest.raises(errors.UnsupportedError, match=rf"\({domain or 'ai.onnx'}, {op}, "
                                                              rf"{v}\)"):
                Session(_one_node(domain, op, v))
    _served(_one_node("", "Upsample", gaps[("", "Upsample")][-1] + 1))  # a kernel from there
    for domain, top, n, k, refused in sets:
        assert n == len(schemas.operators(domain)) and 0 < k <= n
        assert top == max(max(schemas.versions(op, domain)) for op in schemas.operators(domain))
        assert n - k == sum(1 for op, missing in refused
                            if missing == [v for v in range(1, top + 1)
                                           if schemas.get(op, domain, v) is not None])
    # a node at a definition served by an earlier definition's kernel runs (the operator table
    # attaches a kernel where its behaviour begins: tests/operators/served.tsv)
    for domain, op, v in (("", "Add", 14), ("", "Relu", 14), ("", "QuantizeLinear", 28),
                          ("ai.onnx.ml", "TreeEnsembleRegressor", 5)):
        assert table.implementation("kernel", domain, op, v) is not None
        assert v not in [s for s, _ in table.attachments("kernel")[(domain, op)]]
        _served(_one_node(domain, op, v))


def _served(model) -> None:
    """A Session of ``model``'s one node is made: a kernel serves it (the node, made without
    attributes, may lack one, or an input, its definition requires: refused after the kernels
    are matched)."""
    try:
        Session(model)
    except errors.InvalidModelError as e:
        assert " lacks required " in e.message, e


def test_figures_are_those_of_conformance_md():
    text = (ROOT / "docs" / "conformance.md").read_text()
    run = ms.ConformanceRun(text)
    line = (f"| all | {run.total} | {run.passed} | {run.failed} | {run.unsupported} |")
    assert line in text and run.total == run.passed + run.failed + run.unsupported
    statement = ms.render(text)
    assert f"{run.passed} of {run.total} pass ({run.passed / run.total:.1%})" in statement
    assert f"float32 {run.tolerance['float32'][3]}" in statement
    for kind, n, p, _f, _u in run.models:
        assert f"{kind} {p}/{n}" in statement


def test_conformance_text_is_parsed_and_a_missing_figure_refused():
    text = "\n".join([
        "Generated from the node test cases of onnx 9.9.9 (made ...).", "",
        "| all | 10 | 7 | 1 | 2 |", "",
        "## Tolerances (Clause 11.5)", "",
        "| float32 | harness | 5 | 3 | 1e-05 | 0.0002 |",
        "| int8 | exact (every element equal) | 4 | 4 | - | - |", "",
        "## Operators without a kernel", "",
        "- (ai.onnx, Foo, 3): not implemented.",
        "- (ai.onnx.preview.training, Gradient, 1): needs automatic differentiation.", "",
        "## Per operator and opset", "",
        "| ai.onnx | Foo | 3 | 2 | 0 | 0 | 2 |",
        "| ai.onnx | Relu | 14 | 8 | 7 | 1 | 0 |", "",
        "## Model cases", "",
        "| simple | 3 | 2 | 0 | 1 |", ""])
    run = ms.ConformanceRun(text)
    assert (run.onnx_version, run.total, run.passed, run.failed, run.unsupported) == \
        ("9.9.9", 10, 7, 1, 2)
    assert run.tolerance == {"float32": (5, "3", "1e-05", "0.0002"), "int8": (4, "4", "-", "-")}
    assert run.unsupported_ops == {"Foo": 2} and run.refused_ops == ["Foo", "Gradient"]
    assert run.models == [("simple", 3, 2, 0, 1)]
    item = ms._results_item(run)
    assert item.startswith("onnx 9.9.9 node test cases: 7 of 10 pass (70.0%), 1 fail; the 2 "
                           "others are Foo, refused as unsupported. Model cases: simple 2/3 "
                           "(the cases refused as unsupported use Gradient).")
    with pytest.raises(ValueError, match="all"):
        ms.ConformanceRun(re.sub(r"\| all .*", "", text))
