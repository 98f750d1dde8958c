"""Driver of tests/storage/test_atomic_writes.py: kill trials, writer races and a reader loop
against a writer loop on one multi-file ONNX layout, in one process that imports onemodel once
and forks a writer per trial (a CLI ``convert``, killed with SIGKILL or SIGINT at a random time).

Usage: python atomic_driver.py LAYOUT DIRECTORY SEED. Prints one JSON object: for each part, the
count of every state the destination was found in: ``A`` or ``B`` (a whole model of that
version), ``io`` (an IoError), ``mixed`` (tensors of both versions: the fault), ``bad`` (any
other error, with the messages in ``errors``).

Models: N_TENSORS initializers ``w<k>`` of 64 float32; in version A every element of ``w<k>`` is
k, in version B it is k + 1000, so each tensor says which version it belongs to.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import onemodel
from onemodel.cli import main as cli_main
from onemodel.errors import IoError, OneModelError

N_TENSORS = 32
OFFSET = {"A": 0, "B": 1000}

LAYOUTS = {
    "keep": [],  # the source's own data file w.bin, as infer and round trips write it
    "file": ["--external-data", "w.bin", "--threshold", "0"],
    "per-tensor": ["--external-data-per-tensor", "--threshold", "0"],
    "safetensors": ["--external-data", "w.safetensors", "--threshold", "0"],
    "safetensors-shards": ["--external-data", "w.safetensors", "--threshold", "0",
                           "--max-shard-size", "2KiB"],
}


def build(version: str, path: str, external: bool = False) -> None:
    """Write version ``version`` of the model as one inline ONNX file at ``path`` (``external``:
    with every tensor in the data file ``w.bin`` beside it)."""
    inits = [numpy_helper.from_array(np.full(64, k + OFFSET[version], np.float32), f"w{k}")
             for k in range(N_TENSORS)]
    graph = helper.make_graph([helper.make_node("Add", ["x", "w0"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64])],
                              inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path,
              save_as_external_data=external, location="w.bin", size_threshold=0)


def state(dst: str, errors: list) -> str:
    """Which version the model at ``dst`` is, read as a user would (load, every tensor)."""
    try:
        with onemodel.load(dst) as m:
            seen = set()
            for t in m.graph.initializers:
                k = int(t.name[1:])
                v = t.numpy()
                if not (v == v[0]).all():
                    return "mixed"  # one tensor's bytes of two versions
                seen.add(int(v[0]) - k)
            if len(m.graph.initializers) != N_TENSORS:
                errors.append(f"{len(m.graph.initializers)} initializers")
                return "bad"
    except IoError as e:
        if os.environ.get("ATOMIC_DEBUG"):
            print("io:", e, sorted(os.listdir(os.path.dirname(dst))), file=sys.stderr)
        return "io"
    except OneModelError as e:
        errors.append(f"{type(e).__name__}: {e}")
        return "bad"
    if seen == {0}:
        return "A"
    if seen == {1000}:
        return "B"
    return "mixed"


def checked(dst: str, errors: list) -> str:  # (every 5th kill trial, and the last write)
    """:func:`state`, and for a whole model ``check --full`` without an error."""
    s = state(dst, errors)
    if s in ("A", "B"):
        report = onemodel.check(dst, full=True)
        bad = [f for f in report.findings if f.severity == "error"]
        if bad:
            errors.append(f"check --full: {bad[0]}")
            return "bad"
    return s


def fork_convert(src: str, dst: str, flags: list) -> int:
    """A child process running ``onemodel convert SRC DST FLAGS``."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            sys.argv = ["onemodel", "convert", src, dst, "--quiet", *flags]
            try:
                cli_main()
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
        finally:
            os._exit(code)
    return pid


def wait(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def run(layout: str, directory: str, seed: int) -> dict:
    rng = random.Random(seed)
    flags = LAYOUTS[layout]
    src = {v: os.path.join(directory, f"src_{v}", "m.onnx") for v in "AB"}
    for v in "AB":
        os.makedirs(os.path.dirname(src[v]))
        build(v, src[v], external=layout == "keep")
    out = os.path.join(directory, "out")
    os.makedirs(out)
    dst = os.path.join(out, "m.onnx")
    errors: list = []
    result = {"kills": {}, "races": {}, "reads": {}, "errors": errors}

    def count(part, s):
        result[part][s] = result[part].get(s, 0) + 1

    # one write and check here first: the forked writers start with every module imported
    warm = os.path.join(directory, "warm")
    os.makedirs(warm)
    sys.argv = ["onemodel", "convert", src["B"], os.path.join(warm, "m.onnx"), "--quiet", *flags]
    try:
        cli_main()
    except SystemExit as e:
        assert not e.code, e.code
    checked(os.path.join(warm, "m.onnx"), errors)
    # whole writes, timed: the kills fall anywhere in one (the slowest of three: on a loaded
    # machine one quick write made a window that killed every later one before it was done)
    duration = 0.0
    for _ in range(3):
        t0 = time.perf_counter()
        assert wait(fork_convert(src["A"], dst, flags)) == 0
        duration = max(duration, time.perf_counter() - t0)
    current = "A"
    result["seconds"] = {"write": round(duration, 3)}
    t0 = time.perf_counter()
    for i in range(50):
        other = "B" if current == "A" else "A"
        pid = fork_convert(src[other], dst, flags)
        time.sleep(rng.uniform(0, duration * 1.2))
        try:
            os.kill(pid, signal.SIGKILL if i % 2 == 0 else signal.SIGINT)
        except ProcessLookupError:
            pass
        wait(pid)
        s = checked(dst, errors) if i % 5 == 0 else state(dst, errors)
        count("kills", s)
        if s in ("A", "B"):
            current = s
    # first writes killed: a model, whole, or no visible file; the next write needs no --force
    result["first"] = {}
    for i in range(6):
        fresh = os.path.join(directory, f"first{i}")
        os.makedirs(fresh)
        pid = fork_convert(src["B"], os.path.join(fresh, "m.onnx"), flags)
        time.sleep(rng.uniform(0, duration * 1.2))
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        wait(pid)
        visible = [n for n in os.listdir(fresh) if not n.startswith(".")]
        s = state(os.path.join(fresh, "m.onnx"), errors) if "m.onnx" in visible else \
            ("none" if not visible else "orphans")
        result["first"][s] = result["first"].get(s, 0) + 1
        if wait(fork_convert(src["A"], os.path.join(fresh, "m.onnx"), flags)) != 0:
            errors.append(f"the write after a killed first write into {fresh} failed")
        hidden = [n for n in os.listdir(fresh) if n.startswith(".")]
        if hidden:
            errors.append(f"left after a whole write: {hidden}")
    result["seconds"]["kills"] = round(time.perf_counter() - t0, 2)
    t0 = time.perf_counter()
    # two writers at once
    exits = []
    for _ in range(20):
        a, b = fork_convert(src["A"], dst, flags), fork_convert(src["B"], dst, flags)
        exits.append(sorted((wait(a), wait(b))))
        count("races", state(dst, errors))
    result["race_exits"] = exits
    result["seconds"]["races"] = round(time.perf_counter() - t0, 2)
    t0 = time.perf_counter()
    # a reader loop against a writer loop
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            for j in range(6):
                w = fork_convert(src["B" if j % 2 == 0 else "A"], dst, flags)
                if wait(w) != 0:
                    break
            else:
                code = 0
        finally:
            os._exit(code)
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        count("reads", state(dst, errors))
        time.sleep(0.002)  # leave the writer some of the machine
    result["seconds"]["reads"] = round(time.perf_counter() - t0, 2)
    # a whole write leaves no temporary, staged or lock file behind
    assert wait(fork_convert(src["A"], dst, flags)) == 0
    result["final"] = checked(dst, errors)
    result["leftovers"] = sorted(n for n in os.listdir(out) if n.startswith("."))
    if layout == "keep":  # a round trip keeps the source's files, byte for byte
        base = os.path.dirname(src["A"])
        result["same_as_source"] = all(
            open(os.path.join(out, n), "rb").read() == open(os.path.join(base, n), "rb").read()
            for n in ("m.onnx", "w.bin"))
    return result


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
