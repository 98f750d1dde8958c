"""The content digest of a model: one SHA-256 whatever the layout (docs/content-digest.md).

ONNX has no canonical serialization (Part 1, Clause 12.8) and an external reference's SHA-1
covers a whole file, not the octets it selects (Clause 13.3), so the same model saved inline,
with one data file, with a file per tensor or as OneModel has four file hashes. This digest is
of the content: every field of the in-memory model in a fixed order, each tensor's contents
replaced by the digest of its element type, dims and values in the raw layout of Clause 6.3.4.
Storage placement (inline or external, file names, offsets, alignment, OneModel offsets, typed
or raw storage of the same values, zstd framing) does not change it; a change of any field, any
attribute or one bit of one weight does.

    >>> import onemodel
    >>> d = onemodel.digest("model.onnx")
    >>> d.hex                                   # 'sha256:3b0c...'
    >>> d.tensors["graph.initializers[0]"]      # (name, 'sha256:...') of each tensor

Version 1, defined in docs/content-digest.md:

* tensor digest = SHA-256(``"onemodel-content-digest/v1 tensor\\n"`` + int64 LE data_type +
  int64 LE rank + int64 LE each dim + the contents): the raw layout of Clause 6.3.4 for every
  element type but STRING, whose contents are, per element, its int64 LE length then its octets;
* model digest = SHA-256(``"onemodel-content-digest/v1 model\\n"`` + S), where S is the ONNX
  encoding (Clause 12, as ``onnx``'s SerializeToString and onemodel's writer emit it) of the
  model with every TensorProto replaced by its stub: the same ``dims``, ``data_type``,
  ``segment``, ``name``, ``doc_string``, ``metadata_props`` and unknown fields, no storage
  fields (typed data, ``data_location``, ``external_data``), and ``raw_data`` the 32 octets of
  the tensor digest.

Tensors are hashed independently (a Merkle structure): in parallel threads, streamed from any
source in chunks (a local file with ``preadv`` into one buffer, a remote one range by range),
with flat memory.

The computation lives here, in ``formats``, below the readers and writers that use it (the
OneModel writer records the model digest, ``check --full`` compares it) and above the ONNX
encoding it hashes; :mod:`onemodel.content_digest` adds :func:`~onemodel.content_digest.digest`,
which reads a path with :func:`onemodel.load`, and is the public module.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping
from functools import partial

from ..errors import InvalidModelError
from ..ir import Model, Tensor
from ..ir.dtypes import INFO, DataType
from ..ir.walk import check_nesting, iter_tensors

VERSION = 1
TENSOR_PREFIX = b"onemodel-content-digest/v1 tensor\n"
MODEL_PREFIX = b"onemodel-content-digest/v1 model\n"
#: Tensors of at least this many bytes are hashed in worker threads (hashlib and preadv
#: release the GIL); smaller ones inline.
PARALLEL_BYTES = 1 << 20
_CHUNK = 8 << 20


class ModelDigest:
    """A model's content digest.

    Attributes:
        digest: the 32 octets of the model digest.
        tensors: tensor path (IR field names, ``graph.initializers[3]``) -> ``(name, digest
            octets)``, for every tensor of the model, in the order of :func:`iter_tensors`.
    """

    __slots__ = ("digest", "tensors")

    def __init__(self, digest: bytes, tensors: dict):
        self.digest = digest
        self.tensors = tensors

    @property
    def hex(self) -> str:
        """``sha256:<64 hex digits>``."""
        return "sha256:" + self.digest.hex()

    def tensor_hex(self) -> dict[str, tuple[str, str]]:
        """Path -> ``(name, "sha256:<hex>")`` of every tensor."""
        return {p: (n, "sha256:" + d.hex()) for p, (n, d) in self.tensors.items()}

    def __eq__(self, other):
        return isinstance(other, ModelDigest) and other.digest == self.digest

    def __hash__(self):
        return hash(self.digest)

    def __repr__(self):
        return f"ModelDigest({self.hex!r}, {len(self.tensors)} tensors)"


def _contents(t: Tensor):
    """The contents of ``t`` in the digest's layout, as an iterator of byte chunks, and their
    total length (checked against dims and element type)."""
    code = t.data_type or 0
    count = t.size
    if code == DataType.STRING:
        strings = t.string_data
        if len(strings) != count:
            raise InvalidModelError(f"{len(strings)} strings for {count} elements",
                                    path=t.name)
        parts = []
        for s in strings:
            parts.append(struct.pack("<q", len(s)))
            parts.append(bytes(s))
        return iter(parts), sum(len(p) for p in parts)
    info = INFO.get(code)
    if info is None:
        if count == 0 or (t.raw_data is None and t.external is None and not t.typed_fields()):
            return iter(()), 0
        raise InvalidModelError(f"element type {code} has no raw layout", path=t.name)
    want = info.raw_nbytes(count)
    src = t.external if t.is_external else t.raw_data
    if t.is_external and src is None:
        raise InvalidModelError("external data of this tensor was not resolved (the model was "
                                "read without a base directory)", path=t.name)
    if src is None:
        data = t.raw_view()  # typed storage, converted to the raw layout
        return iter((data,)), len(data)
    chunks = getattr(src, "chunks", None)
    n = src.nbytes if chunks is not None else len(memoryview(src).cast("B"))
    if n != want:
        raise InvalidModelError(f"{n} bytes of contents for {count} elements of {info.name} "
                                f"({want} bytes)", path=t.name)
    if chunks is not None:
        return chunks(_CHUNK, check=False), n  # a recorded digest: confirmed by tensor_digest
    return iter((memoryview(src).cast("B"),)), n


def tensor_header(data_type, dims) -> bytes:
    """What a tensor digest hashes before the contents: the prefix, int64 LE ``data_type``
    (0 when absent), rank and each dim (docs/content-digest.md)."""
    dims = [int(d) for d in dims]
    return TENSOR_PREFIX + struct.pack(f"<qq{len(dims)}q", int(data_type or 0), len(dims), *dims)


def tensor_digest(t: Tensor, *, check: bool = True) -> bytes:
    """The 32-octet content digest of one tensor (version 1, see the module docstring):
    element type, dims and values, whatever the storage (raw, typed, external, OneModel).
    Bytes with a digest recorded in their OneModel file are hashed once and, with ``check``,
    the result is compared with it (``Blob.confirm``). Raises InvalidModelError for contents
    that do not match dims and type or an unresolved external reference, IoError when the
    bytes cannot be read or (``check``) do not match their recorded digest."""
    h = hashlib.sha256(tensor_header(t.data_type, t.dims))
    chunks, _ = _contents(t)
    for c in chunks:
        h.update(c)
    d = h.digest()
    src = t.external if t.is_external else t.raw_data
    if check and getattr(src, "digest", None) is not None:
        src.confirm(d)
    return d


def _stub(t: Tensor, d: bytes) -> Tensor:
    return Tensor(dims=list(t.dims), data_type=t.data_type, segment=t.segment, name=t.name,
                  doc_string=t.doc_string, raw_data=d, metadata_props=t.metadata_props,
                  unknown=t.unknown)


def model_digest(model: Model, *, workers: int | None = None, check: bool = True,
                 known: Mapping[str, bytes] | None = None) -> ModelDigest:
    """The content digest of ``model`` (an :class:`onemodel.Model`; tensors read where they
    lie). ``workers``: threads hashing tensors of :data:`PARALLEL_BYTES` or more (default: the
    CPUs, at most 8). ``check``: as for :func:`tensor_digest` (False: bytes that do not match
    a digest recorded for them are hashed as they are, for ``check --full`` to compare).
    ``known``: tensor path -> 32-octet digest taken as that tensor's without reading its bytes
    (a signed manifest's, when only some tensors are checked: the model digest then proves the
    structure and the tensors read, given the others are as ``known`` says). Raises what
    :func:`tensor_digest` raises; UnsupportedError for graphs nested deeper than
    ``limits.MAX_MODEL_NESTING`` (:func:`onemodel.ir.walk.check_nesting`)."""
    check_nesting(model)  # iter_tensors and the encoding recurse into subgraphs
    pairs = list(iter_tensors(model))
    known = known or {}
    digests: dict[int, bytes] = {id(t): known[p] for p, t in pairs if p in known}
    big = [t for _, t in pairs if id(t) not in digests and _stored_bytes(t) >= PARALLEL_BYTES]
    if big:
        import os
        from concurrent.futures import ThreadPoolExecutor

        n = workers or min(8, os.cpu_count() or 1)
        with ThreadPoolExecutor(max_workers=max(1, n)) as pool:
            # largest first, so that the last tensor to finish is a small one
            order = sorted(big, key=_stored_bytes, reverse=True)
            for t, d in zip(order, pool.map(partial(tensor_digest, check=check), order)):
                digests[id(t)] = d
    tensors = {}
    for path, t in pairs:
        d = digests.get(id(t))
        if d is None:
            d = digests[id(t)] = tensor_digest(t, check=check)
        tensors[path] = (t.name or "", d)
    body = structure(model, tensors)
    return ModelDigest(hashlib.sha256(MODEL_PREFIX + body).digest(), tensors)


def structure(model: Model, tensors: Mapping[str, tuple[str, bytes]]) -> bytes:
    """``encode(M')`` of docs/content-digest.md: the ONNX encoding of ``model`` with every
    TensorProto replaced by its stub (``raw_data`` the tensor's digest, from ``tensors``: path
    -> ``(name, digest)``, as :attr:`ModelDigest.tensors`). What the model digest hashes after
    its prefix; a model file itself (``onemodel.load`` reads it), with no tensor contents. Raises
    KeyError for a tensor of ``model`` missing from ``tensors``; UnsupportedError for graphs
    nested deeper than ``limits.MAX_MODEL_NESTING``."""
    from .onnx.wire_encode import encode

    check_nesting(model)  # the encoding recurses into subgraphs
    stubs = {id(t): _stub(t, tensors[p][1]) for p, t in iter_tensors(model)}
    return encode(model, substitute=stubs)


def _stored_bytes(t: Tensor) -> int:
    src = t.external if t.is_external else t.raw_data
    return getattr(src, "nbytes", 0) if src is not None else 0


MANIFEST_FORMAT = "onemodel-content-manifest"


def manifest(result: ModelDigest, name: str) -> dict:
    """The JSON-ready manifest of a model's digests (docs/content-digest.md, "Manifest"): the
    digest version, the model's name and digest, and each tensor's path, name and digest, in
    the model's order. One document a signing tool can sign as one subject; it names no file,
    offset or layout, so it stays valid when the model is laid out again."""
    return {
        "format": MANIFEST_FORMAT,
        "version": VERSION,
        "model": {"name": name, "digest": {"algorithm": "sha256", "value": result.digest.hex()}},
        "tensors": [{"path": p, "name": n, "digest": {"algorithm": "sha256", "value": d.hex()}}
                    for p, (n, d) in result.tensors.items()],
    }
