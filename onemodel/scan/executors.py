"""Running one function over many models: in this process, in a pool of local processes, or on a
Dask cluster (the optional extra ``dask``, imported when used: the last section), each model's
task under a time and memory limit, so that no model stops the scan (issue 29; docs/scan.md,
"Limits").

A task runs in a **sandbox**: a long-lived child Python process (``subprocess``, not
``multiprocessing``: a Dask worker is a daemonic process, which ``multiprocessing`` forbids to
have children) that receives ``(function, item)`` on a pipe, runs ``function(item)`` and sends
the row back. The child's data segment is limited (``RLIMIT_DATA``: the heap and anonymous
mappings, so a ``MemoryError`` past :data:`~onemodel.limits.MAX_SCAN_MEMORY`; file mappings,
which is how large models are read, do not count). A task that runs past
:data:`~onemodel.limits.MAX_SCAN_SECONDS` has its child killed and replaced; a child that dies
(killed, a segfault) is replaced too. Either way the task's row is ``on_failure(item, kind,
message)`` and the scan goes on. The outcomes a sandbox sends are the same wherever it runs, so
the rows are the same locally and on Dask.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from multiprocessing.connection import Connection, wait

from ..errors import InternalError, IoError, UnsupportedError, UsageError, clip
from ..limits import MAX_SCAN_MEMORY, MAX_SCAN_SECONDS, GiB, MiB

#: The failure kinds ``on_failure`` is given (besides the kinds of :mod:`onemodel.errors`, which
#: the function reports in its own rows): the task passed the time or memory limit; the process
#: running it died (a signal, ``os._exit``); the function raised an exception (a bug: the
#: function is meant to turn every fault of a model into a row).
LIMIT = "Limit"
CRASHED = "Crashed"
INTERNAL = "Internal"

#: Seconds a new sandbox may take to start (a Python interpreter importing this module) before
#: the scan stops with an InternalError: a sandbox that cannot start is no model's fault.
SANDBOX_START_SECONDS = 120.0

_BOOTSTRAP = (
    "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "import json, sys; sys.path[:] = json.loads(sys.argv[1])\n"
    "from onemodel.scan.executors import _child_main\n"
    "_child_main(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))\n")


def run_tasks(function, items, *, jobs=None, dask=None, on_failure, progress=None,
              time_limit: float | None = MAX_SCAN_SECONDS,
              memory_limit: int | None = MAX_SCAN_MEMORY):
    """Yield ``(index, row)`` for every item of ``items`` (any iterable, read lazily), in
    completion order; ``index`` is the item's position, by which the caller sorts.

    ``function(item) -> dict`` is a picklable callable (a ``functools.partial`` of a top-level
    function) that never raises for a bad model. When its task exceeds ``time_limit`` seconds or
    ``memory_limit`` bytes, or the process running it dies, or it raises, the row is
    ``on_failure(item, kind, message)`` instead, ``kind`` one of :data:`LIMIT`, :data:`CRASHED`,
    :data:`INTERNAL`, ``message`` one line. ``on_failure`` is called in this process.

    ``jobs``: local processes (``None``: as many as the CPUs this process may use, one at least;
    ``1``: in this process, where no limit is enforced and a crash ends the scan: for debugging
    and profiling). Never
    more than ``jobs`` tasks are in flight. ``dask``: ``None``, a scheduler address
    (``"tcp://host:8786"``) or a ``dask.distributed.Client``; then the tasks run there and
    ``jobs`` is not used (:func:`run_dask`). ``progress``: ``None`` or
    ``progress(index, row)``, called in this process as each row arrives, before it is yielded.
    ``time_limit``, ``memory_limit``: ``None`` for none.

    Ctrl-C (KeyboardInterrupt), SIGTERM (:class:`onemodel.signals.Terminated`) or closing the
    generator kills every process it started (a Dask scan cancels its tasks) and lets the
    exception through. Raises ValueError for ``jobs < 1``; UnsupportedError when ``dask`` is
    given and Dask is not installed; IoError when the scheduler cannot be reached;
    InternalError when a sandbox cannot start or cannot read its task (not a model's fault).
    """
    if dask is not None:
        return run_dask(function, items, dask, on_failure=on_failure, progress=progress,
                        time_limit=time_limit, memory_limit=memory_limit)
    if jobs is None:  # sandboxed even where that is one process
        return _run_pool(function, items, _cpu_count(), on_failure, progress, time_limit,
                         memory_limit)
    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer, not {jobs!r}")
    if jobs == 1:
        return _run_here(function, items, on_failure, progress)
    return _run_pool(function, items, jobs, on_failure, progress, time_limit, memory_limit)


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def shown_bytes(n: int) -> str:
    """``n`` bytes as a limit is written in a message: ``4 GiB``, ``256 MiB`` or ``1000 bytes``."""
    for size, name in ((GiB, "GiB"), (MiB, "MiB")):
        if n >= size and n % size == 0:
            return f"{n // size} {name}"
    return f"{n} bytes"


def time_message(time_limit: float) -> str:
    """The failure message of a task killed at the time limit."""
    return f"the model's task ran past the time limit of {time_limit:g} s per model"


def memory_message(memory_limit: int | None) -> str:
    """The failure message of a task that ran out of memory (past the limit, if one is set)."""
    if not memory_limit:
        return "the model's task ran out of memory"
    return (f"the model's task needed more memory than the limit of {shown_bytes(memory_limit)} "
            "per model")


def death_message(status: int) -> str:
    """The failure message of a task whose process ended with ``status`` (``Popen.returncode``:
    negative for a signal)."""
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = "unknown"
        return f"the process running the model's task was ended by signal {-status} ({name})"
    return f"the process running the model's task exited with status {status}"


def failure_row(outcome, item, on_failure):
    """The row of an outcome a sandbox (or :func:`_outcome`) gave: ``("ok", row)`` or
    ``("failed", kind, message, retire)``."""
    if outcome[0] == "ok":
        return outcome[1]
    return on_failure(item, outcome[1], outcome[2])


def _outcome(function, item, memory_limit):
    """Run ``function(item)``: ``("ok", row)``, or ``("failed", kind, message, retire)`` when it
    raised (``retire``: the process should be replaced, after a MemoryError)."""
    try:
        return ("ok", function(item))
    except MemoryError:
        return ("failed", LIMIT, memory_message(memory_limit), True)
    except RecursionError as e:
        return ("failed", INTERNAL, clip(f"RecursionError: {e}", 400), True)
    except Exception as e:  # a bug of the function: its row says so, the scan goes on
        return ("failed", INTERNAL, clip(f"{type(e).__name__}: {e}", 400), False)


def _run_here(function, items, on_failure, progress):
    """jobs=1: every task in this process, one after the other."""
    for index, item in enumerate(items):
        row = failure_row(_outcome(function, item, None), item, on_failure)
        if progress is not None:
            progress(index, row)
        yield index, row


# --- the sandbox: a child process running tasks under the limits --------------------------


def _limit_memory(memory_limit: int) -> None:
    """Limit this process's data segment (heap, anonymous mappings) to ``memory_limit`` bytes:
    past it an allocation fails (``MemoryError``); and write no core file when it crashes (a
    model that crashes a scan should not fill the disk). Not where the resource module is
    missing."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    if not memory_limit:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        memory_limit = min(memory_limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (memory_limit, hard))


#: Seconds between a sandbox's looks at whether the process that started it is still there.
PARENT_POLL_SECONDS = 1.0


def _end_with_parent(parent: int) -> None:
    """End this process once its parent has gone (killed: a scan or a Dask worker SIGKILLed),
    even in the middle of a task that would never end: it has no one to answer."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_SECONDS)
    os._exit(0)


def _child_main(task_fd: int, result_fd: int, memory_limit: int) -> None:
    """The sandbox's loop (run by :data:`_BOOTSTRAP` in the child): ``("ready",)``, then one
    outcome per task received (``("task", item)``, run with the last ``("function", f)``
    received), in order, until the parent closes the task pipe. A task that cannot be
    unpickled gives ``("broken", message)``; after a MemoryError the child ends (it is
    replaced)."""
    tasks = Connection(task_fd, writable=False)
    results = Connection(result_fd, readable=False)
    threading.Thread(target=_end_with_parent, args=(os.getppid(),), daemon=True).start()
    _limit_memory(memory_limit)
    results.send(("ready",))
    function = None
    frozen = False
    while True:
        try:
            what, value = tasks.recv()
        except EOFError:
            return
        except Exception as e:
            results.send(("broken", clip(f"the task could not be read: {type(e).__name__}: "
                                         f"{e}", 400)))
            return
        if what == "function":
            function = value
            continue
        outcome = _outcome(function, value, memory_limit)
        del value
        if not frozen:
            # the modules the first task imported are never garbage: collections skip them
            # from now on (as the command line freezes its own at start)
            import gc

            gc.freeze()
            frozen = True
        try:
            results.send(outcome)
        except OSError:  # the parent has gone (killed: a Dask worker lost)
            return
        except MemoryError:
            results.send(("failed", LIMIT, memory_message(memory_limit), True))
        except Exception as e:  # a row that cannot be pickled
            results.send(("failed", INTERNAL, clip(f"the row could not be sent: "
                                                   f"{type(e).__name__}: {e}", 400), False))
        if outcome[0] == "failed" and outcome[3]:
            return


class _Died(Exception):
    """The sandbox's process ended; ``args[0]`` its exit status."""


class Sandbox:
    """One child process running tasks (see the module docstring). ``results`` is the
    connection to wait on; :meth:`send` a task, then :meth:`receive` until an outcome comes."""

    def __init__(self, memory_limit: int | None):
        self.memory_limit = memory_limit or 0
        task_r, task_w = os.pipe()
        result_r, result_w = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _BOOTSTRAP, json.dumps([str(p) for p in sys.path]),
                 str(task_r), str(result_w), str(self.memory_limit)],
                pass_fds=(task_r, result_w), stdin=subprocess.DEVNULL)
        except BaseException:
            for fd in (task_w, result_r):
                os.close(fd)
            raise
        finally:
            os.close(task_r)
            os.close(result_w)
        self.tasks = Connection(task_w, readable=False)
        self.results = Connection(result_r, writable=False)
        self.ready = False
        self.served = 0
        self.started = time.monotonic()
        self.function = None
        self.queue: deque = deque()  # (index, item) sent, in order, not yet answered
        self.deadline: float | None = None  # of the first task of the queue, once it runs
        self.dead = False  # a send found it ended: its end is read from the results pipe

    def send(self, function, item) -> None:
        """Give the child a task (the function sent once, the items one by one). Raises
        :class:`_Died` when it has ended."""
        try:
            if function is not self.function:
                self.tasks.send(("function", function))
                self.function = function
            self.tasks.send(("task", item))
        except (BrokenPipeError, ConnectionResetError):
            raise _Died(self.process.wait()) from None

    def receive(self):
        """The child's next message, ``("ready",)`` or an outcome; raises :class:`_Died` when the
        child has ended, InternalError when it could not read its task or never got ready."""
        try:
            message = self.results.recv()
        except (EOFError, OSError):
            status = self.process.wait()
            if not self.ready:
                raise InternalError(f"a scan process could not start ({death_message(status)})"
                                    ) from None
            raise _Died(status) from None
        if message[0] == "ready":
            self.ready = True
        elif message[0] == "broken":
            raise InternalError(message[1])
        else:
            self.served += 1
        return message

    def start_overdue(self) -> bool:
        """Whether the child has taken longer than :data:`SANDBOX_START_SECONDS` to start."""
        return not self.ready and time.monotonic() - self.started > SANDBOX_START_SECONDS

    def kill(self) -> None:
        """End the child at once (SIGKILL) and close the pipes."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.close_pipes()

    def close(self, timeout: float = 5.0) -> None:
        """Let an idle child end (its task pipe closed), killing it after ``timeout`` s."""
        self.close_pipes()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def close_pipes(self) -> None:
        """Close both ends this process holds."""
        self.tasks.close()
        self.results.close()

    def run(self, function, item, time_limit):
        """Run one task here, blocking: its outcome (as :func:`_outcome`'s) and whether this
        sandbox can take another task."""
        self.send(function, item)
        deadline = None
        while True:
            if self.ready and deadline is None:
                deadline = time.monotonic() + time_limit if time_limit else float("inf")
            timeout = (SANDBOX_START_SECONDS if deadline is None
                       else max(0.0, deadline - time.monotonic()))
            if wait([self.results], None if timeout == float("inf") else timeout):
                try:
                    message = self.receive()
                except _Died as died:
                    return ("failed", CRASHED, death_message(died.args[0]), True), False
                if message[0] != "ready":
                    return message, not (message[0] == "failed" and message[3])
            elif deadline is None:
                self.kill()
                raise InternalError(f"a scan process did not start in "
                                    f"{SANDBOX_START_SECONDS:g} s")
            else:
                self.kill()
                return ("failed", LIMIT, time_message(time_limit), True), False


# --- the local pool -------------------------------------------------------------------------


#: Tasks sent ahead to each sandbox of a local pool: it runs them in order and answers each as
#: it ends, so it never waits for the next one (a round trip on a loaded machine costs more than
#: reading a small model). A sandbox that ends (killed at the time limit, a crash, a
#: MemoryError) hands the tasks it had not started back to the pool.
PIPELINE = 4


def _run_pool(function, items, jobs, on_failure, progress, time_limit, memory_limit):
    """``jobs`` sandboxes, each sent up to :data:`PIPELINE` tasks; the items are read as tasks
    are sent, so ``jobs * PIPELINE`` tasks are in flight, never more."""
    pending = enumerate(items)
    again: deque = deque()  # (index, item) handed back by a sandbox that ended, first out
    sandboxes: list[Sandbox] = []
    exhausted = False

    def take():
        nonlocal exhausted
        if again:
            return again.popleft()
        if not exhausted:
            nxt = next(pending, None)
            if nxt is not None:
                return nxt
            exhausted = True
        return None

    def give(sandbox, task) -> bool:
        try:
            sandbox.send(function, task[1])
        except _Died:  # it ended: the task goes back; its end is read from its results pipe
            sandbox.dead = True
            again.appendleft(task)
            return False
        if not sandbox.queue and sandbox.ready and time_limit:
            sandbox.deadline = time.monotonic() + time_limit
        sandbox.queue.append(task)
        return True

    def end(sandbox, kill):
        """Remove ``sandbox``; the tasks it had not started go back."""
        sandboxes.remove(sandbox)
        again.extendleft(reversed(sandbox.queue))
        sandbox.queue.clear()
        sandbox.kill() if kill else sandbox.close()

    def fill():
        for depth in range(PIPELINE):
            if len(sandboxes) < jobs and depth == 0:
                while len(sandboxes) < jobs:
                    task = take()
                    if task is None:
                        return
                    sandboxes.append(Sandbox(memory_limit))
                    give(sandboxes[-1], task)
            for sandbox in sandboxes:
                if len(sandbox.queue) <= depth and not sandbox.dead:
                    task = take()
                    if task is None:
                        return
                    give(sandbox, task)

    try:
        while True:
            fill()
            if not any(s.queue or s.dead for s in sandboxes):
                break
            now = time.monotonic()
            timeouts = [s.deadline - now for s in sandboxes
                        if s.queue and s.deadline is not None]
            if any(not s.ready for s in sandboxes):
                timeouts.append(SANDBOX_START_SECONDS)
            ready = wait([s.results for s in sandboxes],
                         max(0.0, min(timeouts)) if timeouts else None)
            done = []
            for sandbox in [s for s in sandboxes if s.results in ready]:
                try:
                    message = sandbox.receive()
                except _Died as died:
                    if sandbox.queue:
                        done.append((sandbox.queue.popleft(), ("failed", CRASHED,
                                                               death_message(died.args[0]))))
                    sandbox.close_pipes()
                    end(sandbox, kill=False)
                    continue
                if message[0] != "ready":
                    done.append((sandbox.queue.popleft(), message))
                sandbox.deadline = (time.monotonic() + time_limit
                                    if sandbox.queue and time_limit else None)
                if message[0] == "failed" and message[3]:  # it ends itself (a MemoryError)
                    end(sandbox, kill=False)
            now = time.monotonic()
            for sandbox in list(sandboxes):
                if sandbox.queue and sandbox.deadline is not None and now >= sandbox.deadline:
                    done.append((sandbox.queue.popleft(),
                                 ("failed", LIMIT, time_message(time_limit))))
                    end(sandbox, kill=True)
                elif sandbox.start_overdue():
                    raise InternalError(f"a scan process did not start in "
                                        f"{SANDBOX_START_SECONDS:g} s")
            for (index, item), outcome in done:
                row = failure_row(outcome, item, on_failure)
                if progress is not None:
                    progress(index, row)
                yield index, row
    finally:
        for sandbox in sandboxes:
            if sandbox.queue:
                sandbox.kill()
            else:
                sandbox.close_pipes()
        for sandbox in sandboxes:
            if not sandbox.queue:
                sandbox.close()


# --- the sandboxes of a process that runs tasks for Dask ------------------------------------


class _SandboxCache:
    """The idle sandboxes of this process, by memory limit: a Dask worker's task threads each
    take one for a task and give it back, so a worker keeps as many children as it runs tasks
    at once (they end when the worker does: their task pipe closes)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.idle: dict[int, list[Sandbox]] = {}

    def run(self, function, item, time_limit, memory_limit):
        """``function(item)``'s outcome, run in one of the idle sandboxes or a new one."""
        key = memory_limit or 0
        with self.lock:
            sandbox = self.idle.get(key, []).pop() if self.idle.get(key) else None
        if sandbox is not None and sandbox.process.poll() is not None:
            sandbox.close_pipes()
            sandbox = None
        sandbox = sandbox or Sandbox(memory_limit)
        keep = False
        try:
            try:
                outcome, keep = sandbox.run(function, item, time_limit)
            except _Died:  # it ended while idle (killed from outside): a new one takes the task
                sandbox.kill()
                sandbox = Sandbox(memory_limit)
                outcome, keep = sandbox.run(function, item, time_limit)
            return outcome
        finally:
            if keep:
                with self.lock:
                    self.idle.setdefault(key, []).append(sandbox)
            else:
                sandbox.kill()


_SANDBOXES = _SandboxCache()


def run_in_sandbox(function, item, time_limit, memory_limit):
    """The outcome of one task run in a sandbox of this process, blocking (what a Dask worker
    runs): ``("ok", row)`` or ``("failed", kind, message, retire)``. Raises InternalError when
    no sandbox can start."""
    return _SANDBOXES.run(function, item, time_limit, memory_limit)


# --- on a Dask cluster ------------------------------------------------------------------------
#
# Running the tasks on an existing Dask cluster (``onemodel scan --dask ADDRESS``, or a
# ``dask.distributed.Client``): the optional extra ``onemodel-onnx[dask]``, imported when used.
#
# Each task is :func:`_dask_task` on a worker: it runs the model's function in a sandbox process
# of that worker (:func:`run_in_sandbox`), under the same time and memory limits as a local scan,
# and returns the same outcome, so the rows are the same. A subprocess, not a thread with a
# timeout: a Python thread cannot be stopped, so a hung model would keep a worker thread (and its
# memory) for ever, and ``RLIMIT_DATA`` limits a whole process, which for a thread would be the
# worker itself. The sandbox is long-lived (one per worker thread), so a task costs a round trip
# on a pipe, not a process start.
#
# A task is a batch of items (:func:`dask_batch_size`: 8 at first, then as many as take about
# :data:`DASK_TASK_SECONDS`). At most :func:`dask_window` tasks are
# submitted at a time (``as_completed``, topped up as each one completes), so a scan of 100,000
# models holds a few dozen futures, not 100,000. A worker lost mid-scan loses no row: the
# scheduler reschedules the tasks it was running on another worker (until a task has been running
# on ``distributed.scheduler.allowed-failures`` workers that died, 3 by default: ``KilledWorker``;
# then each item of the batch is submitted alone, up to :data:`DASK_KILLED_ALONE` times, and the
# one whose task still kills workers gets a ``Crashed`` row), and a task that raised (a sandbox
# that could not start) is retried :data:`DASK_RETRIES` times.

#: Times a task that raised is run again on the cluster (``Client.submit(retries=)``).
DASK_RETRIES = 2

#: Seconds to wait for the scheduler at an address given (``Client(timeout=)``).
DASK_CONNECT_SECONDS = 30

#: Tasks in flight per thread of the cluster, and the fewest in flight.
DASK_TASKS_PER_THREAD = 2
DASK_MIN_IN_FLIGHT = 4

#: Times an item of a task that ended in ``KilledWorker`` is submitted alone before its row is
#: a ``Crashed`` failure: a worker lost ends every task it was running or holding, so a model
#: that ends its workers takes the others beside it down; alone, twice, it is found.
DASK_KILLED_ALONE = 2

#: Items of the first Dask tasks, before the time an item takes is known. Dask costs a few
#: milliseconds per task (scheduler, client, worker round trips): about 300 tasks/s on 2 cores,
#: where onemodel reads a small model's structure in less. A batch of items per task makes that
#: cost the batch's; each item still runs under its own limits, and a batch whose worker was lost
#: is run again whole, its rows sent once.
DASK_ITEMS_PER_TASK = 8

#: Seconds a task should take once the time of an item is known (:func:`dask_batch_size`): the
#: per-task cost is then under 1% of it, and a lost worker's batch costs that much to run again.
DASK_TASK_SECONDS = 0.5

#: Most items in one task (a batch's rows travel together, and a lost batch is run again whole).
DASK_MAX_ITEMS_PER_TASK = 64


def dask_batch_size(item_seconds: float | None) -> int:
    """Items of the next Dask task: :data:`DASK_ITEMS_PER_TASK` while no task has completed
    (``item_seconds`` None), else as many as take :data:`DASK_TASK_SECONDS` at
    ``item_seconds`` each (the mean of the items completed), 1 to
    :data:`DASK_MAX_ITEMS_PER_TASK`. 1,000 models of 0.6 ms on a LocalCluster of 2 workers took
    1.2 s in batches of 8 and 0.6 s in batches of 32."""
    if item_seconds is None:
        return DASK_ITEMS_PER_TASK
    if item_seconds <= 0:
        return DASK_MAX_ITEMS_PER_TASK
    return max(1, min(DASK_MAX_ITEMS_PER_TASK, int(DASK_TASK_SECONDS / item_seconds)))


def _distributed():
    """The ``distributed`` package, or UnsupportedError saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise UnsupportedError("running on a Dask cluster needs Dask: pip install "
                               "'onemodel-onnx[dask]' (dask.distributed is not installed)") \
            from None
    return distributed


def _dask_task(function, items, time_limit, memory_limit):
    """What a Dask worker runs for a batch of items: ``(outcomes, seconds)``, the outcome of
    ``function(item)`` for each, each run in a sandbox of the worker under the limits
    (``("ok", row)`` or ``("failed", kind, message, retire)``), and the seconds they took."""
    start = time.perf_counter()
    outcomes = [run_in_sandbox(function, item, time_limit, memory_limit) for item in items]
    return outcomes, time.perf_counter() - start


def dask_window(client) -> int:
    """Tasks kept in flight on ``client``'s cluster: :data:`DASK_TASKS_PER_THREAD` per worker thread
    (so no worker waits for the next task), at least :data:`DASK_MIN_IN_FLIGHT`."""
    threads = sum(client.nthreads().values())
    return max(DASK_MIN_IN_FLIGHT, DASK_TASKS_PER_THREAD * threads)


def check_dask_address(address: str) -> None:
    """UsageError, without connecting, for a scheduler address that is not ``scheme://host:port``
    (``tcp://10.0.0.5:8786``; the schemes Dask knows), as Dask would parse it."""
    _distributed()
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, location = parse_address(address, strict=True)
        if scheme in ("tcp", "tls", "ws", "wss"):
            parse_host_port(location)
    except (ValueError, TypeError) as e:
        raise UsageError(f"the Dask scheduler address {address!r} is not scheme://host:port "
                         f"({e})") from None


def dask_connect(dask):
    """``(client, owned)``: the Client given, or one connected to the scheduler address given
    (``owned``: closed by the caller). Raises IoError when the scheduler cannot be reached."""
    distributed = _distributed()
    if not isinstance(dask, str):
        return dask, False
    try:
        return distributed.Client(dask, set_as_default=False,
                                   timeout=DASK_CONNECT_SECONDS), True
    except (OSError, TimeoutError) as e:
        raise IoError(f"cannot reach the Dask scheduler: {type(e).__name__}: {e}",
                      source=dask) from None


def run_dask(function, items, dask, *, on_failure, progress, time_limit, memory_limit):
    """:func:`run_tasks` on a Dask cluster: ``(index, row)`` for every
    item, in completion order. ``dask``: a scheduler address or a ``Client``. Closing the
    generator (Ctrl-C, SIGTERM) cancels the tasks still submitted; a Client made here is
    closed."""
    distributed = _distributed()
    from distributed.scheduler import KilledWorker

    client, owned = dask_connect(dask)
    scan = uuid.uuid4().hex[:12]
    futures = {}  # key -> (future, [(index, item), ...], times run alone after KilledWorker)
    completed = distributed.as_completed(loop=client.loop)
    pending = enumerate(items)
    timed = [0, 0.0]  # items completed in tasks, and the seconds those tasks took on workers

    def submit(batch=None, alone=0):
        if batch is None:
            per_item = timed[1] / timed[0] if timed[0] else None
            batch = list(itertools.islice(pending, dask_batch_size(per_item)))
        if not batch:
            return
        future = client.submit(_dask_task, function, [item for _, item in batch], time_limit,
                               memory_limit, key=f"onemodel-scan-{scan}-{batch[0][0]}-"
                                                 f"{len(batch)}-{alone}", retries=DASK_RETRIES)
        futures[future.key] = (future, batch, alone)
        completed.add(future)

    try:
        for _ in range(dask_window(client)):
            submit()
        for future in completed:
            _, batch, alone = futures.pop(future.key)
            try:
                outcomes, seconds = future.result()
                timed[0] += len(batch)
                timed[1] += seconds
            except KilledWorker:
                outcomes = None
            future.release()
            if outcomes is None and alone < DASK_KILLED_ALONE:  # find the model that ends workers
                for one in batch:
                    submit([one], alone + 1)
                continue
            if outcomes is None:
                outcomes = [("failed", CRASHED, "the model's task ended each Dask worker that "
                             "ran it (KilledWorker)", True)]
            submit()
            for (index, item), outcome in zip(batch, outcomes):
                row = failure_row(outcome, item, on_failure)
                if progress is not None:
                    progress(index, row)
                yield index, row
    finally:
        try:
            if futures:
                client.cancel([f for f, _, _ in futures.values()])
        except (RuntimeError, OSError, TimeoutError):  # the client is closed already
            pass
        finally:
            completed.clear()
            if owned:
                client.close()
