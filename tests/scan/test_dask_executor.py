"""run_tasks on Dask (the last section of onemodel/scan/executors.py), on a LocalCluster of two
worker processes on 127.0.0.1 shared by the module: the same rows as locally (limits and deaths
included), a worker killed mid-scan loses no row, bounded in-flight tasks, the S3 fleet read by
the workers."""

from __future__ import annotations

import functools
import logging
import os
import pathlib
import signal
import time

import _fleet
import pytest
from _tasks import expected_row, failed, misbehave, pid_row, read_row, sleep_row
from servers.fixtures import s3_server  # noqa: F401
from servers.s3 import free_port

from onemodel.errors import IoError
from onemodel.scan import executors
from onemodel.scan.executors import run_tasks

model_files, s3_fleet = _fleet.model_files, _fleet.s3_fleet  # fixtures

distributed = pytest.importorskip("distributed", reason="dask[distributed] (the dask extra) "
                                                        "is not installed")
import dask  # noqa: E402  (installed with distributed)

pytestmark = pytest.mark.skipif(os.name != "posix", reason="sandboxes need POSIX")


@pytest.fixture(scope="module")
def client():
    """A Client of a LocalCluster with 2 worker processes of 1 thread each, on 127.0.0.1."""
    # a task on 2 workers that died is KilledWorker (the default is 3: fewer deaths to wait
    # for); a worker holds no more tasks than it runs (so that a worker killed ends only those)
    failures = {"distributed.scheduler.allowed-failures": 1,
                "distributed.scheduler.worker-saturation": 1.0}
    with dask.config.set(failures), distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address=None, silence_logs=logging.CRITICAL) as cluster:
        with distributed.Client(cluster, set_as_default=False) as c:
            c.wait_for_workers(2, timeout=60)
            yield c


def rows(function, items, **kw):
    """The rows in item order, after checking that each index came once."""
    got = list(run_tasks(function, items, on_failure=failed, **kw))
    assert sorted(i for i, _ in got) == list(range(len(items)))
    return [row for _, row in sorted(got, key=lambda pair: pair[0])]


def test_same_rows_on_dask_as_locally(client, model_files):
    read = functools.partial(read_row, None)
    paths = list(model_files)
    want = [expected_row(p, model_files[p]) for p in paths]
    assert rows(read, paths, jobs=2) == want
    assert rows(read, paths, dask=client) == want
    # the tasks ran on the workers, in their sandboxes
    pids = {r["pid"] for r in rows(pid_row, list(range(8)), dask=client)}
    workers = set(client.run(os.getpid).values())
    assert pids and not pids & (workers | {os.getpid()})


def test_limits_and_deaths_are_the_same_rows_on_dask(client):
    items = [("ok", 0), ("sleep", 60), ("alloc", 1 << 30), ("exit", 3),
             ("signal", int(signal.SIGKILL)), ("raise", "k"), ("ok", 1)]
    kw = dict(time_limit=1.5, memory_limit=256 << 20)
    start = time.monotonic()
    on_dask = rows(misbehave, items, dask=client, **kw)
    assert time.monotonic() - start < 30
    assert on_dask == rows(misbehave, items, jobs=2, **kw)
    assert [r.get("error") for r in on_dask] == [None, "Limit", "Limit", "Crashed", "Crashed",
                                                 "Internal", None]


def test_a_scheduler_address_works_as_a_client(client):
    address = client.scheduler.address
    assert address.startswith("tcp://127.0.0.1:")
    assert rows(pid_row, list(range(5)), dask=address)[4]["item"] == 4


def test_an_unreachable_scheduler_is_an_io_error(monkeypatch):
    monkeypatch.setattr(executors, "DASK_CONNECT_SECONDS", 1)
    address = f"tcp://127.0.0.1:{free_port()}"
    with pytest.raises(IoError, match="cannot reach the Dask scheduler") as e:
        list(run_tasks(pid_row, [1], dask=address, on_failure=failed))
    assert e.value.source == address


def test_no_more_than_a_window_of_tasks_is_in_flight(client, monkeypatch):
    # (batches of the first size throughout: the bound below is the window's, not the sizes')
    monkeypatch.setattr(executors, "DASK_MAX_ITEMS_PER_TASK", executors.DASK_ITEMS_PER_TASK)
    taken = []

    def items():
        for i in range(60):
            taken.append(i)
            yield i

    window = executors.dask_window(client)
    assert window == 4  # 2 threads, 2 tasks each
    in_flight = [len(taken) for _ in run_tasks(pid_row, items(), dask=client,
                                               on_failure=failed)]
    # items taken but not yielded: `window` batches in flight, and the batch being yielded
    most = (window + 1) * executors.DASK_ITEMS_PER_TASK
    assert all(t - k <= most for k, t in enumerate(in_flight)), in_flight
    assert max(t - k for k, t in enumerate(in_flight)) == most  # the bound is the window's
    assert len(taken) == 60


def test_batches_grow_for_quick_items_and_shrink_for_slow_ones():
    assert executors.dask_batch_size(None) == executors.DASK_ITEMS_PER_TASK
    assert executors.dask_batch_size(0.0001) == executors.DASK_MAX_ITEMS_PER_TASK
    assert executors.dask_batch_size(0.05) == int(executors.DASK_TASK_SECONDS / 0.05)
    assert executors.dask_batch_size(3.0) == 1


class _CountingClient:
    """The client, counting the batches submitted and their sizes."""

    def __init__(self, client):
        self._client, self.sizes = client, []

    def submit(self, fn, function, items, *args, **kwargs):
        self.sizes.append(len(items))
        return self._client.submit(fn, function, items, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._client, name)


def test_quick_items_go_in_larger_batches(client):
    counting = _CountingClient(client)
    got = sorted(i for i, _ in run_tasks(pid_row, list(range(300)), dask=counting,
                                         on_failure=failed))
    assert got == list(range(300))
    first = executors.DASK_ITEMS_PER_TASK
    assert counting.sizes[:executors.dask_window(client)] == [first] * 4
    assert max(counting.sizes) > first and len(counting.sizes) < 300 // first


def test_a_worker_killed_mid_scan_loses_no_row(client):
    items = list(range(30))
    killed = []
    got = {}
    for index, row in run_tasks(functools.partial(sleep_row, 0.2), items, dask=client,
                                on_failure=failed):
        got[index] = row
        if not killed:  # every worker is running a task now: kill one mid-task
            pid = sorted(client.run(os.getpid).values())[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    def lost(dask_scheduler):  # the scan's tasks the scheduler took back from a lost worker
        return [str(entry[0]) for entry in dask_scheduler.transition_log
                if str(entry[0]).startswith("onemodel-scan-") and entry[1] == "processing"
                and entry[2] == "released" and "worker-cleanup" in entry[4]]

    assert client.run_on_scheduler(lost)  # the kill was mid-task, and its task was run again
    assert killed and sorted(got) == items
    assert [got[i] for i in items] == [{"item": i} for i in items]  # no failure row either
    client.wait_for_workers(2, timeout=60)  # the nanny restarted it
    assert killed[0] not in client.run(os.getpid).values()


def test_a_model_that_kills_its_workers_is_a_row_and_its_batch_is_not(client):
    items = [("ok", i) for i in range(5)] + [("killparent", os.getpid())] + [("ok", 5)]
    got = rows(misbehave, items, dask=client)
    assert got[:5] == [{"item": ["ok", i]} for i in range(5)] and got[6] == {"item": ["ok", 5]}
    assert got[5] == failed(("killparent", os.getpid()), "Crashed", "the model's task ended "
                            "each Dask worker that ran it (KilledWorker)")
    client.wait_for_workers(2, timeout=60)


def test_relative_paths_are_read_by_the_workers_and_named_as_listed(client, tmp_path,
                                                                    monkeypatch):
    # the workers' working directory is their own: a relative path (a source, the conversions'
    # directory) is sent absolute, and the rows name it as listed, as a local scan does
    import shutil

    import onemodel

    models = pathlib.Path(__file__).resolve().parents[2] / "testdata" / "models"
    (tmp_path / "m").mkdir()
    for name in ("cnn_dynamo.onnx", "bert_tiny.onnx"):
        shutil.copyfile(models / name, tmp_path / "m" / name)
    (tmp_path / "m" / "empty.onnx").write_bytes(b"")  # its error names it as listed too
    monkeypatch.chdir(tmp_path)

    def rows(out, **where):
        got = onemodel.scan("m", hash=True, convert_to=out, **where).rows
        return [{k: v for k, v in r.items() if k != "seconds"} for r in got]

    remote, local = rows("on-dask", client=client), rows("here", jobs=1)
    assert [r["source"] for r in remote] == ["m/bert_tiny.onnx", "m/cnn_dynamo.onnx",
                                             "m/empty.onnx"]
    assert [r["error_kind"] for r in remote] == [None, None, "Malformed"]
    assert str(tmp_path) not in remote[2]["error"] and "m/empty.onnx" in remote[2]["error"]
    assert [r["output"] for r in remote] == ["on-dask/bert_tiny.onemodel",
                                             "on-dask/cnn_dynamo.onemodel", None]
    assert [{**r, "output": None} for r in remote] == [{**r, "output": None} for r in local]
    assert (tmp_path / "on-dask" / "cnn_dynamo.onemodel").is_file()


def test_a_scheduler_address_that_is_no_address_or_jobs_with_dask_are_usage_errors(client):
    import onemodel

    for address in ("notaurl", "tcp://host"):
        start = time.monotonic()
        with pytest.raises(onemodel.UsageError, match="not scheme://host:port"):
            onemodel.scan("testdata/models/cnn_dynamo.onnx", dask=address)
        assert time.monotonic() - start < 10  # refused, not connected to
    with pytest.raises(onemodel.UsageError, match="jobs are local processes"):
        onemodel.scan("testdata/models/cnn_dynamo.onnx", client=client, jobs=2)


def test_the_s3_fleet_read_by_the_workers(client, s3_fleet):
    urls = sorted(s3_fleet.models)
    assert len(urls) == 500
    read = functools.partial(read_row, s3_fleet.storage_options)
    assert rows(read, urls, dask=client) == [expected_row(u, s3_fleet.models[u]) for u in urls]


def test_closing_the_scan_cancels_its_tasks(client):
    # last in the module: the cancelled tasks still running hold their worker for a few s
    items = [("ok", i) for i in range(executors.DASK_ITEMS_PER_TASK)] + [("sleep", 0.2)] * 32
    scan = run_tasks(misbehave, items, dask=client, on_failure=failed)
    assert next(scan) == (0, {"item": ["ok", 0]})
    scan.close()

    def scan_tasks(dask_scheduler):
        return [str(k) for k in dask_scheduler.tasks if str(k).startswith("onemodel-scan-")]

    deadline = time.monotonic() + 20
    while client.run_on_scheduler(scan_tasks) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert client.run_on_scheduler(scan_tasks) == []


def test_onemodel_scan_of_the_s3_fleet_gives_the_same_rows_on_dask_as_locally(client, s3_fleet):
    # the scan itself (rows, check, digests) over the 500 models of the bucket, with a
    # duplicate pair and a truncated model added: the rows of a LocalCluster equal the local
    # ones but for the seconds each took
    import onemodel
    from onemodel.formats.content_digest import model_digest

    fs = s3_fleet.server.filesystem()
    first = sorted(s3_fleet.models)[0]
    base = f"{s3_fleet.bucket}/extra"
    fs.pipe({f"{base}/copy.onnx": s3_fleet.models[first],
             f"{base}/truncated.onnx": s3_fleet.models[first][:100]})
    sources = [f"s3://{s3_fleet.bucket}/models/", f"s3://{base}/"]
    opts = s3_fleet.storage_options

    def rows(**where):
        got = onemodel.scan(sources, hash=True, check=True, storage_options=opts, **where).rows
        return [{k: v for k, v in r.items() if k != "seconds"} for r in got]

    local, remote = rows(jobs=2), rows(client=client)
    assert len(local) == len(s3_fleet.models) + 2 and remote == local
    by_source = {r["source"]: r for r in local}
    bad = by_source[f"s3://{base}/truncated.onnx"]
    assert bad["error_kind"] == "Malformed", bad
    copy = by_source[f"s3://{base}/copy.onnx"]
    assert copy["digest"] == by_source[first]["digest"] == \
        model_digest(onemodel.load(s3_fleet.models[first])).hex
