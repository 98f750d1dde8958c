"""Content digests carried in a OneModel manifest (docs/format-extension.md, section 9).

``write(model, sink, digests=True)`` records, with the fields format section 1.2 lets a file
add (a version 1 reader ignores unknown fields, so it reads the same model):

* in each Tensor's ``data`` object, ``"digest": "sha256:<64 hex>"``: the tensor digest of
  docs/content-digest.md (:func:`onemodel.formats.content_digest.tensor_digest`: SHA-256 over a
  prefix, element type, dims and the raw-layout contents, i.e. the bytes of the ``data`` range);
* in the top-level Model object, ``"digests": {"version": 1, "model": "sha256:<64 hex>"}``:
  the model digest (:func:`onemodel.formats.content_digest.model_digest`) of the model written.

The reader (:func:`attach`) turns the Blob of a tensor with a recorded digest into a
:class:`~onemodel.storage.blob.CheckedBlob`, checked on first use (a mapped file on the first
view of that tensor, once; a remote file on every range it fetched); a mismatch is an IoError
naming the tensor, its manifest path and the byte range.
"""

from __future__ import annotations

from ...errors import MalformedError, UnsupportedError
from ...storage.blob import Blob

#: the key of the top-level object
KEY = "digests"
#: the key of a Tensor's ``data`` object
DATA_KEY = "digest"
VERSION = 1
_PREFIX = "sha256:"
_HEX = frozenset("0123456789abcdef")


def format_digest(d: bytes) -> str:
    """``sha256:<64 lowercase hex>`` of 32 octets."""
    return _PREFIX + d.hex()


def parse_digest(value, path: str) -> bytes:
    """The 32 octets of ``"sha256:<64 lowercase hex>"``; MalformedError at ``path`` otherwise."""
    if (not isinstance(value, str) or not value.startswith(_PREFIX)
            or len(value) != len(_PREFIX) + 64 or not _HEX.issuperset(value[len(_PREFIX):])):
        raise MalformedError(f"a digest is \"sha256:\" and 64 lowercase hex digits, not "
                             f"{str(value)[:80]!r}", path=path)
    return bytes.fromhex(value[len(_PREFIX):])


def record(model, tree: dict, plans: dict) -> None:
    """Add the digests of ``model`` to its manifest ``tree`` (built by the writer; ``plans``:
    ``id(tensor)`` -> its Plan, whose ``data`` objects the tree holds). Hashes every tensor
    (in threads, :func:`onemodel.formats.content_digest.model_digest`). Raises what that raises."""
    from ...ir.walk import iter_tensors
    from ..content_digest import model_digest

    md = model_digest(model)
    for (_, t), (_, d) in zip(iter_tensors(model), md.tensors.values()):
        plan = plans.get(id(t))
        if plan is not None:
            plan.data[DATA_KEY] = format_digest(d)
    entry = {"version": VERSION, "model": format_digest(md.digest)}
    ext = tree.pop("onnx", None)  # the preservation extension stays the last key
    tree[KEY] = entry
    if ext is not None:
        tree["onnx"] = ext


def model_entry(obj: dict, path: str) -> bytes | None:
    """The recorded model digest of a top-level object, or None. Malformed: not an object, a
    bad digest; Unsupported: a later digest version."""
    entry = obj.get(KEY)
    if entry is None:
        return None
    p = f"{path}.{KEY}"
    if not isinstance(entry, dict):
        raise MalformedError("expected an object", path=p)
    version = entry.get("version")
    if version != VERSION:
        raise UnsupportedError(f"content digest version {version!r} is not supported "
                               f"(this reader knows {VERSION})", path=f"{p}.version")
    return parse_digest(entry.get("model"), f"{p}.model")


def attach(t, obj: dict, path: str) -> None:
    """Give tensor ``t`` (just decoded from its manifest object ``obj`` at ``path``) the digest
    its ``data`` object records, if any: ``t.raw_data`` becomes a checked Blob."""
    data = obj.get("data")
    if type(data) is not dict or DATA_KEY not in data or not isinstance(t.raw_data, Blob):
        return
    from ..content_digest import tensor_header

    d = parse_digest(data[DATA_KEY], f"{path}.data.{DATA_KEY}")
    t.raw_data = t.raw_data.expect(d, tensor_header(t.data_type, t.dims), t.name or "", path)


def recorded_model_digest(model) -> bytes | None:
    """The model digest recorded in the OneModel file ``model`` was read from (its manifest
    read again: header and manifest only), or None (another format, a model in memory, no
    digests). Raises the reader's errors for a file that changed since."""
    if getattr(model, "format", None) != "onemodel" or not model.resources:
        return None
    from .header import HEADER_SIZE, parse_header
    from .manifest import as_obj, parse_manifest

    source = model.resources[0]
    size = source.size
    header = parse_header(source.read(0, min(HEADER_SIZE, size)), size)
    manifest = parse_manifest(source.read(HEADER_SIZE, header.manifest_length), HEADER_SIZE)
    return model_entry(as_obj(manifest, "manifest"), "manifest")


def recorded(model) -> dict[str, bytes]:
    """Tensor path (of :func:`onemodel.ir.walk.iter_tensors`) -> recorded digest, for every
    tensor of ``model`` whose bytes carry one (a OneModel file written with ``digests=True``)."""
    from ...ir.walk import iter_tensors

    out = {}
    for p, t in iter_tensors(model):
        d = blob_digest(t)
        if d is not None:
            out[p] = d
    return out


def blob_digest(t) -> bytes | None:
    """The digest recorded for tensor ``t``'s stored bytes (its raw or external Blob), or
    None."""
    src = t.external if t.is_external else t.raw_data
    return src.digest if isinstance(src, Blob) else None


__all__ = ["KEY", "DATA_KEY", "record", "attach", "model_entry", "recorded",
           "recorded_model_digest", "blob_digest",
           "parse_digest", "format_digest"]
