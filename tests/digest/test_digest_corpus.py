"""One content digest per model whatever its layout (issue 14), over a corpus: every model of
testdata/models and every conformance model of the installed onnx (tests/conformance_data.py).

In memory, for every model: ONNX inline, OneModel (with and without recorded digests) and
OneModel.zst (``onemodel.to_bytes(model, format=...)`` read back with ``onemodel.load(bytes)``).
As files (external data needs a directory), for every testdata model and a deterministic sample
of about 100 conformance models: one data file and one file per tensor (every tensor external:
threshold 0), OneModel and OneModel.zst. The digest of each reading equals the digest of the
model as first read; the file layouts really put the tensors in data files.
"""

from __future__ import annotations

import hashlib
import pathlib

import pytest

import onemodel
from onemodel.content_digest import model_digest
from onemodel.errors import OneModelError
from onemodel.ir.walk import iter_tensors
from onemodel.storage import MemorySource, decompress_source

TESTDATA = pathlib.Path(__file__).resolve().parents[2] / "testdata" / "models"
SAMPLE = 100


def _testdata_models() -> list[pathlib.Path]:
    found = sorted(TESTDATA.rglob("*.onnx"))
    assert len(found) >= 6, found
    return found


def _conformance_models() -> list[pathlib.Path]:
    from conformance_data import iter_cases

    cases = iter_cases()
    assert len(cases) > 1500
    return [c.model_path for c in cases]


def _sample(paths: list[pathlib.Path], n: int) -> list[pathlib.Path]:
    """``n`` of the models that hold a tensor (most conformance models hold none: their layouts
    would all be one file), chosen by the SHA-256 of their case names: the same sample on every
    machine. Those with initializers come first (the tensors a data file takes)."""
    def rank(p):
        with onemodel.load(str(p)) as m:
            has = (2 if m.graph.initializers else 1 if next(iter_tensors(m), None) else 0)
        return -has, hashlib.sha256(p.parent.name.encode()).digest()

    ranked = sorted((rank(p), p) for p in paths)
    return [p for r, p in ranked if r[0] < 0][:n]


def _zstd(data: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor(level=1).compress(data)


def _in_memory(m) -> dict[str, str]:
    out = {}
    for label, data in (("onnx inline", onemodel.to_bytes(m, format="onnx")),
                        ("onemodel", onemodel.to_bytes(m, format="onemodel")),
                        ("onemodel+digests", onemodel.to_bytes(m, format="onemodel",
                                                               digests=True))):
        out[label] = data
    out["onemodel.zst"] = _zstd(out["onemodel"])
    got = {}
    for label, data in out.items():
        src = MemorySource(data)
        if label.endswith(".zst"):
            src = decompress_source(src)  # the path a .zst file takes (load(bytes) does not)
        with onemodel.load(src) as back:
            got[label] = model_digest(back).hex
    return got


def _as_files(path: pathlib.Path, d: pathlib.Path) -> dict[str, str]:
    got = {}
    for label, target, opts in (
            ("one data file", d / "file" / "m.onnx", {"layout": "file", "threshold": 0}),
            ("per-tensor files", d / "per" / "m.onnx", {"layout": "per_tensor", "threshold": 0}),
            ("onemodel file", d / "m.onemodel", {}),
            ("onemodel.zst file", d / "m.onemodel.zst", {})):
        target.parent.mkdir(exist_ok=True)
        onemodel.convert(str(path), str(target), **opts)
        got[label] = onemodel.digest(str(target)).hex
    return got


def _external_count(path: pathlib.Path) -> int:
    with onemodel.load(str(path)) as m:
        return sum(t.is_external for t in m.graph.initializers)


def _original(path: pathlib.Path):
    """The model as first read and its digest; None when OneModel cannot represent it (the
    writer refuses it: the refusal is one of the documented kinds)."""
    m = onemodel.load(str(path))
    try:
        onemodel.to_bytes(m, format="onemodel")
    except OneModelError as e:
        m.close()
        assert e.kind in ("InvalidModel", "Unsupported"), e
        return None, None
    return m, model_digest(m).hex


def test_every_model_has_one_digest_in_every_in_memory_layout():
    paths = _testdata_models() + _conformance_models()
    wrong, refused, seen = {}, [], 0
    for p in paths:
        m, want = _original(p)
        if m is None:
            refused.append(p)
            continue
        with m:
            got = _in_memory(m)
        seen += 1
        bad = {k: v for k, v in got.items() if v != want}
        if bad:
            wrong[str(p)] = (want, bad)
    assert wrong == {}
    # OneModel represents (almost) every model; the few it refuses are named for the record
    assert seen >= len(paths) - 10, refused


@pytest.mark.parametrize("which", ["testdata", "conformance sample"])
def test_file_layouts_have_the_digest_of_the_model(which, tmp_path):
    paths = _testdata_models() if which == "testdata" else _sample(_conformance_models(), SAMPLE)
    wrong, checked, external = {}, 0, 0
    for i, p in enumerate(paths):
        m, want = _original(p)
        if m is None:
            continue
        m.close()
        d = tmp_path / str(i)
        d.mkdir()
        got = _as_files(p, d)
        external += _external_count(d / "per" / "m.onnx")
        checked += 1
        bad = {k: v for k, v in got.items() if v != want}
        if bad:
            wrong[str(p)] = (want, bad)
    assert wrong == {}
    assert checked >= len(paths) - 2 and checked >= min(len(paths), SAMPLE) - 2
    # the layouts did move tensors into data files: every initializer of the per-tensor one
    assert external >= (5 if which == "testdata" else 50)
