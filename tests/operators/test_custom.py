"""A user's operator, declared once with its signature, kernel and rule, is known to run, infer
and check (issue 25 item 2): per call, per process, and by entry point for the command line.
The worked example of docs/operators.md is the operator these tests use, run from the page."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

import onemodel
from onemodel.errors import UnsupportedError, UsageError
from onemodel.evaluate import Session
from onemodel.formats.onnx import decode_model
from onemodel.operators import Operator, register, unregister, using

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "operators.md"


def _example() -> str:
    """The code of docs/operators.md's worked example (the block after its marker)."""
    text = PAGE.read_text()
    m = re.search(r"<!-- example: custom operator -->\s*```python\n(.*?)```", text, re.S)
    assert m, "docs/operators.md lost its worked example"
    return m.group(1)


EXAMPLE: dict = {}
exec(compile(_example(), str(PAGE), "exec"), EXAMPLE)
SWISH = EXAMPLE["SWISH"]


def _model_proto(beta=None, extra_input=False, dtype=TensorProto.FLOAT, shape=("n", 4),
                 then_relu=False):
    attrs = {} if beta is None else {"beta": beta}
    ins = ["x", "x"] if extra_input else ["x"]
    nodes = [helper.make_node("Swish", ins, ["y"], domain="com.example", **attrs)]
    if then_relu:   # y an intermediate value (infer annotates those)
        nodes.append(helper.make_node("Relu", ["y"], ["z"]))
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", dtype, list(shape))],
        [helper.make_tensor_value_info("z" if then_relu else "y", dtype, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21),
                                               helper.make_opsetid("com.example", 1)])


def _model(**kw):
    return decode_model(_model_proto(**kw).SerializeToString())


def _swish64(x, beta):
    x = x.astype(np.float64)
    return x / (1 + np.exp(-beta * x))


X = np.linspace(-6, 6, 12, dtype=np.float32).reshape(3, 4)


@pytest.mark.parametrize("beta", [None, 0.5])
def test_a_session_runs_the_declared_kernel_with_the_declared_default(beta):
    y = Session(_model(beta=beta), operators=[SWISH]).run({"x": X})["y"]
    assert y.dtype == np.float32 and y.shape == (3, 4)
    # float32 arithmetic against float64: a few units in the last place
    np.testing.assert_allclose(y, _swish64(X, 1.0 if beta is None else 0.5), rtol=1e-6,
                               atol=1e-7)


def test_without_the_declaration_the_operator_is_unsupported():
    with pytest.raises(UnsupportedError, match="com.example"):
        Session(_model())


def test_infer_uses_the_declared_rule():
    types = onemodel.infer(_model(), operators=[SWISH])
    t = types["y"]
    assert t.elem_type == TensorProto.FLOAT
    assert [d.dim_param or d.dim_value for d in t.shape.dims] == ["n", 4]
    # without it: only what the graph declares of y (its element type)
    assert onemodel.infer(_model())["y"].shape is None


def test_check_checks_the_node_against_the_declared_signature(tmp_path):
    good = tmp_path / "good.onnx"
    good.write_bytes(_model_proto().SerializeToString())
    assert [f.code for f in onemodel.check(str(good)).findings] == ["OM304"]
    assert onemodel.check(str(good), operators=[SWISH]).findings == []
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(_model_proto(beta=2, extra_input=True, dtype=TensorProto.INT64)
                    .SerializeToString())
    found = {(f.code, f.message) for f in onemodel.check(str(bad), operators=[SWISH]).findings}
    codes = sorted(c for c, _ in found)
    assert codes == ["OM305", "OM309", "OM401", "OM402"], found
    assert ("OM305", "node 'Swish' (Swish-1) has 2 inputs; the definition takes exactly 1") \
        in found


def test_check_full_compares_the_rule_with_declared_types(tmp_path):
    p = _model_proto()
    p.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5]))
    path = tmp_path / "m.onnx"
    path.write_bytes(p.SerializeToString())
    r = onemodel.check(str(path), full=True, operators=[SWISH])
    assert [(f.code, f.message) for f in r.findings if f.code == "OM410"] == [
        ("OM410", "'y' is declared [3,5] but inferred [n,4] (axis 1)")]


def test_register_makes_it_known_to_the_process_until_unregistered():
    register(SWISH)
    try:
        y = Session(_model()).run({"x": X})["y"]
        np.testing.assert_allclose(y, _swish64(X, 1.0), rtol=1e-6, atol=1e-7)
        with pytest.raises(UsageError, match="already registered"):
            register(SWISH)
        half = Operator("Swish", "com.example", inputs=[("X", "T")], outputs=[("Y", "T")],
                        constraints={"T": ["tensor(float)"]},
                        kernel=lambda ctx, x: x / 2)
        register(half, replace=True)
        np.testing.assert_array_equal(Session(_model()).run({"x": X})["y"], X / 2)
        with using([SWISH]):   # the call's own comes first
            np.testing.assert_allclose(Session(_model()).run({"x": X})["y"], _swish64(X, 1.0),
                                       rtol=1e-6, atol=1e-7)
    finally:
        unregister("com.example", "Swish")
    with pytest.raises(UnsupportedError):
        Session(_model())


@pytest.mark.parametrize("kwargs,message", [
    (dict(op_type="Relu", domain=""), "is a standard domain"),
    (dict(op_type="Gelu", domain="com.microsoft"), "is a standard domain"),
    (dict(op_type="", domain="x"), "non-empty string"),
    (dict(op_type="A", domain="x", since_version=0), "since_version is an int >= 1"),
    (dict(op_type="A", domain="x", inputs=["X"]), r"inputs\[0\]: 'X' is not"),
    (dict(op_type="A", domain="x", inputs=[("X", "U")]), "type parameter 'U' has no"),
    (dict(op_type="A", domain="x", inputs=[("X", "tensor(float)", "maybe")]), "option"),
    (dict(op_type="A", domain="x", attributes={"k": "NUMBER"}), "attribute 'k'"),
    (dict(op_type="A", domain="x", kernel=3), "not callable"),
])
def test_a_bad_declaration_is_a_usage_error(kwargs, message):
    op_type, domain = kwargs.pop("op_type"), kwargs.pop("domain")
    with pytest.raises(UsageError, match=message):
        Operator(op_type, domain, **kwargs)


def test_an_entry_point_makes_it_known_to_the_command_line(tmp_path):
    # a package providing the operator by entry point, on the path of the child processes
    site = tmp_path / "site"
    (site / "example_ops-1.0.dist-info").mkdir(parents=True)
    (site / "example_ops.py").write_text(_example())
    (site / "example_ops-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: example-ops\nVersion: 1.0\n")
    (site / "example_ops-1.0.dist-info" / "entry_points.txt").write_text(
        "[onemodel.operators]\nswish = example_ops:SWISH\n")
    model = tmp_path / "m.onnx"
    model.write_bytes(_model_proto(shape=(3, 4), then_relu=True).SerializeToString())
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(site)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "onemodel", *args], capture_output=True,
                              text=True, env=env, timeout=120)

    x = tmp_path / "x.npy"
    np.save(x, X)
    out = tmp_path / "out"
    r = cli("run", str(model), "--input", f"x={x}", "--output-dir", str(out))
    assert r.returncode == 0, r.stderr
    np.testing.assert_allclose(np.load(out / "z.npy"), np.maximum(_swish64(X, 1.0), 0),
                               rtol=1e-6, atol=1e-7)
    r = cli("check", str(model))
    assert r.returncode == 0 and "OM304" not in r.stdout, r.stdout + r.stderr
    r = cli("infer", str(model), str(tmp_path / "inferred.onnx"))
    assert r.returncode == 0, r.stderr
    got = onemodel.load(str(tmp_path / "inferred.onnx"))
    y = [v for v in got.graph.value_info if v.name == "y"][0]
    assert y.type.elem_type == TensorProto.FLOAT
    assert [d.dim_value for d in y.type.shape.dims] == [3, 4]


def test_a_broken_entry_point_is_left_out_with_a_warning(tmp_path):
    site = tmp_path / "site"
    (site / "broken_ops-1.0.dist-info").mkdir(parents=True)
    (site / "broken_ops-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: broken-ops\nVersion: 1.0\n")
    (site / "broken_ops-1.0.dist-info" / "entry_points.txt").write_text(
        "[onemodel.operators]\nbroken = no_such_module:OPS\n")
    code = textwrap.dedent("""
        import warnings
        from onemodel.operators import custom
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            print(custom.user_kernel("com.example", "Swish", 1))
        print([str(x.message) for x in w])
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(site)), timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "None"
    assert "entry point 'broken' of onemodel.operators could not be loaded: " \
           "ModuleNotFoundError" in lines[1]
