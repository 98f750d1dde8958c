"""``onemodel sign`` and ``verify-signature`` vs model-signing's own ``sign key`` and
``verify key`` and vs ``onemodel hash``, on the large external-data model of
``benchmarks/hash.py``, whole processes (issue 27).

The model: ``--gb`` (default 2.5) GB of float32 weights in 64 tensors in one external data file
(made by hash.py's generator), in a directory of its own (the bundles are written outside it,
so that model-signing's directory signature covers the model's two files only). An EC P-256
key pair is generated.

* ``onemodel hash MODEL``: the content digest (every tensor hashed, in threads);
* ``onemodel sign MODEL --key K -o S``: model-signing's file digests and the content manifest;
* ``onemodel verify-signature MODEL`` (full: the envelope, then the files byte-exact), and with
  ``--sample 0.1`` (the structure and 10% of the tensors);
* ``model_signing sign key DIR`` and ``model_signing verify key DIR``: the stock CLI, files
  serialization (its hashing of the same bytes).

All read from the page cache (one untimed run of each first); each is timed as a whole process
(median of ``--repeat``, taking turns), its peak resident set and CPU seconds (user +
system, median) by ``/usr/bin/time``.
Targets: onemodel sign and full verify <= 1.1x ``onemodel hash``; flat memory.

    python benchmarks/sign.py [--gb 2.5] [--repeat 3] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import _timing
from hash import MAKE

PY = sys.executable
BIN = os.path.dirname(PY)


CPU: dict[str, list[float]] = {}


def run(cmd: list[str], env: dict) -> tuple[float, int]:
    """``(wall seconds, peak RSS bytes)`` of ``cmd`` under ``/usr/bin/time`` (exit status 0);
    its CPU seconds (user + system) appended to ``CPU[the command line]``."""
    import time

    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M %U %S"] + cmd, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{cmd} failed ({p.returncode}): {p.stderr}")
    rss, user, system = p.stderr.strip().splitlines()[-1].split()
    CPU.setdefault(" ".join(cmd), []).append(float(user) + float(system))
    return dt, int(rss) * 1024


def _keys(d: str) -> tuple[str, str]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    private, public = os.path.join(d, "k.private.pem"), os.path.join(d, "k.public.pem")
    with open(private, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    with open(public, "wb") as f:
        f.write(key.public_key().public_bytes(serialization.Encoding.PEM,
                                              serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


def main() -> None:
    """Generate the model and keys, time every command, print the figures and the targets."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=2.5, help="weight bytes (GB, 10^9)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", help="work directory (default: a temporary one)")
    a = ap.parse_args()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "ONEMODEL_PURE_PYTHON")}
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        mdir = os.path.join(d, "model")
        os.mkdir(mdir)
        model = os.path.join(mdir, "big.onnx")
        subprocess.run([PY, "-c", MAKE, model, str(a.gb)], check=True, env=env,
                       capture_output=True, text=True)
        size = os.path.getsize(model + ".data")
        private, public = _keys(d)
        ours_sig, stock_sig = os.path.join(d, "ours.sig"), os.path.join(d, "stock.sig")
        om = os.path.join(BIN, "onemodel")
        ms = os.path.join(BIN, "model_signing")
        # the bundles the verifications read exist before any timed run
        run([om, "sign", model, "--key", private, "-o", ours_sig], env)
        run([ms, "sign", "key", mdir, "--private_key", private, "--signature", stock_sig], env)
        cmds = {
            "onemodel hash": [om, "hash", model],
            "onemodel sign": [om, "sign", model, "--key", private, "-o", ours_sig],
            "onemodel verify-signature": [om, "verify-signature", model, "--signature",
                                          ours_sig, "--key", public],
            "onemodel verify-signature --sample 0.1": [
                om, "verify-signature", model, "--signature", ours_sig, "--key", public,
                "--sample", "0.1"],
            "model_signing sign key": [ms, "sign", "key", mdir, "--private_key", private,
                                       "--signature", stock_sig],
            "model_signing verify key": [ms, "verify", "key", mdir, "--signature", stock_sig,
                                         "--public_key", public],
            "model_signing verify key (onemodel's bundle)": [
                ms, "verify", "key", mdir, "--signature", ours_sig, "--public_key", public],
        }
        med, peak = _timing.processes(cmds, a.repeat, env, run)
    cpu = {k: sorted(CPU[" ".join(c)])[len(CPU[" ".join(c)]) // 2] for k, c in cmds.items()}
    print(f"\n== {size / 1e9:.2f} GB of weights in 64 tensors (one data file), {a.repeat} runs "
          f"each, {os.cpu_count()} CPUs")
    base = med["onemodel hash"]
    for label in cmds:
        print(f"  {label:46s} {med[label] * 1e3:8.0f} ms  {size / med[label] / 1e9:5.2f} GB/s  "
              f"{med[label] / base:5.2f}x hash  CPU {cpu[label]:5.2f} s  "
              f"peak RSS {peak[label] / 1e6:6.0f} MB")
    for label in ("onemodel sign", "onemodel verify-signature"):
        r = med[label] / base
        print(f"{label} {r:.2f}x onemodel hash (target <= 1.1x): "
              f"{'met' if r <= 1.1 else 'NOT met'}")


if __name__ == "__main__":
    main()
