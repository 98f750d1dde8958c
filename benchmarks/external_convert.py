"""External data conversion in bounded memory, against ``cp`` of the same bytes (ONNX Part 1,
Clause 13; issue: external data, item 3).

Generates, in a temporary directory, an ONNX model whose ~4 GB of float32 weights are in one
external data file (``--gb`` to change; tensors of 64 MiB), then runs, each in its own child
process:

* ``cp`` of the data file (the baseline: GNU cp copies with ``copy_file_range`` / reflinks);
* ONNX (external) -> OneModel;
* OneModel -> ONNX (external, keep layout): checked byte for byte against the original .onnx
  file and data file;
* ONNX (external) -> ONNX (one data file, 64 KiB alignment): a relayout;
* ONNX (external) -> ONNX inline (``force``: the file is past protobuf's 2 GiB limit);
* ONNX inline -> OneModel.

For each it prints the best time of ``--repeat`` runs of the conversion (measured in the child,
interpreter start and imports excluded), its speed relative to the best ``cp`` time (``cp time /
time``: 1.0 is as fast as cp; the target is at least 0.67), and the child's peak RSS (``VmHWM``;
the target is under 300 MB). The page cache is warmed by reading the data once, and ``sync`` runs
before every timed run, so no run pays for the writeback of another and every run reads from the
page cache: the comparison is one of copy paths, not of disk speed.

    python benchmarks/external_convert.py [--gb 4] [--dir /path/with/space] [--keep]

Needs ``onnx`` (to generate the model) and about 6 x ``--gb`` of free disk space.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import _timing

PY = sys.executable
TENSOR_BYTES = 64 << 20

# The child reports VmHWM (peak RSS of its own address space): ru_maxrss would include what the
# parent had resident when it forked.
CHILD = r"""
import json, resource, sys, time
import onemodel
src, dst, opts = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
t = time.perf_counter()
onemodel.convert(src, dst, **opts)
dt = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
try:
    with open("/proc/self/status") as f:
        peak = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM:"))
except OSError:
    pass
print(json.dumps({"seconds": dt, "maxrss": peak}))
"""


def generate(directory: str, gb: float) -> tuple[str, str, int]:
    """model.onnx + model.onnx.data with ~gb GB of weights; ``(onnx path, data path, bytes)``."""
    import numpy as np
    from onnx import TensorProto, helper

    n = max(1, round(gb * (1 << 30) / TENSOR_BYTES))
    side = int((TENSOR_BYTES // 4) ** 0.5)  # 4096 x 4096 float32
    data_path = os.path.join(directory, "model.onnx.data")
    rng = np.random.default_rng(0)
    inits, nodes, prev = [], [], "x"
    with open(data_path, "wb") as f:
        for i in range(n):
            block = rng.integers(0, 1 << 32, TENSOR_BYTES // 4, dtype=np.uint32)
            offset = f.tell()
            f.write(block.tobytes())
            t = TensorProto(name=f"w{i}", data_type=TensorProto.FLOAT, dims=[side, side])
            t.data_location = TensorProto.EXTERNAL
            for k, v in (("location", "model.onnx.data"), ("offset", str(offset)),
                         ("length", str(TENSOR_BYTES))):
                e = t.external_data.add()
                e.key, e.value = k, v
            inits.append(t)
            nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"h{i}"]))
            prev = f"h{i}"
    graph = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("x", 1, ["N", side])],
                              [helper.make_tensor_value_info(prev, 1, ["N", side])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    onnx_path = os.path.join(directory, "model.onnx")
    with open(onnx_path, "wb") as f:
        f.write(model.SerializeToString())
    return onnx_path, data_path, n * TENSOR_BYTES


def settle() -> None:
    """Write back what earlier steps left dirty, so no step pays for another's writeback."""
    os.sync()


def run_cp(src: str, dst: str) -> float:
    """Seconds of one ``cp`` run to a fresh destination (process start included)."""
    settle()
    t = time.perf_counter()
    subprocess.run(["cp", src, dst], check=True)
    dt = time.perf_counter() - t
    os.unlink(dst)
    return dt


def _clear(directory: str, keep: str) -> None:
    for name in os.listdir(directory):
        p = os.path.join(directory, name)
        if p != keep and os.path.isfile(p):
            os.unlink(p)


def run_convert(src: str, dst: str, **opts) -> dict:
    """One conversion in a fresh child to a fresh destination: ``{seconds, maxrss}``."""
    _clear(os.path.dirname(dst), keep=src)
    settle()
    out = subprocess.run([PY, "-c", CHILD, src, dst, json.dumps(opts)], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gb", type=float, default=4.0, help="GB of external weights")
    ap.add_argument("--dir", default=None, help="where to put the files (default: TMPDIR)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per step; the best is shown")
    ap.add_argument("--keep", action="store_true", help="keep the generated files")
    args = ap.parse_args()

    root = tempfile.mkdtemp(prefix="onemodel-ext-bench-", dir=args.dir)
    try:
        d = {name: os.path.join(root, name) for name in ("src", "mid", "back", "relayout",
                                                           "inline", "cp")}
        for p in d.values():
            os.mkdir(p)
        onnx_path, data_path, nbytes = generate(d["src"], args.gb)
        _timing.warm_page_cache(data_path)
        cp_dst = os.path.join(d["cp"], "copy")
        print(f"model: {nbytes / 1e9:.2f} GB of external weights in "
              f"{nbytes // TENSOR_BYTES} tensors; python {sys.version.split()[0]}; "
              f"best of {args.repeat}, each run next to a cp of the data file")
        print(f"{'step':44} {'time':>8} {'cp':>8} {'vs cp':>7} {'peak RSS':>10}")
        print(f"{'':44} {'':>8} {'(next to it)':>16}")

        mid = os.path.join(d["mid"], "model.onemodel")
        back = os.path.join(d["back"], "model.onnx")
        inline = os.path.join(d["inline"], "model.onnx")
        steps = [
            ("ONNX (external) -> OneModel", onnx_path, mid, {}),
            ("OneModel -> ONNX (external, keep layout)", mid, back, {}),
            ("ONNX (external) -> ONNX (one file, 64 KiB)", onnx_path,
             os.path.join(d["relayout"], "model.onnx"),
             {"external_data": "weights.bin", "align": 65536}),
            ("ONNX (external) -> ONNX inline (force)", onnx_path, inline, {"layout": "inline",
                                                                         "force": True}),
            ("ONNX inline -> OneModel", inline, os.path.join(d["inline"], "model.onemodel"), {}),
        ]
        results = []
        for name, src, dst, opts in steps:
            cps, runs = [], []
            for _ in range(args.repeat):  # interleaved, so both see the same machine load
                cps.append(run_cp(data_path, cp_dst))
                runs.append(run_convert(src, dst, **opts))
            cp_time = min(cps)
            seconds = min(r["seconds"] for r in runs)
            rss = max(r["maxrss"] for r in runs)
            ratio = cp_time / seconds
            results.append((name, seconds, ratio, rss, cp_time))
            print(f"{name:44} {seconds:7.2f}s {cp_time:7.2f}s {ratio:6.2f}x "
                  f"{rss / 1e6:8.0f} MB", flush=True)
        same = filecmp.cmp(onnx_path, back, shallow=False) and \
            filecmp.cmp(data_path, os.path.join(d["back"], "model.onnx.data"), shallow=False)
        print(f"ONNX -> OneModel -> ONNX (keep): .onnx and data file byte-identical: {same}")
        best_cp = min(r[4] for r in results)
        worst = min(r[2] for r in results)
        worst_global = min(best_cp / r[1] for r in results)
        peak = max(r[3] for r in results)
        print(f"fastest cp of all: {best_cp:.2f} s ({nbytes / best_cp / 1e9:.2f} GB/s)")
        print(f"slowest step: {worst:.2f}x the speed of the cp next to it, {worst_global:.2f}x "
              f"the fastest cp (target >= 0.67); highest peak RSS: {peak / 1e6:.0f} MB "
              "(target < 300)")
        if not same:
            sys.exit(1)
    finally:
        if args.keep:
            print(f"files kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
