"""run_tasks locally (onemodel/scan/executors.py): the same rows in this process and in a pool;
the time limit, the memory limit, a dead process and an exception each a row; bounded in-flight
tasks; every process ended when the scan stops."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time

import _fleet
import pytest
from _tasks import expected_row, failed, mapped_row, misbehave, pid_row, read_row

from onemodel.errors import UnsupportedError
from onemodel.scan import executors
from onemodel.scan.executors import run_tasks

model_files = _fleet.model_files  # a fixture

pytestmark = pytest.mark.skipif(os.name != "posix", reason="sandboxes need POSIX")


def rows(function, items, **kw):
    """The rows in item order, after checking that each index came once."""
    got = list(run_tasks(function, items, on_failure=failed, **kw))
    assert sorted(i for i, _ in got) == list(range(len(items)))
    return [row for _, row in sorted(got, key=lambda pair: pair[0])]


def test_same_rows_in_this_process_and_in_a_pool(model_files):
    read = functools.partial(read_row, None)
    paths = list(model_files)
    want = [expected_row(p, model_files[p]) for p in paths]
    assert rows(read, paths, jobs=1) == want
    assert rows(read, paths, jobs=2) == want
    assert rows(read, paths, jobs=3) == want


def test_jobs_1_runs_here_and_jobs_2_in_two_other_processes():
    here = rows(pid_row, list(range(6)), jobs=1)
    assert {r["pid"] for r in here} == {os.getpid()}
    pool = rows(pid_row, list(range(20)), jobs=2)
    pids = {r["pid"] for r in pool}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2


def test_the_default_jobs_run_sandboxed_even_on_one_cpu(monkeypatch):
    monkeypatch.setattr(executors, "_cpu_count", lambda: 1)
    got = rows(misbehave, [("ok", 0), ("sleep", 60), ("ok", 1)], time_limit=1)
    assert got == [{"item": ["ok", 0]}, failed(("sleep", 60), "Limit", "the model's task ran "
                                               "past the time limit of 1 s per model"),
                   {"item": ["ok", 1]}]


def test_each_limit_and_each_death_is_a_row_and_the_scan_goes_on():
    items = [("ok", 0), ("sleep", 60), ("ok", 1), ("alloc", 1 << 30), ("ok", 2), ("exit", 3),
             ("signal", int(signal.SIGKILL)), ("signal", int(signal.SIGSEGV)), ("raise", "k"),
             ("ok", 3)]
    start = time.monotonic()
    got = rows(misbehave, items, jobs=2, time_limit=1.5, memory_limit=256 << 20)
    assert time.monotonic() - start < 30  # the sleeper was stopped at 1.5 s, not after 60
    assert got == [
        {"item": ["ok", 0]},
        failed(("sleep", 60), "Limit", "the model's task ran past the time limit of 1.5 s per "
                                       "model"),
        {"item": ["ok", 1]},
        failed(("alloc", 1 << 30), "Limit", "the model's task needed more memory than the limit "
                                            "of 256 MiB per model"),
        {"item": ["ok", 2]},
        failed(("exit", 3), "Crashed", "the process running the model's task exited with "
                                       "status 3"),
        failed(("signal", 9), "Crashed", "the process running the model's task was ended by "
                                         "signal 9 (SIGKILL)"),
        failed(("signal", 11), "Crashed", "the process running the model's task was ended by "
                                          "signal 11 (SIGSEGV)"),
        failed(("raise", "k"), "Internal", "KeyError: 'k'"),
        {"item": ["ok", 3]},
    ]


def test_the_memory_limit_leaves_file_mappings_alone(tmp_path):
    # a model is read through a mapping of its file: 512 MiB mapped under a 256 MiB heap limit
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        f.truncate(512 << 20)
        f.seek(1 << 20)
        f.write(b"\x07")
    got = rows(mapped_row, [str(big)] * 2, jobs=2, memory_limit=256 << 20)
    assert got == [{"bytes": 512 << 20, "sum": 7}] * 2


def test_an_exception_in_this_process_is_a_row_too():
    got = rows(misbehave, [("raise", "k"), ("ok", 1)], jobs=1)
    assert got == [failed(("raise", "k"), "Internal", "KeyError: 'k'"), {"item": ["ok", 1]}]


def test_no_more_than_jobs_tasks_are_in_flight():
    taken = []

    def items():
        for i in range(40):
            taken.append(i)
            yield i

    in_flight = []
    for _ in run_tasks(pid_row, items(), jobs=3, on_failure=failed):
        in_flight.append(len(taken))
    # when the k-th row (k = 0, 1, ...) is yielded, the items taken but not yet yielded are
    # those sent ahead to the 3 sandboxes
    most = 3 * executors.PIPELINE
    assert all(t - k <= most for k, t in enumerate(in_flight)), in_flight
    assert max(t - k for k, t in enumerate(in_flight)) == most  # the bound is reached
    assert len(taken) == 40


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_for_pids(files, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(os.path.exists(f) and open(f).read() for f in files):
            return [int(open(f).read()) for f in files]
        time.sleep(0.05)
    raise AssertionError("the tasks did not start")


@pytest.mark.parametrize("stop", ["close", "interrupt"])
def test_stopping_the_scan_ends_every_process(tmp_path, stop):
    pidfiles = [str(tmp_path / f"pid{i}") for i in range(2)]
    items = [("ok", 0)] + [("pidfile", f) for f in pidfiles] + [("ok", 1)] * 5
    seen = []

    def progress(index, row):
        seen.append(index)
        if stop == "interrupt" and len(seen) == 1:
            pids.extend(_wait_for_pids(pidfiles))
            raise KeyboardInterrupt  # Ctrl-C, as the command line raises it

    pids = []
    scan = run_tasks(misbehave, items, jobs=3, on_failure=failed, progress=progress)
    if stop == "close":
        assert next(scan) == (0, {"item": ["ok", 0]})
        pids = _wait_for_pids(pidfiles)
        scan.close()
    else:
        with pytest.raises(KeyboardInterrupt):
            list(scan)
    assert len(pids) == 2 and not any(_alive(p) for p in pids)  # killed and reaped
    assert seen == [0]


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads /proc")
def test_a_sandbox_ends_when_its_parent_is_killed_mid_task(tmp_path):
    pidfile = tmp_path / "pid"
    scan = ("import sys; sys.path[:0] = {path!r}\n"
            "from _tasks import failed, misbehave\n"
            "from onemodel.scan.executors import run_tasks\n"
            "list(run_tasks(misbehave, [('pidfile', {pidfile!r})], jobs=2, on_failure=failed))\n"
            ).format(path=sys.path, pidfile=str(pidfile))
    parent = subprocess.Popen([sys.executable, "-c", scan])
    try:
        (child,) = _wait_for_pids([str(pidfile)])
        parent.kill()  # no finally runs: the sandbox must see for itself
        parent.wait()
        deadline = time.monotonic() + 30
        while _alive_not_zombie(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive_not_zombie(child)  # not the minute its task would take
    finally:
        parent.kill()


def _alive_not_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_sandbox_killed_while_idle_is_replaced():
    first = executors.run_in_sandbox(pid_row, "a", 30, 1 << 30)
    os.kill(first[1]["pid"], signal.SIGKILL)
    time.sleep(0.2)
    again = executors.run_in_sandbox(pid_row, "b", 30, 1 << 30)
    assert again[0] == "ok" and again[1]["item"] == "b" and again[1]["pid"] != first[1]["pid"]


def test_bad_jobs_and_missing_dask_are_one_clear_error(monkeypatch):
    with pytest.raises(ValueError, match="jobs must be a positive integer"):
        list(run_tasks(pid_row, [1], jobs=0, on_failure=failed))
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if not installed
    with pytest.raises(UnsupportedError, match=r"pip install 'onemodel-onnx\[dask\]'"):
        list(run_tasks(pid_row, [1], dask="tcp://127.0.0.1:8786", on_failure=failed))


def test_the_limits_are_the_stated_ones():
    from onemodel import limits

    assert limits.MAX_SCAN_SECONDS == 600 and limits.MAX_SCAN_MEMORY == 4 << 30
    assert run_tasks.__kwdefaults__["time_limit"] == limits.MAX_SCAN_SECONDS
    assert run_tasks.__kwdefaults__["memory_limit"] == limits.MAX_SCAN_MEMORY
