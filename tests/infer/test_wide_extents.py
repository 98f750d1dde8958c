"""An extent inference gives that no ``dim_value`` (an int64) holds is written as unknown, with
a note from ``onemodel infer`` and an ``OM412`` warning from ``check --full``; never truncated
(issue 23, item 2: ``Reshape`` of ``[2^40, 2^40]`` to ``[-1]`` was written as ``dim_value 0``,
a ``Concat`` of two ``[2^62]`` and a ``Pad`` of ``[2^63 - 1]`` as negative ones, exit 0)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from typer.testing import CliRunner

import onemodel
from onemodel.cli import app
from onemodel.inference import annotate, infer_model, wide_extents

runner = CliRunner()


def _save(path, nodes, inputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("z", T.FLOAT, None)],
                          list(inits))
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), str(path))
    return path


def _reshape(tmp_path):
    return _save(tmp_path / "reshape.onnx",
                 [helper.make_node("Reshape", ["x", "s"], ["y"]),
                  helper.make_node("Identity", ["y"], ["z"])],
                 [helper.make_tensor_value_info("x", T.FLOAT, [1 << 40, 1 << 40])],
                 [numpy_helper.from_array(np.array([-1], np.int64), "s")])


def _concat(tmp_path):
    return _save(tmp_path / "concat.onnx",
                 [helper.make_node("Concat", ["a", "b"], ["y"], axis=0),
                  helper.make_node("Identity", ["y"], ["z"])],
                 [helper.make_tensor_value_info("a", T.FLOAT, [1 << 62]),
                  helper.make_tensor_value_info("b", T.FLOAT, [1 << 62])])


def _pad(tmp_path):
    return _save(tmp_path / "pad.onnx",
                 [helper.make_node("Pad", ["x", "p"], ["y"]),
                  helper.make_node("Identity", ["y"], ["z"])],
                 [helper.make_tensor_value_info("x", T.FLOAT, [(1 << 63) - 1])],
                 [numpy_helper.from_array(np.array([1, 2], np.int64), "p")])


CASES = [(_reshape, 1 << 80), (_concat, 1 << 63), (_pad, (1 << 63) + 2)]


@pytest.mark.parametrize("make,extent", CASES)
def test_infer_writes_an_extent_past_int64_as_unknown(tmp_path, make, extent):
    src = make(tmp_path)
    r = runner.invoke(app, ["infer", str(src), str(tmp_path / "out.onnx")])
    assert r.exit_code == 0, r.output
    vi = {v.name: v for v in onnx.load(str(tmp_path / "out.onnx")).graph.value_info}
    dim = vi["y"].type.tensor_type.shape.dim[0]
    assert not dim.HasField("dim_value") and not dim.HasField("dim_param")
    assert (f"note: output 'y' has extent {extent} at axis 0, above 2^63 - 1: no dim_value "
            "(an int64) holds it, so a written type gives it as unknown") in r.output
    # the OneModel container too, and the JSON report
    r = runner.invoke(app, ["infer", str(src), str(tmp_path / "out.onemodel"), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert [w["path"] for w in doc["unknown_wide_extents"]] == ["graph.node[0]",
                                                                "graph.node[1]"]
    with onemodel.load(str(tmp_path / "out.onemodel")) as m:
        y = next(v for v in m.graph.value_info if v.name == "y")
        d = y.type.tensor_type.shape.dims[0]
        assert d.dim_value is None and d.dim_param is None
    # info --shapes keeps the true extent
    r = runner.invoke(app, ["info", "--shapes", str(src)])
    assert r.exit_code == 0 and str(extent) in r.output


@pytest.mark.parametrize("make,extent", CASES)
def test_check_full_warns_of_an_extent_past_int64(tmp_path, make, extent):
    src = make(tmp_path)
    found = [f for f in onemodel.check(str(src), full=True).findings if f.code == "OM412"]
    assert [(f.severity, f.path) for f in found] == [("warning", "graph.node[0]"),
                                                     ("warning", "graph.node[1]")]
    assert f"output 'y' has extent {extent} at axis 0" in found[0].message
    r = runner.invoke(app, ["check", "--full", str(src)])
    assert "OM412" in r.output and r.exit_code == 0, r.output


def test_annotate_keeps_an_int64_extent_and_drops_a_wider_one(tmp_path):
    src = _concat(tmp_path)
    with onemodel.load(str(src)) as m:
        res = infer_model(m)
        assert [(w["name"], w["axis"], w["extent"]) for w in wide_extents(m, res)] == \
            [("y", 0, 1 << 63), ("z", 0, 1 << 63)]
        annotate(m, res)
        assert m.graph.value_info[0].type.tensor_type.shape.dims[0].dim_value is None
    src = _save(tmp_path / "fits.onnx",
                [helper.make_node("Concat", ["a", "b"], ["y"], axis=0),
                 helper.make_node("Identity", ["y"], ["z"])],
                [helper.make_tensor_value_info("a", T.FLOAT, [(1 << 62) - 1]),
                 helper.make_tensor_value_info("b", T.FLOAT, [1 << 62])])
    with onemodel.load(str(src)) as m:
        res = infer_model(m)
        assert wide_extents(m, res) == []
        annotate(m, res)
        assert m.graph.value_info[0].type.tensor_type.shape.dims[0].dim_value == (1 << 63) - 1


def test_the_prefilter_finds_a_wide_extent_wherever_a_value_holds_one():
    """wide_extents walks a graph's nodes only when one of its Values has a wide extent
    (``_any_wide``, each distinct tensor shape once): a wide extent in a tensor, a sequence's
    element or a map's value is found, as Value.wide_extents finds it; none in ordinary ones."""
    from onemodel.inference import Value, _any_wide

    wide = (1 << 63) + 5
    plain = [Value.tensor(1, (2, 3)), Value.tensor(1, None), Value(), Value.tensor(7, (2, 3)),
             Value.sequence(Value.tensor(1, (4,))), Value.tensor(1, (None, (1 << 63) - 1))]
    assert not _any_wide(plain)
    for v in (Value.tensor(1, (2, wide)), Value.sequence(Value.tensor(1, (wide,))),
              Value.optional(Value.tensor(1, (3, wide))), Value.map(7, Value.tensor(1, (wide,))),
              Value("sparse_tensor", 1, (wide,))):
        assert v.wide_extents(), v
        assert _any_wide(plain + [v] + plain), v
