"""The ways to copy a tensor from file to file, side by side with cp (what LocalSink.copy_from
chooses between; docs/performance.md).

Copies ``--gb`` GiB of a generated file, from an offset that is not page-congruent with the
destination (as between ONNX raw_data and OneModel's 64-byte alignment), each way in a fresh
process (as a command would), to a fresh destination allocated with ``posix_fallocate`` (as the
writers do), after an untimed ``sync``. The ways take turns, round after round; medians, best
and worst are printed:

* ``splice``: file -> pipe -> file through one pipe of 1 MiB or 256 KiB (one copy);
* ``preadv + write``: through one 4 MiB buffer (two copies);
* ``copy_file_range`` at those offsets (the kernel's own splice);
* ``cp`` of the whole file (page-congruent ``copy_file_range``, no preallocation).

    python benchmarks/copy_primitives.py [--gb 1.0] [--repeat 9] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap

import _timing

OFFSET = 93  # bytes skipped at the start of the source: not congruent with 0 modulo the page

COPY = textwrap.dedent("""
    import fcntl, os, sys
    how, src, dst, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    off = %d
    fd = os.open(src, os.O_RDONLY)
    out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.posix_fallocate(out, 0, size - off)
    pos = off
    if how.startswith("splice"):
        r, w = os.pipe()
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, int(how.split(":")[1]))
        cap = fcntl.fcntl(w, fcntl.F_GETPIPE_SZ)
        while pos < size:
            n = os.splice(fd, w, min(cap, size - pos), offset_src=pos)
            pos += n
            while n:
                n -= os.splice(r, out, n)
    elif how == "preadv":
        buf = memoryview(bytearray(4 << 20))
        while pos < size:
            n = os.preadv(fd, [buf[:min(len(buf), size - pos)]], pos)
            view = buf[:n]
            while view:
                view = view[os.write(out, view):]
            pos += n
    else:
        while pos < size:
            pos += os.copy_file_range(fd, out, size - pos, pos)
    os.close(fd)
    os.close(out)
""" % OFFSET)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gb", type=float, default=1.0, help="GiB to copy")
    ap.add_argument("--repeat", type=int, default=9, help="rounds (each way once per round)")
    ap.add_argument("--dir", default=None, help="work directory (default: a temp dir, removed)")
    args = ap.parse_args()

    work = args.dir or tempfile.mkdtemp(prefix="onemodel-copy-")
    os.makedirs(work, exist_ok=True)
    src, dst = os.path.join(work, "src.bin"), os.path.join(work, "dst.bin")
    size = int(args.gb * (1 << 30))
    try:
        if not os.path.exists(src) or os.path.getsize(src) != size:
            with open(src, "wb") as f:  # varied bytes, written once
                block = bytes(range(256)) * 4096
                for i in range(0, size, len(block)):
                    f.write(block[:size - i])
        _timing.warm_page_cache(src)
        fresh = _timing.fresh_destination(dst)

        def way(how):
            return (lambda: subprocess.run([sys.executable, "-c", COPY, how, src, dst, str(size)],
                                           check=True), fresh)

        times = _timing.interleaved({
            "splice, 1 MiB pipe": way("splice:1048576"),
            "splice, 256 KiB pipe": way("splice:262144"),
            "preadv + write, 4 MiB buffer": way("preadv"),
            "copy_file_range (not congruent)": way("copy_file_range"),
            "cp (whole file)": (lambda: subprocess.run(["cp", src, dst], check=True), fresh),
        }, args.repeat)
        print(f"{size / (1 << 30):.2f} GiB from offset {OFFSET}, {args.repeat} rounds, each way "
              "in a fresh process after sync")
        cp = statistics.median(times["cp (whole file)"])
        for label, t in times.items():
            med = statistics.median(t)
            print(f"  {label:34} median {med:6.3f} s  best {min(t):6.3f}  worst {max(t):6.3f}"
                  f"  ({med / cp:4.2f}x cp)")
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
