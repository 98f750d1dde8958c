"""Time and memory guards of issue 24, items 1 and 2 (ONNX Part 1, Clause 15.4): the hostile
models of tests/infer/hostile.py (a shape squared 27 times, `(A+B)` squared 12 and 28 times,
functions calling themselves or each other twice) through `check --full`, `infer` and
`run --random`, each command in a process of its own under an address-space limit, with a
timeout. Before the fix they took gigabytes and ran past 60 s; now each ends in about a second
(most of it starting Python) with under 100 MB resident, and a refusal is one line.

The bounds are generous for slow machines (20 s, 300 MB resident, 1.5 GiB of address space
for numpy's); what was measured is in the issue's report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.infer import hostile

TIMEOUT = 20.0
ADDRESS_SPACE = 3 << 29  # 1.5 GiB
MAX_RESIDENT_MB = 300

#: Runs one command of the CLI in a child under RLIMIT_AS and a timeout, and prints its exit
#: status, output, wall time and peak resident size (of that child alone) as JSON.
_GUARD = r"""
import json, resource, subprocess, sys, time
limit, timeout, args = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
def limited():
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
t = time.monotonic()
try:
    p = subprocess.run([sys.executable, "-m", "onemodel", *args], capture_output=True,
                       text=True, timeout=timeout, preexec_fn=limited)
    rc, out, err = p.returncode, p.stdout, p.stderr
except subprocess.TimeoutExpired:
    rc, out, err = None, "", ""
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"rc": rc, "out": out, "err": err, "seconds": time.monotonic() - t,
                  "resident_mb": peak / (1 << 20 if sys.platform == "darwin" else 1 << 10)}))
"""


def guarded(*args) -> dict:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", _GUARD, str(ADDRESS_SPACE), str(TIMEOUT),
                        *map(str, args)], capture_output=True, text=True, env=env,
                       timeout=TIMEOUT + 30)
    got = json.loads(p.stdout)
    assert got["rc"] is not None, f"{args}: still running after {TIMEOUT} s"
    assert got["resident_mb"] < MAX_RESIDENT_MB, (args, got["resident_mb"])
    assert "Traceback" not in got["err"] and "MemoryError" not in got["err"], got["err"]
    return got


#: model -> expected exit status of check --full, infer, run --random (None: not run), and the
#: words of the one line `run` refuses it with (None: it runs).
EXPECTED = {
    "squarings-27": (0, 0, 0, None),
    "squarings-27-int": (0, 0, 0, None),       # 2^(2^27) wraps to 0 in int64: shape [0]
    "square-plus-14": (0, 0, 2, "InvalidModel: ConstantOfShape shape: dimension -"),
    "binomial-12": (0, 0, 0, None),
    "binomial-28": (0, 0, 0, None),
    "self-calling": (1, 0, 2, "Unsupported: function local.F calls itself"),
    "self-calling-30": (1, 0, 2, "Unsupported: function local.F calls itself"),
    "mutual-30": (1, 0, 2, "Unsupported: function local.F"),
    "doubling-chain-31": (0, 0, 2, "Unsupported: the model's function calls expand to more "
                                   "than 32768 nodes of function bodies (MAX_EXPANDED_NODES)"),
    # an input of rank 1024 is past what numpy holds: one line, not an internal error
    "wide-30": (0, 0, 2, "Unsupported: input 'x' has rank 1024; the evaluator's arrays have at "
                         "most 64 axes (MAX_EVAL_RANK)"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_hostile_models_end_fast_in_little_memory(tmp_path, name):
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(hostile.HOSTILE[name]().SerializeToString())
    check_rc, infer_rc, run_rc, refusal = EXPECTED[name]
    check = guarded("check", "--full", path)
    assert check["rc"] == check_rc, check
    if check_rc:
        assert "OM122" in check["out"], check["out"]
    infer = guarded("infer", path, tmp_path / "out.onnx")
    assert infer["rc"] == infer_rc, infer
    # where inference met a limit, check --full says so (OM413) and so does infer
    noted = "left less known at a limit of inference (check --full lists them, OM413)"
    assert ("OM413" in check["out"]) == (noted in infer["out"]), (check["out"], infer["out"])
    assert ("OM413" in check["out"]) == (name not in ("doubling-chain-31", "squarings-27-int"))
    if run_rc is None:
        return
    run = guarded("run", "--random", path)
    assert run["rc"] == run_rc, run
    if refusal is not None:
        lines = run["err"].strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(refusal), run["err"]
