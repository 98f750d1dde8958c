"""Keeping freed memory for the next run: glibc's malloc tuned once per process, on request.

Every run of a model allocates and frees the same intermediate arrays. With glibc's default
malloc, a freed block larger than the (dynamic) mmap threshold, and free memory at the top of the
heap past the trim threshold, go back to the kernel, so the next run pays one page fault per
4 KiB page it touches again: about a third of the run time of a transformer encoder at batch 16.
onnxruntime avoids the same cost with its own arena allocator.

:func:`tune_allocator` therefore asks glibc, with ``mallopt``, to serve blocks up to
:data:`MMAP_THRESHOLD` bytes from the heap and to return free heap memory to the kernel only when
more than :data:`TRIM_THRESHOLD` bytes of it accumulate at the top. This is a process-wide
setting (it changes how everything in the process allocates, and the process keeps up to
``TRIM_THRESHOLD`` bytes of freed memory mapped), so it is opt-in: the first
:class:`~onemodel.evaluate.Session` (or :func:`onemodel.evaluate.run`) given
``tune_malloc=True`` calls it; a Session without it leaves malloc as it is. It is skipped when:

* the C library is not glibc (musl, macOS, Windows): nothing to tune, nothing is done;
* the environment sets ``ONEMODEL_TUNE_MALLOC=0``;
* the environment already sets ``MALLOC_MMAP_THRESHOLD_`` or ``MALLOC_TRIM_THRESHOLD_`` (the
  user's own glibc tuning wins).
"""

from __future__ import annotations

import ctypes
import os
import sys

#: Largest block served from the heap instead of its own mmap, in bytes (glibc's own upper bound
#: for the dynamic threshold on 64-bit systems).
MMAP_THRESHOLD = 32 * 1024 * 1024

#: Free memory at the top of the heap kept mapped for reuse, in bytes, before glibc trims it.
TRIM_THRESHOLD = 64 * 1024 * 1024

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_result: bool | None = None


def tune_allocator() -> bool:
    """Apply the settings of this module's docstring once per process.

    Returns True when glibc accepted them (now or on an earlier call), False when skipped.
    Never raises.
    """
    global _result
    if _result is None:
        _result = _tune()
    return _result


def _tune() -> bool:
    env = os.environ
    if (env.get("ONEMODEL_TUNE_MALLOC", "1") == "0" or "MALLOC_MMAP_THRESHOLD_" in env
            or "MALLOC_TRIM_THRESHOLD_" in env or not sys.platform.startswith("linux")):
        return False
    try:
        libc = ctypes.CDLL(None)
        if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
            return False
        libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        libc.mallopt.restype = ctypes.c_int
        ok = libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
        ok = libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 and ok
    except (OSError, AttributeError, TypeError):
        return False
    return ok
