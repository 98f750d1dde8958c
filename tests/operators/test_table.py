"""The one operator table (issue 25 item 1; ONNX Part 1, Clause 14.3 and 14.4).

* Every definition of every operator the package knows -- the ONNX schema table's, and those of
  onnxruntime's contrib table that a family names -- has a kernel and a rule serving it, or the
  reason there is none (``onemodel.operators.families.UNIMPLEMENTED``).
* Which function serves which definition is pinned in served.tsv, one row per definition: a
  kernel attached at a version serves the later ones, so a new definition in a regenerated schema
  table (or a kernel moved) shows up here as a changed row to review. Regenerate on purpose with
  ``python tests/operators/test_table.py --write``.
* Attaching checks its reference: an operator without a stored definition, a ``since`` that is
  not one of its versions, a function outside its family's module, a second function for one
  definition are all refused.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from onemodel import schemas
from onemodel.operators import families, table

SERVED = Path(__file__).with_name("served.tsv")
HEADER = ("# domain\top_type\tsince_version\tkernel\trule: the function serving each definition "
          "(module.function); - for none.\n# Regenerate on purpose only: python "
          "tests/operators/test_table.py --write\n")


def _name(fn) -> str:
    return f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__qualname__}" if fn else "-"


def _rows() -> list[str]:
    return [f"{d}\t{o}\t{v}\t{_name(k)}\t{_name(r)}" for d, o, v, k, r in table.served()]


def test_every_definition_has_a_kernel_and_a_rule_or_a_reason():
    missing = []
    reasons = set()
    for d, o, v, k, r in table.served():
        if k is not None and r is not None:
            continue
        why = families.UNIMPLEMENTED.get((d, o)) or families.UNIMPLEMENTED_VERSIONS.get((d, o, v))
        if why:
            reasons.add((d, o) if (d, o) in families.UNIMPLEMENTED else (d, o, v))
        else:
            missing.append((d, o, v, _name(k), _name(r)))
    assert missing == []
    # every reason is still needed: none names an operator that is now served
    assert reasons == set(families.UNIMPLEMENTED) | set(families.UNIMPLEMENTED_VERSIONS)


def test_the_served_table_is_the_committed_one():
    got = _rows()
    committed = [ln for ln in SERVED.read_text().splitlines() if ln and not ln.startswith("#")]
    assert got == committed, "regenerate served.tsv on purpose (module doc)"
    # the figures of the table: every definition of ONNX's schema table is a row; 6 of them
    # (of 5 operators) have neither kernel nor rule
    onnx_rows = [r for r in got
                 if r.split("\t")[1] in schemas.operators(r.split("\t")[0])]
    total = sum(len(schemas.versions(o, d)) for d in schemas.domains()
                for o in schemas.operators(d))
    assert len(onnx_rows) == total
    assert sum(r.endswith("\t-\t-") for r in onnx_rows) == 6


def test_families_name_stored_operators_once():
    seen = {}
    for fam, by_domain in families.FAMILIES.items():
        for d, names in by_domain.items():
            for n in names:
                assert (d, n) not in seen, f"{d}.{n} in {seen[(d, n)]} and {fam}"
                seen[(d, n)] = fam
                assert table.versions(d, n), f"{d}.{n} has no stored definition"


def _probe(fn):
    fn.__module__ = "onemodel.evaluate.kernels.elementwise"
    return fn


@pytest.mark.parametrize("op_type,domain,since,message", [
    ("NoSuchOp", "", None, "has no stored definition"),
    ("Softmax", "", 12, "12 is not the since_version of a definition (they are [1, 11, 13])"),
    ("Add", "", None, "ai.onnx.Add-1 already has a kernel"),
])
def test_attach_refuses_a_bad_reference(op_type, domain, since, message):
    def k(ctx, x):
        return x

    table.attach("kernel", op_type, _probe(k), domain, since)   # (checked on the next lookup)
    with pytest.raises(ValueError, match=re.escape(message)):
        table.implementation("kernel", "", "Add", 14)
    assert table.implementation("kernel", "", "Add", 14).__name__ == "add"   # (left out)


def test_attach_refuses_a_function_outside_its_family():
    def relu(ctx, x):
        return x

    relu.__module__ = "onemodel.evaluate.kernels.elementwise"   # Relu is an activation
    table.attach("kernel", "Relu", relu, "", None)
    with pytest.raises(ValueError, match="must be defined in onemodel.evaluate.kernels"
                                         ".activations"):
        table.attachments("kernel")


def test_a_kernel_serves_later_definitions_until_the_next():
    # Softmax has definitions 1, 11 and 13; one kernel attached at 1 serves all of them, and
    # at opset 12 it is the one in force
    k1, k13 = (table.implementation("kernel", "", "Softmax", v) for v in (1, 13))
    assert k1 is k13 is table.implementation("kernel", "", "Softmax", 12)
    # Clip: a kernel for the attribute form (1, 6) and one for the input form (11, 12, 13)
    assert table.implementation("kernel", "", "Clip", 6).__name__ == "clip_attr"
    assert table.implementation("kernel", "", "Clip", 10).__name__ == "clip_attr"
    assert table.implementation("kernel", "", "Clip", 11).__name__ == "clip"
    # before the operator's first definition, nothing
    assert table.implementation("kernel", "", "Gelu", 19) is None
    assert table.implementation("rule", "", "Gelu", 20) is not None


def test_rule_families_load_on_first_use():
    # a model of Add and Relu: inference imports the rule modules of those two families only
    code = (
        "import sys, onemodel\n"
        "from onemodel import ir\n"
        "from onemodel.inference import Engine\n"
        "f = ir.Type.tensor(1, [2])\n"
        "g = ir.Graph(name='g', nodes=[ir.Node(op_type='Add', inputs=['x', 'x'], outputs=['y']),"
        " ir.Node(op_type='Relu', inputs=['y'], outputs=['z'])],"
        " inputs=[ir.ValueInfo(name='x', type=f)], outputs=[ir.ValueInfo(name='z', type=f)])\n"
        "m = ir.Model(ir_version=10, opset_imports=[ir.OperatorSetId(domain='', version=21)],"
        " graph=g)\n"
        "Engine(m).run()\n"
        "print(sorted(n.rsplit('.', 1)[1] for n in sys.modules"
        " if n.startswith('onemodel.inference.rules.')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "['_util', 'activations', 'elementwise']"


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        SERVED.write_text(HEADER + "\n".join(_rows()) + "\n")
        print(f"wrote {SERVED}")
