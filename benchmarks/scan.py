"""``onemodel scan`` over a directory of many small models, against a plain Python loop of
``onnx.load`` + ``onnx.checker.check_model`` (issue 29).

The models, generated in a temporary directory (``--dir`` to keep them) by the test suite's
generator (tests/scan/_models.py, with the ``onnx`` package): ``--n`` (default 1000) valid ONNX
models, ten to a folder, each ``y = Relu(op(x, w))`` with about ``--weight-bytes`` (default 16 KiB)
of float32 weights, opsets 13 to 21, three producers; ``--layers L``: L such blocks in a chain
(2L nodes, L initializers sharing the weight bytes), closer to a real export.

Each command is timed as a whole process (its interpreter's start included; median of
``--repeat``, one untimed run of each first), and reported in models per second:

* ``onnx loop``: one process loading and checking every model with ``onnx``; ``onnx loop x2``:
  the same split over two processes (``multiprocessing``), the baseline of two cores;
* ``onemodel scan DIR -o OUT.jsonl`` plain, ``--check`` and ``--hash``, each with ``--jobs 1``
  (in one process), ``--jobs 2`` (two sandbox processes) and ``--dask ADDRESS`` on a
  ``dask.distributed.LocalCluster`` of two worker processes of one thread each, started here on
  127.0.0.1 (``--no-dask`` to skip);

with the ratios scan / onnx loop on the same cores (the target of issue 29: ``scan --check`` at
least 5x) and jobs 2 / jobs 1 (linear: 2x). Every run's output is checked to hold one row per
model.

Bytes read: ``rchar`` of ``/proc/self/io`` (bytes returned by ``read`` system calls) of a
``--jobs 1`` scan, less that of the same scan of a directory of one model (the interpreter's
imports), against the bytes of the other models. Files of 1 MiB or more are memory-mapped by
onemodel, not read, so this counts only for models smaller than that (as generated here). Linux
only (``/proc``).

``--s3``: the same models in a bucket of the moto S3 server (tests/servers/s3.py, started here on
127.0.0.1; the ``dev`` extra), scanned at ``s3://BUCKET/models/``, against the loop reading each
object whole with s3fs (``fs.cat``) before ``onnx.load_from_string`` and the check. Both read
through the same local server, so its latency (about a millisecond) is far below an object
store's (10-30 ms): the request counts are printed too, the part that grows with latency.

It needs ``onemodel.scan.row.scan_one`` and the ``onemodel scan`` command (the scan half of
issue 29), and says so if they are missing.

    python benchmarks/scan.py [--n 1000] [--weight-bytes 16384] [--layers 1] [--repeat 3]
                              [--dir DIR] [--no-dask]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import _timing

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "scan"))  # the test suite's generator

PY = sys.executable

# run as a script file, not with -c: spawned pool workers import the file's check()
ONNX_LOOP = textwrap.dedent("""
    import os, sys
    import onnx

    def check(path):
        onnx.checker.check_model(onnx.load(path))

    if __name__ == "__main__":
        paths = sorted(os.path.join(r, n) for r, _, names in os.walk(sys.argv[1])
                       for n in names if n.endswith(".onnx"))
        if sys.argv[2] == "1":
            for p in paths:
                check(p)
        else:
            import multiprocessing
            with multiprocessing.get_context("spawn").Pool(int(sys.argv[2])) as pool:
                pool.map(check, paths, chunksize=16)
""")

# the same loop over a bucket: every object read whole with s3fs (as onnx.load cannot open a URL)
ONNX_S3_LOOP = textwrap.dedent("""
    import json, sys
    import onnx
    import s3fs

    OPTIONS = json.loads(sys.argv[3])

    def check(key, fs=None):
        fs = fs or s3fs.S3FileSystem(skip_instance_cache=True, **OPTIONS)
        onnx.checker.check_model(onnx.load_from_string(fs.cat(key)))

    def check_all(keys):
        fs = s3fs.S3FileSystem(skip_instance_cache=True, **OPTIONS)
        for key in keys:
            check(key, fs)

    if __name__ == "__main__":
        fs = s3fs.S3FileSystem(skip_instance_cache=True, **OPTIONS)
        keys = sorted(k for k in fs.find(sys.argv[1]) if k.endswith(".onnx"))
        if sys.argv[2] == "1":
            check_all(keys)
        else:
            import multiprocessing
            n = int(sys.argv[2])
            with multiprocessing.get_context("spawn").Pool(n) as pool:
                pool.map(check_all, [keys[i::n] for i in range(n)])
""")

# `onemodel` run in this interpreter, writing /proc/self/io to the file $SCAN_BENCH_IO at exit
MEASURED_CLI = textwrap.dedent("""
    import atexit, os, sys

    def _io():
        with open("/proc/self/io") as f, open(os.environ["SCAN_BENCH_IO"], "w") as out:
            out.write(f.read())

    atexit.register(_io)
    sys.argv[0] = "onemodel"
    from onemodel.entry import main
    main()
""")


def require_scan() -> None:
    """Exit with one line unless the scan API and command are there."""
    try:
        from onemodel.scan.row import scan_one  # noqa: F401
    except ImportError as e:
        sys.exit(f"benchmarks/scan.py needs onemodel.scan.row.scan_one and the `onemodel scan` "
                 f"command (the scan half of issue 29), not here yet: {e}")
    r = subprocess.run([PY, "-m", "onemodel", "scan", "--help"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("benchmarks/scan.py needs the `onemodel scan` command (the scan half of issue "
                 f"29): `onemodel scan --help` exited {r.returncode}")


def write_models(root: str, n: int, weight_bytes: int, layers: int) -> int:
    """``n`` generated models under ``root`` (kept when they are there already, as ``--dir``
    left them); their total size in bytes."""
    from _models import make_model

    total = 0
    for i in range(n):
        name = f"run-{i % 10}/model-{i:04d}.onnx"  # (make_models' names)
        path = os.path.join(root, name)
        if os.path.exists(path):
            total += os.path.getsize(path)
            continue
        data = make_model(i, weight_bytes, layers)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        total += len(data)
    return total


def rows_in(path: str) -> list[dict]:
    """The JSON objects of a JSON lines file."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def run(cmd: list[str], env: dict | None = None) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode not in (0, 1):  # 1: some model has errors (a scan with --check may say so)
        sys.exit(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()[-2000:]}")


def time_scan(root: str, out: str, n: int, extra: list[str], repeat: int) -> float:
    """Median seconds of ``onemodel scan root -o out *extra`` (``out`` removed before each
    run); checks that the output holds ``n`` rows."""
    def remove():
        if os.path.exists(out):
            os.remove(out)

    cmd = [PY, "-m", "onemodel", "scan", root, "-o", out, *extra]
    seconds, _ = _timing.timed(lambda: run(cmd), repeat, warmup=True, before=remove)
    got = len(rows_in(out))
    if got != n:
        sys.exit(f"{' '.join(cmd)} wrote {got} rows for {n} models")
    return seconds


def rchar(root: str, out: str, extra: list[str], scratch: str) -> int:
    """Bytes a ``--jobs 1`` scan of ``root`` read through ``read`` system calls."""
    io_file = os.path.join(scratch, "io.txt")
    if os.path.exists(out):
        os.remove(out)
    run([PY, "-c", MEASURED_CLI, "scan", root, "-o", out, "--jobs", "1", *extra],
        env=dict(os.environ, SCAN_BENCH_IO=io_file))
    with open(io_file) as f:
        fields = dict(line.split(": ") for line in f.read().splitlines())
    return int(fields["rchar"])


def bytes_read(root: str, one: str, out: str, extra: list[str], scratch: str) -> int:
    """Bytes read for the models of ``root`` but one: a scan of it less a scan of ``one`` (a
    directory of one model), which reads the same imports."""
    return rchar(root, out, extra, scratch) - rchar(one, out, extra, scratch)


def start_cluster():
    """A LocalCluster of two worker processes of one thread each, on 127.0.0.1, or None
    (saying why) when dask.distributed is not installed."""
    try:
        from distributed import LocalCluster
    except ImportError:
        print("(no dask.distributed: the --dask rows are skipped; pip install "
              "'onemodel-onnx[dask]')")
        return None
    import logging

    return LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                        dashboard_address=None, silence_logs=logging.ERROR)


def start_bucket(root: str):
    """The moto S3 server, started, with the models of ``root`` under ``s3://BUCKET/models/``:
    ``(server, URL of all, URL of run-0, the onnx loop's extra arguments, scan's)``."""
    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    from servers.s3 import MotoS3

    server = MotoS3().start()
    bucket = server.create_bucket("scan-bench")
    fs = server.filesystem()
    for dirpath, _, names in os.walk(root):
        batch = {}
        for name in names:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                batch[f"{bucket}/models/{os.path.relpath(path, root)}"] = f.read()
        fs.pipe(batch)
    opts = server.storage_options
    scan_args = []
    for k, v in opts.items():
        for kk, vv in (v.items() if isinstance(v, dict) else [(None, v)]):
            scan_args += ["-S", f"{k}.{kk}={vv}" if kk else f"{k}={vv}"]
    return (server, f"s3://{bucket}/models/", f"s3://{bucket}/models/run-0/",
            [json.dumps(opts)], scan_args)


def bucket_bytes(server, url: str, out: str, scan_args: list[str], total: int) -> None:
    """Object bytes and requests a ``--jobs 1`` scan of ``url`` asks the server for (its
    request log), plain, ``--check`` and ``--hash``, against the bucket's bytes."""
    from servers.s3 import object_bytes_requested

    fs = server.filesystem()
    bucket_path = url.removeprefix("s3://")
    sizes = {f"/{p}": fs.size(p) for p in fs.find(bucket_path)}
    print(f"\nobject bytes asked of the server (its request log) by a --jobs 1 scan, of "
          f"{total} bytes of models:")
    for flag in ("", "--check", "--hash"):
        if os.path.exists(out):
            os.remove(out)
        with server.recording() as requests:
            run([PY, "-m", "onemodel", "scan", url, "-o", out, "--jobs", "1",
                 *([flag] if flag else []), *scan_args])
        got = object_bytes_requested(requests, sizes)
        gets = sum(e["method"] == "GET" for e in requests)
        print(f"  scan {flag:<8} {got:>12} bytes  {100 * got / total:6.1f}%  {gets} GET requests")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000, help="models (default 1000)")
    ap.add_argument("--weight-bytes", type=int, default=16 * 1024,
                    help="weight bytes per model, about (default 16384)")
    ap.add_argument("--layers", type=int, default=1,
                    help="blocks per model: 2 x LAYERS nodes, LAYERS initializers sharing the "
                    "weight bytes (default 1)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs of each (median)")
    ap.add_argument("--dir", help="generate the models here and keep them")
    ap.add_argument("--no-dask", action="store_true", help="skip the LocalCluster rows")
    ap.add_argument("--s3", action="store_true",
                    help="scan the models in a bucket of a local moto S3 server")
    args = ap.parse_args()
    require_scan()

    scratch = tempfile.mkdtemp(prefix="scan-bench-")
    cluster = server = None
    try:
        root = args.dir or os.path.join(scratch, "models")
        os.makedirs(root, exist_ok=True)
        total = write_models(root, args.n, args.weight_bytes, args.layers)
        one = os.path.join(scratch, "one")
        os.makedirs(one)
        shutil.copy(os.path.join(root, "run-0", "model-0000.onnx"), one)
        out = os.path.join(scratch, "out.jsonl")
        n = args.n
        print(f"{n} models of {2 * args.layers} nodes, {total / 2**20:.1f} MiB ({total // n} "
              f"bytes each on average), {os.cpu_count()} CPUs, median of {args.repeat}")

        where, tenth = root, os.path.join(root, "run-0")  # n/10 models: start-up vs per model
        m = len([f for f in os.listdir(tenth) if f.endswith(".onnx")])
        loop = os.path.join(scratch, "onnx_loop.py")
        with open(loop, "w") as f:
            f.write(ONNX_S3_LOOP if args.s3 else ONNX_LOOP)
        loop_args, scan_args = [], []
        if args.s3:
            server, where, tenth, loop_args, scan_args = start_bucket(root)
            print(f"in a bucket of the moto S3 server at {server.endpoint}")
        results, small = {}, {}
        for procs in ("1", "2"):
            for at, into in ((where, results), (tenth, small)):
                cmd = [PY, loop, at.removeprefix("s3://"), procs, *loop_args]
                into[("onnx loop", procs)], _ = _timing.timed(lambda: run(cmd), args.repeat,
                                                              warmup=True)
        if not args.no_dask:
            cluster = start_cluster()
        ways = [("1", ["--jobs", "1"]), ("2", ["--jobs", "2"])]
        if cluster is not None:
            ways.append(("dask 2", ["--dask", cluster.scheduler_address]))
        for flag in ("", "--check", "--hash"):
            for way, extra in ways:
                args_ = ([flag] if flag else []) + extra + scan_args
                results[(f"scan {flag}".strip(), way)] = time_scan(where, out, n, args_,
                                                                    args.repeat)
                small[(f"scan {flag}".strip(), way)] = time_scan(tenth, out, m, args_,
                                                                  args.repeat)

        def steady(key):  # models/s past the start-up: (n - m) / (T(n) - T(m))
            return (n - m) / max(1e-9, results[key] - small[key])

        print(f"\nwhole process ({n} models), and steady (the models past the first {m}: "
              f"(T({n}) - T({m})) / {n - m}, start-up left out):")
        print(f"{'command':<16} {'jobs':<7} {'seconds':>8} {'models/s':>9} "
              f"{'x onnx loop':>12} {'x jobs 1':>9} {'steady/s':>9} {'x onnx':>7} "
              f"{'x jobs 1':>9}")
        for (what, way), seconds in results.items():
            rate = n / seconds
            base_key = ("onnx loop", "1" if way == "1" else "2")
            base = n / results[base_key]
            single = results[(what, "1")]
            st = steady((what, way))
            print(f"{what:<16} {way:<7} {seconds:>8.2f} {rate:>9.0f} "
                  f"{rate / base:>11.2f}x {single / seconds:>8.2f}x {st:>9.0f} "
                  f"{st / steady(base_key):>6.2f}x {st / steady((what, '1')):>8.2f}x")

        if server is not None:
            bucket_bytes(server, where, out, scan_args, total)
        elif os.path.exists("/proc/self/io"):
            others = total - os.path.getsize(os.path.join(one, "model-0000.onnx"))
            print(f"\nbytes read (read() calls of a --jobs 1 scan, less a scan of one model's), "
                  f"of {others} bytes of models:")
            for flag in ("", "--check", "--hash"):
                got = bytes_read(root, one, out, [flag] if flag else [], scratch)
                print(f"  scan {flag:<8} {got:>12} bytes  {100 * got / others:6.1f}%")
    finally:
        if cluster is not None:
            cluster.close()
        if server is not None:
            server.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
