"""Writing a :class:`~onemodel.ir.Model` as a OneModel file (format version 1, section 4).

One pass checks the model and builds the manifest (the reading rules of section 3, nesting, names,
element types, tensor contents: every error is raised before the first byte is written), then
offsets are assigned in the order of section 1.3 (:func:`onemodel.ir.walk.iter_tensors`), then
the manifest (no insignificant whitespace), the header, the zero padding and the tensor bytes
are written, each tensor at a multiple of 64 with zero bytes between. Tensor bytes are streamed:
Blobs (bytes of a source, as readers leave them) go to ``sink.write_blob`` (file to file for
local files), others are written from their buffers; typed storage is converted to raw layout
one tensor at a time. The same model always gives the same bytes.

The manifest carries the ONNX-preservation extension (:mod:`.extension`) unless ``strict_v1``;
then :mod:`.plain` reports what the plain file leaves out.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import InvalidModelError, UnsupportedError
from ...ir import graph_rules
from ...ir.dtypes import INFO
from ...ir.model import Model
from ...ir.record import _same, buffer_nbytes, buffer_view, record_class
from ...ir.tensor import EXTERNAL, raw_to_typed, sparse_problem, tensor_problem, typed_to_raw
from ...ir.walk import iter_tensors
from ...lazy import np
from ...limits import MAX_CONTAINER_TENSOR_BYTES, MAX_MANIFEST_BYTES
from ...storage.base import Sink
from ...storage.blob import Blob
from . import digests as digest_fields
from . import extension, plain
from .header import HEADER_SIZE, Header, align
from .manifest import bulk_objects, dumps, ensure_recursion_room
from .schema import DECODE, ENCODE, FORMAT_VERSION

_REGION = object()  # the natural raw_data of a tensor, as the writer sees it


@dataclass
class Plan:
    """Where one tensor's data-region bytes come from.

    mode: ``raw`` (raw_data), ``external`` (resolved external data), ``typed`` (typed storage,
    converted into ``array``) or ``none`` (no contents, zero bytes). buffer: the raw or external
    buffer. field: the typed-storage field. rederivable: the typed values are exactly what
    ``raw_to_typed`` gives back from the converted bytes.
    """

    tensor: object
    nbytes: int
    mode: str
    buffer: object = None
    array: np.ndarray | None = None
    field: str | None = None
    rederivable: bool = False
    data: dict | None = None


class _Natural:
    """The writer's view of a plain v1 reading: children are empty placeholders, tensor bytes a
    marker (every child carries its own extension; the data region holds raw_view's bytes)."""

    version = FORMAT_VERSION

    def full(self, cls: str, obj, path: str, lvl: int):
        return record_class(cls)()

    def tensor_content(self, data, path: str, nbytes: int):
        return _REGION


_NATURAL = _Natural()


class Writer:
    """Builds the manifest of one model (the ``w`` of :mod:`.schema` and :mod:`.extension`)."""

    def __init__(self, report: bool = False):
        self.plans: dict[int, Plan] = {}
        self.graphs: list = []  # (graph, its manifest object), to put nodes in order later
        #: with ``report``: id(extension object) -> (record, natural record), for the strict_v1
        #: report of what the plain file leaves out (:func:`.plain.left_out`)
        self.naturals: dict | None = {} if report else None

    def full(self, rec, path: str, lvl: int) -> dict:
        """The manifest object of ``rec`` with its ``"onnx"`` extension when it needs one."""
        cls = type(rec).__name__
        bad = extension.list_field_none(rec)
        if bad is not None:
            raise InvalidModelError(f"repeated field {bad} holds None, not a list ([] when "
                                    "empty)", path=_field_path(path, bad))
        obj = ENCODE[cls](rec, self, path, lvl)
        natural = DECODE[cls](obj, _NATURAL, path, lvl)
        inner = extension.inner_level(cls, lvl)
        ext, skip = {}, set()
        if cls == "Tensor":
            problem = tensor_problem(rec)  # what a reader would refuse is not written
            if problem is not None:
                raise problem[0](problem[1], path=path)
            ext, skip = extension.tensor_content_ext(rec, self.plans.get(id(rec))
                                                     if "data" in obj else None)
            skip |= {"dims", "data_type"}
        elif cls == "SparseTensor":
            problem = sparse_problem(rec)
            if problem is not None:
                raise problem[0](problem[1], path=f"{path}.{problem[2]}")
        elif cls == "Graph":
            self.graphs.append((rec, obj))
        ext.update(extension.diff(rec, natural, self, path, inner, skip=skip))
        if ext:
            obj[extension.KEY] = ext
            if self.naturals is not None:
                self.naturals[id(ext)] = (rec, natural)
        return obj

    def put_in_order(self, orders: dict) -> None:
        """Write each checked graph's nodes in dependency order (section 3), recording the
        original order in the extension when it differs."""
        for g, obj in self.graphs:
            order = orders.get(id(g))
            if order is None or order == list(range(len(order))):
                continue
            nodes = obj["nodes"]
            obj["nodes"] = [nodes[i] for i in order]
            pos = {i: j for j, i in enumerate(order)}
            obj.setdefault(extension.KEY, {})[extension.NODE_ORDER] = [pos[k] for k in
                                                                      range(len(order))]

    def tensor_data(self, t, path: str, count: int) -> dict:
        """The ``data`` object of a tensor, planning where its bytes come from.

        InvalidModel: unresolved external data, contents whose size does not match dims and
        dtype. Unsupported: more than 2^31 - 1 bytes.
        """
        plan = self.plans.get(id(t))
        if plan is not None:
            return plan.data
        info = INFO[t.data_type]
        nbytes = info.raw_nbytes(count)
        if nbytes > MAX_CONTAINER_TENSOR_BYTES:
            raise UnsupportedError(f"tensor of {nbytes} bytes is larger than the "
                                   f"{MAX_CONTAINER_TENSOR_BYTES}-byte limit", path=path)
        if t.data_location == EXTERNAL:
            if t.external is None:
                raise InvalidModelError("external data of this tensor was not resolved",
                                        path=path)
            plan = Plan(t, nbytes, "external", buffer=t.external)
        elif t.raw_data is not None:
            plan = Plan(t, nbytes, "raw", buffer=t.raw_data)
        else:
            field = t.typed_field()
            if field is not None and field != "string_data":
                values = getattr(t, field)
                try:
                    arr = typed_to_raw(t.data_type, field, values, count)
                except InvalidModelError as e:
                    raise InvalidModelError(e.message, path=f"{path}.{field}") from None
                back_field, back = raw_to_typed(t.data_type, arr, count)
                plan = Plan(t, nbytes, "typed", array=arr, field=field,
                            rederivable=back_field == field and _same("array", values, back))
            else:
                plan = Plan(t, nbytes, "none", array=np.zeros(0, np.uint8))
        have = buffer_nbytes(plan.buffer if plan.array is None else plan.array)
        if have != nbytes:
            raise InvalidModelError(f"{have} bytes of contents for {count} elements of "
                                    f"{info.name} ({nbytes} bytes)", path=path)
        plan.data = {"offset": 0, "length": nbytes}
        self.plans[id(t)] = plan
        return plan.data


def _collect(tree, by_data: dict) -> list:
    """The plans whose ``data`` objects the manifest tree references (no recursion)."""
    found, seen = [], set()
    stack = [tree]
    while stack:
        v = stack.pop()
        if type(v) is dict:
            plan = by_data.get(id(v))
            if plan is not None:
                if id(v) not in seen:
                    seen.add(id(v))
                    found.append(plan)
                continue
            stack.extend(v.values())
        elif type(v) is list:
            stack.extend(v)
    return found


def build(model: Model, *, strict_v1: bool = False, digests: bool = False):
    """Check ``model`` and build its manifest: ``(manifest bytes, header, plans in data order,
    left_out)``. Nothing is written. Raises InvalidModelError / UnsupportedError with the path;
    with ``digests``, what hashing the tensors raises (IoError when one cannot be read)."""
    if not isinstance(model, Model):
        raise TypeError("write() takes an onemodel.ir.Model")
    if digests and strict_v1:
        raise UnsupportedError("digests cannot be combined with strict_v1: a plain reader "
                               "reads a model other than the one the model digest is of",
                               path="manifest")
    ensure_recursion_room()
    w = Writer(report=strict_v1)
    tree = w.full(model, "", 0)  # UnsupportedError (names, types, nesting) comes first
    w.put_in_order(graph_rules.check_model(model))
    left_out: list[str] = []
    if strict_v1:
        left_out = plain.left_out(tree, "manifest", w.naturals)
    plans = list(w.plans.values())
    if strict_v1:  # tensors that only the extension referenced are left out too
        plans = _collect(tree, {id(p.data): p for p in plans})
    rank = {}
    for i, (_, t) in enumerate(iter_tensors(model)):
        rank.setdefault(id(t), i)
    plans.sort(key=lambda p: rank.get(id(p.tensor), len(rank)))
    if digests:
        digest_fields.record(model, tree, w.plans)
    pos = 0
    for p in plans:
        if p.nbytes:
            pos = align(pos)
            p.data["offset"] = pos
            pos += p.nbytes
    text = dumps(tree)
    if len(text) > MAX_MANIFEST_BYTES:
        raise UnsupportedError(f"manifest of {len(text)} bytes is larger than the "
                               f"{MAX_MANIFEST_BYTES}-byte limit", path="manifest")
    # No JSON depth check is needed: with at most MAX_MODEL_NESTING graphs and types open, an
    # object is at most 7 JSON levels below the one of the graph or type around it (a graph in
    # an extension's ``graphs`` of an attribute), so the manifest stays below 64 * 7 + 4 levels,
    # well within MAX_JSON_DEPTH (1024).
    header = Header.for_layout(len(text), pos)
    return text, header, [p for p in plans if p.nbytes], left_out


def write(model: Model, sink: Sink, *, strict_v1: bool = False,
          digests: bool = False) -> list[str]:
    """Write ``model`` to ``sink`` as a OneModel file (not committed: the caller commits, or
    aborts on error).

    Args:
        model: the model. sink: where the bytes go, front to back.
        strict_v1: write plain version 1 without the ONNX-preservation extension.
        digests: record each tensor's content digest and the model digest in the manifest
            (docs/format-extension.md section 9; :mod:`.digests`): every tensor is read and
            hashed once before the first byte is written. Not with ``strict_v1``.
    Returns:
        with ``strict_v1``, what the plain file leaves out or changes, with manifest paths
        (:func:`.plain.left_out`: ``manifest.graph.nodes[2]: metadata_props (6 entries)``,
        ``manifest.opsets[0].domain: explicitly '' in the ONNX file; ...``, repeated subjects
        grouped: ``metadata_props of 14 nodes (86 entries in all): manifest.graph.nodes[0-13]``);
        otherwise ``[]``.
    Raises:
        InvalidModelError (section 3 rules, contents that do not match dims and dtype,
        unresolved external data), UnsupportedError (element type 0 or unknown, a name that is
        not UTF-8, too much nesting, a tensor over 2^31 - 1 bytes) before anything is written;
        IoError from the sink.
    """
    with bulk_objects():
        text, header, plans, left_out = build(model, strict_v1=strict_v1, digests=digests)
    sink.reserve(header.file_length)
    sink.write(header.pack())
    sink.write(text)
    sink.write_zeros(header.data_offset - HEADER_SIZE - len(text))
    pos = 0
    for p in plans:
        start = p.data["offset"]
        if start > pos:
            sink.write_zeros(start - pos)
        _write_tensor(p, sink)
        pos = start + p.nbytes
    return left_out


def _write_tensor(p: Plan, sink: Sink) -> None:
    if p.array is not None:
        sink.write(memoryview(p.array).cast("B"))
        return
    buf = p.buffer
    if isinstance(buf, Blob):  # bytes of a source: the sink's one copy decision
        sink.write_blob(buf)
    else:
        sink.write(buffer_view(buf))


def write_bytes(model: Model, *, strict_v1: bool = False, digests: bool = False) -> bytes:
    """The bytes of ``model`` as a OneModel file (for tests and small models)."""
    from ...storage.base import BytesSink

    sink = BytesSink()
    write(model, sink, strict_v1=strict_v1, digests=digests)
    sink.commit()
    return sink.getvalue()


__all__ = ["write", "write_bytes", "build"]


def _field_path(path: str, name: str) -> str:
    """``path.name``, or ``name`` at the top."""
    return f"{path}.{name}" if path else name
