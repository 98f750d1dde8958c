"""Load and convert, side by side with the tools users pick today (ONNX <-> OneModel).

Generates its models in a temporary directory and prints, in one run, median times and ratios:

* graph-heavy: 50,000 small nodes and 20,000 tiny initializers: onemodel's ONNX reader (C decoder,
  and pure Python with ONEMODEL_PURE_PYTHON=1) vs ``onnx.load`` and ``onnx_ir.load``.
  Targets: onemodel (C) <= 1.0x onnx.load and <= 0.1x onnx_ir.load. The C read is also split into
  its decode and its tensor checks.
* weights: ~1 GB of float32 weights inline (``--gb``):
  - ``onemodel.load`` of the .onnx vs ``onnx.load``: time <= 0.1x and peak RSS growth <= 0.1x,
    measured in a child process per tool (VmHWM after the load minus the resident set just
    before it; ru_maxrss is not used: Linux carries it over from the parent across exec);
  - opening the .onemodel and reading one tensor vs ``safetensors.safe_open`` + ``get_tensor`` on
    the same weights: <= 2x;
  - ``onemodel convert`` .onnx -> .onemodel vs ``cp`` of the same file, both as commands to a
    fresh destination: <= 1.5x; and ``onemodel.convert()`` in process and ``onemodel --version``
    (start-up alone) for reference. These four take turns, round after round, and each writing
    run starts after an untimed ``sync``, so that no run pays for the writeback of the gigabyte
    another one left in the page cache.

* the commands people run first, each in a fresh process (``--only first-and-info`` runs these
  alone):
  - the first ``onemodel.load`` of the weights model in a fresh process, the import of the format
    plugins included (timed from after ``import onemodel`` to the model in hand; the import of
    onemodel itself is reported beside it), vs ``onnx.load`` in a fresh process (after ``import
    onnx``): <= 0.1x;
  - ``onemodel info`` of the graph-heavy model, the whole command from ``exec`` to exit, vs
    ``onnx.load`` plus the same walk (op counts, initializer count and bytes by element type)
    in process: <= 1.0x; also shown against a whole ``python`` process that imports onnx,
    loads and walks.
  Bytecode caches are written and used (a sandbox may set PYTHONDONTWRITEBYTECODE, which makes
  every fresh process compile what it imports).

onemodel reads through a memory map of the file, so raw_data values are views of the map. Needs
the bench extra: ``pip install -e ".[bench]"``.

    python benchmarks/load_convert.py [--gb 1.0] [--repeat 7] [--dir DIR] [--only first-and-info]
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap

import _timing

PY = sys.executable


def median_time(fn, repeat: int) -> float:
    """Median wall time of ``fn()`` in seconds, each run after a ``gc.collect()``; what it returns
    is dropped outside the timing."""
    return _timing.median_time(fn, repeat, collect=True)


def make_heavy(path: str) -> None:
    """50,000 nodes (20,000 Add with a 4-float initializer each, then 30,000 Relu), in a chain."""
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


def make_weights(path: str, gb: float) -> None:
    """A chain of 64 Gemm nodes over ``gb`` GiB of float32 weights, all inline (raw_data), each
    with FLOAT attributes ``alpha`` and ``beta`` as exporters write them for linear layers."""
    import numpy as np
    from onnx import helper, numpy_helper

    n = 64
    side = int((gb * (1 << 30) / 4 / n) ** 0.5)
    nodes, inits, prev = [], [], "x"
    base = np.arange(side * side, dtype=np.float32).reshape(side, side) / (side * side)
    for i in range(n):
        inits.append(numpy_helper.from_array(base + i, f"w{i}"))
        nodes.append(helper.make_node("Gemm", [prev, f"w{i}"], [f"h{i}"], name=f"gemm{i}",
                                      alpha=1.0, beta=1.0))
        prev = f"h{i}"
    g = helper.make_graph(nodes, "weights", [helper.make_tensor_value_info("x", 1, ["N", side])],
                          [helper.make_tensor_value_info(prev, 1, ["N", side])], inits)
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]).SerializeToString()
    with open(path, "wb") as f:
        f.write(data)


CHILD = textwrap.dedent("""
    import json, os, sys, time
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    tool, path = sys.argv[1], sys.argv[2]
    if tool == "onnx":
        import onnx
        load = lambda: onnx.load(path)
    elif tool == "onnx_ir":
        import onnx_ir
        load = lambda: onnx_ir.load(path)
    else:
        if tool == "onemodel-py":
            os.environ["ONEMODEL_PURE_PYTHON"] = "1"
        from onemodel.formats.onnx import read
        from onemodel.storage import LocalSource
        load = lambda: read(LocalSource(path))
    def status(key):  # VmHWM: peak resident set of this process image (not inherited by exec)
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) * 1024 for l in f if l.startswith(key + ":"))
    before, anon = rss(), status("RssAnon")
    assert status("VmHWM") < before + (64 << 20), "peak before the load is not the current size"
    t = time.perf_counter()
    m = load()
    dt = time.perf_counter() - t
    print(json.dumps({"seconds": dt, "rss_growth": max(status("VmHWM") - before, 0),
                      "anon_growth": status("RssAnon") - anon}))
""")


FIRST_CHILD = textwrap.dedent("""
    import json, sys, time
    tool, path = sys.argv[1], sys.argv[2]
    t0 = time.perf_counter()
    if tool == "onnx":
        import onnx
        t1 = time.perf_counter()
        m = onnx.load(path)
    else:
        import onemodel
        t1 = time.perf_counter()
        before = len(sys.modules)
        m = onemodel.load(path)
    t2 = time.perf_counter()
    print(json.dumps({"import": t1 - t0, "load": t2 - t1,
                      "modules": len(sys.modules) - before if tool != "onnx" else None}))
""")


def first_load(tool: str, path: str, repeat: int, env: dict) -> dict:
    """Medians over ``repeat`` fresh processes of the import of ``tool`` and of its first load
    of ``path`` (``{"import", "load", "modules"}``, seconds; ``modules``: how many modules the
    first ``onemodel.load`` imported)."""
    runs = []
    for _ in range(repeat):
        out = subprocess.run([PY, "-c", FIRST_CHILD, tool, path], capture_output=True, text=True,
                             check=True, env=env)
        runs.append(json.loads(out.stdout))
    return {k: statistics.median(r[k] for r in runs) if runs[0][k] is not None else None
            for k in runs[0]}


def onnx_walk(proto) -> dict:
    """What ``onemodel info`` counts, from an ``onnx.ModelProto``: nodes and op counts of every
    graph (subgraphs included), initializer count and raw bytes by element type."""
    from collections import Counter

    import onnx

    ops: Counter = Counter()
    by_type: dict = {}
    graphs = [proto.graph]
    while graphs:
        g = graphs.pop()
        for n in g.node:
            ops[f"{n.domain}.{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type] += 1
            for a in n.attribute:
                if a.HasField("g"):
                    graphs.append(a.g)
                graphs.extend(a.graphs)
        for t in g.initializer:
            count = 1
            for d in t.dims:
                count *= d
            e = by_type.get(t.data_type)
            if e is None:  # [count, bytes, bytes per element]
                e = by_type[t.data_type] = [
                    0, 0, onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize]
            e[0] += 1
            e[1] += count * e[2]
    return {"ops": dict(ops), "by_type": by_type}


def first_and_info(heavy: str, weights: str, repeat: int) -> list[str]:
    """The section of the commands people run first; returns its target lines."""
    import onnx

    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "ONEMODEL_PURE_PYTHON")}
    subprocess.run([PY, "-c", "import onemodel, onnx"], check=True, env=env)  # caches
    print(f"\n== first load in a fresh process ({os.path.getsize(weights) / 1e6:.0f} MB "
          f"inline), {repeat} processes each")
    ours = first_load("onemodel", weights, repeat, env)
    theirs = first_load("onnx", weights, max(3, repeat // 2), env)
    print(f"  import onemodel                          {fmt(ours['import'], 's')}")
    print(f"  first onemodel.load (plugin imports in)  {fmt(ours['load'], 's')}  "
          f"({ours['modules']:.0f} modules imported by it)")
    print(f"  import onnx                              {fmt(theirs['import'], 's')}")
    print(f"  onnx.load                                {fmt(theirs['load'], 's')}")

    print("\n== `onemodel info` of the graph-heavy model (whole process) vs onnx.load + walk")
    cli = [os.path.join(os.path.dirname(PY), "onemodel"), "info", heavy]
    subprocess.run(cli, check=True, env=env, stdout=subprocess.DEVNULL)
    walk = onnx_walk(onnx.load(heavy))
    info = json.loads(subprocess.run(cli[:2] + ["--json", heavy], check=True, env=env,
                                     capture_output=True, text=True).stdout)
    assert info["ops"] == walk["ops"] and info["initializers"]["count"] == sum(
        e[0] for e in walk["by_type"].values()), "the walk does not count what info counts"
    walk_child = [PY, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import onnx, "
                  "load_convert as b; b.onnx_walk(onnx.load(sys.argv[2]))",
                  os.path.dirname(os.path.abspath(__file__)), heavy]
    cases = {"`onemodel info` (command)": (
                 lambda: subprocess.run(cli, check=True, env=env, stdout=subprocess.DEVNULL),
                 None),
             "onnx.load + walk (in process)": (lambda: onnx_walk(onnx.load(heavy)), gc.collect),
             "onnx.load alone (in process)": (lambda: onnx.load(heavy), gc.collect),
             "python: import onnx, load, walk (process)": (
                 lambda: subprocess.run(walk_child, check=True, env=env), None)}
    times = _timing.interleaved(cases, repeat)
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in med.items():
        print(f"  {k:<40} {fmt(v, 's')}  (best {fmt(min(times[k]), 's').strip()}, "
              f"worst {fmt(max(times[k]), 's').strip()})")
    return [
        ratio_line("first onemodel.load (fresh) vs onnx.load", ours["load"], theirs["load"], 0.1),
        ratio_line("  the same with `import onemodel`", ours["load"] + ours["import"],
                   theirs["load"], 0.1),
        ratio_line("`onemodel info` heavy vs onnx.load + walk", med["`onemodel info` (command)"],
                   med["onnx.load + walk (in process)"], 1.0),
        ratio_line("  the same vs import onnx, load, walk (process)", med[
            "`onemodel info` (command)"], med["python: import onnx, load, walk (process)"], 1.0),
    ]


def child_load(tool: str, path: str) -> dict:
    """``{"seconds", "rss_growth"}`` of one load of ``path`` by ``tool`` in a fresh process."""
    env = dict(os.environ)
    env.pop("ONEMODEL_PURE_PYTHON", None)
    out = subprocess.run([PY, "-c", CHILD, tool, path], capture_output=True, text=True,
                         check=True, env=env)
    return json.loads(out.stdout)


def fmt(v: float, unit: str) -> str:
    return f"{v * 1000:9.1f} ms" if unit == "s" else f"{v / 2**20:9.1f} MiB"


def ratio_line(label: str, ours: float, theirs: float, target: float, unit: str = "s") -> str:
    ratio = ours / theirs if theirs else float("inf")
    verdict = "OK  " if ratio <= target else "MISS"
    return (f"{verdict} {label:<44} {fmt(ours, unit)} vs {fmt(theirs, unit)}   ratio "
            f"{ratio:6.3f}  (target <= {target})")


def _install_kind(package_dir: str) -> str:
    """How onemodel is installed. Run from a source tree (an editable install, as `make` sets
    up) every command also pays ~10 ms for the import hook of the editable install, which a
    wheel install does not have."""
    return "from site-packages" if "site-packages" in package_dir.split(os.sep) else (
        "from a source tree: editable install")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gb", type=float, default=1.0, help="GiB of weights in the second model")
    ap.add_argument("--repeat", type=int, default=7, help="timed runs per tool (median)")
    ap.add_argument("--dir", default=None, help="work directory (default: a temp dir, removed)")
    ap.add_argument("--only", choices=("all", "first-and-info"), default="all",
                    help="first-and-info: only the fresh-process first load and `info`")
    args = ap.parse_args()

    import numpy as np
    import onnx

    import onemodel

    work = args.dir or tempfile.mkdtemp(prefix="onemodel-load-convert-")
    os.makedirs(work, exist_ok=True)
    heavy, weights = os.path.join(work, "heavy.onnx"), os.path.join(work, "weights.onnx")
    if args.only == "first-and-info":  # needs onnx only (not the rest of the bench extra)
        try:
            for path, make in ((heavy, make_heavy), (weights, lambda p: make_weights(p, args.gb))):
                if not os.path.exists(path):
                    make(path)
                _timing.warm_page_cache(path)
            print(f"python {sys.version.split()[0]}, onnx {onnx.__version__}; onemodel "
                  f"{_install_kind(os.path.dirname(onemodel.__file__))}; repeat {args.repeat}")
            print("\n== targets\n" + "\n".join(first_and_info(heavy, weights, args.repeat)))
        finally:
            if not args.dir:
                shutil.rmtree(work, ignore_errors=True)
        return

    import onnx_ir
    from safetensors import safe_open
    from safetensors.numpy import save_file

    from onemodel.formats.onnx import read
    from onemodel.storage import LocalSource

    dec = importlib.import_module("onemodel.formats.onnx.wire_decode")
    checks = importlib.import_module("onemodel.formats.onnx.checks")

    try:
        if not os.path.exists(heavy):
            make_heavy(heavy)
        if not os.path.exists(weights):
            make_weights(weights, args.gb)
        for p in (heavy, weights):
            _timing.warm_page_cache(p)
        print(f"python {sys.version.split()[0]}, onnx {onnx.__version__}, "
              f"onnx_ir {onnx_ir.__version__}; C decoder: "
              f"{'in use' if dec._C is not None else 'NOT BUILT (' + str(dec._C_ERROR) + ')'}; "
              f"onemodel {_install_kind(os.path.dirname(onemodel.__file__))}")
        print(f"heavy.onnx {os.path.getsize(heavy) / 2**20:.1f} MiB, "
              f"weights.onnx {os.path.getsize(weights) / 2**30:.2f} GiB, repeat {args.repeat}")

        def ours(path, pure=False):
            def run():
                old = os.environ.pop("ONEMODEL_PURE_PYTHON", None)
                if pure:
                    os.environ["ONEMODEL_PURE_PYTHON"] = "1"
                try:
                    src = LocalSource(path)
                    return read(src)
                finally:
                    os.environ.pop("ONEMODEL_PURE_PYTHON", None)
                    if old is not None:
                        os.environ["ONEMODEL_PURE_PYTHON"] = old
            return run

        r = args.repeat
        print("\n== graph-heavy (50,000 nodes, 20,000 initializers)")
        h = {"onemodel read (C)": median_time(ours(heavy), r)}
        src = LocalSource(heavy)  # the C read in its two parts: decode, then the tensor checks
        t_dec = median_time(lambda: dec.decode(src.whole(), blob_source=src), r)
        seen = []
        dec.decode(src.whole(), blob_source=src, check=lambda root, ts: seen.append((root, ts)))
        root, tensors = seen.pop()
        t_chk = median_time(functools.partial(checks.check_tensors, root, tensors), r)
        n_tensors = len(tensors)
        del root, tensors
        src.close()
        h["onemodel read (pure Python)"] = median_time(ours(heavy, pure=True), max(3, r // 2))
        h["onnx.load"] = median_time(lambda: onnx.load(heavy), r)
        h["onnx_ir.load"] = median_time(lambda: onnx_ir.load(heavy), max(3, r // 2))
        for k, v in h.items():
            print(f"  {k:<32} {fmt(v, 's')}")
        print(f"  (C read = decode {fmt(t_dec, 's').strip()} + tensor checks "
              f"{fmt(t_chk, 's').strip()} for {n_tensors} tensors)")

        print(f"\n== weights ({os.path.getsize(weights) / 2**30:.2f} GiB of float32 inline)")
        w = {
            "onemodel read (C)": median_time(ours(weights), r),
            "onnx.load": median_time(lambda: onnx.load(weights), max(3, r // 2)),
            "onnx_ir.load": median_time(lambda: onnx_ir.load(weights), max(3, r // 2)),
        }
        for k, v in w.items():
            print(f"  {k:<32} {fmt(v, 's')}")
        kids = {tool: child_load(tool, weights) for tool in ("onemodel", "onnx")}
        rss = {tool: k["rss_growth"] for tool, k in kids.items()}
        for tool, k in kids.items():
            print(f"  {tool:<10} child: peak RSS growth {fmt(k['rss_growth'], 'B').strip()}, of "
                  f"which anonymous {fmt(k['anon_growth'], 'B').strip()} (the rest: pages of the "
                  "mapped file, shared with the page cache)" if tool == "onemodel" else
                  f"  {tool:<10} child: peak RSS growth {fmt(k['rss_growth'], 'B').strip()}")


        print("\n== open the .onemodel and read one tensor; convert")
        onemodel_path = os.path.join(work, "weights.onemodel")
        st_path = os.path.join(work, "weights.safetensors")
        onemodel.convert(weights, onemodel_path)
        if not os.path.exists(st_path):
            with onemodel.load(weights) as m:
                save_file({t.name: np.ascontiguousarray(t.numpy()) for t in
                           m.graph.initializers}, st_path)
        name = "w32"

        def ours_one():
            with onemodel.load(onemodel_path) as m:
                t = next(t for t in m.graph.initializers if t.name == name)
                return float(t.numpy()[0, 0])

        def st_one():
            with safe_open(st_path, framework="numpy") as f:
                return float(f.get_tensor(name)[0, 0])

        one = {"onemodel open + one tensor": median_time(ours_one, r),
               "safetensors safe_open + get_tensor": median_time(st_one, r)}
        cli = [os.path.join(os.path.dirname(PY), "onemodel"), "convert", weights,
               onemodel_path, "--quiet"]
        copy = os.path.join(work, "copy.onnx")

        # the command as a user runs it: bytecode caches written (a sandbox may set
        # PYTHONDONTWRITEBYTECODE, which makes every start compile the package), one warm-up run
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        subprocess.run(cli, check=True, env=env)
        fresh = _timing.fresh_destination
        conv_times = _timing.interleaved({
            "`onemodel convert` (command)": (
                lambda: subprocess.run(cli, check=True, env=env), fresh(onemodel_path)),
            "onemodel.convert() (in process)": (
                lambda: onemodel.convert(weights, onemodel_path), fresh(onemodel_path)),
            "`cp` (command)": (
                lambda: subprocess.run(["cp", weights, copy], check=True), fresh(copy)),
            "`onemodel --version` (start-up alone)": (
                lambda: subprocess.run(cli[:1] + ["--version"], check=True, env=env,
                                       stdout=subprocess.DEVNULL), None),
        }, r)
        conv = {k: statistics.median(v) for k, v in conv_times.items()}
        for k, v in one.items():
            print(f"  {k:<40} {fmt(v, 's')}")
        for k, v in conv.items():  # the spread: this machine's writeback makes runs vary
            print(f"  {k:<40} {fmt(v, 's')}  (best {fmt(min(conv_times[k]), 's').strip()}, "
                  f"worst {fmt(max(conv_times[k]), 's').strip()})")
        first = first_and_info(heavy, weights, r)
        print("\n== targets")
        print(ratio_line("graph-heavy: onemodel (C) vs onnx.load", h["onemodel read (C)"],
                         h["onnx.load"], 1.0))
        print(ratio_line("graph-heavy: onemodel (C) vs onnx_ir.load", h["onemodel read (C)"],
                         h["onnx_ir.load"], 0.1))
        print(ratio_line("weights: onemodel (C) vs onnx.load, time", w["onemodel read (C)"],
                         w["onnx.load"], 0.1))
        print(ratio_line("weights: onemodel vs onnx.load, peak RSS", rss["onemodel"], rss["onnx"],
                         0.1, unit="B"))
        print(ratio_line("open .onemodel + one tensor vs safetensors", one[
            "onemodel open + one tensor"], one["safetensors safe_open + get_tensor"], 2.0))
        print(ratio_line("`onemodel convert` .onnx -> .onemodel vs `cp`", conv[
            "`onemodel convert` (command)"], conv["`cp` (command)"], 1.5))
        print(ratio_line("onemodel.convert() in process vs `cp`", conv[
            "onemodel.convert() (in process)"], conv["`cp` (command)"], 1.5))
        print("\n".join(first))
        pure = h["onemodel read (pure Python)"]
        print(f"     (pure Python graph-heavy: {pure / h['onnx.load']:.2f}x onnx.load, "
              f"{pure / h['onnx_ir.load']:.3f}x onnx_ir.load)")
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
