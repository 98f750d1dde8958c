"""Load and convert, side by side with the tools users pick today (issue: ONNX <-> OneModel).

Generates its models in a temporary directory and prints, in one run, median times and ratios:

* a model with ~1 GB of float32 weights inline (``--gb`` to change):
  - ``onemodel.load`` of the .onnx vs ``onnx.load``: time and peak RSS growth (targets <= 0.1x);
  - opening the .onemodel and reading one tensor vs ``safetensors.safe_open`` + ``get_tensor`` on
    the same weights (target <= 2x);
  - ``onemodel convert`` .onnx -> .onemodel vs ``cp`` of the same file (target <= 1.5x), both
    as commands, and the in-process API for reference;
* a graph-heavy model (50,000 small nodes, 20,000 tiny initializers):
  - onemodel's ONNX reader vs ``onnx.load`` (target <= 1.0x) and ``onnx_ir.load`` (<= 0.1x).

Peak RSS growth is measured in a child process per tool: the maximum resident set during the load
minus the resident set just before it. Needs the bench extra: ``pip install -e ".[bench]"``.

    python benchmarks/load_convert.py [--gb 1.0] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def make_big(path_onnx: str, path_st: str, gb: float) -> str:
    """A chain of MatMuls over ~gb GB of float32 weights, inline; returns one tensor's name."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper
    from safetensors.numpy import save_file

    n_tensors = 64
    per = int(gb * (1 << 30) / 4 / n_tensors)
    side = int(per ** 0.5)
    rng = np.random.default_rng(0)
    inits, nodes, weights = [], [], {}
    prev = "x"
    for i in range(n_tensors):
        w = rng.standard_normal((side, side), dtype=np.float32)
        weights[f"w{i}"] = w
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"h{i}"]))
        prev = f"h{i}"
    g = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("x", 1, ["N", side])],
                          [helper.make_tensor_value_info(prev, 1, ["N", side])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    with open(path_onnx, "wb") as f:
        f.write(m.SerializeToString())
    save_file(weights, path_st)
    return f"w{n_tensors // 2}"


def make_heavy(path: str) -> None:
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    nodes, inits, prev = [], [], "x"
    for i in range(50_000):
        if i < 20_000:
            inits.append(numpy_helper.from_array(np.full((4,), i, np.float32), f"w{i}"))
            nodes.append(helper.make_node("Add", [prev, f"w{i}"], [f"t{i}"], name=f"n{i}"))
        else:
            nodes.append(helper.make_node("Relu", [prev], [f"t{i}"], name=f"n{i}"))
        prev = f"t{i}"
    g = helper.make_graph(nodes, "heavy", [helper.make_tensor_value_info("x", 1, [4])],
                          [helper.make_tensor_value_info(prev, 1, [4])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), path)


CHILD = textwrap.dedent("""
    import json, sys, time
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096
    tool, path = sys.argv[1], sys.argv[2]
    if tool == "onnx":
        import onnx
        load = lambda: onnx.load(path)
    elif tool == "onnx_ir":
        import onnx_ir
        load = lambda: onnx_ir.load(path)
    else:
        import onemodel
        load = lambda: onemodel.load(path)
    def hwm():  # peak resident set of this process image (ru_maxrss survives exec on Linux)
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    before = rss()
    t = time.perf_counter()
    m = load()
    dt = time.perf_counter() - t
    peak = hwm()
    print(json.dumps({"seconds": dt, "rss_growth": max(peak - before, 0)}))
""")


def child_load(tool: str, path: str) -> dict:
    out = subprocess.run([PY, "-c", CHILD, tool, path], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def row(label: str, ours: float, theirs: float, target: float, unit: str = "s") -> str:
    ratio = ours / theirs if theirs else float("inf")
    ok = "OK " if ratio <= target else "MISS"
    fmt = (lambda v: f"{v * 1000:9.1f} ms") if unit == "s" else (lambda v: f"{v / 2**20:9.1f} MiB")
    return f"{ok} {label:<58} {fmt(ours)} vs {fmt(theirs)}  ratio {ratio:6.3f} (target <= {target})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default=None, help="work directory (default: a temp dir)")
    args = ap.parse_args()

    import onnx
    import onnx_ir
    from safetensors import safe_open

    import onemodel
    from onemodel.formats.onnx import read as onnx_read
    from onemodel.storage import LocalSource

    work = args.dir or tempfile.mkdtemp(prefix="onemodel-bench-")
    os.makedirs(work, exist_ok=True)
    big, st_path = os.path.join(work, "big.onnx"), os.path.join(work, "big.safetensors")
    om = os.path.join(work, "big.onemodel")
    heavy = os.path.join(work, "heavy.onnx")
    print(f"work dir {work}")
    name = make_big(big, st_path, args.gb)
    make_heavy(heavy)
    size = os.path.getsize(big)
    print(f"big.onnx {size / 2**30:.2f} GiB, heavy.onnx {os.path.getsize(heavy) / 2**20:.1f} MiB")
    lines = []

    # warm the page cache for everyone
    for p in (big, st_path, heavy):
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass

    # 1. load of the 1 GB .onnx: time (in process, medians) and peak RSS growth (children)
    t_ours = median_time(lambda: onemodel.load(big).close(), args.repeat)
    t_onnx = median_time(lambda: onnx.load(big), max(2, args.repeat // 2))
    lines.append(row("load 1 GB .onnx: onemodel.load vs onnx.load (time)", t_ours, t_onnx, 0.1))
    r_ours = child_load("onemodel", big)["rss_growth"]
    r_onnx = child_load("onnx", big)["rss_growth"]
    lines.append(row("load 1 GB .onnx: peak RSS growth", r_ours, r_onnx, 0.1, unit="B"))

    # 2. open the .onemodel and read one tensor vs safetensors
    onemodel.convert(big, om)

    def ours_one():
        with onemodel.load(om) as m:
            t = next(t for t in m.graph.initializers if t.name == name)
            a = t.numpy()
            float(a[0, 0])

    def st_one():
        with safe_open(st_path, framework="numpy") as f:
            a = f.get_tensor(name)
            float(a[0, 0])

    lines.append(row("open .onemodel + read one tensor vs safetensors safe_open+get_tensor",
                     median_time(ours_one, args.repeat), median_time(st_one, args.repeat), 2.0))

    # 3. convert .onnx -> .onemodel vs cp, as commands
    cli = [os.path.join(os.path.dirname(PY), "onemodel"), "convert", big, om, "--quiet"]
    cp_dst = os.path.join(work, "copy.onnx")

    def run_cli():
        subprocess.run(cli, check=True)

    def run_cp():
        subprocess.run(["cp", big, cp_dst], check=True)
        os.unlink(cp_dst)

    t_cli = median_time(run_cli, args.repeat)
    t_cp = median_time(run_cp, args.repeat)
    lines.append(row("`onemodel convert` .onnx -> .onemodel vs `cp` (commands)", t_cli, t_cp, 1.5))
    t_api = median_time(lambda: onemodel.convert(big, om), args.repeat)
    lines.append(row("onemodel.convert() in process vs `cp`", t_api, t_cp, 1.5))

    # 4. graph-heavy model: our ONNX reader vs onnx.load and onnx_ir.load
    def ours_heavy():
        src = LocalSource(heavy)
        onnx_read(src).close()

    t_h = median_time(ours_heavy, args.repeat)
    t_h_onnx = median_time(lambda: onnx.load(heavy), args.repeat)
    t_h_ir = median_time(lambda: onnx_ir.load(heavy), max(2, args.repeat // 2))
    lines.append(row("graph-heavy: onemodel ONNX reader vs onnx.load", t_h, t_h_onnx, 1.0))
    lines.append(row("graph-heavy: onemodel ONNX reader vs onnx_ir.load", t_h, t_h_ir, 0.1))
    import importlib
    dec = importlib.import_module("onemodel.formats.onnx.decode")
    print(f"\nC decoder: {'built' if dec._C is not None else 'not built'}")
    print("\n".join(lines))
    if not args.dir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
