"""The safetensors layout (issue 15) on a generated ~1 GB model, whole processes side by side.

The model is tests/safetensors_layout/st_big.py's (loaded by its path): float32 and float16
tensors of 200-270 MB and small ones (``--gb`` scales the large ones), its weights in one
external data file of real bytes (not a sparse file), generated in a temporary directory.

(a) Conversion: ``onemodel convert big.onnx out/model.onnx --layout safetensors --threshold 0``
    (every initializer into ``model.safetensors``, 64-byte aligned, padding entries between) and
    the same with ``--max-shard-size`` (``--shard-mb``, default 300: shards and their index),
    against ``cp`` of the data file (the same bytes). Target: <= 1.5x cp. A third row converts
    the model with its data file at onemodel's default 4096-byte alignment (written once,
    untimed) with ``--align 4096``: source and destination offsets are then congruent modulo the
    page size and the tensors are copied with ``copy_file_range``, as cp copies, where the
    64-byte layout copies them with ``splice`` through a pipe (storage/local.py). The start-up
    of the command (interpreter, imports, the CLI) is shown by the same conversion of a model
    of one 4 KB tensor.
(b) Reading one tensor (``--tensor``, default the largest) of the converted model:
    ``onemodel.load`` of ``model.onnx`` and that tensor's ``numpy()`` copied (``np.array``; a
    row for the view alone too), against ``safetensors.safe_open(model.safetensors, "np")`` and
    ``get_tensor`` (which returns a copy). Target: <= 2x. The copy is numpy's: on a kernel with
    transparent huge pages in ``madvise`` mode numpy asks for huge pages for large arrays, whose
    allocation may stall on compaction; a row with ``NUMPY_MADVISE_HUGEPAGE=0`` shows the copy
    without.

Every command is a whole process (interpreter start and imports included) run under
``/usr/bin/time -f %M`` for its peak RSS; each runs once untimed first (bytecode and page
caches), then ``--repeat`` rounds taking turns; median and best wall time are reported, ratios
median to median and best to best (the targets are judged median to median). Before each
conversion or copy its output is removed and ``sync`` runs, so no run pays for another's
writeback; all reads come from the page cache (the machine's memory must hold the model twice).

    python benchmarks/safetensors.py [--gb 1] [--repeat 5] [--shard-mb 300] [--tensor NAME]
                                     [--dir DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import textwrap

import _timing
from check import run

PY = sys.executable
ONEMODEL = os.path.join(os.path.dirname(PY), "onemodel")

OURS_READ = textwrap.dedent("""
    import sys
    import numpy as np
    import onemodel
    with onemodel.load(sys.argv[1]) as m:
        t = next(t for t in m.graph.initializers if t.name == sys.argv[2])
        a = t.numpy()
        if sys.argv[3] == "copy":
            a = np.array(a)
        print(a.shape, a.dtype, a.reshape(-1)[-1])
""")

THEIRS_READ = textwrap.dedent("""
    import sys
    from safetensors import safe_open
    with safe_open(sys.argv[1], "np") as f:
        a = f.get_tensor(sys.argv[2])
    print(a.shape, a.dtype, a.reshape(-1)[-1])
""")


def _st_big():
    path = pathlib.Path(__file__).parents[1] / "tests" / "safetensors_layout" / "st_big.py"
    spec = importlib.util.spec_from_file_location("st_big", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _scaled(specs, gb: float):
    """The specs with the first dimension of every tensor of 1M elements or more scaled by
    ``gb``."""
    out = []
    for name, code, dims in specs:
        n = 1
        for d in dims:
            n *= d
        if n >= 1 << 20 and gb != 1:
            dims = [max(1, round(dims[0] * gb))] + list(dims[1:])
        out.append((name, code, dims))
    return out


def _emptied(directory: str):
    def before() -> None:
        for name in os.listdir(directory):
            os.unlink(os.path.join(directory, name))
        os.sync()
    return before


def _sides(cmds: dict, repeat: int, env: dict) -> tuple[dict, dict]:
    """``cmds``: label -> (command, before or None[, environment additions]). Each once
    untimed, then ``repeat`` rounds taking turns (:func:`_timing.interleaved`); returns
    ((median, best) seconds, largest peak RSS) by label."""
    envs = {k: dict(env, **(v[2] if len(v) > 2 else {})) for k, v in cmds.items()}
    for k, (cmd, before, *_) in cmds.items():
        if before is not None:
            before()
        run(cmd, envs[k])
    rss: dict = {k: [] for k in cmds}

    def case(key, cmd, before, *_):
        def fn():
            rss[key].append(run(cmd, envs[key])[1])
        return fn, before

    times = _timing.interleaved({k: case(k, *v) for k, v in cmds.items()}, repeat)
    return ({k: (statistics.median(v), min(v)) for k, v in times.items()},
            {k: max(v) for k, v in rss.items()})


def _row(label: str, seconds: tuple, peak: int, base: tuple | None, size: int | None) -> str:
    """One line: median and best wall time, speed (median), ratios to ``base`` (median to
    median, best to best), peak RSS."""
    (med, best) = seconds
    ratio = f"{med / base[0]:5.2f}x {best / base[1]:5.2f}x" if base else " " * 13
    speed = f"{size / med / 1e9:5.2f} GB/s" if size else " " * 10
    return (f"  {label:<54} {med * 1e3:6.0f} {best * 1e3:6.0f} ms  {speed}"
            f"  {ratio}  {peak / 1e6:5.0f} MB")


def main() -> None:
    """Generate the model, time both comparisons, print the table and the targets."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=1.0, help="scale of the large tensors (1: ~1 GB)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--shard-mb", type=int, default=300, help="--max-shard-size in MB (10^6)")
    ap.add_argument("--tensor", help="tensor to read (default: the largest)")
    ap.add_argument("--dir", help="work directory (default: a temporary one)")
    a = ap.parse_args()
    st_big = _st_big()
    specs = _scaled(st_big.BIG_SPECS, a.gb)
    sizes = {name: st_big.nbytes(code, dims) for name, code, dims in specs}
    tensor = a.tensor or max(sizes, key=sizes.get)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "ONEMODEL_PURE_PYTHON")}
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        src, _ = st_big.write_big_model(d, specs)
        data = src + ".data"
        size = os.path.getsize(data)
        outs = {k: os.path.join(d, k) for k in ("one", "shards", "cp", "aligned", "one4k",
                                                "tiny", "tiny_out")}
        for p in outs.values():
            os.mkdir(p)
        _timing.warm_page_cache(data)
        convert = [ONEMODEL, "convert", src, os.path.join(outs["one"], "model.onnx"),
                   "--layout", "safetensors", "--threshold", "0", "-q"]
        shards = [ONEMODEL, "convert", src, os.path.join(outs["shards"], "model.onnx"),
                  "--layout", "safetensors", "--threshold", "0", "--max-shard-size",
                  str(a.shard_mb * 10**6), "-q"]
        cp = ["cp", data, os.path.join(outs["cp"], "copy.data")]
        # the same model with its data file at onemodel's default 4096-byte alignment, written
        # again with --align 4096: source and destination offsets congruent modulo the page
        # size, so the copy is copy_file_range (as cp's) instead of splice through a pipe
        aligned = os.path.join(outs["aligned"], "big.onnx")
        run([ONEMODEL, "convert", src, aligned, "--external-data", "big.data", "--threshold",
             "0", "-q"], env)
        convert4k = [ONEMODEL, "convert", aligned, os.path.join(outs["one4k"], "model.onnx"),
                     "--layout", "safetensors", "--threshold", "0", "--align", "4096", "-q"]
        # the command's start-up: the same conversion of a model of one 4 KB tensor
        tiny, _ = st_big.write_big_model(outs["tiny"], [("w", specs[0][1], [1024])])
        startup = [ONEMODEL, "convert", tiny, os.path.join(outs["tiny_out"], "model.onnx"),
                   "--layout", "safetensors", "--threshold", "0", "-q"]
        med, peak = _sides({"convert": (convert, _emptied(outs["one"])),
                            "shards": (shards, _emptied(outs["shards"])),
                            "convert4k": (convert4k, _emptied(outs["one4k"])),
                            "cp": (cp, _emptied(outs["cp"])),
                            "startup": (startup, _emptied(outs["tiny_out"]))}, a.repeat, env)
        n_shards = sum(1 for n in os.listdir(outs["shards"]) if n.endswith(".safetensors"))
        # (b) on the one-file conversion (the last round left it in place)
        model = os.path.join(outs["one"], "model.onnx")
        st = os.path.join(outs["one"], "model.safetensors")
        rmed, rpeak = _sides({
            "copy": ([PY, "-c", OURS_READ, model, tensor, "copy"], None),
            "view": ([PY, "-c", OURS_READ, model, tensor, "view"], None),
            "copy4k": ([PY, "-c", OURS_READ, model, tensor, "copy"], None,
                       {"NUMPY_MADVISE_HUGEPAGE": "0"}),
            "theirs": ([PY, "-c", THEIRS_READ, st, tensor], None)}, a.repeat, env)
    print(f"\n== {size / 1e9:.2f} GB of weights in {len(specs)} tensors, {a.repeat} runs each, "
          f"{os.cpu_count()} CPUs; whole processes")
    print(f"  {'':<54} {'median':>6} {'best':>6}     {'speed':>10}  {'ratio (med, best)':>13}"
          f"  peak RSS")
    print("(a) conversion to the safetensors layout")
    print(_row("onemodel convert --layout safetensors", med["convert"], peak["convert"],
               med["cp"], size))
    print(_row(f"onemodel convert ... --max-shard-size {a.shard_mb}MB ({n_shards} shards)",
               med["shards"], peak["shards"], med["cp"], size))
    print(_row("  the same from a 4096-aligned data file, --align 4096", med["convert4k"],
               peak["convert4k"], med["cp"], size))
    print(_row("cp of the data file", med["cp"], peak["cp"], None, size))
    print(_row("start-up: onemodel convert of a 4 KB model", med["startup"], peak["startup"],
               None, None))
    t = sizes[tensor]
    print(f"(b) reading {tensor} ({t / 1e6:.0f} MB)")
    print(_row("onemodel.load + numpy() copied (np.array)", rmed["copy"], rpeak["copy"],
               rmed["theirs"], t))
    print(_row("  the same, NUMPY_MADVISE_HUGEPAGE=0", rmed["copy4k"], rpeak["copy4k"],
               rmed["theirs"], t))
    print(_row("onemodel.load + numpy() (a view of the map)", rmed["view"], rpeak["view"],
               rmed["theirs"], t))
    print(_row("safe_open(..., 'np') + get_tensor", rmed["theirs"], rpeak["theirs"], None, t))
    targets = [("conversion", med["convert"][0] / med["cp"][0], 1.5),
               ("sharded conversion", med["shards"][0] / med["cp"][0], 1.5),
               ("one tensor (copy)", rmed["copy"][0] / rmed["theirs"][0], 2.0)]
    print()
    for label, r, target in targets:
        print(f"{label}: {r:.2f}x median to median (target <= {target}x): "
              f"{'met' if r <= target else 'NOT met'}")
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
