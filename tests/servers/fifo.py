"""A guard for tests of FIFOs: a regression that blocks in ``open()`` fails instead of hanging.

``open()`` of a FIFO for reading waits until a writer opens it. :func:`run_guarded` runs the
call in a thread; if it has not returned after ``timeout`` seconds, the write end of the FIFO
is opened (which releases the blocked ``open()``: the reader then sees end of file) and the test
fails saying the call blocked.
"""

from __future__ import annotations

import os
import threading

import pytest


def run_guarded(call, fifo, timeout: float = 10.0):
    """``call()``'s result (or its exception, re-raised), failing the test if it blocked on
    ``fifo`` for ``timeout`` seconds."""
    outcome: dict = {}

    def target():
        try:
            outcome["value"] = call()
        except BaseException as e:  # re-raised in the test's thread
            outcome["error"] = e

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # release the blocked open()
        except OSError:
            pass
        thread.join(5)
        pytest.fail(f"the call blocked for {timeout} s on the FIFO {fifo}")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")
