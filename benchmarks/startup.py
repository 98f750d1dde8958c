"""Start-up: each command people run first, whole process, against onnxruntime running the same
model in a whole process.

On a small model (``testdata/models/cnn_dynamo.onnx`` by default) every command runs as a user
runs it, a fresh process each time, and is timed from ``exec`` to exit: ``onemodel --version``,
``info``, ``convert`` (.onnx -> .onemodel, a fresh destination each run), ``verify`` (the .onnx
against that .onemodel), ``verify --run`` and ``run --random``. The reference is a whole
``python`` process that imports numpy and onnxruntime, creates an ``InferenceSession`` of the
same model and runs it once on the same inputs (those ``run --random`` generates, seed 0,
saved once to a .npz the child loads), then hashes its outputs as ``run`` does. For scale it
also times ``python -c pass``, ``import numpy`` and ``import ml_dtypes`` (a dependency release
that makes its import slow shows there first: ml_dtypes 0.7.0 took 0.5 s).

All cases take turns, round after round, and the median of ``--repeat`` rounds is reported with
the ratio to the onnxruntime run. Target: ``onemodel run --random`` <= 1.0x that run.

Bytecode caches are written and used (one untimed warm-up run of each case): a sandbox may set
``PYTHONDONTWRITEBYTECODE``, which makes every start compile every module it imports.

    python benchmarks/startup.py [--model M.onnx] [--repeat 21]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import _timing

PY = sys.executable
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = ROOT / "testdata" / "models" / "cnn_dynamo.onnx"

ORT_CHILD = textwrap.dedent("""
    import hashlib, sys
    import numpy as np
    import onnxruntime as ort
    sess = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
    feeds = dict(np.load(sys.argv[2]))
    for o, v in zip(sess.get_outputs(), sess.run(None, feeds)):
        digest = hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest()
        print(o.name, v.shape, v.dtype, digest)
""")


def _inputs(model: str, path: str) -> None:
    """Save the inputs ``onemodel run --random`` (seed 0) generates for ``model`` to ``path``."""
    import numpy as np

    import onemodel
    from onemodel.evaluate import random_inputs

    with onemodel.load(model) as m:
        np.savez(path, **random_inputs(m, seed=0))


def _same_outputs(cli: str, model: str, npz: str, env: dict) -> None:
    """onemodel's run and onnxruntime's on the same inputs print the same output names, shapes
    and dtypes (the hashes may differ: float kernels round differently)."""
    ours = subprocess.run([cli, "run", "--random", model], capture_output=True, text=True,
                          env=env, check=True).stdout.split()
    theirs = subprocess.run([PY, "-c", ORT_CHILD, model, npz], capture_output=True, text=True,
                            env=env, check=True).stdout.split()
    if not ours or ours[0].rstrip(":") != theirs[0]:
        raise SystemExit(f"outputs differ: {ours} vs {theirs}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=str(DEFAULT_MODEL), help="a small ONNX model")
    ap.add_argument("--repeat", type=int, default=21, help="rounds (median)")
    args = ap.parse_args()

    import ml_dtypes
    import numpy
    import onnxruntime

    import onemodel

    cli = os.path.join(os.path.dirname(PY), "onemodel")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "ONEMODEL_PURE_PYTHON")}
    work = tempfile.mkdtemp(prefix="onemodel-startup-")
    try:
        model = args.model
        npz = os.path.join(work, "inputs.npz")
        om = os.path.join(work, "model.onemodel")
        _inputs(model, npz)
        _same_outputs(cli, model, npz, env)
        subprocess.run([cli, "convert", model, om, "--quiet"], check=True, env=env)

        def cmd(*argv, executable=cli):
            return lambda: subprocess.run([executable, *argv], check=True, env=env,
                                          stdout=subprocess.DEVNULL)

        out = os.path.join(work, "out.onemodel")

        def fresh_out() -> None:
            if os.path.exists(out):
                os.unlink(out)

        cases = {
            "python -c pass": (cmd("-c", "pass", executable=PY), None),
            "python -c 'import numpy'": (cmd("-c", "import numpy", executable=PY), None),
            "python -c 'import ml_dtypes'": (cmd("-c", "import ml_dtypes", executable=PY), None),
            "onnxruntime: import, session, run": (cmd("-c", ORT_CHILD, model, npz,
                                                      executable=PY), None),
            "onemodel --version": (cmd("--version"), None),
            "onemodel info": (cmd("info", model), None),
            "onemodel convert (.onnx -> .onemodel)": (
                cmd("convert", model, out, "--quiet"), fresh_out),
            "onemodel verify (.onnx vs .onemodel)": (cmd("verify", model, om), None),
            "onemodel verify --run": (cmd("verify", model, om, "--run"), None),
            "onemodel run --random": (cmd("run", "--random", model), None),
        }
        for fn, before in cases.values():  # warm-up: bytecode caches, page cache
            if before is not None:
                before()
            fn()
        times = _timing.interleaved(cases, args.repeat)
        med = {k: statistics.median(v) for k, v in times.items()}
        ort_time = med["onnxruntime: import, session, run"]

        with open(model, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()[:12]
        print(f"python {sys.version.split()[0]}, numpy {numpy.__version__}, ml_dtypes "
              f"{ml_dtypes.__version__}, onnxruntime {onnxruntime.__version__}; onemodel from "
              f"{os.path.dirname(onemodel.__file__)}; OPENBLAS_CORETYPE "
              f"{os.environ.get('OPENBLAS_CORETYPE', 'unset')}")
        print(f"model {model} ({os.path.getsize(model)} bytes, sha256 {digest}...), "
              f"{args.repeat} rounds, medians")
        print(f"\n{'case':<40} {'median':>9} {'best':>9} {'worst':>9} {'vs ort':>7}")
        for k, v in med.items():
            print(f"{k:<40} {v * 1000:7.1f} ms {min(times[k]) * 1000:6.1f} ms "
                  f"{max(times[k]) * 1000:6.1f} ms {v / ort_time:6.2f}x")
        ratio = med["onemodel run --random"] / ort_time
        print(f"\n{'OK  ' if ratio <= 1.0 else 'MISS'} `onemodel run --random` vs the same run "
              f"with onnxruntime (whole process): {ratio:.2f}x (target <= 1.0)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
