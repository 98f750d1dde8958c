"""The evaluator side by side: onemodel vs onnx.reference.ReferenceEvaluator vs onnxruntime.

Three models of testdata/models, a CNN (cnn_dynamo.onnx), a transformer encoder
(transformer_dynamo.onnx) and a YOLO-style detector (detector_legacy.onnx), at batch sizes that
make the run non-trivial (the transformer at two sizes: where per-node work is small, and where
the matrix products dominate); ``--model FILE@DIM=N,...`` adds other models (the real
detectors of the pip wheels: nudenet, rapidocr_onnxruntime's PP-OCRv4 det, ddddocr's det, magika),
timed without the reference evaluator (minutes a run there). Every engine
runs in its own process, prepares the model once (``onemodel.evaluate.Session``,
``ReferenceEvaluator``, ``onnxruntime.InferenceSession`` with one intra-op and one inter-op
thread) and is warmed up with one run; then the median of ``--repeat`` timed runs is taken (for
the reference evaluator, which is slow, half as many, at least 3). All engines run
one-threaded: ``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS`` are set to 1
before numpy is imported (numpy's BLAS serves both onemodel and the reference evaluator). The
outputs of the engines are checked against each other (rtol 1e-4, atol 1e-5) before any timing
is reported.

onemodel's session is created with ``tune_malloc=True``: it keeps freed memory mapped for the
next run (onemodel/evaluate/memory.py; opt-in, since it is a process-wide setting), which saves
the page faults of re-allocating large intermediates; for comparison the reference evaluator is
also timed with the same glibc setting (``ref+malloc``, given through the environment).

Targets: onemodel at least 3x faster than the reference evaluator (issue 5); issue 13: the
transformer encoder at [32, 128] within 1.0x of onnxruntime, the CNN within 2.0x; issue 24: the
CNN and the real detectors within 2.0x. The ratio to onnxruntime is reported.

``onemodel+numpy`` is onemodel with ``ONEMODEL_PURE_PYTHON=1``: every kernel in numpy, without
the compiled float32 kernels of ``onemodel/evaluate/_ckernels.c`` (Conv, Softmax's exponentials).

``--cpu`` times the process's CPU time instead of wall time: on a machine shared with other
jobs, the time a process waits for a core is then left out (the cache it shares is not).

    .venv/bin/python benchmarks/evaluate.py [--repeat 7] [--markdown] [--cpu]
        [--model nudenet/320n.onnx@batch=1,height=320,width=320 ...]
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import pathlib  # noqa: E402
import platform  # noqa: E402

import numpy as np  # noqa: E402
from _timing import median_time  # noqa: E402

from onemodel.evaluate.memory import MMAP_THRESHOLD, TRIM_THRESHOLD  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
MODELS = ROOT / "testdata" / "models"

#: (label, file, dimension variables, what the input is)
CASES = [
    ("CNN", "cnn_dynamo.onnx", {"batch": 32}, "images [32, 3, 32, 32]"),
    ("transformer encoder", "transformer_dynamo.onnx", {"batch": 16, "seq": 64},
     "tokens [16, 64] of a 100-word vocabulary"),
    ("transformer encoder", "transformer_dynamo.onnx", {"batch": 32, "seq": 128},
     "tokens [32, 128] of a 100-word vocabulary"),
    ("detector", "detector_legacy.onnx", {"batch": 32}, "images [32, 3, 64, 64]"),
]
TARGET_VS_REFERENCE = 3.0


def feeds_for(model, dims: dict) -> dict:
    from onemodel.evaluate import random_inputs

    feeds = random_inputs(model, seed=0, dims=dims)
    rng = np.random.default_rng(0)
    for name, value in feeds.items():
        if value.dtype == np.int64:  # token ids over the whole vocabulary
            feeds[name] = rng.integers(0, 100, size=value.shape, dtype=np.int64)
    return feeds


def cpu_median(fn, repeat: int) -> float:
    """Median process CPU time in seconds of ``repeat`` calls of ``fn()`` after one warm-up."""
    import time

    fn()
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return float(np.median(times))


def child(engine: str, file: str, dims: dict, repeat: int, out_path: str,
          clock: str = "wall") -> dict:
    """Time one engine on one model in this process (``clock``: ``wall`` or ``cpu``, the
    process's CPU time); save its outputs to ``out_path``."""
    import onemodel

    path = MODELS / file  # (an absolute path, from --model, stays itself)
    with onemodel.load(path) as model:
        feeds = feeds_for(model, dims)
        names = [o.name for o in model.graph.outputs]
        nodes = len(model.graph.nodes)
        if engine == "onemodel":
            from onemodel.evaluate import Session

            session = Session(model, tune_malloc=True)
            fn = lambda: list(session.run(feeds).values())  # noqa: E731
        elif engine == "reference":
            from onnx.reference import ReferenceEvaluator

            ref = ReferenceEvaluator(str(path))
            fn = lambda: ref.run(None, feeds)  # noqa: E731
            repeat = max(3, repeat // 2)
        else:
            import onnxruntime

            so = onnxruntime.SessionOptions()
            so.intra_op_num_threads = 1
            so.inter_op_num_threads = 1
            so.log_severity_level = 3
            sess = onnxruntime.InferenceSession(str(path), so,
                                                providers=["CPUExecutionProvider"])
            fn = lambda: sess.run(names, feeds)  # noqa: E731
        np.savez(out_path, **dict(zip(names, fn())))
        seconds = (cpu_median(fn, repeat) if clock == "cpu"
                   else median_time(fn, repeat, warmup=True))
    return {"seconds": seconds, "nodes": nodes}


def bench(label: str, file: str, dims: dict, repeat: int, clock: str = "wall",
          reference: bool = True) -> dict:
    """Each engine in its own process (nothing one engine does to the process -- imports, thread
    pools, onemodel's allocator setting, see onemodel/evaluate/memory.py -- reaches another);
    the outputs are compared before the times are reported. ``reference``: also time
    onnx.reference (minutes on a real detector: --model rows leave it out)."""
    import json
    import subprocess
    import sys
    import tempfile

    row = {"label": label, "file": file}
    outputs = {}
    with tempfile.TemporaryDirectory() as tmp:
        engines = ("onemodel", "onemodel+numpy", "reference", "reference+malloc",
                   "onnxruntime") if reference else ("onemodel", "onemodel+numpy", "onnxruntime")
        for engine in engines:
            out_path = os.path.join(tmp, f"{engine}.npz")
            env = dict(os.environ)
            if engine == "onemodel+numpy":  # without the compiled kernels (ckernels.py)
                env["ONEMODEL_PURE_PYTHON"] = "1"
            if engine == "reference+malloc":  # the reference with onemodel's glibc setting
                env["MALLOC_MMAP_THRESHOLD_"] = str(MMAP_THRESHOLD)
                env["MALLOC_TRIM_THRESHOLD_"] = str(TRIM_THRESHOLD)
            proc = subprocess.run([sys.executable, __file__, "--child",
                                   engine.split("+")[0], file, json.dumps(dims), str(repeat),
                                   out_path, clock], capture_output=True, text=True, check=True,
                                  env=env)
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            row[engine] = result["seconds"]
            row["nodes"] = result["nodes"]
            with np.load(out_path) as z:
                outputs[engine] = {k: z[k] for k in z.files}
    for name, value in outputs["onemodel"].items():
        for engine in [e for e in ("onemodel+numpy", "reference", "onnxruntime")
                       if e in outputs]:
            # (the cross-engine float32 defaults of onemodel.compare.CROSS_ENGINE)
            np.testing.assert_allclose(value, outputs[engine][name], rtol=1e-4, atol=1e-5,
                                       err_msg=f"{label}: onemodel vs {engine} on {name}")
    row["ours"], row["ort"] = row["onemodel"], row["onnxruntime"]
    row["ref"] = row.get("reference")
    row["ref_malloc"] = row.get("reference+malloc")
    row["numpy"] = row["onemodel+numpy"]
    return row


def _spin(seconds: float) -> None:
    """Keep a CPU busy for ``seconds`` before the first measurement: an idle virtual machine
    runs its first child process at a lower clock (measured here: the first engine of a run
    took up to 1.8x its time in later runs)."""
    import time

    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _cpu_model() -> str:
    """The CPU's model name and the SIMD extensions that decide the kernels' speed."""
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
    except OSError:
        return platform.processor() or "unknown CPU"
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines()
                 if line.startswith("model name")), "unknown CPU")
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines()
                  if line.startswith("flags")), [])
    simd = [f for f in ("avx2", "fma", "avx512f") if f in flags]
    return f"{name}, {' '.join(simd) or 'no AVX2'}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="timed runs per engine "
                        "(the reference evaluator: half, at least 3)")
    parser.add_argument("--markdown", action="store_true", help="also print a markdown table")
    parser.add_argument("--cpu", action="store_true", help="time the process's CPU time "
                        "instead of wall time (steadier on a machine shared with other jobs; "
                        "every engine runs on one thread)")
    parser.add_argument("--model", action="append", default=[], metavar="FILE[@DIM=N,...]",
                        help="also time this model (its dimension variables set by @dims; "
                        "unset ones 1), without the reference evaluator: the real detectors of "
                        "the pip wheels (nudenet, rapidocr_onnxruntime, ddddocr)")
    parser.add_argument("--child", nargs=6,
                        metavar=("ENGINE", "FILE", "DIMS", "REPEAT", "OUT", "CLOCK"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        import json

        engine, file, dims, repeat, out_path, clock = args.child
        print(json.dumps(child(engine, file, json.loads(dims), int(repeat), out_path, clock)))
        return 0
    import onnx
    import onnxruntime

    print("threads: OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=MKL_NUM_THREADS=1 (onemodel, "
          "reference); onnxruntime intra_op_num_threads=1, inter_op_num_threads=1")
    print(f"python {platform.python_version()}, numpy {np.__version__}, onnx {onnx.__version__}, "
          f"onnxruntime {onnxruntime.__version__}, {platform.machine()}, "
          f"{os.cpu_count()} CPUs ({_cpu_model()}); median of {args.repeat} runs after one "
          f"warm-up"
          f"{', process CPU time' if args.cpu else ', wall time'}")
    _spin(1.0)
    rows = []
    cases = [c + (True,) for c in CASES]
    for spec in args.model:
        file, _, text = spec.partition("@")
        dims = {k: int(v) for k, v in (d.split("=", 1) for d in text.split(",") if d)}
        path = pathlib.Path(file).resolve()
        cases.append((path.stem, str(path), dims, ", ".join(f"{k}={v}" for k, v in dims.items())
                      or "declared extents", False))
    for label, file, dims, what, reference in cases:
        r = bench(label, file, dims, args.repeat, "cpu" if args.cpu else "wall", reference)
        r["what"] = what
        rows.append(r)
    head = (f"{'model':<22}{'onemodel':>10}{'numpy only':>12}{'reference':>11}"
            f"{'ref+malloc':>12}{'onnxruntime':>13}{'ref/ours':>10}{'ours/ort':>10}")
    print(head)
    met = 0
    timed = [r for r in rows if r["ref"] is not None]

    def ms(v, width):
        return f"{v * 1e3:>{width}.1f}ms" if v is not None else f"{'-':>{width + 2}}"

    for r in rows:
        speedup = r["ref"] / r["ours"] if r["ref"] is not None else None
        met += speedup is not None and speedup >= TARGET_VS_REFERENCE
        print(f"{r['label'][:21]:<22}{ms(r['ours'], 8)}{ms(r['numpy'], 10)}{ms(r['ref'], 9)}"
              f"{ms(r['ref_malloc'], 10)}{ms(r['ort'], 11)}"
              f"{(f'{speedup:.1f}x' if speedup is not None else '-'):>10}"
              f"{r['ours'] / r['ort']:>9.2f}x   ({r['what']})")
    print("numpy only: onemodel with ONEMODEL_PURE_PYTHON=1 (without the compiled kernels of "
          "onemodel/evaluate/_ckernels.c)")
    print("ref+malloc: the reference evaluator with onemodel's glibc malloc setting "
          "(onemodel/evaluate/memory.py), for comparison")
    print(f"target: onemodel >= {TARGET_VS_REFERENCE:.0f}x faster than the reference evaluator: "
          f"met in {met} of {len(timed)} rows")
    if args.markdown:
        print()
        print("| model | input | onemodel | onemodel, numpy only | onnx.reference | reference, "
              "same malloc setting | onnxruntime (1 thread) | reference / onemodel | "
              "onemodel / onnxruntime |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            def cell(v):
                return f"{v * 1e3:.1f} ms" if v is not None else "-"
            name = pathlib.Path(r["file"]).name
            vs_ref = f"{r['ref'] / r['ours']:.1f}x" if r["ref"] is not None else "-"
            print(f"| {r['label']} (`{name}`, {r['nodes']} nodes) | {r['what']} | "
                  f"{cell(r['ours'])} | {cell(r['numpy'])} | {cell(r['ref'])} | "
                  f"{cell(r['ref_malloc'])} | {cell(r['ort'])} | {vs_ref} "
                  f"| {r['ours'] / r['ort']:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
