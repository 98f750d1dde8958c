"""Publishing an ONNX model and its data files in a local directory all at once (Clause 13).

A model with external data is several files, and a reader opens the .onnx file first, then the
data files it names. :func:`~.writer.write_layout` writes every file to a temporary file first;
this module decides the order in which they get their names, so that onemodel's reader (which
takes the locks of :mod:`onemodel.storage.locks`) finds the old model or the new one, whole, or
an IoError, and a process killed at any instant leaves one of them on disk:

1. Every data file is written under a *staged* name unique to this write and model file,
   ``.onemodel-staged-<write>-<model>.<name>`` in its directory (:func:`staged_location`; the
   file is created there, no temporary file and no rename): no published model names it, and a
   write killed here leaves only hidden files that the next write of the model removes (step 4).
2. A first version of the .onnx file, naming the staged files, is renamed over the destination:
   the new model is published whole, the old model's files untouched until then.
3. Holding an exclusive lock on the old .onnx file and on that first version (a reader holds a
   shared one while it opens data files: :func:`onemodel.storage.locks.model_file_guard`), the
   staged files are renamed to their names and the final .onnx file, naming them, over the
   destination. A process killed between 2 and this step leaves the first version: the new
   model, whole, under staged names; the next write into the destination takes them over.
4. Staged files of this model file that the new .onnx file does not name (left by a write
   killed before its end; they carry the model file's tag, :func:`owner_tag`) are removed,
   under the same lock.

A process killed in step 3 leaves the first version naming staged files of which some were
renamed already: a reader that finds a staged file gone reads the file it was renamed to, which
holds its bytes (:func:`published_location`). SIGINT and SIGTERM wait until steps 1 to 3 and the
final rename are done (:class:`~onemodel.storage.local.LocalSink` blocks them in its commit).

A shard index of safetensors shards names no tensor; it is staged and renamed like a data file.
Data files of an earlier layout that the new model does not name stay (they may be another
model's); only staged files are ever removed.
"""

from __future__ import annotations

import os
import re

from ...storage import locks

#: A staged data file's name (:func:`staged_location`): the write, the model file it belongs to
#: (:func:`owner_tag`) and the name it is published under.
STAGED = re.compile(r"^\.onemodel-staged-([0-9a-f]{8})-([0-9a-f]{8})\.(.+)$")


def owner_tag(model_path: str) -> str:
    """8 hex digits naming the model file ``model_path`` (by its absolute path) in the names of
    its staged data files, so a write cleans only its own model's stale ones (not those of a
    model of the same name in a subdirectory, written at the same time)."""
    import hashlib

    return hashlib.sha1(os.path.abspath(model_path).encode("utf-8", "surrogatepass")
                        ).hexdigest()[:8]


def staged_location(location: str, write_id: str, owner: str) -> str:
    """The staged form of data file ``location`` for the write ``write_id`` (8 hex digits) of the
    model file tagged ``owner`` (:func:`owner_tag`): ``sub/w.bin`` ->
    ``sub/.onemodel-staged-<write_id>-<owner>.w.bin``, in the same directory and with the same
    suffix (a staged ``.safetensors`` file is read as one)."""
    head, sep, name = location.rpartition("/")
    return f"{head}{sep}.onemodel-staged-{write_id}-{owner}.{name}"


def published_location(location: str) -> str | None:
    """The location a staged data file ``location`` is published under, or ``None`` when it is
    not a staged name. A staged file that is gone was renamed to it (step 3) and holds its bytes,
    so a reader falls back to it (:mod:`.external`)."""
    head, sep, name = location.rpartition("/")
    m = STAGED.match(name)
    return f"{head}{sep}{m.group(3)}" if m else None


def stale_staged(directories, owner: str, keep: set) -> list[tuple[str, tuple]]:
    """``(path, identity)`` of the staged files of model file ``owner`` in ``directories`` that
    are not in ``keep`` (this write's): left by a write that was killed. Called under the
    model file's writer lock, so no live write of that model owns them."""
    found = []
    for directory in directories:
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            m = STAGED.match(name)
            path = os.path.join(directory, name)
            if m is None or m.group(2) != owner or path in keep:
                continue
            try:
                st = os.lstat(path)
            except OSError:
                continue
            found.append((path, (st.st_dev, st.st_ino)))
    return found


class Publication:
    """The files of one write of a model to the local file ``model_path`` and the order they are
    renamed in (module documentation).

    Attributes:
        sinks: the data files' sinks, each at its name or its staged name.
        late: ``(staged path, path)`` of the data files renamed in step 3.
        first: the sink of the first version of the .onnx file (naming the staged files), or
            ``None`` when no file the model names is staged.
        leftovers: ``(path, (st_dev, st_ino))`` of stale staged files (:func:`stale_staged`), to
            remove in step 4.
    """

    def __init__(self, model_path: str):
        self.model_path = model_path
        self.sinks: list = []
        self.late: list[tuple[str, str]] = []
        self.first = None
        self.leftovers: list[tuple[str, tuple]] = []
        self._old = locks.open_for_lock(model_path)  # the .onnx file this write replaces
        self._first_fd = None

    def attach(self, model_sink) -> None:
        """Run the steps in ``model_sink``'s commit (a
        :class:`~onemodel.storage.local.LocalSink` of ``model_path``): 1 to 3 before its rename,
        4 after it; abort every file with it."""
        model_sink.before_rename.append(self._publish)
        model_sink.after_rename.append(self._clean)
        model_sink.on_abort.append(self.abort)

    def _publish(self) -> None:
        sinks, self.sinks = self.sinks, []
        try:
            for i, s in enumerate(sinks):
                s.commit()
        except BaseException:
            for s in sinks[i + 1:]:
                s.abort()
            raise
        if self.first is not None:
            first, self.first = self.first, None
            first.commit()
            self._first_fd = locks.open_for_lock(self.model_path)
        if self.late:
            locks.exclusive(self._old)
            locks.exclusive(self._first_fd)
            for staged, path in self.late:
                os.replace(staged, path)

    def _clean(self) -> None:
        try:
            if self.leftovers:
                locks.exclusive(self._old)
                for path, identity in self.leftovers:
                    try:
                        st = os.lstat(path)
                        if (st.st_dev, st.st_ino) == identity:
                            os.unlink(path)
                    except OSError:
                        pass  # housekeeping: a file that cannot be removed stays
        finally:
            self.close()

    def abort(self) -> None:
        """Remove every temporary file of this write; nothing published is touched."""
        for s in self.sinks + ([self.first] if self.first is not None else []):
            s.abort()
        self.sinks, self.first = [], None
        self.close()

    def close(self) -> None:
        """Release the locks (close the descriptors)."""
        for fd in (self._old, self._first_fd):
            if fd is not None:
                os.close(fd)
        self._old = self._first_fd = None


__all__ = ["STAGED", "staged_location", "published_location", "Publication"]
