"""Opset conversion streams weights: converting (and the default proof, check and inference)
reads the bytes of no initializer except those an adapter needs (issue 26, item 1)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onemodel
from onemodel.opset_convert import convert, convert_checked
from onemodel.storage import local
from onemodel.storage.blob import Blob

#: the weights: 4 tensors of 8 MiB in one external data file (sparse: nothing written)
SIDE, COUNT = 1448, 4


@pytest.fixture
def external(tmp_path):
    """A model at opset 13 whose MatMul weights are in ``w.data`` and whose Squeeze and
    Unsqueeze read an inline ``axes`` initializer (the adapters down to 11 fold it)."""
    nbytes = SIDE * SIDE * 4
    nodes, inits, prev = [], [], "x"
    for i in range(COUNT):
        t = TensorProto(name=f"w{i}", data_type=TensorProto.FLOAT, dims=[SIDE, SIDE])
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", "w.data"), ("offset", str(i * nbytes)),
                     ("length", str(nbytes))):
            e = t.external_data.add()
            e.key, e.value = k, v
        inits.append(t)
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"h{i}"]))
        prev = f"h{i}"
    inits.append(numpy_helper.from_array(np.array([0], np.int64), "axes"))
    nodes += [helper.make_node("Unsqueeze", [prev, "axes"], ["u"]),
              helper.make_node("Squeeze", ["u", "axes"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, ["N", SIDE])],
                          [helper.make_tensor_value_info("y", 1, ["N", SIDE])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    (tmp_path / "m.onnx").write_bytes(m.SerializeToString())
    with open(tmp_path / "w.data", "wb") as f:
        f.truncate(COUNT * nbytes)
    return tmp_path / "m.onnx"


@pytest.fixture
def reads(monkeypatch):
    """Every read of a byte range through a Blob or a local file source, as (source name,
    offset, length); a map of the whole file as (name, "whole")."""
    got = []

    def spy(cls, name, record):
        real = getattr(cls, name)

        def wrapper(self, *a, **k):
            got.append(record(self, *a))
            return real(self, *a, **k)
        monkeypatch.setattr(cls, name, wrapper)

    spy(Blob, "view", lambda b: (b.source.name, b.offset, b.nbytes))
    spy(Blob, "read", lambda b, off=0, n=None: (b.source.name, b.offset + off, n))
    spy(Blob, "part", lambda b, off, n: (b.source.name, b.offset + off, n))
    spy(local.LocalSource, "read", lambda s, off, n: (s.name, off, n))
    spy(local.LocalSource, "whole", lambda s: (s.name, "whole"))
    spy(local.LocalSource, "fetch_many", lambda s, ranges: (s.name, "many", len(ranges)))
    return got


def _data_reads(reads):
    return [r for r in reads if str(r[0]).endswith("w.data")]


@pytest.mark.parametrize("share", [False, True])
def test_converting_reads_no_weight_only_the_axes_an_adapter_folds(external, reads, share):
    with onemodel.load(external) as m:
        reads.clear()
        conv = convert_checked(m, {"": 11}, share=share)
        assert not _data_reads(reads), _data_reads(reads)
        # the axes were read (from the .onnx file) and folded into attributes
        assert any(str(r[0]).endswith("m.onnx") for r in reads), reads
        new = conv.model
        assert [n.op_type for n in new.graph.nodes][-2:] == ["Unsqueeze", "Squeeze"]
        assert new.graph.nodes[-1].attribute("axes").value == [0]
        weights = [t for t in new.graph.initializers if t.name.startswith("w")]
        assert len(weights) == COUNT and all(t.external is not None for t in weights)
        # the spies see a weight read: reading one is recorded (the test can fail)
        assert float(weights[0].numpy()[0, 0]) == 0.0
        assert _data_reads(reads)


def test_converting_without_the_proof_reads_no_weight(external, reads):
    with onemodel.load(external) as m:
        reads.clear()
        convert(m, {"": 11})
        assert not _data_reads(reads), _data_reads(reads)
