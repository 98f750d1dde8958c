"""The stand-in tasks the executor tests run (``function(item) -> dict``): reading a file
whole, mapping it, and misbehaving (sleep past the time limit, allocate past the memory limit,
``os._exit``, a signal, an exception). Top-level functions of a module that imports little
(not pytest), so that a sandbox process or a Dask worker imports them quickly by name
(``tests/scan`` is on ``sys.path``)."""

from __future__ import annotations

import hashlib
import os
import signal
import time


def expected_row(source: str, data: bytes) -> dict:
    """The row :func:`read_row` gives for ``data`` read from ``source``."""
    return {"source": source, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def read_row(storage_options, source: str) -> dict:
    """Read ``source`` (a path or fsspec URL) whole, in one request: :func:`expected_row` of its
    bytes."""
    from fsspec.core import url_to_fs

    fs, path = url_to_fs(source, **(storage_options or {}))
    return expected_row(source, fs.cat_file(path))


def mapped_row(path: str) -> dict:
    """Map the file ``path`` (as onemodel reads large models) and read a byte of every page:
    ``{"bytes": its size, "sum": the sum of those bytes}``."""
    import mmap

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return {"bytes": len(m), "sum": sum(m[::4096])}


def sleep_row(seconds: float, item) -> dict:
    """Sleep ``seconds``, then ``{"item": item}``."""
    time.sleep(seconds)
    return {"item": item}


def misbehave(item) -> dict:
    """``item`` is ``(what, value)``: ``ok``: ``{"item": value}``; ``sleep``: sleep ``value``
    seconds first; ``alloc``: allocate ``value`` bytes; ``exit``: ``os._exit(value)``;
    ``signal``: send this process signal ``value``; ``raise``: raise KeyError(value);
    ``pidfile``: write this process's id to the file ``value``, then sleep a minute;
    ``killparent``: SIGKILL the parent process (a Dask worker) unless its id is ``value``."""
    what, value = item
    if what == "sleep":
        time.sleep(value)
    elif what == "alloc":
        bytearray(value)
    elif what == "exit":
        os._exit(value)
    elif what == "signal":
        os.kill(os.getpid(), value)
        time.sleep(10)
    elif what == "raise":
        raise KeyError(value)
    elif what == "killparent":  # a Dask worker (the sandbox's parent); never the tests'
        if os.getppid() != value:
            os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(1)
    elif what == "pidfile":
        with open(value, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(60)
    return {"item": [what, value]}


def pid_row(item) -> dict:
    """``{"item": item, "pid": this process's id}``."""
    return {"item": item, "pid": os.getpid()}


def failed(item, kind: str, message: str) -> dict:
    """The ``on_failure`` of the tests: a row naming the item, the kind and the message."""
    return {"item": list(item) if isinstance(item, tuple) else item, "error": kind,
            "message": message}

