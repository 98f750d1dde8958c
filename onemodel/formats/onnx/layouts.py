"""The built-in layouts of ONNX external data (:mod:`onemodel.formats.layouts`): ``keep`` and
``inline``, which the writer does itself (:mod:`.writer`), and ``file`` and ``per_tensor``, which
place the tensors to move in one data file or in one data file each (Clause 13)."""

from __future__ import annotations

import re

from ..layouts import Layout, Piece, PlannedFile

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_RESERVED = frozenset(["CON", "PRN", "AUX", "NUL"] + [f"COM{i}" for i in range(1, 10)]
                      + [f"LPT{i}" for i in range(1, 10)])


def align_up(n: int, align: int) -> int:
    """``n`` rounded up to a multiple of ``align``."""
    return -(-n // align) * align


def tensor_file_name(name: str | None, used: set) -> str:
    """A data file name for tensor ``name``: characters outside ``A-Za-z0-9._-`` become ``_``,
    no leading dot, a Windows device name prefixed with ``_``, made unique (case-insensitive)
    among ``used`` with ``.2``, ``.3`` ...; the name is added to ``used``."""
    base = _UNSAFE.sub("_", name or "").lstrip(".")[:200] or "tensor"
    if base.split(".")[0].upper() in _RESERVED:
        base = "_" + base
    cand, i = base, 1
    while cand.lower() in used:
        i += 1
        cand = f"{base}.{i}"
    used.add(cand.lower())
    return cand


class _Keep(Layout):
    """``keep``: every tensor stays where it is (the writer rewrites the referenced bytes)."""

    name = "keep"
    places = False


class _Inline(Layout):
    """``inline``: every tensor in the .onnx file."""

    name = "inline"
    places = False


class _File(Layout):
    """``file``: the tensors in one data file, each at an offset that is a multiple of
    ``align``, in the model's order."""

    name = "file"
    takes_external_data = True

    def plan(self, tensors, location, align, used_names, **options):
        df = PlannedFile(location)
        end = 0
        for i, t in enumerate(tensors):
            offset = align_up(end, align)
            end = offset + t.nbytes
            df.pieces.append(Piece(offset, t.nbytes, tensor=i))
        return [df] if df.pieces else []


class _PerTensor(Layout):
    """``per_tensor``: one data file per tensor, named after it (:func:`tensor_file_name`)."""

    name = "per_tensor"

    def plan(self, tensors, location, align, used_names, **options):
        return [PlannedFile(tensor_file_name(t.name, used_names), [Piece(0, t.nbytes, tensor=i)])
                for i, t in enumerate(tensors)]


KEEP = _Keep()
INLINE = _Inline()
FILE = _File()
PER_TENSOR = _PerTensor()

__all__ = ["KEEP", "INLINE", "FILE", "PER_TENSOR", "align_up", "tensor_file_name"]
