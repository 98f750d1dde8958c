"""Record.copy in C (``copy`` of onemodel/ir/_cpass.c) against the Python copy it replaces
(``ONEMODEL_PURE_PYTHON=1``): on every testdata model and on records of every field kind, the
copy equals the original and the Python copy, shares no record or list with it (a change to
the copy leaves the original as it was), and shares weight buffers and arrays (never their
bytes copied); a record of a class without a plan is copied in Python."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import onemodel
from onemodel.ir import Attribute, Graph, Model, Node, Tensor, Type, ValueInfo
from onemodel.ir.accelerator import passes
from onemodel.ir.record import LIST_MSG, MSG, Record, copy_record

pytestmark = pytest.mark.skipif(passes() is None, reason="onemodel/ir/_cpass.c is not built")
MODELS = Path(__file__).resolve().parents[2] / "testdata" / "models"


def _records(r, seen=None):
    """Every record of the tree under ``r`` (ids), and every list it holds."""
    out = []
    work = [r]
    while work:
        x = work.pop()
        out.append(x)
        for name, kind, _ in x.FIELDS:
            v = getattr(x, name)
            if kind == MSG and v is not None:
                work.append(v)
            elif kind == LIST_MSG:
                work.extend(v)
    return out


@pytest.mark.parametrize("name", sorted(p.name for p in MODELS.glob("*.onnx")))
def test_a_model_copied_in_c_equals_the_python_copy_and_shares_no_record(name, monkeypatch):
    m = onemodel.load(MODELS / name)
    c = copy_record(m)
    assert c is not None and c == m
    with monkeypatch.context() as mp:
        mp.setenv("ONEMODEL_PURE_PYTHON", "1")
        assert copy_record(m) is None
        assert m.copy() == c
    old, new = _records(m), _records(c)
    assert len(old) == len(new)
    assert not {id(x) for x in old} & {id(x) for x in new}
    for a, b in zip(old, new):
        for field, kind, _ in a.FIELDS:
            va, vb = getattr(a, field), getattr(b, field)
            if isinstance(va, list):
                assert va is not vb, (type(a).__name__, field)
            elif kind in ("buffer", "array") and va is not None:
                assert va is vb   # weights and arrays shared, never copied


def test_a_change_to_the_copy_leaves_the_original():
    n = Node(op_type="Relu", inputs=["x"], outputs=["y"],
             attributes=[Attribute.make("alpha", 0.5)])
    w = Tensor(name="w", data_type=1, dims=[2], raw_data=np.ones(2, np.float32).tobytes())
    g = Graph(name="g", nodes=[n], initializers=[w],
              inputs=[ValueInfo(name="x", type=Type.tensor(1, [2]))])
    m = Model(ir_version=10, graph=g)
    c = m.copy()
    c.graph.nodes[0].inputs.append("z")
    c.graph.nodes[0].attributes[0].name = "beta"
    c.graph.inputs[0].type.value.shape.dims.pop()
    c.graph.initializers[0].dims[0] = 3
    assert n.inputs == ["x"] and n.attributes[0].name == "alpha"
    assert len(g.inputs[0].type.value.shape.dims) == 1 and w.dims == [2]
    assert c.graph.initializers[0].raw_data is w.raw_data


def test_a_record_of_a_class_without_a_plan_is_copied_in_python():
    class Late(Record):
        FIELDS = (("items", LIST_MSG, "Node"), ("name", "str", None))

    class Odd:  # not a record: the C copy gives way, the Python copy says what it says
        pass

    late = Late(items=[Node(op_type="Neg")], name="l")
    got = late.copy()   # (planned on this copy: a newer class appeared)
    assert got == late and got.items[0] is not late.items[0]
    m = Model(graph=Graph(nodes=[Node(op_type="Neg")]))
    m.graph.nodes.append(Odd())
    assert copy_record(m) is None
    with pytest.raises(AttributeError):
        m.copy()
