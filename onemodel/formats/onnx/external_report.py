"""How a model's external data files are laid out (ONNX Part 1, Clause 13), for ``onemodel info``.

:func:`external_data_report`: per data file, the bytes referenced and unreferenced, gaps and
trailing bytes, and the alignment of the tensors' offsets; :func:`describe_alignment` says what
an alignment allows, in words. Nothing is read or opened: the report uses the references and the
sizes of the data files the reader opened.
"""

from __future__ import annotations

from ... import limits
from ...ir.tensor import EXTERNAL
from ...ir.walk import iter_tensors
from ...limits import EXTERNAL_DATA_ALIGNMENT
from ...storage.blob import Blob
from ..layouts import layouts as registered_layouts
from .external_refs import RefusedError, location_parts, parse_reference
from .external_walk import data_file_identity
from .writer import union_ranges

_REPORT_KEYS = ("location", "size", "tensors", "referenced", "unreferenced", "gaps", "trailing",
                "alignment", "aligned", "aligned_64")

#: A tensor can be mapped by itself (``mmap`` of its range) only at an offset that is a multiple
#: of the page size: 4096 on the usual systems (Windows maps at 65536).
PAGE_ALIGNMENT = EXTERNAL_DATA_ALIGNMENT


def external_data_report(model) -> list[dict]:
    """How each external data file of ``model`` is used, for ``onemodel info``.

    Returns one JSON-ready dict per data file, in order of first reference, all sizes in bytes:
    ``location`` (as written), ``size`` (of the file; ``None`` when it was not opened, e.g. read
    with ``load_external=False`` or from a OneModel file), ``tensors`` (references to it),
    ``referenced`` (bytes covered by at least one reference), ``unreferenced`` (``size -
    referenced``: orphans and gaps; ``None`` without a size), ``gaps`` (unreferenced bytes
    before the end of the last reference), ``trailing`` (bytes after it), ``alignment`` (the
    alignment the file has: the largest power of two, at most
    :data:`~onemodel.limits.MAX_EXTERNAL_DATA_ALIGNMENT`, dividing every non-empty tensor's
    offset; ``None`` without one), ``aligned`` (``alignment`` >= 4096,
    :data:`PAGE_ALIGNMENT`: each tensor can be mapped by itself at its offset), ``aligned_64``
    (``alignment`` >= 64: in a map of the whole file every tensor starts 64-byte aligned, enough
    for aligned SIMD loads and any element type), ``error`` for a reference that cannot be
    parsed (reported, not raised), and for a data file a layout plugin recognises what it
    says of it under its name (:meth:`~onemodel.formats.layouts.Layout.describe`): for a
    safetensors data file ``safetensors``:
    ``{"entries": the tensors its header names (padding left out), "padding": the padding
    entries it also names (the alignment fillers onemodel records in ``__metadata__``; a
    safetensors reader lists them among its keys), "checked": the references checked consistent
    with the entry they point at}`` (the reader refuses an inconsistent one,
    so for a loaded model ``checked`` equals ``tensors``). :func:`describe_alignment` says this
    in words.
    """
    files: dict[str, dict] = {}
    ranges: dict[str, list] = {}
    for _, t in iter_tensors(model):
        if t.data_location != EXTERNAL:
            continue
        try:
            ref = parse_reference(t.external_data)
            key = "/".join(location_parts(ref.location))
        except RefusedError as e:
            loc = next((x.value for x in t.external_data if x.key == "location"), None)
            f = files.setdefault(f"?{loc}", {"location": loc, "size": None, "tensors": 0,
                                             "referenced": 0, "unreferenced": None, "gaps": None,
                                             "trailing": None, "alignment": None,
                                             "aligned": False, "aligned_64": False})
            f["tensors"] += 1
            f["error"] = e.message
            continue
        f = files.get(key)
        if f is None:
            f = files[key] = {"location": ref.location, "size": None, "tensors": 0,
                              "alignment": None}
            ranges[key] = []
        f["tensors"] += 1
        b = t.external
        if isinstance(b, Blob) and data_file_identity(b.source) is not None:
            f["size"] = b.source.size
            for layout in registered_layouts():
                said = layout.describe(b.source)
                if said is not None:
                    f[layout.name] = said
        length = ref.length if ref.length is not None else t.nbytes
        if length > 0:  # the largest power of two dividing the offset (0: any), capped
            top = limits.MAX_EXTERNAL_DATA_ALIGNMENT
            own = min(ref.offset & -ref.offset, top) if ref.offset else top
            f["alignment"] = own if f["alignment"] is None else min(f["alignment"], own)
        ranges[key].append((ref.offset, ref.offset + length))
    for key, f in files.items():
        if key not in ranges:
            continue
        a = f["alignment"]
        f["aligned"] = a is None or a >= PAGE_ALIGNMENT
        f["aligned_64"] = a is None or a >= limits.CONTAINER_ALIGNMENT
        covered = union_ranges(sorted(ranges[key]))
        referenced = sum(b - a for a, b in covered)
        last_end = covered[-1][1] if covered else 0
        f["referenced"] = referenced
        size = f["size"]
        if size is None:
            f["unreferenced"] = f["gaps"] = f["trailing"] = None
        else:
            f["trailing"] = max(size - last_end, 0)
            f["gaps"] = last_end - referenced
            f["unreferenced"] = size - referenced
    keys = _REPORT_KEYS + tuple(layout.name for layout in registered_layouts()) + ("error",)
    return [{k: f[k] for k in keys if k in f} for f in files.values()]


def _bytes(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB" if n >= 1024 else \
        f"{n} byte{'s' if n != 1 else ''}"


def describe_alignment(alignment: int | None) -> str:
    """What an ``alignment`` of :func:`external_data_report` allows, in words, for ``info``:
    mapping each tensor by itself needs page alignment (4096; 65536 on Windows); a map of the
    whole file gives 64-byte aligned tensors (SIMD loads) from 64 on."""
    if alignment is None:
        return "no tensor bytes"
    head = f"offsets aligned to {_bytes(alignment)}"
    if alignment >= 65536:
        return head + " (each tensor can be mapped by itself, also at Windows' 64 KiB)"
    if alignment >= PAGE_ALIGNMENT:
        return head + " (each tensor can be mapped by itself; Windows maps at 64 KiB)"
    simd = "yes" if alignment >= limits.CONTAINER_ALIGNMENT else \
        f"no, {_bytes(alignment)} < 64"
    return (head + f" (64-byte aligned in a whole-file map: {simd}; mapping a tensor by "
            f"itself needs {PAGE_ALIGNMENT})")


__all__ = ["PAGE_ALIGNMENT", "external_data_report", "describe_alignment"]
