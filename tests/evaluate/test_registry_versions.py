"""Every definition of a claimed operator is accounted for (ONNX Part 1, Clause 14.3).

A node at opset v runs the kernel registered with the greatest since_version <= v. For that to be
the definition in force at v, every since_version onnx knows for a claimed operator must either be
registered, or be a new version whose only change leaves the kernel correct: widened type
constraints (the kernel is generic over element types) or deprecation (Clause 14.5: still
evaluated). Those are listed here, each checked against onnx's schemas so the list cannot rot.
"""

from __future__ import annotations

from pathlib import Path

import onnx.defs

from onemodel.evaluate import registry

#: (domain, op_type, since_version): versions that only widen type constraints or deprecate.
TYPE_OR_DEPRECATION_ONLY = {
    ("", "If", v) for v in (11, 13, 16, 19, 21, 23, 24, 25)} | {
    ("", "Loop", v) for v in (11, 13, 16, 19, 21, 23, 24, 25)} | {
    ("", "Scan", v) for v in (11, 16, 19, 21, 23, 24, 25)} | {
    ("", "SplitToSequence", 24), ("", "Optional", 28), ("", "OptionalHasElement", 28),
    ("", "OptionalGetElement", 28), ("", "QuantizeLinear", 28), ("", "DequantizeLinear", 28),
    ("", "Upsample", 10), ("ai.onnx.ml", "TreeEnsembleRegressor", 5),
    ("ai.onnx.ml", "TreeEnsembleClassifier", 5), ("", "Bernoulli", 22), ("", "RoiAlign", 22),
}


def _signature(schema):
    return ({a: (schema.attributes[a].type, schema.attributes[a].required)
             for a in schema.attributes},
            [(i.name, i.type_str, i.option) for i in schema.inputs],
            [(o.name, o.type_str, o.option) for o in schema.outputs])


def _types(schema):
    return {t.type_param_str: set(t.allowed_type_strs) for t in schema.type_constraints}


def test_every_definition_of_a_claimed_operator_is_accounted_for():
    registry.load_builtin()
    claimed = registry.operators()
    history: dict[tuple[str, str], list] = {}
    for s in onnx.defs.get_all_schemas_with_history():
        domain = "" if s.domain == "ai.onnx" else s.domain
        history.setdefault((domain, s.name), []).append(s)
    missing = []
    for (domain, op), versions in claimed.items():
        schemas = sorted(history.get((domain, op), []), key=lambda s: s.since_version)
        for prev, cur in zip(schemas, schemas[1:]):
            v = cur.since_version
            if v in versions:
                continue
            if (domain, op, v) not in TYPE_OR_DEPRECATION_ONLY:
                missing.append(f"{domain or 'ai.onnx'}.{op}-{v}")
                continue
            # the allowance must be true: same attributes and operands, types only widened
            widened = all(_types(prev).get(k, set()) <= t for k, t in _types(cur).items())
            same = _signature(prev)[0] == _signature(cur)[0]
            deprecated = cur.deprecated and not prev.deprecated
            assert deprecated or (same and widened), (op, v)
    assert not missing, f"definitions with no kernel and not listed: {missing}"


def test_listed_allowances_are_real_versions():
    history = {(("" if s.domain == "ai.onnx" else s.domain), s.name, s.since_version)
               for s in onnx.defs.get_all_schemas_with_history()}
    assert TYPE_OR_DEPRECATION_ONLY <= history


#: The committed registration table: one line per (domain, op_type, since_version) and the kernel.
BUILTIN_TABLE = Path(__file__).with_name("builtin_kernels.tsv")


def _registered():
    registry.load_builtin()
    return {(domain, op_type, since): f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__qualname__}"
            for (domain, op_type), entries in registry._BUILTIN.items()
            for since, fn in entries}


def _committed():
    rows = {}
    for line in BUILTIN_TABLE.read_text().splitlines():
        if line and not line.startswith("#"):
            domain, op_type, since, kernel = line.split("\t")
            rows[(domain, op_type, int(since))] = kernel
    return rows


def test_builtin_registrations_match_the_committed_table():
    # The kernels' registration style (one decorator with a tuple of versions) must keep every
    # (domain, op_type, since_version) key and the function it names: 619 keys, 223 operators
    # outside com.microsoft (onnxruntime's contrib operators, added family by family, are
    # checked by the same table below but not counted here).
    committed = _committed()
    onnx_keys = {k for k in committed if k[0] != "com.microsoft"}
    assert len(onnx_keys) == 619 and len({k[:2] for k in onnx_keys}) == 223
    got = _registered()
    assert sorted(set(committed) - set(got)) == [], "registrations lost"
    assert sorted(set(got) - set(committed)) == [], "registrations not in builtin_kernels.tsv"
    assert {k: v for k, v in got.items() if committed[k] != v} == {}, "kernel changed"
