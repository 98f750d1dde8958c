"""Models where they lie: ``info`` and one tensor from S3, against downloading the whole object.

Starts moto's S3 server (``moto_server``, dev extra) on 127.0.0.1, uploads a model with ~1 GB of
float32 weights (``--gb`` to change) as ``.onemodel`` and as ``.onnx``, and prints, for each, the
median over ``--repeat`` runs of:

* ``info``: ``onemodel.load(url)`` + :func:`onemodel.summary.summarize` (what ``onemodel info``
  prints), with the requests it made and the bytes it fetched;
* one tensor: ``load`` + ``numpy()`` of the middle initializer, likewise;
* the whole object downloaded with s3fs (``fs.cat_file``), the way a tool without range reads
  gets at the same model;

and the ratios info / download and one tensor / download (smaller is better).

moto keeps each object in one buffer and copies all of it to answer every GET, ranged or not, so
on moto a range request costs about as much as a download of the object's bytes into memory
(without sending them). Real object stores do not; the same rows are therefore also measured
against the test suite's HTTP Range server (``tests/servers/http_range.py``, whose range
answers cost what they send) with fsspec's HTTP download as the baseline (``--no-http`` to skip).

    python benchmarks/remote_s3.py [--gb 1.0] [--repeat 3] [--no-http] [--no-s3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))  # the test suite's moto_server launcher

from _timing import timed  # noqa: E402  (this directory, as the script's, is on sys.path)


def make_model(path: str, gb: float, n_tensors: int = 64) -> int:
    """A chain of Adds over ~``gb`` GB of float32 initializers, written inline; returns the
    index of the middle initializer."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    per = int(gb * (1 << 30) / 4 / n_tensors)
    side = int(per ** 0.5)
    rng = np.random.default_rng(0)
    inits, nodes, prev = [], [], "x"
    for i in range(n_tensors):
        w = rng.standard_normal((side, side), dtype=np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("Add", [prev, f"w{i}"], [f"y{i}"]))
        prev = f"y{i}"
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [side, side])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [side, side])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return n_tensors // 2


def fetched(model) -> tuple[int, int]:
    """(requests, bytes) the model's remote sources made and fetched."""
    sources = getattr(model, "resources", None) or []
    return (sum(getattr(r, "requests", 0) for r in sources),
            sum(getattr(r, "bytes_fetched", 0) for r in sources))


def measure(url: str, opts: dict | None, index: int, repeat: int) -> dict:
    """``{operation: (median seconds, requests, bytes)}`` for info, one tensor, download."""
    import fsspec

    import onemodel
    from onemodel.summary import summarize

    def info():
        with onemodel.load(url, storage_options=opts) as m:
            summarize(m)
            return fetched(m)

    def one_tensor():
        with onemodel.load(url, storage_options=opts) as m:
            m.graph.initializers[index].numpy()
            return fetched(m)

    def download():
        fs, path = fsspec.core.url_to_fs(url, skip_instance_cache=True, **(opts or {}))
        return 1, len(fs.cat_file(path))

    out = {}
    for name, fn in (("info", info), ("tensor", one_tensor), ("download", download)):
        seconds, counts = timed(fn, repeat)
        out[name] = (seconds, *counts)
    return out


def report(where: str, urls: dict, opts: dict | None, index: int, repeat: int) -> None:
    import onemodel

    # warm up (imports, the backend's session) on the cheapest object, untimed
    with onemodel.load(next(iter(urls.values())), storage_options=opts):
        pass
    print(f"\n{where}")
    print(f"{'object':<18}{'operation':<16}{'median s':>10}{'requests':>10}{'fetched':>14}"
          f"{'vs download':>14}")
    for key, url in urls.items():
        r = measure(url, opts, index, repeat)
        dl = r["download"][0]
        for name, label in (("info", "info"), ("tensor", "one tensor"),
                            ("download", "download")):
            secs, requests, nbytes = r[name]
            print(f"{key:<18}{label:<16}{secs:>10.3f}{requests:>10}{nbytes / 1e6:>11.2f} MB"
                  f"{secs / dl:>13.3f}x")


def run_s3(om_path: str, onnx_path: str, index: int, repeat: int) -> None:
    import s3fs
    from servers.s3 import MotoS3

    server = MotoS3().start()
    try:
        server.create_bucket("bench")
        opts = server.storage_options
        fs = s3fs.S3FileSystem(skip_instance_cache=True, **opts)
        t = time.perf_counter()
        fs.put_file(om_path, "bench/model.onemodel")
        fs.put_file(onnx_path, "bench/model.onnx")
        print(f"uploaded to moto_server at {server.endpoint} in "
              f"{time.perf_counter() - t:.1f} s")
        report("moto_server (S3 through s3fs; download: s3fs cat_file)",
               {k: f"s3://bench/{k}" for k in ("model.onemodel", "model.onnx")},
               opts, index, repeat)
    finally:
        server.stop()


def run_http(om_path: str, onnx_path: str, index: int, repeat: int) -> None:
    from servers.http_range import RangeServer

    http = RangeServer().start()
    try:
        for k, path in (("model.onemodel", om_path), ("model.onnx", onnx_path)):
            with open(path, "rb") as f:
                http.files[k] = f.read()
        report("HTTP Range server (download: fsspec HTTP cat_file)",
               {k: http.url(k) for k in http.files}, None, index, repeat)
    finally:
        http.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-http", action="store_true", help="skip the HTTP Range server rows")
    ap.add_argument("--no-s3", action="store_true", help="skip the moto_server rows")
    args = ap.parse_args()

    import onemodel

    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = os.path.join(tmp, "model.onnx")
        om_path = os.path.join(tmp, "model.onemodel")
        t = time.perf_counter()
        index = make_model(onnx_path, args.gb)
        onemodel.convert(onnx_path, om_path)
        print(f"model: {os.path.getsize(om_path) / 1e9:.2f} GB OneModel, "
              f"{os.path.getsize(onnx_path) / 1e9:.2f} GB ONNX "
              f"(made in {time.perf_counter() - t:.1f} s)")
        if not args.no_s3:
            run_s3(om_path, onnx_path, index, args.repeat)
        if not args.no_http:
            run_http(om_path, onnx_path, index, args.repeat)


if __name__ == "__main__":
    main()
