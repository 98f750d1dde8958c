"""A progress bar for long transfers: bytes done, rate and time left (rich), on stderr only.

``progress`` is a callable given the number of bytes each read or write moved; :class:`Progress`
is one. Sinks get it through one :class:`ProgressSink`, which :func:`onemodel.storage.open_sink`
wraps around the sink it opens (writers never count); among sources only
:class:`~onemodel.storage.remote.RemoteSource` (bytes each request transferred) and
decompression (compressed bytes consumed) take it, through
:func:`onemodel.storage.open_source`. The bar draws nothing unless stderr is a terminal,
``quiet`` is false and the operation has lasted :data:`DELAY` seconds, so quick operations and
piped or redirected output stay clean; it never writes to stdout.

    with Progress("convert", total=source.size, quiet=quiet) as bar:
        sink = open_sink(url, progress=bar)
        ...
"""

from __future__ import annotations

import time

from .base import Sink, Source

#: Seconds an operation runs before its bar appears.
DELAY = 1.0


class Progress:
    """A callable counting bytes, shown as a rich progress bar once the operation is slow.

    Args:
        description: what is being done (``"convert"``, ``"download"``).
        total: bytes expected, or ``None`` when unknown (the bar then shows bytes and rate).
        quiet: never draw anything.
        delay: seconds before the bar appears (default :data:`DELAY`).
        console: a ``rich.console.Console`` to draw on (default: one on stderr); drawing
            happens only when it is a terminal.

    ``bar(n)`` adds ``n`` bytes. ``done`` is the count so far. Use as a context manager; the
    bar is removed on exit.
    """

    def __init__(self, description: str, total: int | None = None, *, quiet: bool = False,
                 delay: float = DELAY, console=None):
        self.description = description
        self.total = total
        self.quiet = quiet
        self.delay = delay
        self.done = 0
        self._console = console
        self._start = time.monotonic()
        self._bar = None
        self._task = None
        # whether stderr is a terminal is asked once the delay is over: an operation done
        # before then never imports rich (~20 ms)
        self._enabled = not quiet

    def _terminal(self) -> bool:
        if self._console is None:
            from rich.console import Console
            self._console = Console(stderr=True)
        return bool(self._console.is_terminal)

    @property
    def shown(self) -> bool:
        """True once the bar is on screen."""
        return self._bar is not None

    def __call__(self, nbytes: int) -> None:
        self.done += nbytes
        if not self._enabled:
            return
        if self._bar is None:
            if time.monotonic() - self._start < self.delay:
                return
            if not self._terminal():
                self._enabled = False
                return
            self._show()
        self._bar.update(self._task, completed=self.done)

    def set_total(self, total: int | None) -> None:
        """Change the number of bytes expected."""
        self.total = total
        if self._bar is not None:
            self._bar.update(self._task, total=total)

    def _show(self) -> None:
        from rich.progress import BarColumn, DownloadColumn, TextColumn, TimeRemainingColumn
        from rich.progress import Progress as RichProgress
        # binary units (KiB, MiB), as every summary line prints sizes
        self._bar = RichProgress(TextColumn("{task.description}"), BarColumn(),
                                 DownloadColumn(binary_units=True), _speed_column(),
                                 TimeRemainingColumn(), console=self._console, transient=True)
        self._task = self._bar.add_task(self.description, total=self.total,
                                        completed=self.done)
        self._bar.start()

    def close(self) -> None:
        """Remove the bar from the screen (if it was shown)."""
        bar, self._bar = self._bar, None
        if bar is not None:
            bar.stop()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def binary_size(n: float) -> str:
    """``n`` bytes in binary units, as the progress bar shows them: ``"512 B"``, ``"1.5 KiB"``,
    ``"3.0 MiB"``, ``"2.1 GiB"``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # not reached


def _speed_column():
    """A rich column of the transfer rate in binary units (rich's own one is decimal, MB/s)."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class BinarySpeedColumn(ProgressColumn):
        def render(self, task) -> Text:
            speed = task.finished_speed or task.speed
            if speed is None:
                return Text("?", style="progress.data.speed")
            return Text(f"{binary_size(speed)}/s", style="progress.data.speed")

    return BinarySpeedColumn()


class ProgressSink(Sink):
    """A sink that passes everything to ``inner`` and tells ``progress`` how many bytes each
    write, copy or Blob moved (``copy_from`` and ``write_blob`` keep the inner sink's fast path).
    It is the one place progress is counted: :func:`onemodel.storage.open_sink` gives a sink one
    when asked for progress, and writers never count (an ONNX writer's data files are opened
    with the model sink's ``progress``, so their bytes count on the same bar)."""

    def __init__(self, inner: Sink, progress):
        self.inner = inner
        self.name = inner.name
        self.progress = progress

    def write(self, data) -> None:
        self.inner.write(data)
        self.progress(memoryview(data).nbytes)

    def tell(self) -> int:
        return self.inner.tell()

    def write_zeros(self, count: int) -> None:
        self.inner.write_zeros(count)
        self.progress(count)

    def skip(self, count: int) -> None:
        self.inner.skip(count)
        self.progress(count)  # the gap is part of the file's length, as padding written is

    def reserve(self, nbytes: int, ranges=None) -> None:
        self.inner.reserve(nbytes, ranges)

    def copy_from(self, source: Source, offset: int, length: int) -> None:
        self.inner.copy_from(source, offset, length)
        self.progress(length)

    def write_blob(self, blob) -> None:
        """The inner sink's one copy decision for a tensor's Blob, its bytes counted once."""
        self.inner.write_blob(blob)
        self.progress(blob.nbytes)

    def commit(self) -> None:
        self.inner.commit()

    def abort(self) -> None:
        self.inner.abort()
