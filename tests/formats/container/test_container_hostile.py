"""The hostile OneModel files of testdata/format/hostile: each is refused with the kind its name
gives and the path expected.json gives, without allocating more than the file's size."""

from __future__ import annotations

import importlib.util
import json
import os
import tracemalloc

import pytest

from onemodel.errors import OneModelError
from onemodel.formats.container import read
from onemodel.storage import LocalSource

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "testdata", "format")
HOSTILE = os.path.join(ROOT, "hostile")
with open(os.path.join(HOSTILE, "expected.json")) as f:
    EXPECTED = json.load(f)

#: Bytes a read may allocate beyond the file's size: parsed JSON objects, the manifest paths
#: of 64 nested graphs (they grow with depth), frames. Bounded by the nesting limit, and far
#: below any size a hostile header or dims could ask for (2^31 bytes and more).
SLACK = 1024 * 1024


def _load_script():
    spec = importlib.util.spec_from_file_location("make_hostile",
                                                  os.path.join(ROOT, "make_hostile.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_there_are_enough_hostile_files_of_every_kind():
    kinds = {e["kind"] for e in EXPECTED.values()}
    assert len(EXPECTED) >= 40 and kinds == {"Malformed", "InvalidModel", "Unsupported"}
    on_disk = {n for n in os.listdir(HOSTILE) if n.endswith(".onemodel")}
    assert on_disk == set(EXPECTED)
    for name, e in EXPECTED.items():
        assert name.startswith(e["kind"] + "-")


def test_committed_files_are_what_the_script_makes(tmp_path):
    names = _load_script().main(str(tmp_path))
    assert set(names) == set(EXPECTED)
    for n in names:
        with open(tmp_path / n, "rb") as a, open(os.path.join(HOSTILE, n), "rb") as b:
            assert a.read() == b.read(), n


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_hostile_file_is_refused_with_kind_and_path(name):
    path = os.path.join(HOSTILE, name)
    size = os.path.getsize(path)
    with LocalSource(path) as source:
        tracemalloc.start()
        try:
            with pytest.raises(OneModelError) as info:
                read(source)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    err = info.value
    assert (err.kind, err.path) == (EXPECTED[name]["kind"], EXPECTED[name]["path"]), str(err)
    assert err.source == path
    assert peak < size + SLACK, f"read allocated {peak} bytes for a {size}-byte file"
