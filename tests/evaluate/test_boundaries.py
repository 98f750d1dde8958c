"""Where the evaluator's responsibility ends (onemodel/evaluate/runner.py, memory.py): a kernel's
bug is an InternalError naming the node and the kernel, a failure on the values given is an
EvaluationError, and glibc's malloc is tuned only for a session that asks."""

from __future__ import annotations

import os
import pickle
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

from onemodel.errors import EvaluationError, InternalError, InvalidModelError, OneModelError
from onemodel.evaluate import Session, register_kernel, run, unregister_kernel
from onemodel.formats.onnx import decode_model
from onemodel.operators import table

F = TP.FLOAT
MODELS = Path(__file__).resolve().parents[2] / "testdata" / "models"


def _vi(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, extra_opsets=(), functions=()):
    g = helper.make_graph(nodes, "g", inputs, outputs)
    ops = [helper.make_opsetid("", 21)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    m = helper.make_model(g, opset_imports=ops, functions=list(functions))
    m.ir_version = 10
    return decode_model(m.SerializeToString())


def _typo_kernel(ctx, x):
    return np.negative(x, outt=None)  # a bug: no such keyword, numpy raises TypeError


KERNEL = f"{__name__}._typo_kernel"


def _probe_model():
    return _model([helper.make_node("Abs", ["x"], ["a"], name="first"),
                   helper.make_node("Probe", ["a"], ["y"], name="buggy", domain="test.ops")],
                  [_vi("x", F, [2])], [_vi("y")], extra_opsets=[("test.ops", 3)])


def test_a_kernel_raising_type_error_is_an_internal_error_naming_node_and_kernel():
    s = Session(_probe_model(), kernels={("test.ops", "Probe"): _typo_kernel})
    with pytest.raises(InternalError) as e:
        s.run({"x": np.ones(2, np.float32)})
    err = e.value
    assert not isinstance(err, (EvaluationError, InvalidModelError))
    assert err.kind == "InternalError"
    assert err.kernel == KERNEL
    assert err.node == "1 (Probe 'buggy', domain test.ops, opset 3)"
    assert err.message.startswith(f"internal error in kernel {KERNEL} for node 1 (Probe "
                                  "'buggy', domain test.ops, opset 3): TypeError: ")
    assert err.message.endswith("; please report it")
    assert err.path == "graph.nodes[1] (test.ops.Probe 'buggy')"
    assert isinstance(err.__cause__, TypeError)
    # one line without a kind in front: the message says what it is
    assert str(err) == f"{err.message} [{err.path}]"
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is InternalError and (back.kernel, back.node, str(back)) == \
        (err.kernel, err.node, str(err))


def test_a_kernel_bug_inside_a_function_body_names_the_inner_node():
    body = helper.make_function("local", "Wrap", ["X"], ["Y"],
                                [helper.make_node("Probe", ["X"], ["Y"], name="inner",
                                                  domain="test.ops")],
                                [helper.make_opsetid("", 21), helper.make_opsetid("test.ops", 2)])
    m = _model([helper.make_node("Wrap", ["x"], ["y"], name="call", domain="local")],
               [_vi("x", F, [2])], [_vi("y")], extra_opsets=[("local", 1), ("test.ops", 2)],
               functions=[body])
    with pytest.raises(InternalError) as e:
        run(m, {"x": np.ones(2, np.float32)}, kernels={("test.ops", "Probe"): _typo_kernel})
    assert e.value.node == "0 (Probe 'inner', domain test.ops, opset 2)"
    assert e.value.path == ("graph.nodes[0] (local.Wrap 'call') -> function local.Wrap.nodes[0] "
                            "(test.ops.Probe 'inner')")


@pytest.mark.parametrize("exc", [AttributeError("'NoneType' object has no attribute 'shape'"),
                                 KeyError("axis"), NameError("name 'np' is not defined")])
def test_other_exceptions_of_a_kernel_are_internal_errors(exc):
    def kernel(ctx, x):
        raise exc

    s = Session(_probe_model(), kernels={("test.ops", "Probe", 1): kernel})
    with pytest.raises(InternalError) as e:
        s.run({"x": np.ones(2, np.float32)})
    assert f": {type(exc).__name__}: " in e.value.message and e.value.__cause__ is exc


@pytest.mark.parametrize("exc", [ValueError("operands could not be broadcast"),
                                 IndexError("index 7 is out of bounds for axis 0 with size 2"),
                                 ZeroDivisionError("integer division by zero"),
                                 np.linalg.LinAlgError("Singular matrix")])
def test_numpy_errors_on_the_values_given_stay_evaluation_errors(exc):
    def kernel(ctx, x):
        raise exc

    s = Session(_probe_model(), kernels={("test.ops", "Probe"): kernel})
    with pytest.raises(EvaluationError) as e:
        s.run({"x": np.ones(2, np.float32)})
    assert not isinstance(e.value, InternalError)
    assert e.value.message == (f"node 1 (test.ops.Probe 'buggy') failed: {type(exc).__name__}: "
                               f"{exc}; its inputs: a float32[2]")


def test_an_array_too_large_for_memory_is_an_evaluation_error_with_the_shapes():
    m = _model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="big")],
               [_vi("s", TP.INT64, [2])], [_vi("y")])
    with pytest.raises(EvaluationError) as e:  # 2^48 float32 elements: 1 PiB
        run(m, {"s": np.array([1 << 24, 1 << 24], np.int64)})
    msg = e.value.message
    assert msg.startswith("node 0 (ConstantOfShape 'big') failed: needs more memory than is "
                          "available")
    assert msg.endswith("; its inputs: s int64[2]") and e.value.path.startswith("graph.nodes[0]")


def _constant_model():
    return _model([helper.make_node("Constant", [], ["c"], name="k", value_float=2.0),
                   helper.make_node("Add", ["x", "c"], ["y"])], [_vi("x", F, [1])], [_vi("y")])


def test_a_bug_in_constant_folding_is_an_internal_error_at_construction(monkeypatch):
    # A Constant is folded only when its kernel is the built-in one (a session's or a user's
    # Constant kernel runs with the others), so the built-in is replaced for this test.
    table.implementation("kernel", "", "Constant", 1)    # (its family loaded)
    monkeypatch.setitem(table._ATTACHED["kernel"], ("", "Constant"), [(1, _typo_kernel)])
    with pytest.raises(InternalError) as e:
        Session(_constant_model())
    assert e.value.kernel == KERNEL
    assert e.value.node == "0 (Constant 'k', domain ai.onnx, opset 21)"
    assert e.value.path == "graph.nodes[0] (Constant 'k')"


def test_constant_folding_failing_on_its_attributes_stays_invalid(monkeypatch):
    def bad_value(ctx):
        raise ValueError("value_float is not a float")

    table.implementation("kernel", "", "Constant", 1)
    monkeypatch.setitem(table._ATTACHED["kernel"], ("", "Constant"), [(1, bad_value)])
    with pytest.raises(InvalidModelError) as e:
        Session(_constant_model())
    assert e.value.message == "Constant 'k' failed: ValueError: value_float is not a float"


def test_the_cli_prints_an_internal_error_as_one_line_with_its_own_exit_status():
    from typer.testing import CliRunner

    from onemodel.cli import EXIT_INTERNAL, app

    register_kernel("", "Relu", 1, _typo_kernel)  # the CNN's Relu nodes now hit the bug
    try:
        r = CliRunner().invoke(app, ["run", str(MODELS / "cnn_legacy.onnx"), "--random"])
    finally:
        unregister_kernel("", "Relu", 1)
    assert r.exit_code == EXIT_INTERNAL == 70
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"internal error in kernel {KERNEL} for node ")
    assert "TypeError: " in lines[0] and "; please report it [graph.nodes[" in lines[0]
    assert lines[0].endswith(f"] in {MODELS / 'cnn_legacy.onnx'}")  # the source, as before



def test_verify_run_with_a_kernel_bug_exits_70_with_the_line_of_the_bug():
    """A kernel's bug while ``verify --run`` runs the models is neither an error of the models
    nor a difference between them (with InternalError a OneModelError, the second model's run
    failing was a difference, exit 1): one line, exit 70, the source named."""
    from typer.testing import CliRunner

    from onemodel.cli import EXIT_INTERNAL, app

    model = str(MODELS / "cnn_legacy.onnx")
    register_kernel("", "Relu", 1, _typo_kernel)
    try:
        r = CliRunner().invoke(app, ["verify", model, model, "--run"])
    finally:
        unregister_kernel("", "Relu", 1)
    assert r.exit_code == EXIT_INTERNAL == 70
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"internal error in kernel {KERNEL} for node ")
    assert lines[0].endswith(f"] in {model}")

_MALLOC_PROBE = """
import numpy as np
from onnx import TensorProto, helper
from onemodel.evaluate import Session, memory
from onemodel.formats.onnx import decode_model
g = helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
m = decode_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
                 .SerializeToString())
Session(m).run({"x": np.ones(1, np.float32)})
print(memory._result)
Session(m, tune_malloc=True)
print(memory._result)
"""


def test_malloc_is_tuned_only_for_a_session_that_asks():
    """In a fresh process (the setting is once per process): a default Session leaves glibc's
    malloc as it is; ``tune_malloc=True`` applies the setting (True on glibc, False where it is
    skipped)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("ONEMODEL_TUNE_MALLOC", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")}
    out = subprocess.run([sys.executable, "-c", _MALLOC_PROBE], capture_output=True, text=True,
                         check=True, env=env).stdout.split()
    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert out == ["None", str(glibc)]  # never called, then called (and applied on glibc)


def test_internal_error_is_not_a_onemodel_error_nor_a_reading_kind():
    """Issue 25 item 2: a bug is kept out of the user's hierarchy, ``except OneModelError`` does
    not swallow it (it is an InternalError raised by a kernel, caught by no such clause)."""
    from onemodel.errors import KINDS

    assert not issubclass(InternalError, OneModelError) and InternalError.kind not in KINDS
    s = Session(_probe_model(), kernels={("test.ops", "Probe"): _typo_kernel})
    with pytest.raises(InternalError):
        try:
            s.run({"x": np.ones(2, np.float32)})
        except OneModelError:  # (what a caller writes for the model's or the inputs' faults)
            pytest.fail("except OneModelError caught a kernel's bug")
