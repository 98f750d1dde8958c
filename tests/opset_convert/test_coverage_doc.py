"""docs/opset-conversion.md is what docs/make_opset_conversion.py renders from the operator
table now; and its counts add up."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("make_opset_conversion",
                                               ROOT / "docs" / "make_opset_conversion.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)


def test_the_coverage_table_is_current():
    assert (ROOT / "docs" / "opset-conversion.md").read_text() == make.render(), \
        "run: python docs/make_opset_conversion.py > docs/opset-conversion.md"


def test_every_adjacent_pair_is_counted_once():
    from onemodel import schemas
    from onemodel.opset_convert.changes import changes

    for d, c in make.tally().items():
        pairs = sum(len(schemas.versions(op, d)) - 1 for op in schemas.operators(d))
        assert c["pairs"] == pairs
        assert c["identical"] + c["adapted"] + c["refused down"] + c["not yet covered"] == pairs
        assert all(ch.kind in ("types", "adapter", "semantic", "uncovered")
                   for op in schemas.operators(d) for ch in changes(d, op))


def test_every_adapter_has_both_directions_and_a_docstring():
    from onemodel.operators.table import attachments

    for (d, op), entries in attachments("adapter").items():
        for since, fn in entries:
            assert callable(getattr(fn, "up", None)) and callable(getattr(fn, "down", None)), \
                (op, since)
            assert fn.__doc__, (op, since)


def test_adapters_at_first_definitions_are_exactly_the_decompositions():
    """An adapter attached to an operator's first definition converts below it (it has no
    predecessor to step to): it must say so (``decomposition = True``), and no other
    adapter may."""
    from onemodel.operators.table import attachments, versions

    for (d, op), entries in attachments("adapter").items():
        for since, fn in entries:
            first = since == versions(d, op)[0]
            assert getattr(fn, "decomposition", False) == first, (op, since)


def test_every_adapter_module_is_named_for_a_family():
    """The table imports adapters/<family>.py by family name: a module named otherwise
    would never be imported, and its adapters never used."""
    from onemodel.operators.families import FAMILIES

    folder = ROOT / "onemodel" / "opset_convert" / "adapters"
    modules = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    assert modules <= set(FAMILIES), modules - set(FAMILIES)
