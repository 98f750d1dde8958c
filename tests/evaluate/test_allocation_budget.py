"""The allocation budget of the evaluator (onemodel/evaluate/memory.py, check_allocation): a node
whose output or scratch size comes from attributes or input values is refused with an
EvaluationError naming the node and the sizes before it allocates more than the memory
available (or ONEMODEL_MEMORY_LIMIT), and runs as before under it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from guards import bounded
from onnx import TensorProto as TP
from onnx import helper, numpy_helper
from oracle import node_model, ours
from typer.testing import CliRunner

from onemodel.cli import app
from onemodel.errors import EvaluationError, UsageError
from onemodel.evaluate import memory

CNN = Path(__file__).resolve().parents[2] / "testdata" / "models" / "cnn_dynamo.onnx"

MiB = 1 << 20
LIMITED = "more than the 1.0 MiB ONEMODEL_MEMORY_LIMIT allows"


@pytest.fixture
def one_mib(monkeypatch):
    monkeypatch.setenv("ONEMODEL_MEMORY_LIMIT", str(MiB))


def refused(model, feeds) -> str:
    with pytest.raises(EvaluationError) as e:
        ours(model, feeds)
    return e.value.message


def _failed(op: str, what: str, size: str, tail: str = LIMITED) -> str:
    return (f"node 0 ({op}) failed: needs more memory than is available: {what} would take "
            f"{size}, {tail}; its inputs: ")


# -- refused past ONEMODEL_MEMORY_LIMIT, right under it ---------------------------------------

def test_pad_with_big_pads(one_mib):
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    big = {"x": x, "pads": np.array([0, 0, 300, 300, 0, 0, 300, 300], np.int64)}
    msg = refused(node_model("Pad", big, ["x", "pads"], ["y"]), big)
    # [1, 1, 604, 604] float32: 1 459 264 bytes
    assert msg.startswith(_failed("Pad", "the padded output", "1.4 MiB")), msg
    assert msg.endswith("x float32[1, 1, 4, 4], pads int64[8]")
    small = {"x": x, "pads": np.array([0, 0, 1, 2, 0, 0, 1, 2], np.int64)}
    (y,) = ours(node_model("Pad", small, ["x", "pads"], ["y"]), small)
    want = np.zeros((1, 1, 6, 8), np.float32)
    want[0, 0, 1:5, 2:6] = x[0, 0]
    np.testing.assert_array_equal(y, want)


def _conv(pads, strides=(1, 1)):
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    w = np.ones((1, 1, 3, 3), np.float32)
    feeds = {"x": x, "w": w}
    return node_model("Conv", feeds, ["x", "w"], ["y"], pads=list(pads),
                      strides=list(strides)), feeds


def test_conv_with_big_pads(one_mib):
    model, feeds = _conv([400] * 4)
    msg = refused(model, feeds)  # output [1, 1, 802, 802] float32: 2 572 816 bytes
    assert msg.startswith(_failed("Conv", "the Conv output", "2.5 MiB")), msg
    # a stride past the pads keeps the output at [1, 1, 1, 1]; the padded copy stays
    model, feeds = _conv([400] * 4, strides=(1000, 1000))
    msg = refused(model, feeds)  # one sample padded to [1, 804, 804] float32: 2 585 664 bytes
    assert msg.startswith(_failed("Conv", "the padded copy of one sample", "2.5 MiB")), msg
    model, feeds = _conv([1] * 4)
    (y,) = ours(model, feeds)
    xp = np.pad(feeds["x"][0, 0].astype(np.float64), 1)
    want = np.array([[xp[i:i + 3, j:j + 3].sum() for j in range(4)] for i in range(4)])
    np.testing.assert_array_equal(y, want.reshape(1, 1, 4, 4).astype(np.float32))


def test_conv_transpose_with_big_strides(one_mib):
    x = np.array([[[[1, 2], [3, 4]]]], np.float32)
    w = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    feeds = {"x": x, "w": w}
    model = node_model("ConvTranspose", feeds, ["x", "w"], ["y"], strides=[1000, 1000])
    msg = refused(model, feeds)  # columns [1, 1, 9, 4] and the output [1, 1, 1003, 1003]
    assert msg.startswith(_failed("ConvTranspose", "the ConvTranspose columns and output",
                                  "3.8 MiB")), msg
    (y,) = ours(node_model("ConvTranspose", feeds, ["x", "w"], ["y"], strides=[2, 2]), feeds)
    want = np.zeros((5, 5), np.float32)
    for i in range(2):
        for j in range(2):
            want[2 * i:2 * i + 3, 2 * j:2 * j + 3] += x[0, 0, i, j] * w[0, 0]
    np.testing.assert_array_equal(y, want.reshape(1, 1, 5, 5))


def test_constant_of_shape(one_mib):
    value = numpy_helper.from_array(np.array([7], np.float32))
    big = {"s": np.array([1024, 512], np.int64)}
    msg = refused(node_model("ConstantOfShape", big, ["s"], ["y"], value=value), big)
    assert msg.startswith(_failed("ConstantOfShape", "the ConstantOfShape output", "2.0 MiB"))
    small = {"s": np.array([4, 5], np.int64)}
    (y,) = ours(node_model("ConstantOfShape", small, ["s"], ["y"], value=value), small)
    np.testing.assert_array_equal(y, np.full((4, 5), 7, np.float32))


def test_tile(one_mib):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    big = {"x": x, "r": np.array([512, 512], np.int64)}
    msg = refused(node_model("Tile", big, ["x", "r"], ["y"]), big)
    assert msg.startswith(_failed("Tile", "the Tile output", "6.0 MiB")), msg  # [1024, 1536]
    small = {"x": x, "r": np.array([2, 1], np.int64)}
    (y,) = ours(node_model("Tile", small, ["x", "r"], ["y"]), small)
    np.testing.assert_array_equal(y, np.concatenate([x, x]))


def test_expand(one_mib):
    x = np.array([[1], [2]], np.float32)
    big = {"x": x, "s": np.array([2, 1 << 18], np.int64)}
    msg = refused(node_model("Expand", big, ["x", "s"], ["y"]), big)
    assert msg.startswith(_failed("Expand", "the Expand output", "2.0 MiB")), msg
    small = {"x": x, "s": np.array([2, 3], np.int64)}
    (y,) = ours(node_model("Expand", small, ["x", "s"], ["y"]), small)
    np.testing.assert_array_equal(y, [[1, 1, 1], [2, 2, 2]])


def test_resize_with_a_big_scale(one_mib):
    x = np.array([[[[1, 2], [3, 4]]]], np.float32)
    big = {"x": x, "scales": np.array([1, 1, 1000, 1000], np.float32)}
    msg = refused(node_model("Resize", big, ["x", "", "scales"], ["y"], mode="nearest"), big)
    # [1, 1, 2000, 2000] float32: 16 000 000 bytes
    assert msg.startswith(_failed("Resize", "the resized output", "15.3 MiB")), msg
    small = {"x": x, "scales": np.array([1, 1, 2, 2], np.float32)}
    (y,) = ours(node_model("Resize", small, ["x", "", "scales"], ["y"], mode="nearest"), small)
    np.testing.assert_array_equal(y, x.repeat(2, axis=2).repeat(2, axis=3))


def test_upsample_with_a_scale_of_ten_thousand(one_mib):
    x = np.array([[[[1, 2], [3, 4]]]], np.float32)
    big = {"x": x, "scales": np.array([1, 1, 1e4, 1e4], np.float32)}
    msg = refused(node_model("Upsample", big, ["x", "scales"], ["y"], opset=9), big)
    # [1, 1, 20000, 20000] float32: 1.6e9 bytes
    assert msg.startswith(_failed("Upsample", "the resized output", "1.5 GiB")), msg


def test_range_with_a_huge_count(one_mib):
    def model(feeds):
        return node_model("Range", feeds, ["a", "b", "d"], ["y"])

    big = {"a": np.array(0, np.int64), "b": np.array(10 ** 6, np.int64),
           "d": np.array(1, np.int64)}
    msg = refused(model(big), big)  # 10^6 int64 twice (the indices, their products)
    assert msg.startswith(_failed("Range", "the Range output", "15.3 MiB")), msg
    small = {"a": np.array(1, np.int64), "b": np.array(11, np.int64),
             "d": np.array(3, np.int64)}
    (y,) = ours(model(small), small)
    np.testing.assert_array_equal(y, [1, 4, 7, 10])
    assert y.dtype == np.int64


def test_random_normal_with_a_big_shape(one_mib):
    msg = refused(node_model("RandomNormal", {}, [], ["y"], shape=[512, 256]), {})
    # float64 draws, then the float32 cast: 16 bytes an element
    assert msg.startswith(_failed("RandomNormal", "the RandomNormal output", "2.0 MiB")), msg
    (y,) = ours(node_model("RandomNormal", {}, [], ["y"], shape=[3, 4], scale=0.0, mean=5.0,
                           seed=1.0), {})
    np.testing.assert_array_equal(y, np.full((3, 4), 5, np.float32))
    assert y.dtype == np.float32


def test_one_hot_depth(one_mib):
    def model(feeds):
        return node_model("OneHot", feeds, ["i", "depth", "v"], ["y"])

    big = {"i": np.array([0, 1], np.int64), "depth": np.array(1 << 19, np.int64),
           "v": np.array([0, 1], np.float32)}
    msg = refused(model(big), big)  # [2, 2^19] booleans and float32
    assert msg.startswith(_failed("OneHot", "the OneHot output", "5.0 MiB")), msg
    small = dict(big, depth=np.array(3, np.int64))
    (y,) = ours(model(small), small)
    np.testing.assert_array_equal(y, [[1, 0, 0], [0, 1, 0]])


# -- the variable and the machine's memory ----------------------------------------------------

@pytest.mark.parametrize("value", ["1MiB", "-5", "1e6", "0x100", "12 GB"])
def test_a_bad_memory_limit_is_a_usage_error_before_any_run(monkeypatch, tmp_path, value):
    """A setting that is not a number of bytes is named when the Session is made (a UsageError,
    exit 2 with one line from the command line), not by the first array checked."""
    monkeypatch.setenv("ONEMODEL_MEMORY_LIMIT", value)
    feeds = {"s": np.array([2], np.int64)}
    with pytest.raises(UsageError) as e:
        ours(node_model("ConstantOfShape", feeds, ["s"], ["y"]), feeds)
    assert str(e.value) == (f"ONEMODEL_MEMORY_LIMIT='{value}' is not a number of bytes (a "
                            "decimal integer such as 1073741824)")
    r = CliRunner().invoke(app, ["run", str(CNN), "--random"])
    assert r.exit_code == 2, r.output
    assert r.stderr == f"Usage error: {e.value}\n"


def test_an_empty_memory_limit_is_unset(monkeypatch):
    monkeypatch.setenv("ONEMODEL_MEMORY_LIMIT", "")
    assert memory.memory_limit() is None
    monkeypatch.setenv("ONEMODEL_MEMORY_LIMIT", " 4096 ")
    assert memory.memory_limit() == 4096


def test_without_the_variable_more_than_the_machine_has_is_refused(monkeypatch):
    monkeypatch.delenv("ONEMODEL_MEMORY_LIMIT", raising=False)
    feeds = {"s": np.array([1 << 20, 1 << 20], np.int64)}  # 2^40 float32: 4 TiB
    msg = refused(node_model("ConstantOfShape", feeds, ["s"], ["y"]), feeds)
    assert msg.startswith("node 0 (ConstantOfShape) failed: needs more memory than is "
                          "available: the ConstantOfShape output would take 4.0 TiB, more than "
                          "the "), msg
    assert "of memory available; its inputs: s int64[2]" in msg


def test_the_available_figure_from_meminfo_and_the_cgroup(monkeypatch, tmp_path):
    monkeypatch.delenv("ONEMODEL_MEMORY_LIMIT", raising=False)
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       8000000 kB\nMemFree:          100 kB\n"
                       "MemAvailable:    409600 kB\n")
    monkeypatch.setattr(memory, "_MEMINFO", str(meminfo))
    monkeypatch.setattr(memory, "_CGROUP", str(tmp_path / "no-cgroup"))
    assert memory.available_memory() == 400 * MiB
    memory.check_allocation(400 * MiB, "an array")  # exactly what is available: taken
    with pytest.raises(EvaluationError) as e:
        memory.check_allocation(400 * MiB + 1, "an array")
    assert e.value.message == ("needs more memory than is available: an array would take "
                               "400.0 MiB, more than the 400.0 MiB of memory available")
    memory.check_allocation(200 * MiB, "a small array")  # under 256 MiB: not even read
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    (cgroup / "memory.max").write_text(f"{300 * MiB}\n")
    (cgroup / "memory.current").write_text(f"{10 * MiB}\n")
    monkeypatch.setattr(memory, "_CGROUP", str(cgroup))
    assert memory.available_memory() == 290 * MiB  # the cgroup's room is smaller
    (cgroup / "memory.max").write_text("max\n")
    assert memory.available_memory() == 400 * MiB
    meminfo.write_text("MemTotal:       8000000 kB\n")  # no MemAvailable: sysconf's figure
    assert memory.available_memory() == (memory.os.sysconf("SC_AVPHYS_PAGES")
                                         * memory.os.sysconf("SC_PAGE_SIZE"))


def test_size_text():
    assert [memory.size_text(n) for n in (100, 1536, 3 * MiB // 2, 37 << 30, 4 << 40)] == [
        "100 bytes", "1.5 KiB", "1.5 MiB", "37.0 GiB", "4.0 TiB"]


# -- the command line -------------------------------------------------------------------------

def test_cli_run_random_exits_2_with_the_error_line(tmp_path, monkeypatch):
    monkeypatch.delenv("ONEMODEL_MEMORY_LIMIT", raising=False)
    pads = numpy_helper.from_array(np.array([0, 0, 10 ** 6, 10 ** 6] * 2, np.int64), "pads")
    graph = helper.make_graph(
        [helper.make_node("Pad", ["x", "pads"], ["y"], name="huge_pad")], "g",
        [helper.make_tensor_value_info("x", TP.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", TP.FLOAT, None)], [pads])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    path = tmp_path / "pad.onnx"
    onnx.save(model, path)
    r = CliRunner().invoke(app, ["run", str(path), "--random"])
    assert r.exit_code == 2, r.output
    # [1, 1, 2000004, 2000004] float32: 16 TB
    assert r.stderr.startswith("EvaluationError: node 0 (Pad 'huge_pad') failed: needs more "
                               "memory than is available: the padded output would take 14.6 "
                               "TiB, more than the "), r.stderr
    assert "Traceback" not in r.output and len(r.stderr.strip().splitlines()) == 1


# -- what grows with the data (issue 24, item 3): each refused before the memory is taken ----

def _guarded(model, feeds) -> str:
    """The refusal of ``model`` on ``feeds``, within a time and memory guard (the sizes refused
    are 10 to 1000 times the guard's)."""
    with bounded(seconds=60, peak=24 * MiB):
        return refused(model, feeds)


def _loop_model(n: int):
    """Loop M times, each iteration's scan output a [n] float32 filled with 1 (n * 4 bytes)."""
    fill = numpy_helper.from_array(np.array([1], np.float32))
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("ConstantOfShape", ["shape"], ["scan"], value=fill)], "body",
        [helper.make_tensor_value_info("i", TP.INT64, []),
         helper.make_tensor_value_info("cond_in", TP.BOOL, [])],
        [helper.make_tensor_value_info("cond_out", TP.BOOL, []),
         helper.make_tensor_value_info("scan", TP.FLOAT, [n])],
        [numpy_helper.from_array(np.array([n], np.int64), "shape")])
    graph = helper.make_graph([helper.make_node("Loop", ["M", ""], ["out"], body=body)], "g",
                              [helper.make_tensor_value_info("M", TP.INT64, [])],
                              [helper.make_tensor_value_info("out", TP.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_loop_scan_outputs_growing_past_the_budget(monkeypatch):
    """The issue's Loop: 256 KiB a iteration, M = 65 536 (16 GiB), refused at the budget."""
    monkeypatch.setenv("ONEMODEL_MEMORY_LIMIT", str(4 * MiB))
    model = _loop_model(1 << 16)
    msg = _guarded(model, {"M": np.array(65536, np.int64)})
    # the 17th iteration's output takes the scan outputs kept to 4.25 MiB
    assert msg == ("node 0 (Loop) failed: needs more memory than is available: the Loop scan "
                   "outputs would take 4.2 MiB, more than the 4.0 MiB ONEMODEL_MEMORY_LIMIT "
                   "allows; its inputs: M int64[], (none) absent")
    (out,) = ours(model, {"M": np.array(16, np.int64)})  # 16 iterations: exactly 4 MiB
    assert out.shape == (16, 1 << 16) and out.dtype == np.float32 and (out == 1).all()


def test_scan_outputs_growing_past_the_budget(one_mib):
    body = helper.make_graph(
        [helper.make_node("Tile", ["x", "reps"], ["y"])], "body",
        [helper.make_tensor_value_info("x", TP.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TP.FLOAT, [1 << 14])],
        [numpy_helper.from_array(np.array([1 << 14], np.int64), "reps")])
    feeds = {"xs": np.arange(100, dtype=np.float32).reshape(100, 1)}
    model = node_model("Scan", feeds, ["xs"], ["ys"], opset=17, body=body, num_scan_inputs=1)
    msg = _guarded(model, feeds)  # 100 slices of 64 KiB: 6.25 MiB
    assert msg == _failed("Scan", "the Scan outputs", "1.1 MiB") + "xs float32[100, 1]"
    small = {"xs": feeds["xs"][:4]}
    (ys,) = ours(node_model("Scan", small, ["xs"], ["ys"], opset=17, body=body,
                            num_scan_inputs=1), small)
    np.testing.assert_array_equal(ys, np.repeat(np.arange(4, dtype=np.float32)[:, None],
                                                1 << 14, axis=1))


@pytest.mark.parametrize("op,dtype,size", [("Add", np.float32, "3.4 GiB"),
                                           ("Mul", np.float64, "6.7 GiB"),
                                           ("Less", np.float32, "858.3 MiB")])
def test_broadcast_results_past_the_budget(one_mib, op, dtype, size):
    """[N, 1] with [1, N] at N = 30 000 (the issue's two-node model reached 6.9 GB)."""
    feeds = {"a": np.ones((30000, 1), dtype), "b": np.ones((1, 30000), dtype)}
    msg = _guarded(node_model(op, feeds, ["a", "b"], ["y"]), feeds)
    assert msg == _failed(op, f"the {op} output", size) + (
        f"a {np.dtype(dtype).name}[30000, 1], b {np.dtype(dtype).name}[1, 30000]")
    small = {"a": np.arange(3, dtype=dtype).reshape(3, 1), "b": np.arange(2, dtype=dtype)[None]}
    (y,) = ours(node_model(op, small, ["a", "b"], ["y"]), small)
    want = {"Add": np.add, "Mul": np.multiply, "Less": np.less}[op](small["a"], small["b"])
    np.testing.assert_array_equal(y, want)


def test_where_and_sum_broadcasts_past_the_budget(one_mib):
    feeds = {"c": np.ones((2000, 1), bool), "x": np.ones((1, 2000), np.float32),
             "y": np.zeros((), np.float32)}
    msg = _guarded(node_model("Where", feeds, ["c", "x", "y"], ["z"]), feeds)
    assert msg.startswith(_failed("Where", "the Where output", "15.3 MiB")), msg
    feeds = {"p": np.ones((2000, 1), np.float32), "q": np.ones((2000,), np.float32)}
    msg = _guarded(node_model("Sum", feeds, ["p", "q"], ["z"]), feeds)
    assert msg.startswith(_failed("Sum", "the broadcast output", "15.3 MiB")), msg
    # no larger than an input: nothing is refused, whatever the limit
    feeds = {"p": np.ones((512, 512), np.float32), "q": np.ones((512,), np.float32)}
    (z,) = ours(node_model("Sum", feeds, ["p", "q"], ["z"]), feeds)
    assert z.shape == (512, 512) and (z == 2).all()


@pytest.mark.parametrize("op", ["MatMul", "Gemm"])
def test_products_past_the_budget(one_mib, op):
    feeds = {"a": np.ones((30000, 1), np.float32), "b": np.ones((1, 30000), np.float32)}
    msg = _guarded(node_model(op, feeds, ["a", "b"], ["y"]), feeds)
    assert msg == _failed(op, f"the {op} output", "3.4 GiB") + (
        "a float32[30000, 1], b float32[1, 30000]")
    small = {"a": np.arange(6, dtype=np.float32).reshape(3, 2),
             "b": np.arange(8, dtype=np.float32).reshape(2, 4)}
    (y,) = ours(node_model(op, small, ["a", "b"], ["y"]), small)
    np.testing.assert_array_equal(y, small["a"].astype(np.float64) @ small["b"])


def test_concat_past_the_budget(one_mib):
    feeds = {k: np.ones((1 << 17,), np.float32) for k in "abc"}  # 512 KiB each
    msg = _guarded(node_model("Concat", feeds, ["a", "b", "c"], ["y"], axis=0), feeds)
    assert msg == _failed("Concat", "the Concat output", "1.5 MiB") + ", ".join(
        f"{k} float32[131072]" for k in "abc")
    two = {"a": feeds["a"], "b": feeds["b"] * 2}  # exactly 1 MiB: taken
    (y,) = ours(node_model("Concat", two, ["a", "b"], ["y"], axis=0), two)
    np.testing.assert_array_equal(y, np.repeat(np.array([1, 2], np.float32), 1 << 17))


def test_concat_from_sequence_past_the_budget(one_mib):
    """A sequence a Loop grew one tensor at a time, concatenated: checked like Concat."""
    seq = onnx.helper.make_tensor_sequence_value_info("s", TP.FLOAT, None)
    feeds = {"s": [np.ones((1 << 16,), np.float32) for _ in range(5)]}  # 5 x 256 KiB
    model = node_model("ConcatFromSequence", feeds, ["s"], ["y"], infos={"s": seq}, axis=0)
    msg = _guarded(model, feeds)
    assert msg == _failed("ConcatFromSequence", "the ConcatFromSequence output", "1.2 MiB") \
        + "s sequence of 5"
    four = {"s": feeds["s"][:4]}  # exactly 1 MiB: taken
    (y,) = ours(model, four)
    assert y.shape == (1 << 18,) and (y == 1).all()


def test_loop_carried_sequence_growing_past_the_budget(one_mib):
    """A Loop whose body inserts a new 256 KiB tensor into a carried sequence each iteration."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Mul", ["t", "t"], ["u"]),
         helper.make_node("SequenceInsert", ["seq_in", "u"], ["seq_out"])], "body",
        [helper.make_tensor_value_info("i", TP.INT64, []),
         helper.make_tensor_value_info("cond_in", TP.BOOL, []),
         helper.make_tensor_sequence_value_info("seq_in", TP.FLOAT, None)],
        [helper.make_tensor_value_info("cond_out", TP.BOOL, []),
         helper.make_tensor_sequence_value_info("seq_out", TP.FLOAT, None)],
        [numpy_helper.from_array(np.ones(1 << 16, np.float32), "t")])
    graph = helper.make_graph(
        [helper.make_node("SequenceEmpty", [], ["s0"], dtype=TP.FLOAT),
         helper.make_node("Loop", ["M", "", "s0"], ["sN"], body=body),
         helper.make_node("SequenceLength", ["sN"], ["n"])], "g",
        [helper.make_tensor_value_info("M", TP.INT64, [])],
        [helper.make_tensor_value_info("n", TP.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    msg = _guarded(model, {"M": np.array(1 << 20, np.int64)})  # 2^20 x 256 KiB: 256 GiB
    assert msg == ("node 1 (Loop) failed: needs more memory than is available: the Loop's "
                   "carried sequences would take 1.2 MiB, more than the 1.0 MiB "
                   "ONEMODEL_MEMORY_LIMIT allows; its inputs: M int64[], (none) absent, "
                   "s0 sequence of 0")
    (n,) = ours(model, {"M": np.array(4, np.int64)})  # exactly 1 MiB: taken
    assert n == 4


def test_a_broadcast_past_the_machine_is_refused_without_the_variable(monkeypatch):
    monkeypatch.delenv("ONEMODEL_MEMORY_LIMIT", raising=False)
    feeds = {"a": np.ones((1 << 20, 1), np.float32), "b": np.ones((1, 1 << 20), np.float32)}
    msg = _guarded(node_model("Add", feeds, ["a", "b"], ["y"]), feeds)  # 2^40 float32: 4 TiB
    assert msg.startswith("node 0 (Add) failed: needs more memory than is available: the Add "
                          "output would take 4.0 TiB, more than the "), msg
    assert msg.endswith(" of memory available; its inputs: a float32[1048576, 1], "
                        "b float32[1, 1048576]")


# -- scan outputs held once: written into the stack as they come -----------------------------

_PEAK_CHILD = r"""
import json, resource, sys
import numpy as np
from onemodel.evaluate import run
from onemodel.formats.onnx import decode_model
with open(sys.argv[1], "rb") as f:
    model = decode_model(f.read())
feeds = {"M": np.array(int(sys.argv[2]), np.int64)}
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
(out,) = run(model, feeds).values()
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
n = out.shape[0]
exact = out.dtype == np.float32 and all(bool((out[i] == i).all()) for i in range(n))
print(json.dumps([before * 1024, after * 1024, list(out.shape), exact]))
"""


def _counting_loop_model(n: int):
    """Loop M times, iteration i's scan output a [n] float32 filled with i."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Cast", ["i"], ["f"], to=TP.FLOAT),
         helper.make_node("ConstantOfShape", ["shape"], ["ones"],
                          value=numpy_helper.from_array(np.array([1], np.float32))),
         helper.make_node("Mul", ["ones", "f"], ["scan"])], "body",
        [helper.make_tensor_value_info("i", TP.INT64, []),
         helper.make_tensor_value_info("cond_in", TP.BOOL, [])],
        [helper.make_tensor_value_info("cond_out", TP.BOOL, []),
         helper.make_tensor_value_info("scan", TP.FLOAT, [n])],
        [numpy_helper.from_array(np.array([n], np.int64), "shape")])
    graph = helper.make_graph([helper.make_node("Loop", ["M", ""], ["out"], body=body)], "g",
                              [helper.make_tensor_value_info("M", TP.INT64, [])],
                              [helper.make_tensor_value_info("out", TP.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("limit", ["1000000000", ""])
def test_loop_scan_output_peak_is_about_its_size(tmp_path, limit):
    """50 iterations of 4 MiB (200 MiB stacked): the run's peak resident memory grows by the
    stack and about one iteration's value (a 25 % allowance for the allocator), not by the
    values kept and a stack built from them (twice the size, as np.stack of the kept values
    did). With ONEMODEL_MEMORY_LIMIT the stack is allocated at M entries at once; without, the
    budget is the machine's available memory (both paths). The baseline is the child's own peak
    after start-up and loading, before the run."""
    path = tmp_path / "loopscan.onnx"
    onnx.save(_counting_loop_model(1 << 20), path)
    env = dict(os.environ, ONEMODEL_MEMORY_LIMIT=limit)
    r = subprocess.run([sys.executable, "-c", _PEAK_CHILD, str(path), "50"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    before, after, shape, exact = json.loads(r.stdout)
    stack = 50 * 4 * MiB
    assert shape == [50, 1 << 20] and exact
    assert after - before < 1.25 * stack, (before, after)


# -- ulimit -v (RLIMIT_AS) bounds the memory available ---------------------------------------

def test_the_address_space_limit_bounds_the_memory_available(monkeypatch, tmp_path):
    """RLIMIT_AS less VmSize lowers the available figure (here 300 MiB of limit, 100 MiB
    mapped: 200 MiB)."""
    import resource
    monkeypatch.setattr(resource, "getrlimit", lambda which: (
        (300 * MiB, resource.RLIM_INFINITY) if which == resource.RLIMIT_AS else (-1, -1)))
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmPeak:\t  999999 kB\nVmSize:\t  102400 kB\n")
    monkeypatch.setattr(memory, "_STATUS", str(status))
    assert memory._address_space_room() == 200 * MiB
    assert memory.available_memory() <= 200 * MiB
    status.write_text("VmSize:\t  409600 kB\n")  # mapped past the limit already: no room
    assert memory.available_memory() == 0


_VMSIZE = ("import onemodel.cli, onemodel.evaluate\n"
           "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmSize')][0])")


def test_cli_run_under_ulimit_v_refuses_naming_the_node(tmp_path, monkeypatch):
    """Under an RLIMIT_AS of what start-up maps (numpy, the BLAS threads: measured by a first
    child, about 150 MiB on 2 cores) plus 1 GiB, an Add broadcasting [20000, 1] with [1, 20000]
    (1.5 GiB of float32) is refused by the budget check, exit 2 with one line naming the node;
    not numpy's MemoryError, nor exit 70."""
    import resource
    monkeypatch.delenv("ONEMODEL_MEMORY_LIMIT", raising=False)
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"], name="big_add")], "g",
        [helper.make_tensor_value_info("a", TP.FLOAT, [20000, 1]),
         helper.make_tensor_value_info("b", TP.FLOAT, [1, 20000])],
        [helper.make_tensor_value_info("y", TP.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "broadcast.onnx"
    onnx.save(model, path)
    start = subprocess.run([sys.executable, "-c", _VMSIZE], capture_output=True, text=True,
                           timeout=60, check=True)
    limit = int(start.stdout) * 1024 + (1 << 30)
    def limit_address_space():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    r = subprocess.run([sys.executable, "-m", "onemodel", "run", str(path), "--random"],
                       preexec_fn=limit_address_space,
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, ONEMODEL_MEMORY_LIMIT=""))
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith("EvaluationError: node 0 (Add 'big_add') failed: needs more "
                               "memory than is available: the Add output would take 1.5 GiB, "
                               "more than the "), r.stderr
    assert " of memory available; its inputs: a float32[20000, 1]" in r.stderr


@pytest.mark.parametrize("attrs", [{}, {"scan_output_axes": [1]},
                                   {"scan_output_axes": [-1], "scan_output_directions": [1]}])
def test_scan_output_peak_is_about_its_size(monkeypatch, attrs):
    """A Scan of 64 steps of 512 KiB (a 32 MiB stack, on axis 0, on axis 1, reversed): at most
    the stack and a few steps' values allocated at once (40 MiB traced), not the values kept and
    a stack built from them (64 MiB), nor a copy into the layout of another axis; exact."""
    monkeypatch.delenv("ONEMODEL_MEMORY_LIMIT", raising=False)
    n = 1 << 17
    body = helper.make_graph(
        [helper.make_node("Tile", ["x", "reps"], ["y"])], "body",
        [helper.make_tensor_value_info("x", TP.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TP.FLOAT, [n])],
        [numpy_helper.from_array(np.array([n], np.int64), "reps")])
    feeds = {"xs": np.arange(64, dtype=np.float32).reshape(64, 1)}
    model = node_model("Scan", feeds, ["xs"], ["ys"], opset=17, body=body, num_scan_inputs=1,
                       **attrs)
    with bounded(seconds=60, peak=40 * MiB):
        (ys,) = ours(model, feeds)
    want = np.repeat(np.arange(64, dtype=np.float32)[:, None], n, axis=1)
    if attrs.get("scan_output_directions"):
        want = want[::-1]
    if attrs.get("scan_output_axes"):
        want = want.T
    assert ys.dtype == np.float32
    np.testing.assert_array_equal(ys, want)
