"""Bytes that go to, or come from, a Python file object instead of a named file.

* :class:`FileObjectSink`: a Sink writing into a binary file object (``io.BytesIO``, a file
  opened ``"wb"``, ``sys.stdout.buffer``), front to back as the writer produces the bytes.
* :func:`file_object_source`: a MemorySource over what a binary file object reads.

A file object names no directory (:func:`onemodel.storage.place.place_of` gives ``None`` for
both), so external data files cannot be written beside, nor resolved from, it: a writer with
external data to place refuses unless it is given their directory (``base_dir``), and a reader
refuses external tensors the same way (Clause 15.3: never the working directory). Bytes held
in memory whole (``bytes``, ``BytesSink``) are :class:`~onemodel.storage.base.MemorySource` and
:class:`~onemodel.storage.base.BytesSink`.
"""

from __future__ import annotations

import io

from ..errors import IoError
from .base import MemorySource, Sink, Source


def is_file_object(target, method: str) -> bool:
    """True when ``target`` is a file object with a callable ``method`` (``"read"`` or
    ``"write"``), not a path, URL, bytes, Source or Sink (which have sources and sinks of their
    own)."""
    return not isinstance(target, (str, bytes, bytearray, memoryview, Source, Sink)) and callable(
        getattr(target, method, None))


def _name(f, default: str) -> str:
    name = getattr(f, "name", None)
    return name if isinstance(name, str) else default


def _require_binary(f, what: str) -> None:
    mode = getattr(f, "mode", None)
    if isinstance(f, io.TextIOBase) or (isinstance(mode, str) and "b" not in mode):
        raise TypeError(f"{what} needs a binary file object (opened with 'b', or io.BytesIO), "
                        "not a text one")


class FileObjectSink(Sink):
    """A Sink that writes into the binary file object ``f`` (any object with ``write``).

    Bytes go to ``f`` as the writer produces them: nothing is gathered in memory, weights are
    not copied beyond what ``f`` itself does. :meth:`commit` flushes ``f`` and leaves it open (it
    is the caller's); :meth:`abort` truncates a seekable ``f`` back to where it stood when the
    sink was made, so a failed write leaves nothing; one that cannot seek (a pipe) keeps the
    bytes already written. A short write of a raw file object is completed. ``name`` (default:
    ``f.name`` when it is a string, else ``<file object>``) is for messages only.

    Raises TypeError for a text file object; IoError when ``f`` fails (OSError).
    """

    def __init__(self, f, name: str | None = None):
        _require_binary(f, "writing a model")
        self._f = f
        self.name = name or _name(f, "<file object>")
        try:
            self._start = f.tell() if f.seekable() else None
        except (AttributeError, OSError, ValueError):
            self._start = None
        self._pos = 0

    def write(self, data) -> None:
        view = data if isinstance(data, memoryview) else memoryview(data)
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B")
        try:
            done = self._f.write(view)
            # a raw (unbuffered) file object may take fewer octets; None: a non-blocking one
            # that took none (not a file object a model can be written to)
            while done is not None and done < len(view):
                done += self._f.write(view[done:])
        except OSError as e:
            raise IoError(f"cannot write: {e.strerror or e}", source=self.name) from None
        if done is None:
            raise IoError("cannot write: the file object took no bytes (non-blocking?)",
                          source=self.name)
        self._pos += len(view)

    def tell(self) -> int:
        return self._pos

    def commit(self) -> None:
        flush = getattr(self._f, "flush", None)
        if flush is not None:
            try:
                flush()
            except OSError as e:
                raise IoError(f"cannot write: {e.strerror or e}", source=self.name) from None

    def abort(self) -> None:
        if self._start is None or self._pos == 0:
            return
        try:
            self._f.seek(self._start)
            self._f.truncate()
        except (AttributeError, OSError, ValueError):
            pass  # the error being raised says what went wrong; this one would hide it
        self._pos = 0


def file_object_source(f, name: str | None = None) -> MemorySource:
    """A MemorySource over the bytes the binary file object ``f`` reads (``f.read()``, from its
    position to its end); its ``name`` is ``name``, ``f.name`` or ``<file object>``.

    The bytes are read once, whole (a file object cannot be mapped); tensors are zero-copy views
    of them. Raises TypeError for a text file object (or one whose ``read`` does not give
    bytes), IoError when reading fails.
    """
    _require_binary(f, "reading a model")
    label = name or _name(f, "<file object>")
    try:
        data = f.read()
    except OSError as e:
        raise IoError(f"cannot read: {e.strerror or e}", source=label) from None
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"reading a model needs a binary file object; read() gave "
                        f"{type(data).__name__}")
    return MemorySource(data, name=label)
