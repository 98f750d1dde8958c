"""``onemodel check`` side by side with ``onnx.checker.check_model``, whole processes.

Two models, generated in a temporary directory (by a child process, so that this process stays
small and the peak resident set it hands its children stays small too):

* graph-heavy: the 50,000-node graph of ``load_convert.make_heavy`` (20,000 Add with a 4-float
  initializer, 30,000 Relu, in a chain). ``onemodel check FILE`` vs ``python -c "import onnx;
  onnx.checker.check_model(path)"``. Target <= 1.0x.
* external: ``--gb`` (default 2.5) GB of float32 weights in one external data file, 64 Gemm
  nodes. The data file is sparse (``truncate``): neither tool reads the bytes (onemodel checks
  references and lengths; onnx's checker checks the locations). onnx's checker is given the path
  (a ModelProto over 2 GiB cannot be serialized for it). Targets: <= 1.0x, and peak RSS of
  ``onemodel check`` <= 150 MB.

Each command is timed as a whole process (median of ``--repeat``, the tools taking turns) and
its peak resident set is ``/usr/bin/time -f %M`` (the small ``time`` process is the parent the
measured one inherits its counters from).

    python benchmarks/check.py [--gb 2.5] [--repeat 7] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap

import _timing

PY = sys.executable
HERE = os.path.dirname(os.path.abspath(__file__))

MAKE = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, sys.argv[1])
    import load_convert
    from onnx import TensorProto, helper
    heavy, external, gb = sys.argv[2], sys.argv[3], float(sys.argv[4])
    load_convert.make_heavy(heavy)
    n = 64
    side = int((gb * 1e9 / 4 / n) ** 0.5)
    nbytes = side * side * 4
    step = (nbytes + 4095) // 4096 * 4096
    data = os.path.basename(external) + ".data"
    nodes, inits, prev = [], [], "x"
    for i in range(n):
        t = TensorProto(name=f"w{i}", data_type=TensorProto.FLOAT, dims=[side, side])
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", data), ("offset", str(i * step)), ("length", str(nbytes))):
            e = t.external_data.add()
            e.key, e.value = k, v
        inits.append(t)
        nodes.append(helper.make_node("Gemm", [prev, f"w{i}"], [f"h{i}"], name=f"gemm{i}"))
        prev = f"h{i}"
    g = helper.make_graph(nodes, "external", [helper.make_tensor_value_info("x", 1, ["N", side])],
                          [helper.make_tensor_value_info(prev, 1, ["N", side])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    with open(external, "wb") as f:
        f.write(m.SerializeToString())
    with open(os.path.join(os.path.dirname(external), data), "wb") as f:
        f.truncate((n - 1) * step + nbytes)
""")


def run(cmd: list[str], env: dict) -> tuple[float, int]:
    """``(wall seconds, peak RSS bytes)`` of ``cmd`` run under ``/usr/bin/time``; its exit status
    must be 0."""
    import time

    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{cmd} failed ({p.returncode}): {p.stderr}")
    return dt, int(p.stderr.strip().splitlines()[-1]) * 1024


def compare(label: str, path: str, repeat: int, env: dict, target: float,
            rss_target: int | None) -> list[str]:
    """Time and measure both commands on ``path``; print them; return the target lines."""
    ours = [os.path.join(os.path.dirname(PY), "onemodel"), "check", path]
    theirs = [PY, "-c", "import sys, onnx; onnx.checker.check_model(sys.argv[1])", path]
    med, peak = _timing.processes({"ours": ours, "theirs": theirs}, repeat, env, run)
    print(f"\n== {label} ({os.path.getsize(path) / 1e6:.1f} MB model file), {repeat} runs each")
    print(f"  `onemodel check`                       {med['ours'] * 1e3:8.0f} ms  "
          f"peak RSS {peak['ours'] / 1e6:6.0f} MB")
    print(f"  python -c onnx.checker.check_model     {med['theirs'] * 1e3:8.0f} ms  "
          f"peak RSS {peak['theirs'] / 1e6:6.0f} MB")
    r = med["ours"] / med["theirs"]
    lines = [f"{label}: onemodel check {r:.2f}x onnx.checker (target <= {target}x): "
             f"{'met' if r <= target else 'NOT met'}"]
    if rss_target is not None:
        lines.append(f"{label}: peak RSS of onemodel check {peak['ours'] / 1e6:.0f} MB (target "
                     f"<= {rss_target / 1e6:.0f} MB): "
                     f"{'met' if peak['ours'] <= rss_target else 'NOT met'}")
    return lines


def main() -> None:
    """Generate the two models, compare, print the targets met or not."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=2.5, help="external data size (GB, 10^9)")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--dir", help="work directory (default: a temporary one)")
    a = ap.parse_args()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "ONEMODEL_PURE_PYTHON")}
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        heavy, external = os.path.join(d, "heavy.onnx"), os.path.join(d, "external.onnx")
        subprocess.run([PY, "-c", MAKE, HERE, heavy, external, str(a.gb)], check=True, env=env)
        lines = compare("graph-heavy (50,000 nodes)", heavy, a.repeat, env, 1.0, None)
        lines += compare(f"external data ({a.gb:g} GB, sparse)", external, a.repeat, env, 1.0,
                         150_000_000)
    print()
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
