"""``onemodel hash`` of a large external-data model vs one ``hashlib.sha256`` stream over the
same weight bytes, whole processes (issue 14).

The model, generated in a temporary directory (with onemodel's own records and encoder):
``--gb`` (default 2.5) GB of float32 weights in
64 tensors, one after the other in one external data file (no padding, so the data file is
exactly the weight bytes), 64 Gemm nodes. The bytes are real (random, written in 64 MiB chunks),
not a sparse file: every byte must be read and hashed.

* ours: ``onemodel hash MODEL`` (the model digest: every tensor hashed, in threads).
* baseline: ``python -c`` reading the data file in 8 MiB chunks (``readinto`` one buffer) into
  one ``hashlib.sha256``.

Both read from the page cache (one untimed run of each first; the machine's memory must hold
the data file). Each command is timed as a whole process (median of ``--repeat``, the two taking
turns); its peak resident set is ``/usr/bin/time -f %M``. Targets: ours <= 1.2x the baseline,
and the peak RSS of ours flat (independent of the model's size: reported with the size of the
largest tensor, which it never holds whole).

    python benchmarks/hash.py [--gb 2.5] [--repeat 5] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap

import _timing
from check import run

PY = sys.executable

MAKE = textwrap.dedent("""
    import os, sys
    import numpy as np
    from onemodel.formats.onnx.wire_encode import encode
    from onemodel.ir import (EXTERNAL, Dimension, Graph, Model, Node, OperatorSetId, Shape,
                             StringStringEntry, Tensor, TensorType, Type, ValueInfo)
    path, gb = sys.argv[1], float(sys.argv[2])
    n = 64
    side = int((gb * 1e9 / 4 / n) ** 0.5)
    nbytes = side * side * 4
    data = os.path.basename(path) + ".data"

    def typed(name):
        dims = [Dimension(dim_param="N"), Dimension(dim_value=side)]
        return ValueInfo(name=name, type=Type(tensor_type=TensorType(elem_type=1,
                                                                     shape=Shape(dims=dims))))

    ref = lambda i: [StringStringEntry(key=k, value=v) for k, v in (
        ("location", data), ("offset", str(i * nbytes)), ("length", str(nbytes)))]
    weights = [Tensor(name=f"w{i}", data_type=1, dims=[side, side], data_location=EXTERNAL,
                      external_data=ref(i)) for i in range(n)]
    names = ["x"] + [f"h{i}" for i in range(n)]
    graph = Graph(name="external", initializers=weights, inputs=[typed("x")],
                  outputs=[typed(names[-1])],
                  nodes=[Node(op_type="Gemm", name=f"gemm{i}", inputs=[names[i], f"w{i}"],
                              outputs=[names[i + 1]]) for i in range(n)])
    model = Model(ir_version=10, opset_imports=[OperatorSetId(domain="", version=21)],
                  graph=graph)
    with open(path, "wb") as f:
        f.write(encode(model))
    rng = np.random.default_rng(0)
    left = n * nbytes
    with open(os.path.join(os.path.dirname(path), data), "wb") as f:
        while left:
            k = min(left, 64 << 20)
            f.write(rng.bytes(k))
            left -= k
    print(nbytes)
""")

BASELINE = textwrap.dedent("""
    import hashlib, sys
    h = hashlib.sha256()
    buf = bytearray(8 << 20)
    view = memoryview(buf)
    with open(sys.argv[1], "rb", buffering=0) as f:
        while True:
            got = f.readinto(buf)
            if not got:
                break
            h.update(view[:got])
    print(h.hexdigest())
""")


def main() -> None:
    """Generate the model, time both commands, print the figures and the targets."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=2.5, help="weight bytes (GB, 10^9)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", help="work directory (default: a temporary one)")
    a = ap.parse_args()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "ONEMODEL_PURE_PYTHON")}
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        model = os.path.join(d, "big.onnx")
        tensor = int(subprocess.run([PY, "-c", MAKE, model, str(a.gb)], check=True, env=env,
                                    capture_output=True, text=True).stdout)
        data = model + ".data"
        size = os.path.getsize(data)
        ours = [os.path.join(os.path.dirname(PY), "onemodel"), "hash", model]
        theirs = [PY, "-c", BASELINE, data]
        med, peak = _timing.processes({"ours": ours, "theirs": theirs}, a.repeat, env, run)
    print(f"\n== {size / 1e9:.2f} GB of weights in 64 tensors of {tensor / 1e6:.1f} MB, "
          f"{a.repeat} runs each, {os.cpu_count()} CPUs")
    print(f"  `onemodel hash`                       {med['ours'] * 1e3:8.0f} ms  "
          f"{size / med['ours'] / 1e9:5.2f} GB/s  peak RSS {peak['ours'] / 1e6:6.0f} MB")
    print(f"  python -c hashlib.sha256 (8 MiB)      {med['theirs'] * 1e3:8.0f} ms  "
          f"{size / med['theirs'] / 1e9:5.2f} GB/s  peak RSS {peak['theirs'] / 1e6:6.0f} MB")
    r = med["ours"] / med["theirs"]
    print(f"\nonemodel hash {r:.2f}x one sha256 stream (target <= 1.2x): "
          f"{'met' if r <= 1.2 else 'NOT met'}")
    print(f"peak RSS of onemodel hash {peak['ours'] / 1e6:.0f} MB for {size / 1e9:.2f} GB "
          f"(largest tensor {tensor / 1e6:.0f} MB)")


if __name__ == "__main__":
    main()
