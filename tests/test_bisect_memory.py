"""verify --bisect within a stated memory bound (issue 24, item 3): only the first model's
values are kept, at most MAX_BISECT_MEMORY of them in memory (here a smaller ``memory=``), the
rest in a temporary directory removed afterwards; the second model's values are compared as
they are produced. Before, both runs' values were all kept (3,000 nodes of 1 MiB: 6.2 GB)."""

from __future__ import annotations

import os
import tempfile

import numpy as np
from guards import bounded
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from onemodel.bisect import NODE, KeptValues, bisect
from onemodel.formats.onnx import decode_model
from onemodel.limits import MAX_BISECT_MEMORY, MiB

N = 64  # nodes, each output 1 MiB of float32
ELEMS = 1 << 18


def _chain(changed: int | None = None):
    """x -> Add(., c_k) for k < N: every value [2^18] float32 (1 MiB); node ``changed`` adds
    2 instead of 1."""
    nodes, inits = [], []
    prev = "x"
    for k in range(N):
        inits.append(numpy_helper.from_array(np.array([2.0 if k == changed else 1.0],
                                                      np.float32), f"c{k}"))
        nodes.append(helper.make_node("Add", [prev, f"c{k}"], [f"v{k}"], name=f"add{k}"))
        prev = f"v{k}"
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TP.FLOAT, [ELEMS])],
                          [helper.make_tensor_value_info(prev, TP.FLOAT, [ELEMS])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return decode_model(m.SerializeToString())


def _temporaries() -> set:
    return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith("onemodel-bisect-")}


def test_bisect_keeps_values_within_its_memory_bound():
    a, b = _chain(), _chain(changed=40)
    x = {"x": np.linspace(-1, 1, ELEMS, dtype=np.float32)}
    before = _temporaries()
    with bounded(seconds=120, peak=48 * MiB):  # the values of both runs: 128 MiB
        report = bisect(a, b, x, memory=8 * MiB)
    assert _temporaries() == before  # the spilled values are removed
    first = report.first
    assert (first.index, first.name, first.verdict) == (40, "add40", NODE)
    assert report.nodes == N and report.nodes_compared == N
    assert report.differing == N - 40  # every node after it differs by 1 too
    (name, c), = first.outputs
    assert name == "v40" and not c.within and c.max_abs == 1.0
    (name, c), = first.inputs[:1]
    assert name == "v39" and c.within  # A's spilled value of v39 against B's
    # B alone on A's v39 gives A's v40 + 1: the node differs (its constant), not its inputs
    (name, c), = first.rerun
    assert name == "v40" and c.max_abs == 1.0
    with bounded(seconds=120, peak=48 * MiB):
        same = bisect(a, a, x, memory=8 * MiB)
    assert same.first is None and same.nodes_compared == N


def test_kept_values_spill_past_the_budget(tmp_path):
    kept = KeptValues(3 * 8, str(tmp_path))
    values = {"a": np.arange(3, dtype=np.float64), "b": np.arange(6, dtype=np.int32).reshape(2, 3),
              "s": [np.ones(2)], "e": np.zeros((0, 4), np.float32), "n": None}
    for k, v in values.items():
        kept.put(k, v)
    assert kept.held == 24 and kept.spilled == 24  # "a" in memory; "b" written out
    assert sorted(os.listdir(tmp_path)) == ["0.bin"]
    got = kept["b"]
    assert got.dtype == np.int32 and got.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert not got.flags.writeable
    assert kept["a"] is values["a"] and kept["s"] is values["s"] and kept["n"] is None
    assert "e" in kept and "zz" not in kept and kept.get("zz", 5) == 5
    kept.put("a", np.arange(4, dtype=np.float64))  # a new value of "a": 32 bytes, written out
    kept.put("c", np.ones(3))  # the 24 bytes "a" held are free again: held
    assert (kept.held, kept.spilled) == (24, 56)
    assert sorted(os.listdir(tmp_path)) == ["0.bin", "1.bin"]
    assert kept["a"].tolist() == [0, 1, 2, 3] and kept["b"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert MAX_BISECT_MEMORY == 256 * MiB
