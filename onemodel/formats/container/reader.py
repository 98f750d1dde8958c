"""Reading a OneModel file (format version 1) into a :class:`~onemodel.ir.Model`.

Order of work (section 3.1): the header is checked against the real file length (section 1.1),
then the manifest's size and JSON depth, then the manifest is parsed and decoded object by object
(every tensor range checked against the data region in exact integer arithmetic before any view
is taken), then the reading rules of section 3 are applied. Tensors are never copied: ``raw_data``
is the :class:`~onemodel.storage.blob.Blob` of the tensor's bytes in the data region, a zero-copy
view of a local or in-memory source (of its memory map for files of 1 MiB or more), fetched on
first use from a remote one.
"""

from __future__ import annotations

from ...errors import InvalidModelError, MalformedError, OneModelError, UnsupportedError
from ...ir import graph_rules
from ...ir.model import Model
from ...ir.tensor import sparse_problem, tensor_problem
from ...ir.walk import iter_graphs
from ...storage.base import MemorySource, Source
from ...storage.blob import Blob
from . import digests, extension
from .header import HEADER_SIZE, parse_header
from .manifest import as_int, as_obj, bulk_objects, ensure_recursion_room, parse_manifest, req
from .schema import DECODE

MANIFEST = "manifest"


class Reader:
    """Decodes the manifest objects of one file (the ``ctx`` of :mod:`.schema`).

    Attributes:
        source: the file. header: its checked :class:`~.header.Header`. version: the header's
        format version. graph_paths: ``id(graph)`` -> manifest path (for rule errors).
        node_orders: ``id(graph)`` -> original node order from the extension.
        errors: ``None`` (refusals are raised), or a list (``onemodel check``): a tensor whose
        byte length does not match its dims and dtype, or whose extension breaks a tensor rule,
        is kept (its Blob spans the length the manifest states) and its InvalidModelError or
        UnsupportedError appended here, so every such tensor is reported; other refusals are
        raised.
    """

    def __init__(self, source: Source, header, errors: list | None = None):
        self.source = source
        self.header = header
        self.version = header.version
        self.graph_paths: dict[int, str] = {}
        self.node_orders: dict[int, list[int]] = {}
        self.errors = errors

    def full(self, cls: str, obj, path: str, lvl: int):
        """Decode a ``cls`` object: its natural reading, then its ``"onnx"`` extension."""
        obj = as_obj(obj, path)
        faults = len(self.errors) if self.errors is not None else 0
        rec = DECODE[cls](obj, self, path, lvl)
        if cls == "Tensor":
            digests.attach(rec, obj, path)  # a recorded digest: checked on first use
        ext = obj.get(extension.KEY)
        if cls == "Graph":
            self.graph_paths[id(rec)] = path
        if ext is not None:
            epath = f"{path}.{extension.KEY}"
            if cls == "Tensor":
                extension.apply_tensor(rec, ext, self, epath)
                # The natural reading already meets these rules (decode_tensor); what the
                # extension set (a typed field beside raw_data, external data ...) may not.
                problem = tensor_problem(rec)
                # (a tensor whose length was refused already is not reported twice)
                if problem is not None and (self.errors is None or len(self.errors) == faults):
                    self._refuse(problem[0](problem[1], path=epath))
            else:
                inner = extension.inner_level(cls, lvl)
                skip = (extension.NODE_ORDER,) if cls == "Graph" else ()
                extension.apply(rec, ext, self, epath, inner, skip=skip)
                if cls == "Graph" and extension.NODE_ORDER in ext:
                    self.node_orders[id(rec)] = extension.read_node_order(
                        ext[extension.NODE_ORDER], len(rec.nodes),
                        f"{epath}.{extension.NODE_ORDER}")
        if cls == "SparseTensor":
            problem = sparse_problem(rec)
            if problem is not None:
                raise problem[0](problem[1], path=f"{path}.{problem[2]}")
        return rec

    def tensor_content(self, data, path: str, nbytes: int):
        """The raw_data (a Blob) of a tensor's ``data`` object: ``nbytes`` bytes at its offset.

        Checked in exact arithmetic before any slice: InvalidModel when ``length`` is not
        ``nbytes`` (collected in :attr:`errors` when they are, the Blob then spanning
        ``length``); Malformed when the range leaves the data region or a non-empty tensor's
        offset is not a multiple of 64.
        """
        data = as_obj(data, path)
        offset = as_int(req(data, "offset", path), f"{path}.offset")
        length = as_int(req(data, "length", path), f"{path}.length")
        h = self.header
        where = h.data_offset + offset if offset >= 0 else None
        if length != nbytes:
            self._refuse(InvalidModelError(f"byte length {length} does not match dims and dtype "
                                           f"({nbytes} bytes)", path=f"{path}.length",
                                           offset=where))
        if offset < 0 or offset + length > h.data_length:
            raise MalformedError(f"tensor byte range [{offset}, {offset + length}) is outside the "
                                 f"{h.data_length}-byte data region", path=path, offset=where)
        if length and offset % 64:
            raise MalformedError(f"tensor offset {offset} is not a multiple of 64",
                                 path=f"{path}.offset", offset=where)
        return Blob(self.source, h.data_offset + offset, length)

    def _refuse(self, e: OneModelError) -> None:
        """Raise ``e``, or append it to :attr:`errors` when they are collected."""
        if self.errors is None:
            raise e
        self.errors.append(e)


def read(source: Source) -> Model:
    """Read a OneModel file from ``source`` (OneModel format version 1, sections 1 to 3).

    Returns the model; ``model.resources`` holds ``source`` (``model.close()`` releases it) and
    ``model.source`` its name. Tensors are Blobs of the source (see the module doc), which a
    writer copies file to file. It takes no options: a
    OneModel file has no external data, so nothing is resolved against a directory.

    Raises MalformedError, InvalidModelError, UnsupportedError (each with the manifest path or
    header field and the file offset when there is one) or IoError from the source. On error the
    source is left open (the caller opened it).
    """
    ensure_recursion_room()
    try:
        with bulk_objects():
            model = _read(source)
    except OneModelError as e:
        raise e.at(source=source.name)
    except RecursionError:
        raise UnsupportedError("the manifest nests too deeply", path=MANIFEST,
                               source=source.name) from None
    model.resources = [source]
    model.source = source.name
    return model


def _read(source: Source) -> Model:
    """Header, manifest, objects, rules (see :func:`read`)."""
    size = source.size
    header = parse_header(source.read(0, min(HEADER_SIZE, size)), size)
    manifest = parse_manifest(source.read(HEADER_SIZE, header.manifest_length), HEADER_SIZE)
    r = Reader(source, header)
    digests.model_entry(as_obj(manifest, MANIFEST), MANIFEST)  # checked; compared by check --full
    model = r.full("Model", manifest, MANIFEST, 0)
    orders = graph_rules.check_model(model, prefix=f"{MANIFEST}.", paths=r.graph_paths)
    _reorder(model, orders, r.node_orders)
    return model


def _reorder(model: Model, orders: dict, originals: dict) -> None:
    """Put each graph's nodes in dependency order, or in the original order the extension
    recorded."""
    graphs = []
    if model.graph is not None:
        graphs += [g for _, g in iter_graphs(model.graph)]
    for ti in model.training_info:
        for g in (ti.initialization, ti.algorithm):
            if g is not None:
                graphs += [x for _, x in iter_graphs(g)]
    seen = set()
    for g in graphs:
        if id(g) in seen:
            continue
        seen.add(id(g))
        order = originals.get(id(g), orders.get(id(g)))
        if order is not None and order != list(range(len(g.nodes))):
            g.nodes = [g.nodes[i] for i in order]


def read_bytes(data, *, name: str = "<bytes>") -> Model:
    """Read a OneModel file held in memory (bytes-like), for tests and small models: the
    counterpart of :func:`.writer.write_bytes`. Tensors are views of ``data``.

    Raises MalformedError, InvalidModelError or UnsupportedError (see :func:`read`).
    """
    return read(MemorySource(data, name))


__all__ = ["read", "read_bytes"]
