"""Issue 15: the sharded safetensors output of a generated ~1 GB model (st_big.py) follows the
index convention Hugging Face ``transformers`` reads: ``<stem>.safetensors.index.json`` with
``{"metadata": {"total_size"}, "weight_map"}`` and shards ``<stem>-0000i-of-0000k.safetensors``,
checked by reading the index with json and every shard with ``safetensors.safe_open``."""

from __future__ import annotations

import hashlib
import json
import os
import struct

import numpy as np
from safetensors import safe_open
from st_big import BIG_SPECS, NUMPY, count, nbytes, values, write_big_model
from typer.testing import CliRunner

import onemodel
from onemodel.cli import app

MAX_SHARD = 300_000_000


def _hf_shards(sizes, max_shard_size):
    """Shards as huggingface_hub's split_state_dict_into_shards forms them for tensors none of
    which is larger than ``max_shard_size`` (the case here): a new shard when the next tensor
    would take the current one past the size."""
    shards, current, total = [], [], 0
    for i, n in enumerate(sizes):
        assert n <= max_shard_size
        if current and total + n > max_shard_size:
            shards.append(current)
            current, total = [], 0
        current.append(i)
        total += n
    return shards + [current]


def _file_digest(path, begin, end):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(begin)
        left = end - begin
        while left:
            chunk = f.read(min(left, 64 << 20))
            assert chunk
            h.update(chunk)
            left -= len(chunk)
    return h.hexdigest()


def test_sharded_1gb_model_in_transformers_index_convention(tmp_path):
    src, digests = write_big_model(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    r = CliRunner().invoke(app, ["convert", src, str(out / "model.onnx"), "--layout",
                                 "safetensors", "--threshold", "0", "--max-shard-size",
                                 str(MAX_SHARD), "-q"])
    assert r.exit_code == 0, r.output
    os.unlink(src + ".data")  # the shards alone hold the weights from here on

    sizes = [nbytes(c, d) for _, c, d in BIG_SPECS]
    groups = _hf_shards(sizes, MAX_SHARD)
    k = len(groups)
    assert k == 4  # embed + norm.bias | mlp.weight + mlp.bias | layers.1 | lm_head + step
    names = [f"model-{g + 1:05d}-of-{k:05d}.safetensors" for g in range(k)]
    expect_map = {BIG_SPECS[i][0]: names[g] for g, group in enumerate(groups) for i in group}
    assert sorted(os.listdir(out)) == sorted(names + ["model.onnx",
                                                      "model.safetensors.index.json"])

    index = json.loads((out / "model.safetensors.index.json").read_text(encoding="utf-8"))
    # as transformers writes it: total_size is the tensors' bytes (no header, no padding),
    # the weight_map every tensor, in the model's order, and nothing else
    assert index == {"metadata": {"total_size": sum(sizes)}, "weight_map": expect_map}
    assert list(index["weight_map"]) == [name for name, _, _ in BIG_SPECS]
    assert index["metadata"]["total_size"] == 1_003_847_854

    spec = {name: (i, code, dims) for i, (name, code, dims) in enumerate(BIG_SPECS)}
    seen = set()
    for shard in sorted(set(index["weight_map"].values())):  # as transformers' loader does
        path = str(out / shard)
        wanted = {key for key, s in index["weight_map"].items() if s == shard}
        with open(path, "rb") as f:
            (hlen,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(hlen))
        data_start = 8 + hlen
        with safe_open(path, "np") as f:
            meta = f.metadata()
            padding = set(json.loads(meta.get("onemodel.padding", "[]")))
            keys = set(f.keys())
            # the padding entries are in the shard but never in the weight_map
            assert keys == wanted | padding and not padding & set(index["weight_map"])
            assert all(header[p]["dtype"] == "U8" for p in padding)
            shard_bytes = 0
            for key in sorted(wanted):
                i, code, dims = spec[key]
                sl = f.get_slice(key)
                assert sl.get_shape() == dims
                assert sl.get_dtype() == {np.float32: "F32", np.float16: "F16",
                                          np.int64: "I64"}[NUMPY[code]]
                # sampled elements: first, middle and last row (or range), exact
                rows = dims[0]
                width = count(dims[1:])
                for r0 in sorted({0, rows // 2, rows - 1}):
                    got = sl[r0:r0 + 1] if len(dims) > 1 else sl[r0:]
                    j = np.arange(r0 * width, (r0 + 1) * width if len(dims) > 1 else rows,
                                  dtype=np.int64)
                    want = values(i, code, j).reshape(got.shape)
                    assert got.dtype == NUMPY[code] and np.array_equal(got, want), (key, r0)
                begin, end = header[key]["data_offsets"]
                assert end - begin == nbytes(code, dims)
                assert begin % 64 == 0  # onemodel's alignment (padding entries before)
                assert _file_digest(path, data_start + begin, data_start + end) == digests[key]
                shard_bytes += end - begin
                seen.add(key)
            assert shard_bytes <= MAX_SHARD
    assert seen == set(spec)

    # the ONNX model references its shards; onemodel reads the values back from them
    with onemodel.load(out / "model.onnx") as m:
        step = next(t for t in m.graph.initializers if t.name == "step")
        assert step.numpy().tolist() == values(6, BIG_SPECS[6][1], np.arange(3)).tolist()
        locations = {t.name: {e.key: e.value for e in t.external_data}["location"]
                     for t in m.graph.initializers}
    assert locations == expect_map
