"""File names for ``run --output-dir``: one file per output, never two outputs in one file
(``.npy``, or ``.pb`` for what numpy cannot hold: :class:`OutputFiles`).

ONNX value names may hold any character (``a/b``, ``a_b``, ``..``, ``x:0``). A name becomes a
file name by percent-escaping (:func:`file_stem`): letters, digits, ``-``, ``_`` and ``.`` stay,
every other byte of its UTF-8 form (and ``%`` itself, and a leading ``.``) is written ``%XX``.
Different names give different file names; a stem longer than :data:`MAX_STEM` characters is
cut and ends in ``~`` and a digest of the whole name (``~`` never appears otherwise). Where the
file system folds case (``A`` and ``a`` are one file), a name whose file was already written in
this run gets ``~2``, ``~3`` ... : no run overwrites a file it wrote itself. Nor a file the
command reads (the model, its data files, an ``--input`` file, the test data): such a path is
refused before anything is written (:meth:`OutputFiles.refuse_inputs`).
"""

from __future__ import annotations

import hashlib
import os

#: Longest stem kept as it is (file names are limited to 255 bytes; ``.npy`` and a suffix fit).
MAX_STEM = 200

_KEEP = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


def file_stem(name: str) -> str:
    """The file name (without ``.npy``) of the output ``name``: an injective escape."""
    out = []
    for i, c in enumerate(name):
        if c in _KEEP and not (i == 0 and c == "."):
            out.append(c)
        else:
            out.extend(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass"))
    stem = "".join(out) or "%"  # "" is the only name that escapes to nothing
    if len(stem) > MAX_STEM:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        stem = f"{stem[:MAX_STEM - 17]}~{digest}"
    return stem


class OutputFiles:
    """Paths in ``directory`` for the outputs of one run; ``written`` lists ``(name, path)`` in
    the order they were handed out.

    ``output_format`` ``npy`` (the default) saves a tensor as ``.npy`` where numpy can load the
    file back, and as a TensorProto ``.pb`` where it cannot (bfloat16, float8, int4, int2,
    float4, float6: :func:`onemodel.value_files.numpy_can_store`); ``pb`` saves every tensor as
    ``.pb``. A sequence, map or optional output is always one ``.pb`` file (SequenceProto,
    MapProto, OptionalProto; Annex B.4): ``kinds`` maps output names to the message kind of
    their declared type (:func:`onemodel.value_files.message_kind`), so that an output declared
    optional is an OptionalProto.
    """

    def __init__(self, directory: str, output_format: str = "npy", kinds: dict | None = None,
                 inputs=()):
        self.directory = directory
        self.output_format = output_format
        #: output name -> message kind of its declared type (an optional is written as one)
        self.kinds = kinds or {}
        #: ``(what, path)`` of the files the command reads: no output is written over one
        self.inputs = list(inputs)
        self.written: list[tuple[str, str]] = []
        self._taken: set[str] = set()

    def refuse_inputs(self, names) -> None:
        """Raise UsageError when a file that the outputs ``names`` (in the order they are
        saved) could be given, ``.npy`` or ``.pb``, is one of :attr:`inputs`
        (:func:`onemodel.storage.place.refuse_inputs_as_outputs`); called before the first is
        saved, so nothing is written then."""
        from ..errors import quote
        from ..storage.place import refuse_inputs_as_outputs

        taken = set(self._taken)
        outputs = []
        for name in names:
            stem = self._stem(name, taken)
            outputs += [(f"the file of output {quote(name)}",
                         os.path.join(self.directory, stem + suffix))
                        for suffix in (".npy", ".pb")]
        refuse_inputs_as_outputs(outputs, self.inputs)

    def save(self, name: str, value) -> str:
        """Write the output ``name`` (an ndarray, list, dict or None) to its own file, as the
        class docstring says; returns the path. Raises IoError when it cannot be written."""
        from ..errors import IoError
        from ..lazy import np
        from ..value_files import numpy_can_store, write_pb

        kind = self.kinds.get(name)
        if isinstance(value, np.ndarray) and self.output_format == "npy" \
                and numpy_can_store(value.dtype) and kind != "optional":
            path = self.path_for(name)
            try:
                np.save(path, value.astype(str) if value.dtype == object else value,
                        allow_pickle=False)
            except OSError as e:
                raise IoError(f"cannot save output {name!r}: {e.strerror or e}",
                              source=path) from None
            return path
        path = self.path_for(name, ".pb")
        write_pb(path, value, name, kind)
        return path

    def saved_lines(self) -> list[str]:
        """``saved NAME -> PATH`` per file written so far, as ``run`` prints them (the name, an
        output's, and the path made printable: :func:`onemodel.errors.printable`)."""
        from ..errors import printable

        return [f"saved {printable(name)} -> {printable(path)}" for name, path in self.written]

    def path_for(self, name: str, suffix: str = ".npy") -> str:
        """A path ``directory/<file_stem(name)><suffix>`` that no earlier output of this run
        got (compared without case, for case-folding file systems). Raises UsageError for a
        path that is one of :attr:`inputs`."""
        from ..errors import quote
        from ..storage.place import refuse_inputs_as_outputs

        stem = self._stem(name, self._taken)
        path = os.path.join(self.directory, stem + suffix)
        refuse_inputs_as_outputs([(f"the file of output {quote(name)}", path)], self.inputs)
        self.written.append((name, path))
        return path

    @staticmethod
    def _stem(name: str, taken: set) -> str:
        """The stem of ``name`` that ``taken`` (casefolded stems, added to) does not hold."""
        stem = base = file_stem(name)
        n = 1
        while stem.casefold() in taken:
            n += 1
            stem = f"{base}~{n}"
        taken.add(stem.casefold())
        return stem
