"""The C pass of the graph rules (onemodel/ir/_cpass.c) against the Python pass it accelerates
(``graph_rules._in_order_python``): for scopes of every kind the one pass meets (sorted, an
input used before its definition, an output defined twice, an undeclared domain, names read
from enclosing scopes and defined again later, empty names, attributes), the same result and
the same ``defs`` afterwards (Part 1, Clauses 7.3 and 7.5)."""

from __future__ import annotations

import os
import random

import pytest

from onemodel.ir import Attribute, Node, graph_rules
from onemodel.ir.accelerator import passes

_C = passes()
needs_c = pytest.mark.skipif(_C is None, reason="onemodel/ir/_cpass.c is not built")


def test_the_c_pass_is_built():
    """With ONEMODEL_REQUIRE_C=1 (``make test``) a missing extension is a failure, not a
    skip."""
    if os.environ.get("ONEMODEL_REQUIRE_C") != "1":
        pytest.skip("ONEMODEL_REQUIRE_C is not set")
    assert _C is not None, "onemodel/ir/_cpass.c was not built or its setup failed"

#: the spellings of the domains of the nodes; "" and "ai.onnx" are imported, "x.y" is not
DOMAINS = ("", "ai.onnx", None, "com.microsoft", "x.y")


def _both(nodes, defs, outer, domains):
    a, b = dict(defs), dict(defs)
    got_c = _C.in_order(nodes, a, outer, lambda d: graph_rules.normalize_domain(d) in domains)
    got_py = graph_rules._in_order_python(nodes, b, outer, domains)
    return (got_c, a), (got_py, b)


def _scope(rng: random.Random, n: int):
    pool = [f"v{k}" for k in range(n + 3)]
    defs = {"x": -1, "w": -1}
    nodes, made = [], ["x", "w"]
    for i in range(n):
        k = rng.choice((0, 1, 1, 2, 2, 3))
        ins = [rng.choice(made + ["", "outer1", "outer2"] + (pool if rng.random() < 0.05 else []))
               for _ in range(k)]
        outs = [pool[i] if rng.random() < 0.97 else rng.choice(pool + ["x", ""])
                for _ in range(rng.choice((1, 1, 1, 2)))]
        if len(outs) == 2 and rng.random() < 0.9:
            outs[1] = f"second{i}"
        node = Node(op_type="Add", inputs=ins, outputs=outs,
                    domain=rng.choice(DOMAINS) if rng.random() < 0.1 else "")
        if rng.random() < 0.2:
            node.attributes = [Attribute(name="axis", type=2, i=1)]
        nodes.append(node)
        made += [o for o in outs if o]
    outer = [{"outer1": 0}, {"outer2": -1, "v3": 1}] if rng.random() < 0.7 else []
    return nodes, defs, outer


@needs_c
@pytest.mark.parametrize("seed", range(300))
def test_the_c_pass_equals_the_python_pass(seed):
    rng = random.Random(seed)
    nodes, defs, outer = _scope(rng, rng.choice((0, 1, 3, 10, 40)))
    domains = {"", "com.microsoft"} if seed % 3 else {""}
    (got_c, defs_c), (got_py, defs_py) = _both(nodes, defs, outer, domains)
    assert got_c == got_py
    assert defs_c == defs_py and list(defs_c) == list(defs_py)


@needs_c
def test_a_sorted_scope_gives_its_outer_reads_and_attribute_nodes():
    nodes = [Node(op_type="Neg", inputs=["x"], outputs=["a"]),
             Node(op_type="Add", inputs=["a", "o"], outputs=["b"],
                  attributes=[Attribute(name="k", type=2, i=1)]),
             Node(op_type="Add", inputs=["b", ""], outputs=["", "c"], domain="ai.onnx")]
    defs = {"x": -1}
    assert _C.in_order(nodes, defs, [{"o": 0}], lambda d: True) == (["o"], [1])
    assert defs == {"x": -1, "a": 0, "b": 1, "c": 2}


@needs_c
@pytest.mark.parametrize("case", ["undefined", "twice", "domain", "defined-later"])
def test_a_scope_out_of_the_common_case_leaves_defs_as_it_was(case):
    nodes = [Node(op_type="Neg", inputs=["x"], outputs=["a"]),
             Node(op_type="Neg", inputs=["a"], outputs=["b"]),
             Node(op_type="Neg", inputs=["b"], outputs=["c"])]
    outer = []
    if case == "undefined":
        nodes[2].inputs = ["nowhere"]
    elif case == "twice":
        nodes[2].outputs = ["a"]
    elif case == "domain":
        nodes[2].domain = "x.y"
    else:  # read from the enclosing scope, then defined here: not the common case
        nodes[1].inputs, outer = ["c"], [{"c": -1}]
    defs = {"x": -1}
    assert _C.in_order(nodes, defs, outer, lambda d: d in ("", None)) is None
    assert defs == {"x": -1}


@needs_c
def test_names_that_are_not_plain_str_give_way_to_the_rule_by_rule_walk():
    class Name(str):
        pass

    nodes = [Node(op_type="Neg", inputs=[Name("x")], outputs=["a"])]
    defs = {"x": -1}
    assert _C.in_order(nodes, defs, [], lambda d: True) is None and defs == {"x": -1}


def test_onemodel_pure_python_turns_the_c_pass_off(monkeypatch):
    monkeypatch.setenv("ONEMODEL_PURE_PYTHON", "1")
    assert passes() is None
