"""The ``safetensors`` layout of ONNX external data (:mod:`onemodel.formats.layouts`): as
``file``, but the data file is one valid safetensors file (:mod:`.layout`; docs/safetensors.md),
or shards of it with a Hugging Face index (option ``max_shard_size``). Reading, a data file that
starts like a safetensors file has its header checked and every reference into it checked
against the header entry it selects (:mod:`.check`)."""

from __future__ import annotations

import json

from ...errors import NAME_ONLY, OneModelError, Setting, UnsupportedError, literal, quote
from ..layouts import Layout, Piece, PlacementError, PlannedFile

SUFFIX = ".safetensors"


class SafetensorsLayout(Layout):
    """The ``safetensors`` layout plugin."""

    name = "safetensors"
    options = {"max_shard_size": "a positive integer (bytes)"}
    suffixes = (SUFFIX,)
    takes_external_data = True

    @property
    def default_align(self) -> int:
        from .layout import DEFAULT_ALIGN

        return DEFAULT_ALIGN

    def check_options(self, options: dict) -> None:
        """``max_shard_size``: a positive integer (bytes), or None."""
        n = options.get("max_shard_size")
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise UnsupportedError.advising(
                "{0}" + literal(f" must be {self.options['max_shard_size']} with layout "
                                f"'safetensors', not {quote(n)} with layout 'safetensors'"),
                Setting("max_shard_size", NAME_ONLY))

    def default_location(self, model_name: str | None) -> str:
        """The .onnx file's name with ``.safetensors`` for ``.onnx``."""
        base = model_name or "model.onnx"
        return (base[:-5] if base.lower().endswith(".onnx") else base) + SUFFIX

    def plan(self, tensors, location, align, used_names, max_shard_size=None, **options):
        """One safetensors file (:func:`.layout.plan`): its header the first piece, every tensor
        at its aligned offset. With ``max_shard_size`` and more tensor bytes than that, shards
        ``<stem>-0000i-of-0000k.safetensors`` instead, after their index
        ``<data file>.index.json`` (:func:`.layout.shard`)."""
        from . import layout

        if not tensors:
            return []
        items = [(t.name, t.data_type, t.dims, t.nbytes) for t in tensors]
        keys, _ = layout.unique_keys([x[0] for x in items])
        groups = [list(range(len(tensors)))]
        names = [location]
        files = []
        total = sum(t.nbytes for t in tensors)
        if max_shard_size is not None and total > max_shard_size:
            groups = layout.shard([t.nbytes for t in tensors], max_shard_size)
            names = layout.shard_names(location, len(groups))
            weight_map = {keys[i]: names[g] for g, group in enumerate(groups) for i in group}
            data = layout.index_json(weight_map, total)
            files.append(PlannedFile(names[-1], [Piece(0, len(data), data=data)], index=True))
        for g, group in enumerate(groups):
            try:
                header, offsets, _ = layout.plan([items[i] for i in group], align,
                                                 keys=[keys[i] for i in group])
            except UnsupportedError as e:
                raise PlacementError(group[0], e) from None
            df = PlannedFile(names[g], [Piece(0, len(header), data=header)])
            df.pieces += [Piece(offset, tensors[i].nbytes, tensor=i)
                          for i, offset in zip(group, offsets)]
            files.append(df)
        return files

    def open_data_file(self, source, location: str):
        """The checked header of a data file that is a safetensors file
        (:func:`.check.open_index`), None for another. A header that breaks the format's rules
        is refused with the header check's kind (MalformedError, UnsupportedError), the message
        naming its path."""
        from .check import open_index

        try:
            return open_index(source, location)
        except OneModelError as e:
            raise type(e)(f"safetensors data file, {e.path}: {e.message}", offset=e.offset,
                          source=e.source) from None

    def describe(self, source) -> dict | None:
        """``{"entries": tensors its header names (padding left out), "padding": the padding
        entries, "checked": references checked}`` of a safetensors data file read."""
        from .check import index_of

        st = index_of(source)
        if st is None:
            return None
        return {"entries": st.tensors, "padding": len(st.header) - st.tensors,
                "checked": st.checked}

    def companions(self, path: str) -> list:
        """The index beside a shard (``<stem>.safetensors.index.json``), when ``path`` is named
        as a shard and the index exists."""
        import os

        from .layout import index_of_shard

        index = index_of_shard(path)
        return [index] if index is not None and os.path.isfile(index) else []

    def index_names(self, data: bytes) -> list | None:
        """The shard names the ``weight_map`` of an index json names (None: no such index)."""
        try:
            shards = set(json.loads(data)["weight_map"].values())
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
        return sorted(shards) if all(isinstance(s, str) for s in shards) else None


    def kept_ranges(self, source, end: int) -> list:
        """The header (octets ``[0, data start)``) of a safetensors data file read
        (:func:`.check.index_of`) whose referenced tensors reach the end of its data region, so
        that ``keep`` rewrites it as a valid safetensors file (its padding entries are zeros,
        as ``keep`` writes gaps). ``[]`` otherwise: a file whose last entry no reference selects
        would be cut short of what its header names."""
        from .check import index_of

        st = index_of(source)
        if st is None or end != st.header.size:
            return []
        return [(0, st.header.data_start)]

    def summary(self, described: dict, references: int) -> str:
        """``; safetensors file, N tensor entries (+P padding entries) in its header, ...``."""
        n, pad = described["entries"], described.get("padding")
        return (f"; safetensors file, {n} tensor entr{'y' if n == 1 else 'ies'}"
                + (f" (+{pad} padding entr{'y' if pad == 1 else 'ies'})" if pad else "")
                + " in its header, "
                + ("every referenced tensor consistent with its entry"
                   if described["checked"] == references
                   else f"{described['checked']} of {references} references checked against "
                   "it"))

    # -- weights files (docs/safetensors.md) -------------------------------------------------
    weights_note = ("a safetensors weights file: it holds tensors only, not a model (no graph); "
                    "to put its tensors into a model, convert it with {0}")

    def is_weights_file(self, head: bytes | None, name: str | None) -> bool:
        """Its name ends in ``.safetensors``, or its first 8 octets are a little-endian header
        length and the JSON object of a safetensors header follows (the whole header when
        ``head`` holds it, else its start ``{"``)."""
        if name and name.lower().endswith(SUFFIX):
            return True
        if not head or len(head) < 10:
            return False
        head = bytes(head)
        n = int.from_bytes(head[:8], "little")
        if n < 2 or head[8:9] != b"{":
            return False
        if len(head) < 8 + n:
            return head[8:].lstrip(b"{ \t\r\n")[:1] == b'"'
        try:
            header = json.loads(head[8:8 + n])
        except ValueError:
            return False
        return isinstance(header, dict) and all(
            isinstance(v, dict) and "dtype" in v and "data_offsets" in v
            for k, v in header.items() if k != "__metadata__")

    def write_weights(self, model, sink, *, align: int | None = None,
                      metadata: dict | None = None, padding: list | None = None) -> int:
        """:func:`.weights.write_weights`, ``align`` by default :data:`.layout.DEFAULT_ALIGN`."""
        from .weights import write_weights

        return write_weights(model, sink, align=self.default_align if align is None else align,
                             metadata=metadata, padding=padding)

    def weights_of(self, model) -> list:
        """The initializers :meth:`write_weights` writes (:func:`.weights.initializers`)."""
        from .weights import initializers

        return [t for _, t in initializers(model)]

    def apply_weights(self, model, source, *, name: str | None = None) -> list:
        """:func:`.weights.apply_weights`."""
        from .weights import apply_weights

        return apply_weights(model, source, name=name)

    def list_weights(self, source, name: str | None = None) -> tuple:
        """The checked header's metadata and entries (:func:`.header.read_header`; padding
        entries marked). Raises what the header check raises for a broken one."""
        from .header import read_header
        from .layout import Recorded

        header = read_header(source)
        padding = Recorded(header.metadata, name).padding
        return header.metadata, [{"name": e.name, "dtype": e.dtype, "shape": list(e.shape),
                                  "bytes": e.nbytes, "padding": e.name in padding}
                                 for e in header.entries]


LAYOUT = SafetensorsLayout()

__all__ = ["LAYOUT", "SafetensorsLayout", "SUFFIX"]
