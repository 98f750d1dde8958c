"""Every kernel of the evaluator has an inference rule at exactly its versions (issue 12 Build 1:
one table of operators for both; ONNX Part 1, Clause 14.3 keys ``(domain, op_type, since)``)."""

from __future__ import annotations

from onemodel.evaluate import registry as kernels
from onemodel.inference.registry import claimed


def _kernel_keys() -> set[tuple[str, str, int]]:
    kernels.load_builtin()
    return {(domain, op, since) for (domain, op), entries in kernels._BUILTIN.items()
            for since, _ in entries}


def _rule_keys() -> set[tuple[str, str, int]]:
    return {(domain, op, since) for (domain, op), versions in claimed().items()
            for since in versions}


def test_every_kernel_version_has_a_rule():
    missing = sorted(_kernel_keys() - _rule_keys())
    assert not missing, f"{len(missing)} kernel keys without a rule: {missing}"


def test_no_rule_without_a_kernel():
    extra = sorted(_rule_keys() - _kernel_keys())
    assert not extra, f"{len(extra)} rule keys without a kernel: {extra}"


def test_the_kernel_table_is_the_evaluators():
    keys = _kernel_keys()
    # a few keys whose versions are known from the kernels' modules
    assert ("", "Add", 14) in keys and ("", "Scan", 8) in keys and ("", "Scan", 9) in keys
    assert ("", "OptionalHasElement", 18) in keys and ("", "If", 1) in keys
