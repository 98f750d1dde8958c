"""A model written as several files changes all at once (docs/storage.md, "Atomicity"): a reader
sees the old model or the new one, whole, or an IoError; a write killed at any instant leaves
one of them; a second writer is refused; a killed write's partial file never looks valid and is
removed by the next write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onemodel
from onemodel.errors import IoError, OneModelError
from onemodel.formats.onnx.publish import owner_tag, published_location, staged_location
from onemodel.storage import LocalSink, locks, open_source

DRIVER = Path(__file__).with_name("atomic_driver.py")
LAYOUTS = ["keep", "file", "per-tensor", "safetensors", "safetensors-shards"]

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not locks.HAVE_FLOCK,
                                reason="fork and flock (POSIX)")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_no_mixed_model_under_kills_races_and_a_reader(tmp_path, layout):
    """50 writes killed at random times (SIGKILL and SIGINT alternately, a fixed seed), 6 first
    writes into an empty directory killed (the next one needs no --force), 20 races of two
    writers and a reader loop against 6 writes, on one multi-file layout: the destination is
    always version A or B whole (check --full: no error); a read during a write gives A, B or an
    IoError; never tensors of both. A second writer exits 0 (it came after the first) or 2
    (refused: the lock). The last whole write leaves no hidden file behind."""
    done = subprocess.run([sys.executable, str(DRIVER), layout, str(tmp_path), "23"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    r = json.loads(done.stdout)
    assert r["errors"] == []
    for part in ("kills", "races", "reads"):
        assert r[part].get("mixed", 0) == 0 and r[part].get("bad", 0) == 0, (part, r[part])
    # a crash or a refused writer always leaves a whole model: never an IoError
    assert set(r["kills"]) <= {"A", "B"} and sum(r["kills"].values()) == 50, r["kills"]
    assert set(r["races"]) <= {"A", "B"} and sum(r["races"].values()) == 20, r["races"]
    assert r["kills"].get("B", 0) > 0  # some writes got through before the kill
    # a first write killed leaves the model whole or no visible file (no orphan data file that
    # the next write would refuse to replace without --force)
    assert set(r["first"]) <= {"B", "none"} and sum(r["first"].values()) == 6, r["first"]
    assert all(a == 0 and b in (0, 2) for a, b in r["race_exits"]), r["race_exits"]
    assert r["reads"].get("A", 0) + r["reads"].get("B", 0) > 0, r["reads"]
    assert r["final"] == "A" and r["leftovers"] == []
    assert r.get("same_as_source", True)  # keep: the round trip's bytes are the source's


def _model(value: float, n: int = 4) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.full(300, value + k, np.float32), f"w{k}")
             for k in range(n)]
    graph = helper.make_graph([helper.make_node("Add", ["x", "w0"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [300])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [300])],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _files(directory: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.mark.parametrize("options", [dict(external_data="w.bin"), dict(layout="per_tensor"),
                                     dict(external_data="w.safetensors", threshold=0)],
                         ids=["file", "per-tensor", "safetensors"])
def test_rewriting_a_destination_gives_the_bytes_of_a_fresh_write(tmp_path, options):
    """Writing over an earlier version goes through staged names (publish.py), and ends with
    the names and the bytes of a write into an empty directory: the writer stays deterministic,
    and no staged, partial or lock file is left."""
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(_model(1.0), a)
    onnx.save(_model(7.0), b)
    fresh, again = tmp_path / "fresh", tmp_path / "again"
    fresh.mkdir()
    again.mkdir()
    onemodel.convert(a, fresh / "m.onnx", **options)
    onemodel.convert(b, again / "m.onnx", **options)
    onemodel.convert(a, again / "m.onnx", **options)
    assert _files(again) == _files(fresh)
    assert not [n for n in os.listdir(again) if n.startswith(".")]


def test_a_staged_file_gone_is_read_under_its_name(tmp_path):
    """A write killed while renaming staged files to their names leaves the first .onnx naming
    a staged file that is gone; the file it was renamed to holds its bytes and is read instead.
    When both are missing the IoError names both."""
    src = tmp_path / "src.onnx"
    onnx.save(_model(3.0), src)
    out = tmp_path / "out"
    out.mkdir()
    onemodel.convert(src, out / "m.onnx", external_data="w.bin", threshold=0)
    staged = staged_location("w.bin", "0123abcd", owner_tag(str(out / "m.onnx")))
    assert published_location(staged) == "w.bin"
    proto = onnx.load(out / "m.onnx", load_external_data=False)
    for t in proto.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = staged
    (out / "m.onnx").write_bytes(proto.SerializeToString())
    with onemodel.load(out / "m.onnx") as m:
        assert [float(t.numpy()[0]) for t in m.graph.initializers] == [3.0, 4.0, 5.0, 6.0]
    (out / "w.bin").unlink()
    with pytest.raises(IoError, match="does not exist, nor the file 'w.bin'"):
        onemodel.load(out / "m.onnx")


def test_a_reader_of_a_replaced_model_file_gets_an_io_error(tmp_path):
    """The data files of a model file replaced since it was read may be the new version's:
    resolving them then is an IoError, not a model of two versions."""
    from onemodel.formats.onnx import read, resolve_external_data

    src_a, src_b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(_model(1.0), src_a)
    onnx.save(_model(9.0), src_b)
    out = tmp_path / "out"
    out.mkdir()
    onemodel.convert(src_a, out / "m.onnx", external_data="w.bin", threshold=0)
    source = open_source(str(out / "m.onnx"))
    model = read(source, load_external=False)
    onemodel.convert(src_b, out / "m.onnx", external_data="w.bin", threshold=0)
    with pytest.raises(IoError, match="replaced while it was being read"):
        resolve_external_data(model, model_file=source)
    model.close()
    with onemodel.load(out / "m.onnx") as m:
        assert float(m.graph.initializers[0].numpy()[0]) == 9.0


def test_a_second_writer_is_refused_and_the_lock_goes_with_the_first(tmp_path):
    dst = tmp_path / "m.onemodel"
    first = LocalSink(str(dst))
    with pytest.raises(IoError, match="another process is writing this file"):
        LocalSink(str(dst))
    assert os.path.exists(locks.lock_file_of(str(dst)))
    first.abort()
    assert os.listdir(tmp_path) == []
    second = LocalSink(str(dst))
    second.write(b"x" * 100)
    second.commit()
    assert os.listdir(tmp_path) == ["m.onemodel"] and dst.read_bytes() == b"x" * 100


def test_a_killed_onemodel_write_never_looks_valid_and_is_cleaned(tmp_path):
    """A process killed after writing every byte of a OneModel file, before its rename, leaves
    a partial file whose header is still zeros (refused by load and check); the next write into
    the directory removes it, and leaves alone the partial of a write still running."""
    src = tmp_path / "src.onnx"
    onnx.save(_model(2.0), src)
    out = tmp_path / "out"
    out.mkdir()
    code = (
        "import os, onemodel\n"
        "from onemodel.formats.container.writer import write\n"
        "from onemodel.storage import LocalSink\n"
        f"m = onemodel.load({str(src)!r})\n"
        f"s = LocalSink({str(out / 'm.onemodel')!r})\n"
        "write(m, s)\n"
        "s._f.flush()\n"
        "os._exit(0)\n")  # killed: no commit, no abort
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    partials = [n for n in os.listdir(out) if locks.PARTIAL.match(n)]
    assert len(partials) == 1
    partial = out / partials[0]
    whole = onemodel.to_bytes(onemodel.load(src), format="onemodel")
    assert partial.stat().st_size == len(whole)
    assert partial.read_bytes()[:64] == bytes(64) and partial.read_bytes()[64:] == whole[64:]
    with pytest.raises(OneModelError):
        onemodel.load(partial, format="onemodel")
    running = LocalSink(str(out / "other.onemodel"))  # a live write in the same directory
    try:
        onemodel.convert(src, out / "m.onemodel")
        left = sorted(n for n in os.listdir(out) if n.startswith("."))
        assert left == sorted([".other.onemodel.lock", os.path.basename(running._tmp)])
    finally:
        running.abort()
    assert os.listdir(out) == ["m.onemodel"]
    assert (out / "m.onemodel").read_bytes() == whole


def test_a_compressed_model_with_data_files_is_read_without_the_guard(tmp_path):
    """A .onnx.zst model is read from a decompressed temporary file, not from its path: the
    check that the path still names the file read does not apply (it would always fail)."""
    import zstandard

    src = tmp_path / "src.onnx"
    onnx.save(_model(5.0), src)
    onemodel.convert(src, tmp_path / "m.onnx", external_data="w.bin", threshold=0)
    packed = zstandard.ZstdCompressor().compress((tmp_path / "m.onnx").read_bytes())
    (tmp_path / "m.onnx.zst").write_bytes(packed)
    with onemodel.load(tmp_path / "m.onnx.zst") as m:
        assert [float(t.numpy()[0]) for t in m.graph.initializers] == [5.0, 6.0, 7.0, 8.0]
    assert onemodel.check(tmp_path / "m.onnx.zst", full=True).ok


def test_a_write_takes_over_what_a_killed_write_left(tmp_path):
    """A write killed after publishing its first .onnx leaves the model naming a staged file,
    the data file of the old version under the name beside it. The next write (no --force)
    replaces both as the destination's own and removes the staged file; a staged file of
    another model in the directory stays."""
    src_a, src_b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(_model(1.0), src_a)
    onnx.save(_model(9.0), src_b)
    out, other = tmp_path / "out", tmp_path / "other"
    out.mkdir()
    other.mkdir()
    onemodel.convert(src_a, out / "m.onnx", external_data="w.bin", threshold=0)
    onemodel.convert(src_b, other / "m.onnx", external_data="w.bin", threshold=0)
    staged = staged_location("w.bin", "0123abcd", owner_tag(str(out / "m.onnx")))
    (out / staged).write_bytes((other / "w.bin").read_bytes())
    foreign = staged_location("w.bin", "0123abcd", owner_tag(str(out / "n.onnx")))
    (out / foreign).write_bytes(b"another model's")
    proto = onnx.load(other / "m.onnx", load_external_data=False)
    for t in proto.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = staged
    (out / "m.onnx").write_bytes(proto.SerializeToString())
    with onemodel.load(out / "m.onnx") as m:  # the killed write's model: version B, whole
        assert float(m.graph.initializers[0].numpy()[0]) == 9.0
    onemodel.convert(src_a, out / "m.onnx", external_data="w.bin", threshold=0)
    assert sorted(os.listdir(out)) == sorted(["m.onnx", "w.bin", foreign])
    with onemodel.load(out / "m.onnx") as m:
        assert float(m.graph.initializers[0].numpy()[0]) == 1.0


@pytest.mark.parametrize("size", [100, 3 << 20], ids=["buffered", "file-to-file"])
def test_the_first_bytes_are_written_last(tmp_path, size):
    """Whichever way the bytes go (written, or copied file to file from a mapped source), the
    temporary file holds zeros in its first 64 bytes until commit, then exactly the source."""
    data = np.random.default_rng(0).integers(1, 255, size, dtype=np.uint8).tobytes()
    (tmp_path / "src.bin").write_bytes(data)
    with open_source(str(tmp_path / "src.bin")) as src:
        sink = LocalSink(str(tmp_path / "dst.bin"))
        sink.copy_from(src, 0, size)
        sink._f.flush()
        partial = Path(sink._tmp).read_bytes()
        assert partial[:64] == bytes(64) and partial[64:] == data[64:]
        sink.commit()
    assert (tmp_path / "dst.bin").read_bytes() == data


@pytest.mark.skipif(not locks.HAVE_FLOCK, reason="no flock: partials are never removed")
def test_a_partial_keeps_its_lock_until_it_is_renamed(tmp_path, monkeypatch):
    """A new-user trial: 8 processes converting into one directory failed 29 times in 400
    (``cannot write file: No such file or directory``): a writer closed its temporary file,
    releasing its lock, before the rename, and another writer's cleaning of dead partials
    (``remove_stale_partials``) removed it in that gap. The cleaner runs in the gap here."""
    cleaned = []
    chmod = os.chmod

    def chmod_then_clean(path, mode, *a, **k):  # (between the close and the rename)
        chmod(path, mode, *a, **k)
        cleaned.extend(locks.remove_stale_partials(str(tmp_path)))

    monkeypatch.setattr(os, "chmod", chmod_then_clean)
    sink = LocalSink(str(tmp_path / "m.bin"))
    sink.write(b"x" * 100)
    sink.commit()
    assert cleaned == [] and (tmp_path / "m.bin").read_bytes() == b"x" * 100
    # a partial whose writer is gone is still cleaned
    dead = tmp_path / ".m.bin.abcd1234.partial"
    dead.write_bytes(b"")
    assert locks.remove_stale_partials(str(tmp_path)) == [dead.name]
