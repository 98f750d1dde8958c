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
``ONEMODEL_MEMORY_LIMIT`` (bytes) when set, else :func:`available_memory`. What grows with the
data without an attribute saying so is checked too: a broadcast larger than its inputs
(:func:`check_broadcast`, :func:`check_broadcast_all`: the elementwise operators, Where, Sum),
a matrix product (:func:`check_product`: MatMul, Gemm), a concatenation (Concat,
ConcatFromSequence), and what a Loop or Scan keeps as it iterates (:class:`Accumulation`). Each
check's fast path, for arrays under the unchecked size, is one product and one comparison.
"""

from __future__ import annotations

import ctypes
import os
import sys

from ..errors import EvaluationError, OneModelError, UsageError, quote
from ..ir.tensor import element_count
from ..operators import broadcast

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
_STATUS = "/proc/self/status"


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
    (v2) still allows when its ``memory.max`` is set, and to the address space the process may
    still map when ``RLIMIT_AS`` is set (``ulimit -v``: the limit less ``VmSize`` of
    /proc/self/status); else the available physical pages times the page size
    (``os.sysconf``); None when the system tells none of these. Never raises."""
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
    for room in (_cgroup_room(), _address_space_room()):
        if room is not None:
            avail = room if avail is None else min(avail, room)
    return avail


def _address_space_room() -> int | None:
    """``RLIMIT_AS`` (soft) less the process's ``VmSize`` (/proc/self/status): the address space
    a new mapping may still take, 0 at least; None where there is no such limit or it cannot be
    read (no ``resource`` module, no /proc)."""
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, AttributeError, OSError, ValueError):
        return None
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    try:
        with open(_STATUS, "rb") as f:
            for line in f:
                if line.startswith(b"VmSize:"):
                    return max(soft - int(line.split()[1]) * 1024, 0)  # (in kB)
    except (OSError, ValueError, IndexError):
        return None
    return None


def memory_budget() -> int | None:
    """The bytes an allocation may take now: ``ONEMODEL_MEMORY_LIMIT`` when set, else
    :func:`available_memory`; None when neither is known. UsageError as :func:`memory_limit`."""
    limit = memory_limit()
    return limit if limit is not None else available_memory()


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


# -- what grows with the data: broadcasts, products, accumulations ---------------------------

#: Below this many bytes an allocation is not checked at all: CHECKED_ALLOCATION_BYTES, or the
#: ``ONEMODEL_MEMORY_LIMIT`` when it is lower. Set by :func:`refresh_budget` when a Session is
#: made, so that the kernels' fast path is one comparison with a module global.
_floor = CHECKED_ALLOCATION_BYTES


def refresh_budget() -> int | None:
    """Read ``ONEMODEL_MEMORY_LIMIT`` (:func:`memory_limit`: UsageError for a bad value) and
    set the size below which :func:`check_broadcast`, :func:`check_product` and
    :class:`Accumulation` do not check; returns the limit. A Session calls it when it is
    made."""
    global _floor
    limit = memory_limit()
    _floor = CHECKED_ALLOCATION_BYTES if limit is None else min(limit, CHECKED_ALLOCATION_BYTES)
    return limit


def broadcast_count(a: tuple, b: tuple) -> int:
    """The element count of the multidirectional broadcast (ONNX Part 1, Clause 8.3; numpy's
    rule) of shapes ``a`` and ``b``; 0 when they do not broadcast (numpy then says why).
    The shape is :func:`onemodel.operators.broadcast.int_shape`."""
    shape = broadcast.int_shape((a, b))
    if shape is None:
        return 0
    n = 1
    for d in shape:
        n *= d
    return n


def check_broadcast(a, b, itemsize: int, what: str) -> None:
    """Check the broadcast result of arrays ``a`` and ``b`` (``itemsize`` bytes an element)
    against the budget before it is computed, when it is larger than both inputs (a result no
    larger than an input grows nothing). The fast path, taken for all but arrays whose sizes
    multiply past the unchecked size, is one product and one comparison.

    Raises EvaluationError as :func:`check_allocation` (``what``: ``the Add output``)."""
    na, nb = a.size, b.size
    if na * nb * itemsize < _floor or a.shape == b.shape:
        return
    n = broadcast_count(a.shape, b.shape)
    if n > na and n > nb:
        check_allocation(n * itemsize, what)


def check_broadcast_all(arrays, itemsize: int, what: str) -> None:
    """:func:`check_broadcast` for the broadcast of several arrays (Sum, Max, Where); None
    entries (absent optional inputs) are left out."""
    arrays = [x for x in arrays if x is not None]
    bound = itemsize
    for x in arrays:
        bound *= x.size
    if bound < _floor or len(arrays) < 2:
        return
    shape = broadcast.int_shape([x.shape for x in arrays])
    if shape is None:
        return  # numpy says why
    n = 1
    for d in shape:
        n *= d
    if all(n > x.size for x in arrays):
        check_allocation(n * itemsize, what)


def check_product(a, b, itemsize: int, what: str) -> None:
    """Check the output of the matrix product ``a @ b`` (numpy's ``matmul`` rule: the stacks
    broadcast, then ``[..., m, n]``; a 1-D operand counts as a matrix of one row or column)
    against the budget before it is computed: an ``[m, 1] @ [1, n]`` product is ``m * n``
    elements from ``m + n``. Raises EvaluationError as :func:`check_allocation`."""
    if a.size * b.size * itemsize < _floor:  # (a bound of the output: the fast path)
        return
    sa, sb = a.shape, b.shape
    m = sa[-2] if len(sa) >= 2 else 1
    n = sb[-1] if len(sb) >= 2 else 1
    stack = broadcast_count(sa[:-2], sb[:-2])
    if stack * m * n * itemsize >= _floor:
        check_allocation(stack * m * n * itemsize, what)


class Accumulation:
    """Bytes a kernel keeps as it iterates (a Loop's or Scan's scan outputs, stacked at the
    end), checked against the budget as they grow: :meth:`add` is one addition and one
    comparison until the total reaches the unchecked size, then :func:`check_allocation` runs
    each time the total has grown by a sixteenth (at once past ``ONEMODEL_MEMORY_LIMIT``), so
    a loop of many iterations reads the available memory a few dozen times, not each time."""

    __slots__ = ("what", "nbytes", "_next")

    def __init__(self, what: str):
        self.what = what
        self.nbytes = 0
        self._next = _floor

    def add(self, nbytes: int) -> None:
        """Count ``nbytes`` more; EvaluationError as :func:`check_allocation` when the total
        (``what`` would take ...) passes the budget."""
        self.nbytes += nbytes
        if self.nbytes >= self._next:
            total = self.nbytes
            check_allocation(total, self.what)
            limit = memory_limit()
            self._next = total + max(total >> 4, 1)
            if limit is not None:
                self._next = min(self._next, limit + 1)
