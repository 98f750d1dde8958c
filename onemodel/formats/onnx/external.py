"""External data: resolving the references of ONNX Part 1, Clause 13 under the rules of Clause 15.3.

A tensor whose ``data_location`` is EXTERNAL carries key-value ``external_data`` entries instead of
its contents. Resolution (:func:`resolve_external_data`, which the reader calls) turns them into
bytes, each step in the module that holds it:

1. **The reference** (:func:`.external_refs.parse_reference`, Clause 13.2, Table 11). Only the
   keys ``location``, ``offset``, ``length`` and ``checksum`` are accepted, each at most once;
   ``location`` is mandatory; ``offset`` and ``length`` are non-negative decimal integers written
   with ASCII digits only (no sign, space or underscore) and below 2^63; ``checksum`` is a SHA-1
   digest in hex.
2. **The location** (:func:`.external_refs.location_parts`, the one rule of which locations are
   legal). A relative path of ``/``-separated components: not empty, not absolute, no Windows
   drive (``C:``), no backslash, no NUL, no ``..`` component; joined to a URL, also none of these
   once percent-decoded, and no scheme.
3. **The file** (:func:`.external_walk.open_location`, the one place that decides where a
   location is opened).
   A local location is opened component by component from a descriptor of the model's directory
   (never the working directory): every directory with ``O_NOFOLLOW | O_DIRECTORY``, the file with
   ``O_NOFOLLOW``, each after an ``lstat`` that refuses a symbolic link, and each descriptor
   compared by ``(st_dev, st_ino)`` with what the ``lstat`` saw, so a component swapped between
   the check and the open is caught. The file must be a regular file with exactly one hard link.
   Where directories cannot be walked by descriptor (:data:`.external_walk.DIR_FD_WALK` false:
   Windows) the same checks are made by path, with a weaker guarantee: a directory on the way
   replaced by a link after its check is not caught (docs/external-data.md, "Without a
   descriptor walk"). A location under a URL (``s3://``, ``https://``, ``memory://`` ...)
   passes the same rule (with ``url=True``), is joined to the model's directory URL by
   :func:`onemodel.storage.place.join_location` and read with range requests.
4. **The bytes** (:func:`resolve_external_data`). ``offset + length`` is checked against the
   file's size before anything is used, a missing ``length`` runs to the end of the file, and the
   length must equal the element count times the element size (dims x element type). A
   ``checksum`` is verified (SHA-1 of the whole file, Clause 13.3) before the bytes are used. Each
   data file is opened and mapped once, whatever the number of tensors in it;
   ``tensor.external`` becomes the :class:`~onemodel.storage.blob.Blob` of the tensor's bytes in
   it (its ``view()`` a zero-copy slice of the map, or one range read of a remote file, fetched on
   first use), which writers copy file to file.
5. **A data file of a layout** (:func:`onemodel.formats.layouts.open_data_file`). Each layout
   plugin is offered the data file; the ``safetensors`` one
   (:mod:`onemodel.formats.safetensors.check`) takes a data file that starts like a
   safetensors file, checks its header by the format's rules, and every
   reference into it must select one header entry's range holding the tensor (dtype and shape,
   or U8 octets with the element type recorded); a refusal is the header check's kind
   (MalformedError, UnsupportedError) or InvalidModelError, its message naming the entry.

Data files are written (:mod:`.writer`) where :mod:`.external_sinks` says, their directories
created by the same confined walk.

Resolution outside the model's directory is possible only when asked for explicitly
(``allow_outside=True``, CLI ``--allow-external-outside``; Clause 15.3 "SHALL NOT be the default").
It then accepts absolute paths, ``..`` and links, but still only a regular file.

Errors: a refusal under Clause 15.3, a bad key or value, a size that does not fit the file and a
checksum mismatch are :class:`~onemodel.errors.InvalidModelError` (Clause 13.2 / 15.3: a
validation failure under Clause 10); a file that cannot be opened or read is
:class:`~onemodel.errors.IoError`. Every message names the tensor and the location; the error's
path is the tensor's proto path (``ModelProto.graph.initializer[3]``), its offset the tensor's
position in the .onnx file, its source the model file.

Local data files of :data:`~onemodel.limits.MMAP_THRESHOLD` bytes or more are mapped (the map and
its descriptor stay open until ``model.close()``); smaller ones are read into memory and their
descriptor closed at once, so a model with thousands of small per-tensor files does not run out of
descriptors. The map is read-only; a data file truncated by another process while it is mapped
makes reads of the lost pages fail (SIGBUS), as for any mapped file.
"""

from __future__ import annotations

import os

from ...errors import InvalidModelError, IoError, OneModelError, quote
from ...ir.dtypes import INFO
from ...ir.model import Model
from ...ir.tensor import EXTERNAL
from ...ir.walk import iter_tensors
from ...storage.base import Source
from ...storage.blob import Blob
from ...storage.locks import model_file_guard
from ...storage.place import is_remote, local_path, place_of
from .external_refs import RefusedError, expected_nbytes, location_parts, parse_reference
from .external_walk import OpenedFile, open_base_dir, open_location
from .paths import proto_path
from .publish import published_location

_HASH_CHUNK = 16 << 20


def _sha1_of(source: Source) -> str:
    import hashlib  # here: 2.5 ms of every model's first load otherwise

    h = hashlib.sha1()
    whole = source.whole()
    for start in range(0, source.size, _HASH_CHUNK):
        n = min(_HASH_CHUNK, source.size - start)
        h.update(whole[start:start + n] if whole is not None else source.read(start, n))
    return h.hexdigest()


_UNKNOWN = object()


class _DataFile:
    __slots__ = ("opened", "sha1", "layout")

    def __init__(self, opened: OpenedFile):
        self.opened = opened
        self.sha1 = None
        self.layout = _UNKNOWN  # the checker of a layout that recognised the file, None for none


def _layout_checker(df: _DataFile, location: str):
    """The checker of the layout plugin that recognises ``df`` (a safetensors file:
    :func:`onemodel.formats.layouts.open_data_file`), or None. A file that breaks that layout's
    rules is refused as the layout says (a safetensors header: MalformedError,
    UnsupportedError, the message naming its path)."""
    if df.layout is _UNKNOWN:
        from ..layouts import open_data_file

        df.layout = open_data_file(df.opened.source, location)
    return df.layout


def resolve_external_data(model: Model, base=None, *, allow_outside: bool = False,
                          storage_options: dict | None = None, offsets: dict | None = None,
                          source: str | None = None, errors: list | None = None,
                          unverified: list | None = None, model_file: Source | None = None
                          ) -> list[Source]:
    """Resolve every external tensor of ``model`` (initializers, sparse initializers' values and
    indices, attribute tensors, in subgraphs, functions and training graphs).

    Args:
        model: the model; its tensors get ``external``: the Blob of exactly the tensor's bytes
            in its data file (read through the map, or range reads of a remote file).
        base: the model's directory (a local path, or a URL of the directory); default
            ``model.base_dir``.
        allow_outside: resolve locations outside that directory too (absolute paths, ``..``,
            links, hard links). Never the default (Clause 15.3).
        storage_options: fsspec options for a URL base.
        offsets: ``{id(tensor): byte offset of the TensorProto in the .onnx file}`` for error
            messages (the reader has them).
        source: the model file's name, for error messages.
        errors: a list: a tensor that cannot be resolved is left unresolved and its error
            appended here instead of raised (``onemodel check``); the others are resolved.
        unverified: a list: a ``checksum`` is not verified (the data file is not read), and each
            tensor whose checksum was left unverified is appended here instead (``onemodel
            check`` without ``--full``: structure only). Default: verified (Clause 13.3).
        model_file: the source the model was read from. When it is a local file opened by its
            path (``path_stat``; not a decompressed ``.zst``), the data files are opened under
            a shared lock on that file after checking that its path still names it
            (:func:`onemodel.storage.locks.model_file_guard`), so a writer publishing a new
            version meanwhile cannot mix its data files into this model (docs/storage.md,
            "Atomicity").
    Returns:
        the Sources opened (one per data file), which the caller closes (the reader puts them in
        ``model.resources``). On error every file opened here is closed again.
    Raises:
        InvalidModelError for a refused reference, a size mismatch or a checksum mismatch, or
        when there is no ``base`` (a model read from bytes); IoError when a file cannot be read
        or ``model_file`` was replaced by a new version since it was read. Each names the
        tensor and the location, with the tensor's proto path.
    """
    externals = [t for _, t in iter_tensors(model) if t.data_location == EXTERNAL]
    if not externals:
        return []
    base = base if base is not None else model.base_dir
    source = source if source is not None else model.source
    if base is None:
        t = externals[0]
        e = InvalidModelError(
            f"tensor {quote(t.name)} has external data, but the model was read from bytes with no "
            "base directory; pass base_dir= (the directory of the model file) or "
            "load_external=False", path=proto_path(model, t), source=source)
        if errors is None:
            raise e
        errors.append(e)
        return []
    resolver = _Resolver(base, allow_outside, storage_options)
    resolver.unverified = unverified
    seen = getattr(model_file, "path_stat", None) if not is_remote(base) else None
    try:
        with model_file_guard(model_file.name if seen is not None else None, seen):
            _resolve_all(resolver, model, externals, offsets, source, errors)
    except BaseException:
        resolver.close_all()
        raise
    finally:
        resolver.close_base()
    return resolver.sources


def _resolve_all(resolver, model, externals, offsets, source, errors) -> None:
    """Resolve ``externals`` (:func:`resolve_external_data`)."""
    for t in externals:
        try:
            resolver.resolve(t)
        except OneModelError as e:
            where = None
            if offsets is not None:
                where = offsets.get(id(t))
            if errors is None:
                raise _located(e, model, t, where, source) from None
            errors.append(_located(e, model, t, where, source))


def _located(e: OneModelError, model, t, offset, source) -> OneModelError:
    loc = None
    for entry in t.external_data:
        if entry.key == "location":
            loc = entry.value
            break
    head = f"tensor {quote(t.name)}"
    if loc is not None:
        head += f", external data location {quote(loc)}"
    err = type(e)(f"{head}: {e.message}", path=e.path, offset=e.offset, source=e.source)
    return err.at(path=proto_path(model, t), offset=offset, source=source)


class _Resolver:
    """One model's resolution: the base directory descriptor and one Source per data file."""

    def __init__(self, base, allow_outside: bool, storage_options):
        self.base = base
        self.allow_outside = allow_outside
        self.storage_options = storage_options
        self.by_location: dict = {}
        self.by_identity: dict = {}
        self.sources: list[Source] = []
        self.base_fd = None
        self.unverified: list | None = None  # a list: checksums are not verified (see above)
        if not is_remote(base) and not allow_outside:
            self.base_fd = open_base_dir(local_path(base))

    def data_file(self, location: str) -> _DataFile:
        key = location if self.allow_outside else \
            ("/".join(location_parts(location)) if not is_remote(self.base) else location)
        df = self.by_location.get(key)
        if df is not None:
            return df
        try:
            opened = open_location(self.base, location, allow_outside=self.allow_outside,
                                   storage_options=self.storage_options, base_fd=self.base_fd)
        except IoError:
            published = published_location(location)
            if published is None:
                raise
            # a staged data file renamed to its name by a write killed before its last rename
            # (publish.py, step 3): that file holds the staged file's bytes
            try:
                opened = open_location(self.base, published, allow_outside=self.allow_outside,
                                       storage_options=self.storage_options,
                                       base_fd=self.base_fd)
            except OneModelError:
                raise IoError(f"{quote(location)} does not exist, nor the file "
                              f"{quote(published)} it was to be renamed to") from None
        df = self.by_identity.get(opened.identity)
        if df is not None:  # the same file under another spelling: keep the first map
            opened.source.close()
        else:
            df = _DataFile(opened)
            self.by_identity[opened.identity] = df
            self.sources.append(opened.source)
        self.by_location[key] = df
        return df

    def resolve(self, t) -> None:
        ref = parse_reference(t.external_data)
        want = expected_nbytes(t)
        df = self.data_file(ref.location)
        src = df.opened.source
        size = src.size
        if ref.offset > size:
            raise RefusedError(f"offset {ref.offset} is past the end of the {size}-byte file")
        length = ref.length if ref.length is not None else size - ref.offset
        if ref.offset + length > size:
            raise RefusedError(f"the {size}-byte file is shorter than offset {ref.offset} + "
                               f"length {length} (Clause 13.2)")
        if length != want:
            what = "length" if ref.length is not None else "the rest of the file after offset"
            raise RefusedError(f"{what} {length} does not match dims {list(t.dims)} of "
                               f"{INFO[t.data_type].name} ({want} bytes)")
        if ref.checksum is not None and self.unverified is not None:
            self.unverified.append(t)
        elif ref.checksum is not None:
            if df.sha1 is None:
                df.sha1 = _sha1_of(src)
            if df.sha1 != ref.checksum:
                raise RefusedError(f"checksum mismatch: the file's SHA-1 is {df.sha1}, the "
                                   f"reference says {ref.checksum} (Clause 13.3)")
        checker = _layout_checker(df, ref.location)
        if checker is not None:
            checker.check(t, ref.offset, length)
        t.external = Blob(src, ref.offset, length)

    def close_base(self) -> None:
        if self.base_fd is not None:
            os.close(self.base_fd)
            self.base_fd = None

    def close_all(self) -> None:
        for s in self.sources:
            s.close()
        self.sources = []


def default_base(source: Source):
    """The directory external data of a model read from ``source`` resolves against: the
    directory of a local file (absolute), the directory URL of a remote one, the compressed
    file's for a decompressed ``.zst`` source, ``None`` for bytes in memory (never the working
    directory, Clause 15.3). See :func:`onemodel.storage.place.place_of`."""
    place = place_of(source)
    return None if place is None else place[0]


__all__ = ["resolve_external_data", "default_base"]
