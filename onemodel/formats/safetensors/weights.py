"""Weights in and out: a model's initializers as a safetensors file, and a safetensors file's
tensors put back into a model's initializers by name (docs/safetensors.md).

:func:`write_weights` writes every initializer with a raw layout (ONNX Part 1, Clause 6.3.4;
STRING initializers are left out: they have none) of every graph into one safetensors file laid
out by :func:`.layout.plan` (names as keys, unique keys for names met twice, element types and
the given metadata, such as the model's digest, in ``__metadata__``), the tensor bytes streamed
from where they lie.

:func:`apply_weights` replaces initializers by key: each tensor of the file (padding entries
skipped) must name an initializer (its key, as :func:`write_weights` gives the model's
initializers keys) and hold its element type and dims (:func:`.layout.consistent`); the
initializer's contents become a Blob of the file's bytes (zero-copy).
"""

from __future__ import annotations

import re

from ...errors import InvalidModelError, quote
from ...ir.dtypes import INFO, DataType
from ...ir.record import buffer_view
from ...ir.tensor import EXTERNAL, STORAGE_FIELDS, Tensor
from ...ir.walk import iter_tensors
from ...storage.blob import Blob
from .header import read_header
from .layout import DEFAULT_ALIGN, Recorded, consistent, plan, unique_keys

_INITIALIZER = re.compile(r"\.initializers\[\d+\]$")


def initializers(model) -> list:
    """``(path, tensor)`` of every initializer of every graph (subgraphs, training graphs), each
    tensor once, in walk order, that has a raw layout (not STRING)."""
    out, seen = [], set()
    for path, t in iter_tensors(model):
        if id(t) in seen or not _INITIALIZER.search(path):
            continue
        seen.add(id(t))
        if (t.data_type or 0) in INFO and t.data_type not in (DataType.STRING,
                                                              DataType.UNDEFINED):
            out.append((path, t))
    return out


def _contents(t, path):
    if t.data_location == EXTERNAL:
        if t.external is None:
            raise InvalidModelError(f"the external data of tensor {quote(t.name)} was not "
                                    "loaded", path=path)
        return t.external
    return t.raw_data if t.raw_data is not None else t.raw_view()


def write_weights(model, sink, *, align: int = DEFAULT_ALIGN,
                  metadata: dict | None = None, padding: list | None = None) -> int:
    """Write the initializers of ``model`` (:func:`initializers`) to ``sink`` as one safetensors
    file (:func:`.layout.plan`, layout ``"weights"``; ``metadata`` str -> str added to
    ``__metadata__``), not committed here. Returns the number of tensors written; ``padding``
    (a list), when given, receives the key of each padding entry written (``__pad0__``, ...:
    one per gap before an aligned tensor; none with ``align=1``). Raises UnsupportedError for a
    bad ``align``, InvalidModelError for external data not loaded."""
    from ...limits import MAX_EXTERNAL_DATA_ALIGNMENT as MAX_ALIGN

    if isinstance(align, bool) or not isinstance(align, int) or align < 1 or \
            align & (align - 1) or align > MAX_ALIGN:
        from ...errors import NAME_ONLY, Setting, UnsupportedError, literal

        raise UnsupportedError.advising(
            "{0}" + literal(f" must be a power of two from 1 to {MAX_ALIGN} bytes, not "
                            f"{quote(align)}"), Setting("align", NAME_ONLY))
    inits = initializers(model)
    header, offsets, _ = plan([(t.name or "", t.data_type, t.dims, t.nbytes) for _, t in inits],
                              align, layout="weights", metadata=metadata)
    end = offsets[-1] + inits[-1][1].nbytes if inits else len(header)
    sink.reserve(end)
    sink.write(header)
    pos = len(header)
    for (path, t), offset in zip(inits, offsets):
        if offset > pos:
            sink.write(bytes(offset - pos))  # a padding entry's zeros
            if padding is not None:  # (plan names them in order: __pad0__, __pad1__, ...)
                padding.append(f"__pad{len(padding)}__")
        buf = _contents(t, path)
        n = t.nbytes
        if n:
            if isinstance(buf, Blob):
                sink.write_blob(buf)
            else:
                sink.write(buffer_view(buf)[:n])
        pos = offset + n
    return len(inits)


def apply_weights(model, source, *, name: str | None = None) -> list:
    """Replace initializers of ``model`` by the tensors of the safetensors file ``source`` (a
    storage Source, added to ``model.resources``: the initializers view its bytes).

    Returns the initializers replaced (Tensors), in the file's order. Raises what
    :func:`.header.read_header` raises for a file that breaks the format's rules;
    InvalidModelError, naming the tensor, for a key no initializer has or a tensor whose dtype
    or shape does not hold the initializer's element type and dims (nothing is replaced then).
    """
    name = name or getattr(source, "name", None)
    header = read_header(source)
    recorded = Recorded(header.metadata, name)
    inits = initializers(model)
    by_key = dict(zip(unique_keys([t.name or "" for _, t in inits])[0], inits))
    changes = []
    for e in header.entries:
        if e.name in recorded.padding:
            continue
        p = f"safetensors[{quote(e.name)}]"
        found = by_key.get(e.name)
        if found is None:
            raise InvalidModelError(f"tensor {quote(recorded.name(e.name))} of the safetensors "
                                    "file is no initializer of the model", path=p, source=name)
        path, t = found
        why = consistent(e, t.data_type, t.dims, recorded)
        if why is None and e.nbytes != t.nbytes:
            why = f"it holds {e.nbytes} octets, the tensor {t.nbytes}"
        if why is not None:
            raise InvalidModelError(
                f"tensor {quote(t.name)} ({INFO[t.data_type].name}{list(t.dims)}) cannot take "
                f"safetensors entry {quote(e.name)} ({e.dtype}{list(e.shape)}): {why}",
                path=path, source=name)
        changes.append((t, Blob(source, e.begin, e.nbytes)))
    blank = Tensor()  # each storage field's unset value (None, or an empty list for repeated ones)
    for t, blob in changes:
        for f in STORAGE_FIELDS:
            v = getattr(blank, f)
            setattr(t, f, list(v) if isinstance(v, list) else v)
        t.external = None
        t.raw_data = blob
    model.resources = (model.resources or []) + [source]
    return [t for t, _ in changes]


__all__ = ["initializers", "write_weights", "apply_weights"]
