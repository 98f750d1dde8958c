"""Running a scan's tasks on an existing Dask cluster (``onemodel scan --dask ADDRESS``, or a
``dask.distributed.Client``): the optional extra ``onemodel-onnx[dask]``, imported when used.

Each task is :func:`_task` on a worker: it runs the model's function in a sandbox process of
that worker (:func:`onemodel.scan.executors.run_in_sandbox`), under the same time and memory
limits as a local scan, and returns the same outcome, so the rows are the same. A subprocess,
not a thread with a timeout: a Python thread cannot be stopped, so a hung model would keep a
worker thread (and its memory) for ever, and ``RLIMIT_DATA`` limits a whole process, which for a
thread would be the worker itself. The sandbox is long-lived (one per worker thread), so a task
costs a round trip on a pipe, not a process start.

A task is a batch of :data:`ITEMS_PER_TASK` items. At most :func:`window` tasks are submitted at
a time (``as_completed``, topped up as each one completes), so a scan of 100,000 models holds a
few dozen futures, not 100,000. A worker lost mid-scan loses no row: the scheduler reschedules
the tasks it was running on another worker (until a task has been running on
``distributed.scheduler.allowed-failures`` workers that died, 3 by default: ``KilledWorker``;
then each item of the batch is submitted alone, up to :data:`KILLED_ALONE` times, and the one
whose task still kills workers gets a ``Crashed`` row), and a task that raised (a sandbox that
could not start) is retried :data:`RETRIES` times.
"""

from __future__ import annotations

import itertools
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

#: Times an item of a task that ended in ``KilledWorker`` is submitted alone before its row is
#: a ``Crashed`` failure: a worker lost ends every task it was running or holding, so a model
#: that ends its workers takes the others beside it down; alone, twice, it is found.
KILLED_ALONE = 2

#: Items per Dask task. Dask costs a few milliseconds per task (scheduler, client, worker round
#: trips): about 300 tasks/s on 2 cores, where onemodel reads a small model's structure in less.
#: A batch of items per task makes that cost the batch's; each item still runs under its own
#: limits, and a batch whose worker was lost is run again whole, its rows sent once.
ITEMS_PER_TASK = 8


def _distributed():
    """The ``distributed`` package, or UnsupportedError saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise UnsupportedError("--dask needs Dask: pip install 'onemodel-onnx[dask]' "
                               "(dask.distributed is not installed)") from None
    return distributed


def _task(function, items, time_limit, memory_limit):
    """What a Dask worker runs for a batch of items: the outcome of ``function(item)`` for each,
    each run in a sandbox of the worker under the limits (``("ok", row)`` or ``("failed", kind,
    message, retire)``)."""
    return [run_in_sandbox(function, item, time_limit, memory_limit) for item in items]


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
    futures = {}  # key -> (future, [(index, item), ...], times run alone after KilledWorker)
    completed = distributed.as_completed(loop=client.loop)
    pending = enumerate(items)

    def submit(batch=None, alone=0):
        if batch is None:
            batch = list(itertools.islice(pending, ITEMS_PER_TASK))
        if not batch:
            return
        future = client.submit(_task, function, [item for _, item in batch], time_limit,
                               memory_limit, key=f"onemodel-scan-{scan}-{batch[0][0]}-"
                                                 f"{len(batch)}-{alone}", retries=RETRIES)
        futures[future.key] = (future, batch, alone)
        completed.add(future)

    try:
        for _ in range(window(client)):
            submit()
        for future in completed:
            _, batch, alone = futures.pop(future.key)
            try:
                outcomes = future.result()
            except KilledWorker:
                outcomes = None
            future.release()
            if outcomes is None and alone < KILLED_ALONE:  # find the model that ends workers
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
