"""Running a scan's tasks on an existing Dask cluster (``onemodel scan --dask ADDRESS``, or a
``dask.distributed.Client``): the optional extra ``onemodel-onnx[dask]``, imported when used.

Each task is :func:`_task` on a worker: it runs the model's function in a sandbox process of
that worker (:func:`onemodel.scan.executors.run_in_sandbox`), under the same time and memory
limits as a local scan, and returns the same outcome, so the rows are the same. A subprocess,
not a thread with a timeout: a Python thread cannot be stopped, so a hung model would keep a
worker thread (and its memory) for ever, and ``RLIMIT_DATA`` limits a whole process, which for a
thread would be the worker itself. The sandbox is long-lived (one per worker thread), so a task
costs a round trip on a pipe, not a process start.

At most :func:`window` tasks are submitted at a time (``as_completed``, topped up as each one
completes), so a scan of 100,000 models holds a few dozen futures, not 100,000. A worker lost
mid-scan loses no row: the scheduler reschedules the tasks it was running on another worker
(until a task has been running on ``distributed.scheduler.allowed-failures`` workers that died,
3 by default: then that model's row is a ``Crashed`` failure, ``KilledWorker``), and a task that
raised (a sandbox that could not start) is retried :data:`RETRIES` times.
"""

from __future__ import annotations

import uuid

from ..errors import IoError, UnsupportedError
from .executors import CRASHED, failure_row, run_in_sandbox

#: Times a task that raised is run again on the cluster (``Client.submit(retries=)``).
RETRIES = 2

#: Seconds to wait for the scheduler at an address given (``Client(timeout=)``).
CONNECT_SECONDS = 30

#: Tasks in flight per thread of the cluster, and the fewest in flight.
TASKS_PER_THREAD = 2
MIN_IN_FLIGHT = 4


def _distributed():
    """The ``distributed`` package, or UnsupportedError saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise UnsupportedError("--dask needs Dask: pip install 'onemodel-onnx[dask]' "
                               "(dask.distributed is not installed)") from None
    return distributed


def _task(function, item, time_limit, memory_limit):
    """What a Dask worker runs for one item: the outcome of ``function(item)`` run in a sandbox
    of the worker (``("ok", row)`` or ``("failed", kind, message, retire)``)."""
    return run_in_sandbox(function, item, time_limit, memory_limit)


def window(client) -> int:
    """Tasks kept in flight on ``client``'s cluster: :data:`TASKS_PER_THREAD` per worker thread
    (so no worker waits for the next task), at least :data:`MIN_IN_FLIGHT`."""
    threads = sum(client.nthreads().values())
    return max(MIN_IN_FLIGHT, TASKS_PER_THREAD * threads)


def connect(dask):
    """``(client, owned)``: the Client given, or one connected to the scheduler address given
    (``owned``: closed by the caller). Raises IoError when the scheduler cannot be reached."""
    distributed = _distributed()
    if not isinstance(dask, str):
        return dask, False
    try:
        return distributed.Client(dask, set_as_default=False,
                                   timeout=CONNECT_SECONDS), True
    except (OSError, TimeoutError) as e:
        raise IoError(f"cannot reach the Dask scheduler: {type(e).__name__}: {e}",
                      source=dask) from None


def run_dask(function, items, dask, *, on_failure, progress, time_limit, memory_limit):
    """:func:`onemodel.scan.executors.run_tasks` on a Dask cluster: ``(index, row)`` for every
    item, in completion order. ``dask``: a scheduler address or a ``Client``. Closing the
    generator (Ctrl-C, SIGTERM) cancels the tasks still submitted; a Client made here is
    closed."""
    distributed = _distributed()
    from distributed.scheduler import KilledWorker

    client, owned = connect(dask)
    scan = uuid.uuid4().hex[:12]
    futures = {}  # key -> (future, index, item)
    completed = distributed.as_completed(loop=client.loop)
    pending = enumerate(items)

    def submit():
        nxt = next(pending, None)
        if nxt is None:
            return
        index, item = nxt
        future = client.submit(_task, function, item, time_limit, memory_limit,
                               key=f"onemodel-scan-{scan}-{index}", retries=RETRIES)
        futures[future.key] = (future, index, item)
        completed.add(future)

    try:
        for _ in range(window(client)):
            submit()
        for future in completed:
            _, index, item = futures.pop(future.key)
            try:
                outcome = future.result()
            except KilledWorker:
                outcome = ("failed", CRASHED, "the model's task ended each Dask worker that ran "
                           "it (KilledWorker)", True)
            future.release()
            submit()
            row = failure_row(outcome, item, on_failure)
            if progress is not None:
                progress(index, row)
            yield index, row
    finally:
        try:
            if futures:
                client.cancel([f for f, _, _ in futures.values()])
        finally:
            completed.clear()
            if owned:
                client.close()
