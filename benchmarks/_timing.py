"""Median wall times for the benchmark scripts of this directory (imported by them as
``_timing``: a script's directory is on ``sys.path`` when it runs)."""

from __future__ import annotations

import gc
import os
import statistics
import time
from typing import Any, Callable


def timed(fn: Callable[[], Any], repeat: int, *, warmup: bool = False, collect: bool = False,
          before: Callable[[], Any] | None = None) -> tuple[float, Any]:
    """``(median seconds, what the last call returned)`` of ``repeat`` timed calls of ``fn()``.

    Outside the timing: with ``warmup`` one untimed call first; before each timed call,
    ``before()`` when given (e.g. removing the previous run's output) and, with ``collect``, a
    ``gc.collect()``. What a call returned is dropped before the next call starts, so two
    results are never held at once (and freeing one is not timed).
    """
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, not {repeat}")
    if warmup:
        fn()
    times = []
    result = None
    for _ in range(repeat):
        result = None
        if before is not None:
            before()
        if collect:
            gc.collect()
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def median_time(fn: Callable[[], Any], repeat: int, *, warmup: bool = False,
                collect: bool = False, before: Callable[[], Any] | None = None) -> float:
    """Median wall time in seconds of ``repeat`` calls of ``fn()``; options as :func:`timed`."""
    return timed(fn, repeat, warmup=warmup, collect=collect, before=before)[0]


def interleaved(cases: dict[str, tuple[Callable[[], Any], Callable[[], Any] | None]],
                repeat: int) -> dict[str, list[float]]:
    """Wall seconds of every call of each case (in run order), the cases taking turns: round
    ``i`` times every case once, in order. Tools that write gigabytes leave the disk busy for
    whatever runs next; taking turns gives each the same share of that disturbance. ``cases``
    maps a label to ``(fn, before)``; ``before()`` (may be ``None``) runs untimed before each
    call."""
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, not {repeat}")
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(repeat):
        for label, (fn, before) in cases.items():
            if before is not None:
                before()
            t = time.perf_counter()
            fn()
            times[label].append(time.perf_counter() - t)
    return times


def fresh_destination(path: str) -> Callable[[], None]:
    """A ``before`` callable for :func:`interleaved` or :func:`timed`: removes ``path`` and runs
    ``sync``, so every run writes a new file and none pays for the writeback of the bytes an
    earlier run left dirty."""
    def before() -> None:
        if os.path.exists(path):
            os.unlink(path)
        os.sync()
    return before


def warm_page_cache(path: str) -> None:
    """Read ``path`` once, so that every tool finds it in the page cache alike."""
    with open(path, "rb") as f:
        while f.read(64 << 20):
            pass


def processes(cmds: dict[str, list[str]], repeat: int, env: dict,
              run: Callable[[list[str], dict], tuple[float, int]]) -> tuple[dict, dict]:
    """Whole processes side by side: ``cmds`` label -> command, each run once untimed (bytecode
    caches, page cache), then ``repeat`` rounds taking turns (:func:`interleaved`). ``run(cmd,
    env)`` runs one and returns ``(seconds, peak RSS bytes)``. Returns ``(median seconds,
    largest peak RSS)``, each a dict by label."""
    for cmd in cmds.values():
        run(cmd, env)
    rss: dict[str, list[int]] = {k: [] for k in cmds}

    def case(key, cmd):
        def fn():
            rss[key].append(run(cmd, env)[1])
        return fn, None

    times = interleaved({k: case(k, c) for k, c in cmds.items()}, repeat)
    return ({k: statistics.median(v) for k, v in times.items()},
            {k: max(v) for k, v in rss.items()})
