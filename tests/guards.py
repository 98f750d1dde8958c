"""A time and memory guard for tests of inputs that used to take unbounded time or memory.

:func:`bounded` runs the body of a ``with`` block under :mod:`tracemalloc` (numpy's array data
is traced too) and fails the test when the block took longer than ``seconds`` or its peak of
traced memory passed ``peak`` bytes: a regression that reads ``/dev/zero`` or grows a list of
arrays without bound fails with the figures instead of exhausting the machine. Bounds are
generous (seconds, not milliseconds) so that a slow or busy machine passes.
"""

from __future__ import annotations

import time
import tracemalloc
from contextlib import contextmanager


@contextmanager
def bounded(seconds: float, peak: int):
    """Fail the test unless the block ends within ``seconds`` with at most ``peak`` bytes of
    traced memory allocated at once (whatever it raises is re-raised after the checks)."""
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    start = time.monotonic()
    try:
        yield
    finally:
        elapsed = time.monotonic() - start
        used = tracemalloc.get_traced_memory()[1]
        if not was_tracing:
            tracemalloc.stop()
        assert elapsed < seconds, f"took {elapsed:.1f} s, more than the {seconds} s allowed"
        assert used <= peak, f"allocated {used} bytes at once, more than the {peak} allowed"
