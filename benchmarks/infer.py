"""``onemodel infer`` side by side with ``onnx.shape_inference.infer_shapes_path``, whole
processes (issue 12: <= 1.0x on the 50,000-node graph; flat memory on 2.5 GB of external data).

The models are the two of benchmarks/check.py, generated the same way in a temporary
directory: the 50,000-node graph of ``load_convert.make_heavy`` (20,000 Add with a 4-float
initializer, 30,000 Relu, in a chain) and ``--gb`` GB of float32 weights in one sparse external
data file (64 Gemm nodes). Both tools read IN and write OUT with the inferred value_info, OUT
in IN's directory (external references stay valid; neither tool reads the weights).

Each command is timed as a whole process (median of ``--repeat``, the tools taking turns);
peak RSS from ``/usr/bin/time -f %M``. Afterwards both outputs are read back and the number of
``value_info`` entries each wrote is printed.

    python benchmarks/infer.py [--gb 2.5] [--repeat 7] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import _timing
import check

PY = sys.executable
HERE = os.path.dirname(os.path.abspath(__file__))


def compare(label: str, path: str, repeat: int, env: dict, target: float | None,
            rss_target: int | None) -> list[str]:
    """Time both commands on ``path``; print them; return the target lines."""
    base = os.path.splitext(path)[0]
    ours_out, theirs_out = base + ".om-inferred.onnx", base + ".onnx-inferred.onnx"
    ours = [os.path.join(os.path.dirname(PY), "onemodel"), "infer", path, ours_out]
    theirs = [PY, "-c", "import sys, onnx.shape_inference as s; "
              "s.infer_shapes_path(sys.argv[1], sys.argv[2])", path, theirs_out]
    med, peak = _timing.processes({"ours": ours, "theirs": theirs}, repeat, env, check.run)
    counts = subprocess.run(
        [PY, "-c", "import sys, onnx\nfor p in sys.argv[1:]:\n"
         "    print(len(onnx.load(p, load_external_data=False).graph.value_info))",
         ours_out, theirs_out], capture_output=True, text=True, check=True).stdout.split()
    print(f"\n== {label} ({os.path.getsize(path) / 1e6:.1f} MB model file), {repeat} runs each")
    print(f"  `onemodel infer IN OUT`                 {med['ours'] * 1e3:8.0f} ms  "
          f"peak RSS {peak['ours'] / 1e6:6.0f} MB  value_info written {counts[0]}")
    print(f"  onnx.shape_inference.infer_shapes_path  {med['theirs'] * 1e3:8.0f} ms  "
          f"peak RSS {peak['theirs'] / 1e6:6.0f} MB  value_info written {counts[1]}")
    r = med["ours"] / med["theirs"]
    lines = [f"{label}: onemodel infer {r:.2f}x infer_shapes_path"
             + (f" (target <= {target}x): {'met' if r <= target else 'NOT met'}"
                if target is not None else "")]
    if rss_target is not None:
        lines.append(f"{label}: peak RSS of onemodel infer {peak['ours'] / 1e6:.0f} MB (target "
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
        subprocess.run([PY, "-c", check.MAKE, HERE, heavy, external, str(a.gb)], check=True,
                       env=env)
        lines = compare("graph-heavy (50,000 nodes)", heavy, a.repeat, env, 1.0, None)
        lines += compare(f"external data ({a.gb:g} GB, sparse)", external, a.repeat, env, None,
                         150_000_000)
    print()
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
