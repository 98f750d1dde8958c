"""The evaluator's memory: glibc's malloc tuned once per process, on request, to keep freed
memory for the next run; and the allocation budget (at the end).

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

The allocation budget: a kernel whose output or scratch array is sized by attributes or input
values (pads, a target shape, scales, a count) calls :func:`check_allocation` (or
:func:`check_array`) before it allocates. With Linux's overcommit an allocation larger than the
memory available may succeed, and the process is then killed by the OOM killer when the pages
are touched, with no message; the check refuses it with an EvaluationError instead. The budget is
``ONEMODEL_MEMORY_LIMIT`` (bytes) when set, else :func:`available_memory`.
"""

from __future__ import annotations

import ctypes
import os
import sys

from ..errors import EvaluationError, OneModelError, UsageError, quote
from ..ir.tensor import element_count

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


# -- the allocation budget ---------------------------------------------------------------------

#: Allocations smaller than this, in bytes, are not checked against the available memory (so
#: that small arrays cost no read of /proc/meminfo); ``ONEMODEL_MEMORY_LIMIT`` checks them all.
CHECKED_ALLOCATION_BYTES = 256 * 1024 * 1024

#: The environment variable that sets the available memory, in bytes (a decimal integer).
MEMORY_LIMIT_VARIABLE = "ONEMODEL_MEMORY_LIMIT"

#: How a refusal starts: as the evaluator words a MemoryError of a kernel.
_REFUSED = "needs more memory than is available"

_MEMINFO = "/proc/meminfo"
_CGROUP = "/sys/fs/cgroup"


def size_text(nbytes: int) -> str:
    """``nbytes`` for a message: ``1.5 TiB``, ``37.3 GiB``, ``512.0 MiB``, ``12.5 KiB`` or
    ``100 bytes`` (PiB, TiB, GiB, MiB and KiB of 2^50, 2^40, 2^30, 2^20 and 2^10 bytes)."""
    for unit, size in (("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20),
                       ("KiB", 1 << 10)):
        if nbytes >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{nbytes} bytes"


def memory_limit() -> int | None:
    """The bytes ``ONEMODEL_MEMORY_LIMIT`` allows, or None when it is unset or empty.

    Raises UsageError (a ValueError) when it is set to anything but a decimal integer of
    bytes: a Session checks it when it is made, so the setting is named before any run.
    """
    value = os.environ.get(MEMORY_LIMIT_VARIABLE, "")
    if not value:
        return None
    text = value.strip()
    if not text.isascii() or not text.isdigit():
        raise UsageError(f"{MEMORY_LIMIT_VARIABLE}={quote(value)} is not a number of bytes (a "
                         "decimal integer such as 1073741824)")
    return int(text)


def available_memory() -> int | None:
    """The memory, in bytes, a new allocation can take without the kernel reclaiming memory that
    is in use: ``MemAvailable`` of /proc/meminfo (Linux), lowered to what the process's cgroup
    (v2) still allows when its ``memory.max`` is set; else the available physical pages times
    the page size (``os.sysconf``); None when the system tells neither. Never raises."""
    avail = None
    try:
        with open(_MEMINFO, "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    avail = int(line.split()[1]) * 1024  # (in kB)
                    break
    except (OSError, ValueError, IndexError):
        avail = None
    if avail is None:
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):
            avail = None
        if avail is not None and avail <= 0:
            avail = None
    room = _cgroup_room()
    if room is not None:
        avail = room if avail is None else min(avail, room)
    return avail


def _cgroup_room() -> int | None:
    """``memory.max - memory.current`` of the root of this process's cgroup v2 view, or None
    where there is no such limit (``max``) or no cgroup v2 file."""
    try:
        with open(f"{_CGROUP}/memory.max", "rb") as f:
            top = f.read().strip()
        if top == b"max":
            return None
        with open(f"{_CGROUP}/memory.current", "rb") as f:
            used = int(f.read().strip())
        return max(int(top) - used, 0)
    except (OSError, ValueError):
        return None


def check_allocation(nbytes: int, what: str) -> None:
    """Refuse an allocation of ``nbytes`` bytes that the machine cannot hold, before it is made.

    ``what`` names the array for the message (``"the padded input"``). The budget is
    ``ONEMODEL_MEMORY_LIMIT`` (bytes) when set, else :func:`available_memory`, read only for
    allocations of :data:`CHECKED_ALLOCATION_BYTES` or more; where neither is known nothing is
    checked. With Linux's overcommit an allocation past the memory available can succeed and the
    process is killed when the memory is touched, with no message; this check turns that into
    an error.

    Raises:
        EvaluationError: ``nbytes`` exceeds the budget ("needs more memory than is available:
            the padded input would take 37.3 GiB, more than the 21.8 GiB of memory available";
            the evaluator prefixes the node and its inputs).
        UsageError: ``ONEMODEL_MEMORY_LIMIT`` is not a decimal integer.
    """
    limit = memory_limit()
    if limit is not None:
        if nbytes > limit:
            raise EvaluationError(f"{_REFUSED}: {what} would take {size_text(nbytes)}, more "
                                  f"than the {size_text(limit)} {MEMORY_LIMIT_VARIABLE} allows")
        return
    if nbytes < CHECKED_ALLOCATION_BYTES:
        return
    avail = available_memory()
    if avail is not None and nbytes > avail:
        raise EvaluationError(f"{_REFUSED}: {what} would take {size_text(nbytes)}, more than "
                              f"the {size_text(avail)} of memory available")


def check_array(shape, itemsize: int, what: str) -> tuple[int, ...]:
    """``shape`` as a tuple of ints, checked before an array of that shape and ``itemsize``
    bytes per element is allocated: the element count (:func:`~onemodel.ir.tensor.element_count`:
    InvalidModelError for a negative extent or 2^63 elements, UnsupportedError at
    ``limits.MAX_ELEMENT_COUNT``) and then :func:`check_allocation`; the errors' messages start
    with ``what``."""
    shape = tuple(int(d) for d in shape)
    try:
        count = element_count(shape)
    except OneModelError as e:
        raise type(e)(f"{what}: {e.message}") from None
    check_allocation(count * itemsize, what)
    return shape
