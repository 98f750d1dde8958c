"""``onemodel scan``: one row per model, hostile files as rows, duplicates, resume, Parquet,
bytes read (issue 29). The executor is run in this process (``jobs=1``)."""

from __future__ import annotations

import json
import os
import pathlib

import pytest
from scan_fleet import chain_bytes, make_fleet, make_hostile

import onemodel
from onemodel.scan import FIELDS, SCHEMA_VERSION, expand, failed_row, read_catalog
from onemodel.scan.catalog import JOURNAL_SUFFIX, read_jsonl
from onemodel.scan.summary import summarize_rows

pytest.importorskip("onnx")

MODELS = pathlib.Path(__file__).resolve().parents[2] / "testdata" / "models"


def _stable(rows):
    """Rows without ``seconds``, the one field that differs between two runs."""
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


@pytest.fixture
def fleet(tmp_path):
    root = make_fleet(tmp_path / "fleet")
    kinds = make_hostile(tmp_path / "fleet")
    return root, kinds


def test_sources_expand_directories_globs_and_lists_into_models_only(tmp_path, fleet):
    root, kinds = fleet
    good = sorted(str(p) for p in pathlib.Path(root, "good").rglob("*")
                  if p.name.endswith((".onnx", ".onemodel", ".onnx.zst")))
    assert len(good) == 9  # m0..m5, the copy, m1.onemodel, sub/m2.onnx.zst
    assert expand(os.path.join(root, "good")) == good  # no notes.txt, no w.data
    assert expand(os.path.join(root, "good", "m*.onnx")) == [
        os.path.join(root, "good", f"m{i}.onnx") for i in range(6)]
    listing = tmp_path / "list.txt"
    listing.write_text(f"# two sources\n\n{os.path.join(root, 'good', 'm3.onnx')}\n"
                       f"{os.path.join(root, 'hostile')}\n")
    want = sorted([os.path.join(root, "good", "m3.onnx"), *kinds])
    assert expand([f"@{listing}", os.path.join(root, "good", "m3.onnx")]) == want
    # a file named explicitly is a source whatever its name
    assert expand(os.path.join(root, "good", "notes.txt")) == [
        os.path.join(root, "good", "notes.txt")]
    nested = tmp_path / "nested.txt"
    nested.write_text(f"@{listing}\n")
    with pytest.raises(onemodel.UsageError, match="lists do not nest"):
        expand(f"@{nested}")


def test_every_hostile_file_is_a_row_with_its_kind_and_the_rest_are_read(fleet):
    from servers.fifo import run_guarded

    root, kinds = fleet
    result = run_guarded(lambda: onemodel.scan(root, jobs=1),
                         os.path.join(root, "hostile", "fifo.onnx"))
    rows = {r["source"]: r for r in result.rows}
    assert [r["source"] for r in result.rows] == sorted(rows)
    assert len(kinds) == 21 and len(rows) == 9 + 21
    for path, kind in kinds.items():
        row = rows[path]
        assert (row["error_kind"], row["format"]) == (kind, None), row
        assert "\n" not in row["error"] and "Traceback" not in row["error"]
        assert path in row["error"]  # the CLI's line names the file
    fifo = rows[os.path.join(root, "hostile", "fifo.onnx")]
    assert "FIFO" in fifo["error"]
    for path, row in rows.items():
        assert list(row) == list(FIELDS) and row["schema"] == SCHEMA_VERSION
        if path in kinds:
            continue
        assert row["error_kind"] is None, row
        # y = x + w0 + w1 + w2, three 8x8 float32 initializers
        assert (row["nodes"], row["ops"], row["initializers"], row["parameters"]) == \
            (3, {"Add": 3}, 3, 192)
        assert row["by_dtype"] == {"float": {"tensors": 3, "parameters": 192, "bytes": 768}}
        assert row["opsets"] == [{"domain": "", "version": 17}]
        assert row["ir_version"] == 8
        assert row["digest"] is None and row["tensors"] is None  # not asked for
    m1 = rows[os.path.join(root, "good", "m1.onnx")]
    assert (m1["format"], m1["producer"], m1["bytes"]) == \
        ("onnx", "exporter-b", os.path.getsize(os.path.join(root, "good", "m1.onnx")))
    assert rows[os.path.join(root, "good", "m1.onemodel")]["format"] == "onemodel"
    s = result.summary
    assert s["models"] == len(rows) and s["failed"] == len(kinds)
    assert s["errors"] == {"Malformed": 10, "InvalidModel": 4, "Io": 4, "Unsupported": 3}
    assert s["formats"] == {"onnx": 8, "onemodel": 1}
    assert s["producers"] == {"exporter-b": 5, "exporter-a": 4}  # m1's three forms, m3, m5
    assert s["validity"] == {"unreadable": 21, "read": 9}
    assert len(s["slowest"]) == 5 and len(s["largest"]) == 5


def test_check_counts_are_those_of_onemodel_check(fleet):
    root, kinds = fleet
    result = onemodel.scan(os.path.join(root, "good"), jobs=1, check=True)
    for row in result.rows:
        report = onemodel.check(row["source"])
        assert (row["check_errors"], row["check_warnings"], row["check_infos"]) == \
            (len(report.errors), len(report.warnings), len(report.infos))
        assert sum(row["check_codes"].values()) == len(report.findings)
    # a model the check reads but load refuses: the check's counts and the error both
    row = onemodel.scan(os.path.join(root, "hostile", "outside.onnx"), jobs=1,
                        check=True).rows[0]
    assert row["error_kind"] == "InvalidModel" and row["check_codes"] == {"OM203": 1}
    assert result.summary["validity"] == {"valid": 9}


def test_duplicates_identical_models_and_shared_tensors(fleet):
    root, _ = fleet
    good = os.path.join(root, "good")
    result = onemodel.scan(good, jobs=1, duplicates=True)
    d = result.duplicates
    path = lambda name: os.path.join(good, name)  # noqa: E731
    # m1 three ways (a byte copy, OneModel), m2 twice (zstd): content-identical
    assert d["identical"] == [
        {"digest": result.rows[0]["digest"],
         "sources": [path("copy_of_m1.onnx"), path("m1.onemodel"), path("m1.onnx")]},
        {"digest": next(r["digest"] for r in result.rows if r["source"] == path("m2.onnx")),
         "sources": [path("m2.onnx"), path("sub/m2.onnx.zst")]}]
    # 9 models of 3 tensors of 256 bytes; distinct: m0..m5's 18 but m5's w0 (m0's)
    assert (d["tensors"], d["tensor_bytes"]) == (27, 27 * 256)
    assert d["unique_tensor_bytes"] == 17 * 256
    assert d["saved_bytes"] == 10 * 256
    assert {"sources": [path("m0.onnx"), path("m5.onnx")], "tensors": 1, "bytes": 256} \
        in d["shared"]
    for row in result.rows:
        assert [t["path"] for t in row["tensors"]] == [f"graph.initializers[{i}]"
                                                       for i in range(3)]
        assert all(t["bytes"] == 256 and t["dtype"] == "float" for t in row["tensors"])
        assert row["digest"] == onemodel.digest(row["source"]).hex


def test_testdata_models_scan_with_digests_equal_to_onemodel_digest():
    result = onemodel.scan(str(MODELS), jobs=1, hash=True)
    assert len(result.rows) == len(list(MODELS.rglob("*.onnx")))
    for row in result.rows:
        assert row["error_kind"] is None, row
        assert row["digest"] == onemodel.digest(row["source"]).hex
    ext = next(r for r in result.rows if r["source"].endswith("mlp_dynamo.onnx"))
    assert ext["external_tensors"] > 0 and ext["data_bytes"] > 0


def test_resume_after_a_torn_output_scans_only_the_rest_and_duplicates_nothing(tmp_path, fleet):
    root, _ = fleet
    out = str(tmp_path / "catalog.jsonl")
    full = onemodel.scan(root, out, jobs=1)
    lines = pathlib.Path(out).read_bytes().splitlines(keepends=True)
    assert len(lines) == 30 and read_catalog(out) == full.rows
    # a scan stopped after 7 rows, in the middle of writing the 8th
    pathlib.Path(out).write_bytes(b"".join(lines[:7]) + lines[7][:25])
    assert len(read_jsonl(out)) == 7
    resumed = onemodel.scan(root, out, jobs=1, resume=True)
    assert (resumed.scanned, resumed.skipped) == (23, 7)
    assert _stable(resumed.rows) == _stable(full.rows)
    assert _stable(read_catalog(out)) == _stable(full.rows)
    sources = [json.loads(x)["source"] for x in pathlib.Path(out).read_text().splitlines()]
    assert sources == sorted(set(sources)) and len(sources) == 30


def test_an_interrupted_scan_keeps_its_complete_rows_and_resumes(tmp_path, fleet):
    root, _ = fleet
    out = str(tmp_path / "catalog.parquet")
    seen = []

    def stop_after_five(row):
        seen.append(row)
        if len(seen) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        onemodel.scan(root, out, jobs=1, progress=stop_after_five)
    assert not os.path.exists(out)
    assert [r["source"] for r in read_jsonl(out + JOURNAL_SUFFIX)] == \
        [r["source"] for r in seen]
    resumed = onemodel.scan(root, out, jobs=1, resume=True)
    assert (resumed.scanned, resumed.skipped) == (25, 5)
    assert not os.path.exists(out + JOURNAL_SUFFIX)
    assert [r["source"] for r in read_catalog(out)] == expand(root)


def test_parquet_and_json_lines_hold_the_same_rows(tmp_path, fleet):
    pytest.importorskip("pyarrow")
    root, _ = fleet
    a = onemodel.scan(root, str(tmp_path / "c.jsonl"), jobs=1, tensors=True, check=True)
    b = onemodel.scan(root, str(tmp_path / "c.parquet"), jobs=1, tensors=True, check=True)
    assert _stable(read_catalog(str(tmp_path / "c.parquet"))) == _stable(a.rows)
    assert _stable(b.rows) == _stable(a.rows)
    # a row written and read back is the same row, seconds included
    from onemodel.scan.catalog import read_parquet, write_parquet
    write_parquet(a.rows, str(tmp_path / "same.parquet"))
    assert read_parquet(str(tmp_path / "same.parquet")) == a.rows


def test_without_hash_a_remote_scan_reads_the_structure_only(http_server):
    """32 float32 tensors of 1 MiB each over HTTP: the structure costs the first 64 KiB and one
    8 KiB block per initializer (ONNX), the header and manifest (OneModel); the hash reads
    each byte about once."""
    data = chain_bytes(n=32, shape=(256, 1024), seed=3)
    http_server.files["m.onnx"] = data
    http_server.files["m.onemodel"] = onemodel.to_bytes(onemodel.load(data), format="onemodel")
    for name in ("m.onnx", "m.onemodel"):
        size = len(http_server.files[name])
        http_server.log.clear()
        row = onemodel.scan(http_server.url(name), jobs=1).rows[0]
        assert row["error_kind"] is None and row["parameters"] == 32 * 256 * 1024
        assert row["read_bytes"] == http_server.bytes_sent
        assert http_server.bytes_sent <= 0.02 * size, (name, http_server.bytes_sent)
        http_server.log.clear()
        row = onemodel.scan(http_server.url(name), jobs=1, check=True).rows[0]
        assert row["check_errors"] == 0 and row["read_bytes"] == http_server.bytes_sent
        assert http_server.bytes_sent <= 0.02 * size, (name, http_server.bytes_sent)
        http_server.log.clear()
        row = onemodel.scan(http_server.url(name), jobs=1, hash=True).rows[0]
        assert row["digest"] == onemodel.digest(data).hex
        assert size <= http_server.bytes_sent <= 1.02 * size, (name, http_server.bytes_sent)


def test_convert_to_writes_each_readable_model_with_its_digest_checked(tmp_path, fleet):
    root, kinds = fleet
    out = tmp_path / "converted"
    result = onemodel.scan(root, jobs=1, convert_to=str(out))
    for row in result.rows:
        if row["source"] in kinds:
            assert row["output"] is None and row["error_kind"] is not None
            continue
        assert row["output_error"] is None, row
        assert row["output"].startswith(str(out)) and row["output"].endswith(".onemodel")
        assert onemodel.digest(row["output"]).hex == row["digest"]
    outputs = sorted(r["output"] for r in result.rows if r["output"])
    assert len(set(outputs)) == 9  # m1.onnx and m1.onemodel do not write one file
    assert str(out / "good" / "m1.onemodel") in outputs
    assert str(out / "good" / "m1~2.onemodel") in outputs
    assert str(out / "good" / "sub" / "m2.onemodel") in outputs
    # ONNX with one data file per model, in a folder of its own
    from scan_fleet import write
    big = write(str(tmp_path / "big" / "b.onnx"), chain_bytes(n=2, shape=(64, 64)))
    r2 = onemodel.scan(big, jobs=1, convert_to=str(tmp_path / "onnx"), layout="file").rows[0]
    assert r2["output"] == str(tmp_path / "onnx" / "b" / "b.onnx")
    assert r2["output_error"] is None
    with onemodel.load(r2["output"]) as m:
        assert all(t.is_external for t in m.graph.initializers)


def test_a_conversion_over_a_source_is_refused_before_anything_is_read(fleet):
    root, _ = fleet
    with pytest.raises(onemodel.UsageError, match="would replace a model scanned"):
        onemodel.scan(os.path.join(root, "good", "m0.onnx"), jobs=1,
                      convert_to=os.path.join(root, "good"), layout="inline")


def test_failed_row_is_a_row_of_its_kind():
    row = failed_row("s3://b/m.onnx?X-Amz-Signature=secret", "Timeout",
                     "the model took more than\n60 s")
    assert list(row) == list(FIELDS)
    assert (row["source"], row["error_kind"], row["error"]) == \
        ("s3://b/m.onnx?X-Amz-Signature=***", "Timeout", "the model took more than 60 s")


def test_the_command_line_writes_the_catalog_and_prints_the_summary(tmp_path, fleet):
    from typer.testing import CliRunner

    from onemodel.cli import app

    root, kinds = fleet
    out = str(tmp_path / "c.jsonl")
    r = CliRunner().invoke(app, ["scan", root, "-o", out, "-j", "1", "--duplicates"])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("scanned 30 models: 30 rows, 21 failed")
    assert "errors: Malformed 10, InvalidModel 4, Io 4, Unsupported 3" in r.output
    assert "2 groups of identical models" in r.output
    assert len(read_catalog(out)) == 30
    r = CliRunner().invoke(app, ["scan", os.path.join(root, "good", "m0.onnx"), "-j", "1"])
    assert r.exit_code == 0
    row = json.loads(r.stdout.splitlines()[0])
    assert row["source"].endswith("m0.onnx") and row["nodes"] == 3
    r = CliRunner().invoke(app, ["scan", os.path.join(root, "good"), "-j", "1", "--json",
                                 "--duplicates", "-o", str(tmp_path / "d.jsonl")])
    doc = json.loads(r.stdout)
    assert (doc["scanned"], doc["skipped"], doc["summary"]["models"]) == (9, 0, 9)
    assert [len(g["sources"]) for g in doc["duplicates"]["identical"]] == [3, 2]
    r = CliRunner().invoke(app, ["scan", root, "--resume"])
    assert r.exit_code == 2 and "resume needs the output" in r.output


def test_a_url_prefix_and_a_url_glob_list_the_models_under_them():
    import uuid

    import fsspec

    fs = fsspec.filesystem("memory")
    root = f"scan-{uuid.uuid4().hex[:8]}"
    for p in ("models/a.onnx", "models/sub/b.onnx.zst", "models/a.data", "other/c.onnx"):
        data = chain_bytes(seed=1)
        if p.endswith(".zst"):
            data = onemodel.to_bytes(onemodel.load(data))
            import zstandard
            data = zstandard.ZstdCompressor().compress(data)
        with fs.open(f"{root}/{p}", "wb") as f:
            f.write(data)
    want = [f"memory:///{root}/models/a.onnx", f"memory:///{root}/models/sub/b.onnx.zst"]
    assert expand(f"memory://{root}/models/") == want
    assert expand(f"memory://{root}/models") == want  # a directory without its slash
    assert expand(f"memory://{root}/*/*.onnx") == [f"memory:///{root}/models/a.onnx",
                                                  f"memory:///{root}/other/c.onnx"]
    rows = onemodel.scan(f"memory://{root}/models/", jobs=1, hash=True).rows
    assert [r["error_kind"] for r in rows] == [None, None]
    assert rows[0]["digest"] == rows[1]["digest"] == onemodel.digest(chain_bytes(seed=1)).hex


def test_an_s3_prefix_is_listed_and_read_with_the_storage_options(s3):
    server, bucket = s3
    client = server.client()
    for i in range(3):
        client.put_object(Bucket=bucket, Key=f"fleet/m{i}.onnx", Body=chain_bytes(seed=i))
    client.put_object(Bucket=bucket, Key="fleet/bad.onnx", Body=b"\xff" * 100)
    client.put_object(Bucket=bucket, Key="fleet/readme.txt", Body=b"text")
    result = onemodel.scan(f"s3://{bucket}/fleet/", jobs=1, check=True,
                           storage_options=server.storage_options)
    assert [r["source"] for r in result.rows] == \
        [f"s3://{bucket}/fleet/{n}" for n in ("bad.onnx", "m0.onnx", "m1.onnx", "m2.onnx")]
    assert [r["error_kind"] for r in result.rows] == ["Malformed", None, None, None]
    assert result.summary["validity"] == {"valid": 3, "unreadable": 1}


def test_strings_of_a_model_that_are_not_utf8_or_printable_are_escaped_in_both_catalogs(
        tmp_path):
    pytest.importorskip("pyarrow")
    from scan_fleet import write

    data = chain_bytes(producer="PRODUCER")
    # the producer's octets: invalid UTF-8 and an escape code (the same length)
    data = data.replace(b"PRODUCER", b"PR\xff\x1b[2JR")
    path = write(str(tmp_path / "m" / "odd.onnx"), data)
    for out in ("c.jsonl", "c.parquet"):
        rows = onemodel.scan(path, str(tmp_path / out), jobs=1, tensors=True).rows
        assert rows[0]["producer"] == "PR\\udcff\\x1b[2JR"
        assert _stable(read_catalog(str(tmp_path / out))) == _stable(rows)


def test_the_progress_bar_counts_rows_done_failed_and_bytes_read():
    from onemodel.cli.scan import _Bar

    bar = _Bar(quiet=True)  # (drawn only on a terminal; the counts are kept all the same)
    for row in (failed_row("a.onnx", "Io", "cannot open"),
                {"error_kind": None, "read_bytes": 1536},
                {"error_kind": None, "read_bytes": None}):
        bar(row)
    assert (bar.done, bar.failed, bar.read) == (3, 1, 1536)
    assert bar._text() == "scan: 3 done, 1 failed, 1.5 KiB read"
    assert not bar.enabled


def test_a_scan_leaves_no_file_open(tmp_path, fleet):
    """Every source is closed whatever its row: a scan of thousands of models must not run out
    of descriptors. A mapped (>= 1 MiB) OneModel file the check's reader refuses (an unknown
    type kind: OM205, no model) kept one open per scan."""
    import struct

    from scan_fleet import write

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("no /proc/self/fd to count descriptors")
    root, _ = fleet
    big = onemodel.to_bytes(onemodel.load(chain_bytes(n=2, shape=(512, 512))),
                            format="onemodel")
    length = struct.unpack_from("<Q", big, 24)[0]
    manifest = big[64:64 + length].replace(b'"kind":"tensor"', b'"kind":"tensox"', 1)
    refused = write(str(tmp_path / "big" / "refused.onemodel"),
                    big[:64] + manifest + big[64 + length:])
    fds = lambda: len(os.listdir("/proc/self/fd"))  # noqa: E731
    onemodel.scan([root, refused], jobs=1, check=True)  # (imports and caches settle)
    before = fds()
    for kw in ({}, {"check": True}, {"hash": True, "check": True}):
        rows = {r["source"]: r for r in onemodel.scan([root, refused], jobs=1, **kw).rows}
        assert rows[refused]["error_kind"] == "Unsupported"
    assert fds() == before


def test_a_file_name_with_an_escape_code_is_shown_escaped_and_found_again_on_resume(tmp_path):
    from scan_fleet import write

    path = write(str(tmp_path / "d" / "odd\x1b[2Jname.onnx"), chain_bytes())
    out = str(tmp_path / "c.jsonl")
    first = onemodel.scan(str(tmp_path / "d"), out, jobs=1)
    assert first.rows[0]["source"] == path.replace("\x1b", "\\x1b")
    assert first.rows[0]["error_kind"] is None
    again = onemodel.scan(str(tmp_path / "d"), out, jobs=1, resume=True)
    assert (again.scanned, again.skipped) == (0, 1)


def test_without_hash_a_bucket_scan_asks_the_server_for_at_most_2_percent_of_its_bytes(s3):
    """A bucket of 6 models of 12 MiB of weights each (6 float32 tensors of 2 MiB): inline
    ONNX, OneModel, and ONNX with one external data file, two of each. Without ``--hash``
    (``--check`` included) the object bytes the GET requests ask for, counted from moto's
    request log, are at most 2% of the bucket's bytes (the first 64 KiB of each file and one
    8 KiB block per inline initializer); with ``--hash`` each byte is read about once."""
    from servers.s3 import object_bytes_requested

    server, bucket = s3
    fs = server.filesystem()
    objects = {}
    for i in range(6):
        data = chain_bytes(n=6, shape=(512, 1024), seed=100 + i)
        if i % 3 == 0:
            objects[f"{bucket}/m/{i}.onnx"] = data
        elif i % 3 == 1:
            objects[f"{bucket}/m/{i}.onemodel"] = onemodel.to_bytes(onemodel.load(data),
                                                                     format="onemodel")
        else:
            onemodel.save(onemodel.load(data), f"s3://{bucket}/m/{i}.onnx",
                          storage_options=server.storage_options, external_data=f"{i}.data")
    fs.pipe(objects)
    sizes = {f"/{p}": fs.size(p) for p in fs.find(f"{bucket}/m")}
    total = sum(sizes.values())
    assert len(sizes) == 8 and total >= 6 * 6 * 512 * 1024 * 4  # 6 models and 2 data files
    source = f"s3://{bucket}/m/"
    for kw in ({}, {"check": True}):
        with server.recording() as requests:
            result = onemodel.scan(source, jobs=1, storage_options=server.storage_options, **kw)
        assert [r["error_kind"] for r in result.rows] == [None] * 6
        assert all(r["parameters"] == 6 * 512 * 1024 for r in result.rows)
        asked = object_bytes_requested(requests, sizes)
        assert 0 < asked <= 0.02 * total, (kw, asked, total)
    with server.recording() as requests:
        result = onemodel.scan(source, jobs=1, hash=True, storage_options=server.storage_options)
    assert all(r["digest"] for r in result.rows)
    assert total * 0.98 <= object_bytes_requested(requests, sizes) <= 1.05 * total


def test_check_rows_give_the_sizes_of_the_files_as_plain_rows_do():
    # --check reads through the check's reader: its model's files are sized before it closes
    models = [str(MODELS / "cnn_dynamo.onnx"), str(MODELS / "external" / "mlp_dynamo.onnx")]
    want = [(os.path.getsize(models[0]), 0),
            (os.path.getsize(models[1]), os.path.getsize(models[1] + ".data"))]
    for kw in ({}, {"check": True}, {"check": True, "hash": True}):
        rows = onemodel.scan(models, jobs=1, **kw).rows
        assert [(r["bytes"], r["data_bytes"]) for r in rows] == want, kw


def test_a_remote_model_of_many_small_tensors_costs_few_requests(http_server):
    """50 initializers of 64 KiB over HTTP: the gaps between their records (their values) are
    read through the read-ahead window, not skipped by one request each (51 requests with the
    former 4 KiB of sequential slack; storage/remote.py SEQUENTIAL_SLACK)."""
    data = chain_bytes(n=50, shape=(64, 256), seed=5)
    http_server.files["small.onnx"] = data
    http_server.log.clear()
    row = onemodel.scan(http_server.url("small.onnx"), jobs=1, check=True).rows[0]
    assert row["error_kind"] is None and row["initializers"] == 50
    assert len(http_server.log) <= 8, len(http_server.log)


def test_a_source_that_does_not_exist_is_refused_but_a_listed_one_is_a_row(tmp_path):
    missing = str(tmp_path / "no-such-model.onnx")
    with pytest.raises(onemodel.UsageError, match="no such file or directory"):
        onemodel.scan(missing, jobs=1)
    listing = tmp_path / "list.txt"
    listing.write_text(missing + "\n")
    rows = onemodel.scan(f"@{listing}", jobs=1).rows
    assert [(r["source"], r["error_kind"]) for r in rows] == [(missing, "Io")]


def _catalog_of(tmp_path, name="c.jsonl"):
    """A directory of two models and its catalog (plain rows): ``(directory, catalog, bytes)``."""
    import shutil

    d = tmp_path / "models"
    d.mkdir()
    for m in ("cnn_dynamo.onnx", "bert_tiny.onnx"):
        shutil.copyfile(MODELS / m, d / m)
    out = tmp_path / name
    onemodel.scan(str(d), str(out), jobs=1)
    return d, out, out.read_bytes()


def test_a_catalog_that_is_also_a_source_or_its_list_is_refused_untouched(tmp_path):
    d, out, before = _catalog_of(tmp_path)
    with pytest.raises(onemodel.UsageError, match="is a source"):
        onemodel.scan([str(d), str(out)], str(out), jobs=1)
    listing = tmp_path / "list.jsonl"
    listing.write_text(f"{d / 'cnn_dynamo.onnx'}\n")
    with pytest.raises(onemodel.UsageError, match="is a list of sources"):
        onemodel.scan(f"@{listing}", str(listing), jobs=1)
    assert out.read_bytes() == before and listing.read_text() == f"{d / 'cnn_dynamo.onnx'}\n"


def test_a_conversion_into_the_catalog_is_refused_before_anything_is_written(tmp_path):
    d, out, before = _catalog_of(tmp_path)
    with pytest.raises(onemodel.UsageError, match="conversion's directory .* is the catalog"):
        onemodel.scan(str(d), str(out), jobs=1, convert_to=str(out))
    assert out.read_bytes() == before
    fresh = tmp_path / "fresh.jsonl"
    with pytest.raises(onemodel.UsageError, match="is the catalog"):
        onemodel.scan(str(d), str(fresh), jobs=1, convert_to=str(tmp_path / "." / "fresh.jsonl"))
    assert not fresh.exists()


@pytest.mark.parametrize("name", ["c.jsonl", "c.parquet"])
def test_a_scan_that_cannot_start_leaves_the_catalog_as_it_was(tmp_path, monkeypatch, name):
    if name.endswith(".parquet"):
        pytest.importorskip("pyarrow")
    from onemodel.scan import executors

    d, out, before = _catalog_of(tmp_path, name)

    def unreachable(*args, **kwargs):
        raise onemodel.IoError("cannot reach the Dask scheduler", source="tcp://127.0.0.1:1")
        yield  # (a generator, as run_tasks is)

    monkeypatch.setattr(executors, "run_tasks", unreachable)
    with pytest.raises(onemodel.IoError):
        onemodel.scan(str(d), str(out), jobs=1)
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["models", name])  # no journal


def test_resuming_a_file_that_is_not_a_catalog_is_refused_untouched(tmp_path):
    d, _, _ = _catalog_of(tmp_path)
    other = tmp_path / "other.jsonl"
    for text in ('{"user": 1, "text": "important"}\n', "notes, no newline",
                 " \n \n\n"):  # (a data file of whitespace bytes: no row, no catalog)
        other.write_text(text)
        with pytest.raises(onemodel.UsageError, match="not the catalog of a scan"):
            onemodel.scan(str(d), str(other), jobs=1, resume=True)
        assert other.read_text() == text


def test_resuming_a_parquet_file_that_is_not_a_catalog_is_refused_untouched(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    d, _, _ = _catalog_of(tmp_path)
    text = tmp_path / "text.parquet"
    text.write_text('{"user": 1}\n')
    with pytest.raises(onemodel.UsageError, match="text.parquet is not the catalog of a scan "
                       r"\(it is not a Parquet file\)"):
        onemodel.scan(str(d), str(text), jobs=1, resume=True)
    assert text.read_text() == '{"user": 1}\n'
    table = tmp_path / "table.parquet"
    pq.write_table(pa.table({"user": [1, 2], "text": ["important", "too"]}), table)
    before = table.read_bytes()
    with pytest.raises(onemodel.UsageError, match=r"\(row 1 is not a row of schema 1\)"):
        onemodel.scan(str(d), str(table), jobs=1, resume=True)
    assert table.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["models", "c.jsonl", "text.parquet", "table.parquet"])  # no journal either


def test_a_catalog_over_a_models_data_file_or_another_file_is_refused_untouched(tmp_path):
    """A new-user trial: a scan whose catalog is named as a model's external data file
    (``weights.jsonl``) wrote the catalog over the weights. A scan replaces only its own
    earlier output: any other file that is not empty is refused, JSON lines or Parquet (and a
    Parquet catalog's journal), before anything is written; an earlier catalog is replaced."""
    import importlib.util

    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save_model

    d = tmp_path / "d"
    d.mkdir()
    w = numpy_helper.from_array(np.ones((64, 64), np.float32), "W")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])], [w])
    save_model(helper.make_model(g), str(d / "m.onnx"), save_as_external_data=True,
               location="weights.jsonl", size_threshold=0)
    weights = (d / "weights.jsonl").read_bytes()
    with pytest.raises(onemodel.UsageError, match=r"weights.jsonl exists and is not the catalog "
                       r"of a scan \(its first line is not a row\): a scan replaces only its "
                       "own output"):
        onemodel.scan(str(d), str(d / "weights.jsonl"), jobs=1, hash=True)
    assert (d / "weights.jsonl").read_bytes() == weights
    notes = tmp_path / "notes.parquet"
    notes.write_text("not parquet")
    with pytest.raises(onemodel.UsageError, match=r"\(it is not a Parquet file\)"):
        onemodel.scan(str(d), str(notes), jobs=1)
    if importlib.util.find_spec("pyarrow") is not None:
        journal = tmp_path / ("c.parquet" + JOURNAL_SUFFIX)
        journal.write_text("my notes\n")
        with pytest.raises(onemodel.UsageError, match="c.parquet.rows.jsonl exists"):
            onemodel.scan(str(d), str(tmp_path / "c.parquet"), jobs=1)
        assert journal.read_text() == "my notes\n"
    assert notes.read_text() == "not parquet"
    out = tmp_path / "c.jsonl"
    out.write_bytes(b"")  # empty: nothing to lose
    onemodel.scan(str(d), str(out), jobs=1)
    onemodel.scan(str(d), str(out), jobs=1, hash=True)  # an earlier catalog: replaced
    assert [r["digest"] is not None for r in read_catalog(str(out))] == [True]
    assert (d / "weights.jsonl").read_bytes() == weights


@pytest.mark.parametrize("resume", [False, True])
def test_a_catalog_that_is_a_fifo_is_refused_at_once(tmp_path, resume):
    """A new-user trial: ``-o`` a FIFO waited forever for a reader; it is an Io error, as for
    every other output."""
    import subprocess
    import sys

    fifo = tmp_path / "c.jsonl"
    os.mkfifo(fifo)
    done = subprocess.run([sys.executable, "-m", "onemodel", "scan", str(MODELS), "-o",
                           str(fifo), *(["--resume"] if resume else [])],
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (
        2, f"Io: cannot write: it is a FIFO, not a regular file in {fifo}\n")


@pytest.mark.parametrize("name", ["c.jsonl", "c.parquet"])
def test_resuming_with_another_flag_keeps_what_the_earlier_rows_held(tmp_path, name):
    """A new-user trial: ``--check`` then ``--resume --hash`` replaced each row by one with the
    digest but without the check's counts (null: "validity" became "read"). A row scanned
    again for what this scan asks is scanned for what its earlier row held too."""
    if name.endswith(".parquet"):
        pytest.importorskip("pyarrow")
    d, out, _ = _catalog_of(tmp_path, name)  # rows without digests or checks
    onemodel.scan(str(d), str(out), jobs=1, check=True)
    checked = {r["source"]: r["check_codes"] for r in read_catalog(str(out))}
    assert all(v is not None for v in checked.values())
    r = onemodel.scan(str(d), str(out), jobs=2, resume=True, hash=True)
    assert (r.scanned, r.rescanned) == (2, 2)
    rows = read_catalog(str(out))
    assert {x["source"]: x["check_codes"] for x in rows} == checked
    assert all(x["digest"] and x["check_errors"] is not None for x in rows)
    assert r.summary == summarize_rows(rows) and "valid" in str(r.summary)


def test_resuming_with_more_asked_scans_again_the_rows_that_lack_it(tmp_path):
    d, out, _ = _catalog_of(tmp_path)  # rows without digests
    import shutil

    shutil.copyfile(d / "cnn_dynamo.onnx", d / "copy.onnx")
    r = onemodel.scan(str(d), str(out), jobs=1, resume=True, duplicates=True)
    assert (r.scanned, r.skipped, r.rescanned) == (3, 0, 2)
    assert all(row["digest"] and row["tensors"] for row in r.rows)
    assert [g["sources"] for g in r.duplicates["identical"]] == [
        [str(d / "cnn_dynamo.onnx"), str(d / "copy.onnx")]]
    assert len(read_catalog(str(out))) == 3
    again = onemodel.scan(str(d), str(out), jobs=1, resume=True, hash=True)
    assert (again.scanned, again.skipped, again.rescanned) == (0, 3, 0)
    first = onemodel.scan(str(d), str(out), jobs=1, resume=True, convert_to=str(tmp_path / "a"))
    assert (first.scanned, first.skipped, first.rescanned) == (3, 0, 3)
    second = onemodel.scan(str(d), str(out), jobs=1, resume=True,
                           convert_to=str(tmp_path / "b"))  # another directory: again
    assert (second.scanned, second.skipped, second.rescanned) == (3, 0, 3)
    assert [r["output"] for r in read_catalog(str(out))] == [
        str(tmp_path / "b" / n) for n in ("bert_tiny.onemodel", "cnn_dynamo.onemodel",
                                          "copy.onemodel")]
    assert sorted(os.listdir(tmp_path / "b")) == sorted(os.listdir(tmp_path / "a"))
    same = onemodel.scan(str(d), str(out), jobs=1, resume=True, convert_to=str(tmp_path / "b"))
    assert (same.scanned, same.skipped, same.rescanned) == (0, 3, 0)


def test_a_conversion_of_a_file_name_that_is_not_utf8_is_named_escaped(tmp_path):
    # the output of bad\xff.onnx: its row names it escaped as the source is, the scan goes on
    import shutil

    d = tmp_path / "weird"
    d.mkdir()
    odd = os.path.join(os.fsencode(str(d)), b"bad\xff.onnx")
    shutil.copyfile(MODELS / "cnn_dynamo.onnx", odd)
    shutil.copyfile(MODELS / "cnn_dynamo.onnx", d / "good.onnx")
    out = tmp_path / "c.jsonl"
    rows = onemodel.scan(str(d), str(out), jobs=1, convert_to=str(tmp_path / "o")).rows
    assert [r["error_kind"] for r in rows] == [None, None]
    assert [r["output"] for r in rows] == [
        str(tmp_path / "o" / "bad\\udcff.onemodel"), str(tmp_path / "o" / "good.onemodel")]
    assert rows[0]["source"].endswith("bad\\udcff.onnx")
    assert [r["output"] for r in read_catalog(str(out))] == [r["output"] for r in rows]


@pytest.mark.parametrize("layout", ["per_tensor", "file", "safetensors", "keep"])
def test_models_of_one_folder_with_the_same_tensor_names_convert_in_any_layout(tmp_path, layout):
    # per_tensor names data files by tensor: two models of one folder whose tensors share names
    # would write the same files; each model converted with data files gets a folder of its own
    from scan_fleet import write

    d = tmp_path / "src"
    for i in range(3):  # the same initializer names (w0, w1), other values
        write(str(d / "a" / f"m{i}.onnx"), chain_bytes(n=2, shape=(64, 64), seed=10 + i))
    runs = []
    for jobs in (1, 2, 1):
        out = tmp_path / f"out-{len(runs)}"
        rows = onemodel.scan(str(d), jobs=jobs, convert_to=str(out), layout=layout).rows
        assert [r["output_error"] for r in rows] == [None] * 3, rows
        for r in rows:
            assert r["output"] == str(out / f"m{r['source'][-6]}" / f"m{r['source'][-6]}.onnx")
            assert onemodel.digest(r["output"]).hex == r["digest"]
        runs.append([{k: v for k, v in r.items() if k not in ("seconds", "output")}
                     for r in rows])
    assert runs[0] == runs[1] == runs[2]


def test_the_command_line_says_an_interrupted_scan_resumes_and_what_resuming_kept(
        tmp_path, monkeypatch):
    import sys

    from typer.testing import CliRunner

    from onemodel.cli import app

    d, out, _ = _catalog_of(tmp_path)  # two rows, without digests
    package = sys.modules["onemodel.scan"]
    real = package.scan

    def stopped_after_one_row(*args, progress=None, **kwargs):
        def stop(row):
            progress(row)
            raise KeyboardInterrupt
        return real(*args, progress=stop, **kwargs)

    monkeypatch.setattr(package, "scan", stopped_after_one_row)
    fresh = str(tmp_path / "fresh.jsonl")
    r = CliRunner().invoke(app, ["scan", str(d), "-o", fresh, "-j", "1"])
    assert r.exit_code == 130, r.output
    assert f"the rows done so far (1 row) are kept in {fresh}: the same command with --resume " \
        "goes on from them" in r.stderr
    assert len(read_jsonl(fresh)) == 1
    monkeypatch.setattr(package, "scan", real)
    r = CliRunner().invoke(app, ["scan", str(d), "-o", fresh, "-j", "1", "--resume"])
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"scanned 1 model (1 row kept from {fresh}): 2 rows")
    r = CliRunner().invoke(app, ["scan", str(d), "-o", str(out), "-j", "1", "--resume",
                                 "--hash"])
    assert r.stdout.startswith(f"scanned 2 models (2 of those scanned replacing rows of {out} "
                               "that lacked what this scan asks): 2 rows"), r.output
