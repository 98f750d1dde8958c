"""Initializer statistics of `onemodel view` against numpy in float64."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from view_models import save, tensor, vi

import onemodel
from onemodel.limits import VIEW_STATS_ELEMENTS
from onemodel.view.statistics import RUNS, tensor_statistics

REL = 1e-12  # min and max are exact; the mean is a float64 sum of the same values (order aside)


def _model(tmp_path, arrays: dict):
    inits = [tensor(k, v) for k, v in arrays.items()]
    nodes = [helper.make_node("Identity", [k], [k + "_out"]) for k in arrays]
    path = save(tmp_path / "stats.onnx", nodes, [], [vi(k + "_out") for k in arrays], inits)
    return onemodel.load(path)


def _expected(values) -> dict:
    x = np.asarray(values).astype(np.float64).reshape(-1)
    finite = x[np.isfinite(x)]
    return {"min": finite.min(), "max": finite.max(), "mean": finite.mean(),
            "nan": int(np.isnan(x).sum()), "inf": int(np.isinf(x).sum())}


def _agree(got: dict, want: dict) -> None:
    assert got["nan"] == want["nan"] and got["inf"] == want["inf"]
    for k in ("min", "max", "mean"):
        assert got[k] == pytest.approx(want[k], rel=REL, abs=1e-300), k


def test_statistics_match_numpy_in_float64(tmp_path):
    rng = np.random.default_rng(7)
    f32 = rng.normal(3.0, 10.0, 5000).astype(np.float32)
    f32[[5, 99]] = np.nan
    f32[[7, 8, 4000]] = [np.inf, -np.inf, np.inf]
    f16 = rng.normal(0, 1, 777).astype(np.float16)
    f16[[3, 700]] = [np.nan, -np.inf]
    arrays = {"f32": f32, "i8": rng.integers(-128, 128, 999).astype(np.int8),
              "f16": f16,  # (f32 has more than SMALL elements; the others are batched)
              "u64": np.array([0, 2**40, 5, 2**33 + 1], np.uint64),
              "b": np.array([True, False, True])}
    with _model(tmp_path, arrays) as m:
        got = {t.name: tensor_statistics(t) for t in m.graph.initializers}
    for name, arr in arrays.items():
        assert got[name]["count"] == arr.size and got[name]["sampled"] is False
        _agree(got[name], _expected(arr))
    assert got["f32"]["nan"] == 2 and got["f32"]["inf"] == 3


def test_a_large_tensor_is_sampled_in_runs(tmp_path):
    arr = np.arange(10_000, dtype=np.float32) * np.float32(0.5) - 7
    limit = 640
    with _model(tmp_path, {"w": arr}) as m:
        st = tensor_statistics(m.graph.initializers[0], limit=limit)
    step, run = arr.size // RUNS, limit // RUNS
    picked = np.concatenate([arr[k * step:k * step + run] for k in range(RUNS)])
    assert st["sampled"] is True and st["count"] == limit and st["total"] == arr.size
    _agree(st, _expected(picked))
    assert VIEW_STATS_ELEMENTS >= RUNS  # (each run holds at least one element by default)


def test_a_tensor_without_finite_values_and_without_statistics(tmp_path):
    arrays = {"nan": np.array([np.nan, np.nan], np.float32), "s": np.array(["a", "b"])}
    with _model(tmp_path, arrays) as m:
        by = {t.name: t for t in m.graph.initializers}
        st = tensor_statistics(by["nan"])
        assert (st["min"], st["max"], st["mean"], st["nan"]) == (None, None, None, 2)
        assert tensor_statistics(by["s"]) is None  # STRING: nothing to count
