"""Writing ONNX files: the format plugin's write path (ONNX Part 1, Clause 12 and 13).

:func:`write` (the plugin's ``write``) checks the model's tensors as the reader would, and
:func:`write_layout` encodes the ModelProto (:mod:`.wire_encode`), puts the tensor contents inline
or in external data files and streams everything to its sinks (:func:`stream_pieces`).
:func:`encode_message` / :func:`encode_model` give the bytes of any record, in memory.
:mod:`.external_report` describes how a model's data files are laid out (``onemodel info``).

Layouts (:func:`write_layout`, ``layout=``) are plugins of :mod:`onemodel.formats.layouts`:
``keep`` and ``inline`` are done here; the others plan their data files
(:meth:`~onemodel.formats.layouts.Layout.plan`) and this module writes them. The built-in ones:

==============  ===================================================================================
``keep``        Every tensor stays where it is. External references are written as they are, and
                each data file is rewritten to hold exactly the bytes its references select (zeros
                in gaps between them, nothing after the last): a model read and written back gives
                the same .onnx file and the same data files, byte for byte, and orphaned bytes of
                a data file are dropped. A ``checksum`` key is updated when the file's bytes
                change. A data file that already holds exactly those bytes, in place, is left
                untouched (saving a model into its own directory does not copy its weights).
``inline``      Every tensor in the .onnx file (``raw_data``); references are dropped.
``file``        Tensors of ``threshold`` bytes or more in one data file (``external_data``, by
                default the .onnx file's name + ``.data``), each at an offset that is a multiple
                of ``align``; the others inline.
``per_tensor``  One data file per tensor of ``threshold`` bytes or more, named after the tensor
                (characters outside ``A-Za-z0-9._-`` become ``_``; names made unique).
``safetensors`` As ``file``, but the data file is one valid safetensors file (``external_data``,
                by default the .onnx file's name with ``.safetensors`` for ``.onnx``; a data file
                name ending in ``.safetensors`` selects this layout): a header naming every
                tensor's key, dtype and shape, each tensor's bytes at an offset that is a
                multiple of ``align`` (default 64), padding entries in the gaps
                (the plugin :mod:`onemodel.formats.safetensors.plugin`; docs/safetensors.md).
==============  ===================================================================================

Which tensors move to data files (``file``, ``per_tensor``): initializers of every graph
(subgraphs and training graphs included), as ``onnx`` does; with ``convert_attributes`` also
attribute tensors (``Constant`` values ...) and sparse tensors' values and indices; and every tensor
that already was external. STRING tensors (no raw layout) and empty tensors stay inline.
References are written with the keys ``location``, ``offset`` and ``length``, in that order, as
``onnx`` writes them.

Bytes stream: a tensor whose contents are a Blob (bytes of a source, as the readers leave them) is
handed to ``Sink.write_blob``, which copies a local file's bytes file to file (``copy_file_range``
or ``splice``, a bounded buffered copy where the kernel does neither) and a remote file's in
bounded range reads; other contents are written from their buffers. Nothing is concatenated in
memory, so memory stays bounded whatever the model size.

Safety: every data file is written to a temporary file beside its destination and renamed into
place only after the .onnx bytes were written, so an existing data file is never appended to or
truncated in place, a failed write changes no data file, and writing a model onto the files it is
still mapped from is safe on POSIX (the maps keep the old files alive). On Windows a mapped file
cannot be replaced; that write fails with IoError (the new model in place under staged
names). Data files
are created only inside the output directory (symbolic links on the way refused) unless
``allow_outside`` is given. Data files of an earlier layout that the new one no longer references
are not deleted. For a local model file the data files and the .onnx file are published in the
order of :mod:`.publish` (staged names unique to the write, a first .onnx naming them, then the
final names under a lock), so a reader or a killed write never finds tensors of two versions
(docs/external-data.md, "Atomicity"); remote and compressed destinations commit the data files
one by one before the .onnx file.

No data file of another model is replaced silently. With ``keep``, ``per_tensor`` and ``file``
without ``external_data`` the data file names are not the user's choice (they come from the
model's references, its tensor names or the .onnx file's name), so two models written into one
directory can ask for the same name; a name given with ``external_data`` can be another model's
data file too (``convert W.safetensors --into MODEL OUT.onnx --external-data w.bin`` beside a
model that references ``w.bin``). Before anything is written, each data file that would replace
an existing file is checked, whoever chose its name; the replacement is allowed only when

* that file is one the model's tensors were read from (rewriting a model in place), or
* the destination .onnx file exists and references that file (writing over an earlier output of
  the same conversion replaces its own data), or
* it is the index json of safetensors shards (layout ``safetensors`` with ``max_shard_size``)
  and its ``weight_map`` names a shard the destination .onnx file references (the index of the
  shards of that earlier output), or
* ``force`` is given (CLI ``--force``);

otherwise the write raises IoError naming the file.

While :func:`write_layout` runs it temporarily sets the storage fields of tensors that change
place and restores them before it returns; the model must not be used by another thread meanwhile.
"""

from __future__ import annotations

import contextlib
import os
import re
import warnings

from ... import limits
from ...errors import (
    NAME_ONLY,
    AdviceError,
    InvalidModelError,
    IoError,
    NoDataDirectoryError,
    OneModelError,
    Placeholder,
    Setting,
    UnsupportedError,
    display_url,
    literal,
    quote,
)
from ...ir.dtypes import INFO, DataType
from ...ir.entries import StringStringEntry
from ...ir.model import Model
from ...ir.record import buffer_nbytes, buffer_view, same_bytes
from ...ir.tensor import EXTERNAL, STORAGE_FIELDS, canonical_typed
from ...ir.walk import iter_tensors
from ...lazy import np
from ...limits import EXTERNAL_DATA_ALIGNMENT
from ...storage.blob import Blob
from ...storage.compressed import is_compressed_sink
from ...storage.hashing import HashingSink
from ...storage.place import is_remote, local_path, place_of, target_of
from ..layouts import BUILTIN, Placed, PlacementError, kept_ranges
from ..layouts import by_name as layout_by_name
from ..layouts import for_data_file as layout_for_data_file
from ..layouts import layouts as registered_layouts
from .checks import check_tensors
from .external_refs import RefusedError, location_parts, parse_reference
from .external_sinks import data_file_target, open_data_sink, same_directory
from .external_walk import data_file_identity
from .paths import proto_path
from .publish import Publication, owner_tag, published_location, staged_location, stale_staged
from .wire_encode import encode, encode_pieces, none_list_error, pieces_size

#: The built-in layouts (:data:`onemodel.formats.layouts.BUILTIN`; the registry has them all).
LAYOUTS = BUILTIN

_STORAGE_FIELDS = STORAGE_FIELDS
_INITIALIZER = re.compile(r"\.initializers\[\d+\]$")


class _Slot:
    """One tensor's bytes in a data file: where, how many, and where they come from (``buffer``:
    a Blob of a source, or bytes in memory)."""

    __slots__ = ("offset", "nbytes", "tensor", "buffer")

    def __init__(self, offset, nbytes, tensor, buffer):
        self.offset, self.nbytes, self.tensor, self.buffer = offset, nbytes, tensor, buffer


class _DataFile:
    """A data file to write: its location and slots; ``untouched`` leaves the file as it is;
    ``index`` is the layout plugin of an index file (the index json of safetensors shards),
    which no tensor references."""

    __slots__ = ("location", "slots", "checksum", "untouched", "sha1", "index")

    def __init__(self, location: str):
        self.location = location
        self.slots: list[_Slot] = []
        self.checksum = False      # keep: a reference carries a checksum to keep true
        self.untouched = False
        self.sha1 = None
        self.index = None


class _Overrides:
    """Storage fields set for the write and restored afterwards."""

    def __init__(self):
        self.saved: list = []

    def set(self, t, **fields) -> None:
        self.saved.append((t, {f: getattr(t, f) for f in _STORAGE_FIELDS}))
        for k, v in fields.items():
            setattr(t, k, v)

    def restore(self) -> None:
        while self.saved:
            t, fields = self.saved.pop()
            for k, v in fields.items():
                setattr(t, k, v)


def _contents(model, t):
    """A tensor's raw-layout bytes: its Blob (bytes of a source) or a buffer in memory."""
    if t.data_location == EXTERNAL:
        if t.external is None:
            raise InvalidModelError(
                f"the external data of tensor {quote(t.name)} was not loaded (read with "
                "load_external=False or from bytes), so it cannot be written to a new place",
                path=proto_path(model, t))
        return t.external
    if t.raw_data is not None:
        return t.raw_data
    return t.raw_view()


def _movable(path: str, t, threshold: int, convert_attributes: bool) -> bool:
    code = t.data_type or 0
    if code in (DataType.UNDEFINED, DataType.STRING) or code not in INFO or t.segment is not None:
        return False
    n = t.nbytes
    if n == 0 or n < threshold:
        return False
    return t.data_location == EXTERNAL or convert_attributes or bool(_INITIALIZER.search(path))


def _entries(location: str, offset: int, nbytes: int) -> list:
    return [StringStringEntry(key="location", value=location),
            StringStringEntry(key="offset", value=str(offset)),
            StringStringEntry(key="length", value=str(nbytes))]


def _output_place(sink, base_dir):
    """``(directory or URL of the data files, the model file's name when it is in that
    directory)`` for a write to ``sink`` (:func:`onemodel.storage.place.place_of`)."""
    place = place_of(sink)
    if place is None:
        return base_dir, None
    own, name = place
    if base_dir is None:
        return own, name
    return base_dir, (name if same_directory(base_dir, own) else None)


# -- planning -----------------------------------------------------------------------------------
def _plan(model, layout, external_data, threshold, align, convert_attributes, out_base,
          model_name, allow_outside, ov: _Overrides, layout_options: dict) -> list[_DataFile]:
    """The data files to write: those of ``keep`` (:func:`_plan_keep`), none for ``inline``,
    else the layout plugin's plan for the tensors that move (:func:`_place`)."""
    files: dict[str, _DataFile] = {}
    seen: set = set()
    moving: list = []
    for path, t in iter_tensors(model):
        if id(t) in seen:
            continue
        seen.add(id(t))
        if t.external_data is None:  # (a layout may replace it: refused before, not hidden)
            raise InvalidModelError("repeated field external_data holds None, not a list ([] "
                                    "when empty)", path=f"{path}.external_data")
        canonical = canonical_typed(t)  # (narrow types: int32_data as Clause 6.3.4 has it)
        if canonical is not None:
            ov.set(t, int32_data=canonical)
        external = t.data_location == EXTERNAL
        if layout.name == "keep":
            if external:
                _plan_keep(model, t, files, out_base, allow_outside)
            continue
        if not layout.places or not _movable(path, t, threshold, convert_attributes):
            if external:
                ov.set(t, data_location=None, external_data=[], raw_data=_contents(model, t))
            continue
        moving.append((t, _contents(model, t)))
    if layout.name == "keep":
        for df in files.values():
            _keep_layout_bytes(df)
    if moving:
        return _place(model, layout, moving, external_data, align, model_name, ov,
                      layout_options)
    return list(files.values())


def _place(model, layout, moving, external_data, align, model_name, ov: _Overrides,
           layout_options: dict) -> list[_DataFile]:
    """The data files of ``layout``'s plan (:meth:`onemodel.formats.layouts.Layout.plan`) for
    the ``(tensor, contents)`` that move, each tensor's reference set to its piece."""
    placed = [Placed(t.name or "", t.data_type, t.dims, t.nbytes) for t, _ in moving]
    location = external_data or layout.default_location(model_name)
    used_names = {model_name.lower()} if model_name else set()
    try:
        planned = layout.plan(placed, location, align, used_names, **layout_options)
    except PlacementError as e:
        raise e.error.at(path=proto_path(model, moving[e.index][0])) from None
    files = []
    for pf in planned:
        df = _DataFile(pf.location)
        df.index = layout if pf.index else None
        for piece in pf.pieces:
            if piece.tensor is None:
                df.slots.append(_Slot(piece.offset, piece.nbytes, None, piece.data))
                continue
            t, buf = moving[piece.tensor]
            df.slots.append(_Slot(piece.offset, piece.nbytes, t, buf))
            ov.set(t, data_location=EXTERNAL,
                   external_data=_entries(df.location, piece.offset, piece.nbytes),
                   raw_data=None, float_data=None, int32_data=None, int64_data=None,
                   double_data=None, uint64_data=None)
        files.append(df)
    return files


def _keep_layout_bytes(df: _DataFile) -> None:
    """Add to ``df`` (layout ``keep``) the bytes no reference selects that the layout of its
    source file needs (:func:`onemodel.formats.layouts.kept_ranges`: a safetensors header),
    when every tensor of ``df`` comes from one source at its own offset (the file rewritten as
    it was read); otherwise nothing."""
    if df.untouched or not df.slots:
        return
    source = None
    for s in df.slots:
        b = s.buffer
        if not isinstance(b, Blob) or b.offset != s.offset or (
                source is not None and b.source is not source):
            return
        source = b.source
    end = max(s.offset + s.nbytes for s in df.slots)
    for offset, n in kept_ranges(source, end):
        df.slots.append(_Slot(offset, n, None, Blob(source, offset, n)))


def _plan_keep(model, t, files, out_base, allow_outside) -> None:
    try:
        ref = parse_reference(t.external_data)
        key = ref.location if allow_outside else "/".join(location_parts(ref.location))
    except RefusedError as e:
        raise InvalidModelError(f"tensor {quote(t.name)}: {e.message}", path=proto_path(model, t)) \
            from None
    df = files.get(key)
    if df is None:
        df = files[key] = _DataFile(ref.location)
    if ref.checksum is not None:
        df.checksum = True
    if t.external is None:
        if same_directory(out_base, model.base_dir):
            df.untouched = True  # not loaded, written to where it is: the file stays as it is
            return
        _contents(model, t)  # raises: not loaded
    buf = t.external
    n = buffer_nbytes(buf)
    if ref.length is not None and ref.length != n:
        raise InvalidModelError(f"tensor {quote(t.name)} holds {n} bytes but its reference says "
                                f"length {ref.length}", path=proto_path(model, t))
    df.slots.append(_Slot(ref.offset, n, t, buf))


def union_ranges(ranges) -> list[list[int]]:
    """Sorted ``(start, end)`` ranges merged where they overlap or touch."""
    out: list[list[int]] = []
    for a, b in ranges:
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1][1] = b
        else:
            out.append([a, b])
    return out


def _in_place(df: _DataFile, out_base) -> bool:
    """True when ``df``'s destination already is the file its slots come from, holding exactly
    their bytes at their offsets and zeros elsewhere, so it needs no rewriting."""
    if out_base is None or is_remote(out_base) or not df.slots:
        return False
    identity = src = None
    for s in df.slots:
        b = s.buffer
        if not isinstance(b, Blob) or b.offset != s.offset:
            return False
        ident = data_file_identity(b.source)
        if ident is None or (identity is not None and ident != identity):
            return False
        identity, src = ident, b.source
    if src.closed:
        return False
    try:
        st = os.lstat(os.path.join(local_path(out_base), *location_parts(df.location)))
    except (OSError, InvalidModelError):
        return False
    if (st.st_dev, st.st_ino) != identity or st.st_nlink != 1 or st.st_size != src.size:
        return False
    covered = union_ranges(sorted((s.offset, s.offset + s.nbytes) for s in df.slots))
    whole = src.whole()
    if whole is None or covered[-1][1] != src.size:
        return False
    pos = 0
    for a, b in covered:
        if a > pos and np.frombuffer(whole[pos:a], dtype=np.uint8).any():
            return False
        pos = b
    return True


# -- not destroying the files the model was read from ----------------------------------------------
def _refuse_inputs(model, files: list[_DataFile], sink, out_base, allow_outside: bool) -> None:
    """Raise UsageError when a data file to write would destroy a file the model was read from
    (:func:`..inputs.input_files`): the model file (weights written over the model), or one of
    its data files, shards or shard index, unless the model is written in place (the
    destination is the model file: its data files are its own) or every tensor read from that
    data file goes back to it at its own offset (the old references still hold: ``keep``, or
    ``per_tensor`` again beside the source). Whatever ``force`` says."""
    if not files or out_base is None:
        return
    from ...storage.place import refuse_inputs_as_outputs, same_file
    from ..inputs import input_files

    inputs = input_files(model)
    dest = target_of(sink)
    if dest is not None and any(f.model and same_file(dest, f.target) for f in inputs):
        return  # in place (a data file named as the model file is refused before)
    for df in files:
        try:
            target = data_file_target(out_base, df.location, allow_outside=allow_outside)
        except RefusedError:
            continue
        for f in inputs:
            if not f.model and same_file(target, f.target) and \
                    _keeps_references(model, df, f.target):
                continue
            refuse_inputs_as_outputs([(f"data file {quote(df.location)}", target)], [f])


def _keeps_references(model, df: _DataFile, path: str) -> bool:
    """Whether every tensor of ``model`` read from the data file at ``path`` is written to
    ``df`` at the offset it was read from, from those same bytes."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    ident = (st.st_dev, st.st_ino)
    slots = {id(s.tensor): s for s in df.slots if s.tensor is not None}
    for _, t in iter_tensors(model):
        b = t.external
        if isinstance(b, Blob) and data_file_identity(b.source) == ident:
            s = slots.get(id(t))
            if s is None or s.offset != b.offset or not isinstance(s.buffer, Blob) or \
                    s.buffer.source is not b.source or s.buffer.offset != b.offset:
                return False
    return True


# -- not replacing another model's data files ------------------------------------------------------
def _read_from(model) -> set:
    """Identities (:func:`~.external.data_file_identity`) of the data files the model's tensors
    were read from."""
    found = set()
    for _, t in iter_tensors(model):
        for b in (t.external, t.raw_data):
            if isinstance(b, Blob):
                ident = data_file_identity(b.source)
                if ident is not None:
                    found.add(ident)
    return found


def _existing(target: str, storage_options) -> tuple | str | None:
    """The identity of the file at ``target`` (a path: ``(st_dev, st_ino)``; a URL: the URL),
    or ``None`` when there is none."""
    if is_remote(target):
        from ...storage.remote import as_io_error, filesystem

        fs, path = filesystem(target, storage_options)
        try:
            return target if fs.exists(path) else None
        except Exception as e:  # backends raise anything
            raise as_io_error(e, target, "check") from None
    try:
        st = os.lstat(target)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _old_references(sink, out_base, allow_outside: bool, storage_options) -> list:
    """``(location, target)`` of every external reference of the file ``sink`` will replace (the
    destination .onnx, as it is now); empty when it does not exist or is no ONNX file."""
    target = target_of(sink)
    if target is None:
        return []
    from ...storage import open_source
    from .reader import read

    try:
        source = open_source(target, storage_options=storage_options)
    except OneModelError:
        return []
    found = []
    try:
        with read(source, load_external=False) as old:
            for _, t in iter_tensors(old):
                if t.data_location != EXTERNAL:
                    continue
                try:
                    location = parse_reference(t.external_data).location
                    found.append((location, data_file_target(out_base, location,
                                                             allow_outside=allow_outside)))
                except RefusedError:
                    continue
    except OneModelError:
        return []
    finally:
        source.close()
    return found


def _referenced_by(sink, out_base, allow_outside: bool, storage_options) -> set:
    """Identities of the existing data files that the file ``sink`` will replace (the
    destination .onnx, as it is now) references; empty when it does not exist or is no ONNX.
    A staged data file it references (a write killed in publish.py's step 3) counts for the
    file it was to be published as too."""
    found = set()
    for location, where in _old_references(sink, out_base, allow_outside, storage_options):
        published = published_location(location)
        if published is not None:
            try:
                ident = _existing(data_file_target(out_base, published,
                                                   allow_outside=allow_outside),
                                  storage_options)
            except RefusedError:
                ident = None
            if ident is not None:
                found.add(ident)
        ident = _existing(where, storage_options)
        if ident is not None:
            found.add(ident)
    return found


def _refuse_replacing(files: list[_DataFile], sink, out_base, read_from: set,
                      allow_outside: bool, storage_options) -> None:
    """Raise IoError when a data file to write would replace an existing file that belongs to
    another model: one the model was not read from and that the destination .onnx file does not
    reference (module documentation)."""
    referenced = None
    for df in files:
        target = data_file_target(out_base, df.location, allow_outside=allow_outside)
        ident = _existing(target, storage_options)
        if ident is None or ident in read_from:
            continue
        if referenced is None:
            referenced = _referenced_by(sink, out_base, allow_outside, storage_options)
        if ident in referenced or (df.index and _index_of(df.index, target, df.location, referenced,
                                                     out_base, allow_outside, storage_options)):
            continue
        dest = target_of(sink)
        dest = f"{quote(_shown(dest))}" if dest else "the destination"
        if df.index:
            raise _replace_refusal(
                f"shard index {quote(_shown(target))} already exists and none of the shards it "
                f"names is referenced by a model file at {dest}: it may be another model's",
                REPLACE_INDEX_HINT)
        raise _replace_refusal(
            f"data file {quote(_shown(target))} already exists and may hold another model's "
            f"weights (this model was not read from it, and no model file at {dest} references "
            f"it)", REPLACE_DATA_HINT)


def _replace_refusal(fact: str, remedy: tuple) -> IoError:
    """The IoError refusing to replace another model's data file: ``fact; remedy``, the two
    kept apart as ``.fact`` and ``.remedy`` (one of the hints below: a template and the
    settings it advises, written as each interface writes them) so that a caller without
    convert's options (``onemodel infer``) can give its own remedy without reading the text."""
    e = IoError.advising(literal(fact) + "; " + remedy[0], *remedy[1])
    e.fact, e.remedy = fact, remedy
    return e


#: How the refusal to replace another model's data file (shard index) ends: what the caller
#: of convert / save can do. A command without these options (infer) gives its own.
REPLACE_DATA_HINT = ("use {0} to overwrite it, or {1} to write a new data file",
                     (Setting("force", True), Setting("external_data", Placeholder("NAME"))))
REPLACE_INDEX_HINT = ("use {0} to overwrite it and its shards, or {1} to write shards of "
                      "another name",
                      (Setting("force", True), Setting("external_data", Placeholder("NAME"))))


#: Largest existing shard index read by :func:`_index_of` (an index of a model's tensors is small).
_INDEX_READ_LIMIT = 64 << 20


def _index_of(layout, target: str, location: str, referenced: set, out_base,
              allow_outside: bool, storage_options) -> bool:
    """Whether the existing index file at ``target`` (data file ``location``, of layout
    ``layout``: a safetensors shard index) belongs to the model the destination .onnx holds now:
    the data files it names (:meth:`~onemodel.formats.layouts.Layout.index_names`, the shards
    of its ``weight_map``) include one that model references (so converting again into the
    same directory replaces the index with its shards). False for anything that is no such
    index (unreadable, too large, not one the layout reads)."""
    import posixpath

    from ...storage import open_source

    try:
        with open_source(target, storage_options=storage_options) as source:
            if source.size > _INDEX_READ_LIMIT:
                return False
            names = layout.index_names(bytes(source.read(0, source.size)))
        for name in names or ():
            where = data_file_target(out_base, posixpath.join(posixpath.dirname(location), name),
                                     allow_outside=allow_outside)
            if _existing(where, storage_options) in referenced:
                return True
    except (OneModelError, RefusedError):
        return False
    return False


def _shown(target: str) -> str:
    """A path or URL as shown in messages (credentials of a URL masked)."""
    if is_remote(target):
        return display_url(target)
    return target


# -- publishing all files at once (publish.py) --------------------------------------------------
def _local_sink(sink):
    """The :class:`~onemodel.storage.local.LocalSink` ``sink`` is (or counts progress for), or
    ``None`` (a remote, compressed or in-memory sink: its files are committed one by one)."""
    from ...storage.local import LocalSink
    from ...storage.progress import ProgressSink

    while isinstance(sink, ProgressSink):
        sink = sink.inner
    return sink if isinstance(sink, LocalSink) else None


def _publication(sink, out_base, files) -> Publication | None:
    """A :class:`.publish.Publication` for data ``files`` written beside the local model file of
    ``sink``; ``None`` when there are none or the model file is not a local file."""
    local = _local_sink(sink)
    if not files or local is None or out_base is None or is_remote(out_base):
        return None
    return Publication(local.name)


def _first_version(model, files, staged: dict, ov: _Overrides, model_path: str):
    """A sink holding the first version of the .onnx file (publish.py, step 2): the model with
    the references to each staged data file naming its staged location."""
    from ...storage.local import LocalSink

    done: set = set()
    for df in files:
        where = staged.get(id(df))
        if where is None:
            continue
        for slot in df.slots:
            t = slot.tensor
            if t is None or id(t) in done:
                continue
            done.add(id(t))
            ov.set(t, external_data=[StringStringEntry(key=e.key, value=where)
                                     if e.key == "location" else e for e in t.external_data])
    pieces = encode_pieces(model)
    first = LocalSink(model_path, lock=False)
    try:
        first.reserve(pieces_size(pieces))
        stream_pieces(pieces, first)
    except BaseException:
        first.abort()
        raise
    return first


def _leftovers(pub: Publication, out_base, files, allow_outside: bool) -> list:
    """``(path, identity)`` of the stale staged data files of the model file (publish.py, step
    4) in the directories of ``files``, none of which is written to by this write."""
    new = set()
    for df in files:
        new.add(data_file_target(out_base, df.location, allow_outside=allow_outside))
    new.update(staged for staged, _ in pub.late)
    directories = {os.path.dirname(path) for path in new}
    return stale_staged(sorted(directories), owner_tag(pub.model_path), new)


# -- writing ------------------------------------------------------------------------------------
def _emit(sink, slot: _Slot, start: int, n: int) -> None:
    """Write bytes ``[start, start + n)`` of a slot's contents."""
    if n <= 0:
        return
    b = slot.buffer
    if isinstance(b, Blob):  # the sink's one copy decision (file to file where it can)
        sink.write_blob(b if start == 0 and n == b.nbytes else b.part(start, n))
    else:
        sink.write(buffer_view(b)[start:start + n])


def _same_bytes(a: _Slot, b: _Slot, start: int, end: int) -> bool:
    """Whether slots ``a`` and ``b`` hold the same bytes over file range ``[start, end)``."""
    x, y = a.buffer, b.buffer
    if isinstance(x, Blob) and isinstance(y, Blob) and x.source is y.source \
            and x.offset - a.offset == y.offset - b.offset:
        return True
    va = buffer_view(a.buffer)[start - a.offset:end - a.offset]
    vb = buffer_view(b.buffer)[start - b.offset:end - b.offset]
    return same_bytes(va, vb)


def _write_data_file(model, df: _DataFile, sink) -> str | None:
    """Write ``df``'s slots in offset order with zeros in gaps; the file's SHA-1 when asked,
    computed from the bytes as they are written (:class:`~onemodel.storage.hashing.HashingSink`:
    each byte is read once, also from a remote source)."""
    import hashlib  # here: 2.5 ms of every model's first load otherwise

    hasher = hashlib.sha1() if df.checksum else None
    if hasher is not None:
        sink = HashingSink(sink, hasher)
    pos = 0
    last = None
    for slot in sorted(df.slots, key=lambda s: (s.offset, -s.nbytes)):
        end = slot.offset + slot.nbytes
        if last is not None and slot.offset < pos:
            shared_end = min(end, pos)
            if not _same_bytes(last, slot, slot.offset, shared_end):
                raise InvalidModelError(
                    f"tensors {quote(last.tensor.name)} and {quote(slot.tensor.name)} share bytes "
                    f"{slot.offset}..{shared_end} of data file {quote(df.location)} but hold "
                    "different contents", path=proto_path(model, slot.tensor))
            if end <= pos:
                continue
            _emit(sink, slot, pos - slot.offset, end - pos)
        else:
            if slot.offset > pos:
                sink.skip(slot.offset - pos)  # a hole where the sink can leave one
            _emit(sink, slot, 0, slot.nbytes)
        pos = end
        last = slot
    return hasher.hexdigest() if hasher is not None else None


def _update_checksums(files: list[_DataFile], ov: _Overrides) -> bool:
    """Set the checksum of references to rewritten files whose SHA-1 changed; True if any."""
    changed = False
    for df in files:
        if df.sha1 is None:
            continue
        done: set = set()
        for slot in df.slots:
            t = slot.tensor
            if t is None or id(t) in done:  # (None: bytes of the layout's own, a header)
                continue
            done.add(id(t))
            if any(e.key == "checksum" and e.value != df.sha1 for e in t.external_data):
                ov.set(t, external_data=[StringStringEntry(key=e.key, value=df.sha1)
                                         if e.key == "checksum" else e
                                         for e in t.external_data])
                changed = True
    return changed


def stream_pieces(pieces, sink) -> None:
    """Write the pieces of :func:`~.wire_encode.encode_pieces` to ``sink``: a Blob through
    ``sink.write_blob`` (file to file when local), bytes as they are."""
    for piece in pieces:
        if isinstance(piece, Blob):
            sink.write_blob(piece)
        else:
            sink.write(piece)


@contextlib.contextmanager
def _none_lists_refused(model):
    """A repeated field of the model holding None, not a list (its empty value is ``[]``; the
    OneModel writer refuses it alike), is an InvalidModelError naming the field, whatever
    meets it first: the encoding (which raises that error itself) or a walk of the tensors
    before it, to which it is a TypeError (``nodes`` None, a tensor's ``dims`` None). The
    model is searched for such a field only then, so writing a well-formed model costs
    nothing more; another TypeError is raised as it is."""
    try:
        yield
    except TypeError:
        error = none_list_error(model)
        if error is None:
            raise
        raise error from None


def _option_refused(option: str, value, layout: str) -> str:
    """The message for a layout option given with a layout that does not take it, after the
    option's name."""
    takers = [p for p in registered_layouts() if option in p.options]
    kind = takers[0].options[option] if takers else "given"
    return (f" must be {kind} with layout {_either([quote(p.name) for p in takers])}, "
            f"not {quote(value)} with layout {quote(layout)}")


def _either(names: list) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return " or ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else \
        "".join(names)


#: Largest accepted alignment of data file offsets, in bytes
#: (:data:`onemodel.limits.MAX_EXTERNAL_DATA_ALIGNMENT`).
MAX_ALIGN = limits.MAX_EXTERNAL_DATA_ALIGNMENT


def write_layout(model, sink, *, layout: str | None = None, external_data: str | None = None,
                 threshold: int = 1024, align: int | None = None,
                 force: bool = False, base_dir=None, allow_outside: bool = False,
                 convert_attributes: bool = False, storage_options: dict | None = None,
                 max_shard_size: int | None = None) -> None:
    """Write ``model`` to ``sink`` as a ModelProto with the external data ``layout`` (module
    documentation), and its data files beside it.

    Args:
        layout: ``keep`` (default; ``file`` when ``external_data`` is given, ``safetensors``
            when it ends in ``.safetensors``; ``inline`` into a zstd-compressed sink, a
            ``.onnx.zst``, which is one self-contained stream: a layout that leaves data files
            beside it raises AdviceError), ``inline``, ``file``, ``per_tensor``,
            ``safetensors`` or the name of a registered layout plugin (a data file name with
            its suffix selects it).
        external_data: relative location of the one data file of ``file`` (default: the .onnx
            file's name + ``.data``); the rules of Clause 13.2 apply (no ``..``, not absolute).
        threshold: bytes; smaller tensors stay inline (``file``, ``per_tensor``).
        align: bytes; every offset in a ``file`` data file is a multiple of it (default 4096, a
            page; 65536 for readers that map by the Windows allocation granularity; 1 for none);
            in a ``safetensors`` data file, every tensor's offset (default 64).
        force: write a .onnx file of :data:`~onemodel.limits.PROTOBUF_MESSAGE_LIMIT` (2 GiB) or
            more, with a warning; without it that raises UnsupportedError before anything is
            written. Also replace an existing data file that may belong to another model
            (module documentation); without it that raises IoError before anything is written.
        base_dir: directory (or URL) of the data files; default the sink's file's directory.
        allow_outside: allow ``keep`` references outside that directory. Never the default.
        convert_attributes: also move attribute and sparse tensors (``file``, ``per_tensor``).
        storage_options: fsspec options for data files under a URL.
        max_shard_size: bytes (layout ``safetensors``): more tensor bytes than this are split
            into shards ``<stem>-00001-of-0000k.safetensors`` of at most that much each, with
            the index ``<data file>.index.json`` Hugging Face's ``transformers`` reads.
    The .onnx bytes go to ``sink`` (the caller commits it); data files are committed here, after
    the .onnx bytes were written, and aborted on any error.

    Raises UnsupportedError for a bad option (naming it and the values it takes) or data files
    to write with no directory for them (no ``base_dir`` and a sink that is no file);
    InvalidModelError for an external tensor that was not loaded and must move, a data file
    that would replace the model file, tensors that share bytes of a data file with different
    contents; UnsupportedError for the 2 GiB limit without
    ``force``; UsageError for a data file that would destroy a file the model was read from
    (the model file; a data file whose tensors would not stay at their offsets); IoError for a
    data file that would replace an existing file of another model without ``force`` (every
    layout that writes data files, ``external_data`` named or not), or when a file cannot be
    written.
    """
    compressed = is_compressed_sink(sink)  # x.onnx.zst: one self-contained stream
    if layout is None:
        layout = ("inline" if compressed else "keep") if external_data is None else \
            layout_for_data_file(external_data).name
    plugin = layout_by_name(layout)
    if external_data is not None and not plugin.takes_external_data:
        named = [quote(p.name) for p in registered_layouts() if p.takes_external_data]
        raise UnsupportedError.advising(
            "{0}" + literal(f" names the data file of layout {_either(named)} only, not of "
                            f"layout {quote(layout)}"), Setting("external_data", NAME_ONLY))
    layout_options = {"max_shard_size": max_shard_size} if max_shard_size is not None else {}
    for option in layout_options:
        if option not in plugin.options:
            raise UnsupportedError.advising(
                "{0}" + literal(_option_refused(option, layout_options[option], layout)),
                Setting(option, NAME_ONLY))
    plugin.check_options(layout_options)
    if align is None:
        align = plugin.default_align or EXTERNAL_DATA_ALIGNMENT
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
        raise UnsupportedError.advising(
            "{0}" + literal(f" must be a non-negative integer (bytes), not {quote(threshold)}"),
            Setting("threshold", NAME_ONLY))
    if (isinstance(align, bool) or not isinstance(align, int) or align < 1
            or align & (align - 1) or align > MAX_ALIGN):
        raise UnsupportedError.advising(
            "{0}" + literal(f" must be a power of two from 1 to {MAX_ALIGN} bytes (4096: a "
                            f"page; 65536 for Windows readers), not {quote(align)}"),
            Setting("align", NAME_ONLY))
    if external_data is not None:
        try:
            location_parts(external_data)
        except RefusedError as e:
            raise UnsupportedError.advising(
                "{0}" + literal(f" {quote(external_data)} must be a relative path of "
                                f"'/'-separated names inside the output directory (Clause "
                                f"13.2): {e.message}"), Setting("external_data", NAME_ONLY)) \
                from None

    out_base, model_name = _output_place(sink, base_dir)
    read_from = _read_from(model) if not force else set()
    ov = _Overrides()
    sinks: list = []
    pub = None
    try:
        files = _plan(model, plugin, external_data, threshold, align, convert_attributes,
                      out_base, model_name, allow_outside, ov, layout_options)
        if files and compressed:  # (they would lie beside it, not compressed, needed by it)
            names = ", ".join(quote(df.location) for df in files[:3]) + \
                (", ..." if len(files) > 3 else "")
            raise AdviceError(
                f"a .zst output is one compressed stream, but layout {quote(layout)} would "
                f"leave {len(files)} data file{'s' if len(files) > 1 else ''} ({names}) beside "
                "it, uncompressed, that it needs: put every tensor in the stream ({0}, the "
                "default for .zst), or write an uncompressed .onnx with its data files, or a "
                ".onemodel.zst", [("layout", "inline")])
        if files and out_base is None:
            raise NoDataDirectoryError("the model has external data files to write but the "
                                       "sink is not a file; pass base_dir= (their directory) "
                                       "or layout='inline'",
                                       [df.location for df in files])
        if model_name and not allow_outside:
            for df in files:
                if "/".join(location_parts(df.location)).lower() == model_name.lower():
                    raise InvalidModelError(f"data file {quote(df.location)} would replace the "
                                            "model file itself")
        files = [df for df in files
                 if not (df.untouched or (layout == "keep" and _in_place(df, out_base)))]
        _refuse_inputs(model, files, sink, out_base, allow_outside)
        if files and not force:  # (a name given with external_data included)
            _refuse_replacing(files, sink, out_base, read_from, allow_outside, storage_options)
        pieces = encode_pieces(model)
        total = pieces_size(pieces)
        if total >= limits.PROTOBUF_MESSAGE_LIMIT:
            msg = (f"the ONNX file would be {total} bytes, past the 2 GiB protobuf limit: onnx, "
                   "onnxruntime and other protobuf-based tools cannot read it")
            if not force and compressed:  # (external data cannot go with one .zst stream)
                raise AdviceError(msg + "; write a .onemodel.zst instead, or pass {0} to write "
                                  "it anyway", [("force", True)])
            if not force:  # (the settings spelled as the caller's interface types them)
                raise AdviceError(msg + "; write the weights to external data ({0}), or pass "
                                  "{1} to write it anyway", [("layout", "file"), ("force", True)])
            warnings.warn(msg, stacklevel=3)
        pub = _publication(sink, out_base, files)
        staged: dict = {}  # id(_DataFile) -> its staged location (publish.py, step 1)
        write_id = os.urandom(4).hex()
        owner = owner_tag(pub.model_path) if pub is not None else None
        for df in files:
            where = df.location
            if pub is not None:  # written under a staged name, renamed in step 3
                where = staged_location(df.location, write_id, owner)
                pub.late.append((data_file_target(out_base, where, allow_outside=allow_outside),
                                 data_file_target(out_base, df.location,
                                                  allow_outside=allow_outside)))
                if not df.index:
                    staged[id(df)] = where
            s = open_data_sink(out_base, where, allow_outside=allow_outside,
                               storage_options=storage_options, progress=sink.progress,
                               temporary=pub is None)
            sinks.append(s)
            # disk for the bytes really written (the slots), never for the gaps between them
            written = union_ranges(sorted((slot.offset, slot.offset + slot.nbytes)
                                    for slot in df.slots))
            s.reserve(written[-1][1] if written else 0, [tuple(r) for r in written])
            df.sha1 = _write_data_file(model, df, s)
        if layout == "keep" and any(df.checksum for df in files):
            if _update_checksums(files, ov):
                pieces = encode_pieces(model)
        sink.reserve(pieces_size(pieces))
        stream_pieces(pieces, sink)
        if pub is not None:
            pub.sinks, sinks = sinks, []
            if staged:
                pub.first = _first_version(model, files, staged, ov, pub.model_path)
            pub.leftovers = _leftovers(pub, out_base, files, allow_outside)
            pub.attach(_local_sink(sink))
            pub = None
        for s in sinks:
            s.commit()
        sinks = []
    finally:
        for s in sinks:
            s.abort()
        if pub is not None:
            pub.abort()
        ov.restore()


def encode_message(record) -> bytes:
    """The octets of any record as its ONNX message (Annex B), as the protobuf serializer writes
    them, in memory (:func:`.wire_encode.encode`)."""
    return encode(record)


encode_model = encode_message


def write(model, sink, *, layout: str | None = None, external_data: str | None = None,
          threshold: int = 1024, align: int | None = None, force: bool = False,
          base_dir=None, allow_outside: bool = False, convert_attributes: bool = False,
          storage_options: dict | None = None, max_shard_size: int | None = None) -> None:
    """Write ``model`` as a ModelProto to ``sink`` (not committed here) and its external data
    files beside it (committed here, after everything was written).

    Args:
        layout: where tensor contents go (the module documentation has the details):
            ``"keep"`` (default): every tensor stays where it is; external references are kept
            as written and their data files rewritten to hold exactly the referenced bytes, so
            a model read and written back gives the same .onnx and data files, byte for byte.
            ``"inline"``: every tensor in the .onnx file. ``"file"``: tensors of ``threshold``
            bytes or more in one data file ``external_data``. ``"per_tensor"``: one data file per
            such tensor, named after it. ``"safetensors"``: as ``"file"``, the data file a valid
            safetensors file (docs/safetensors.md). Default ``"file"`` when ``external_data`` is
            given (``"safetensors"`` when it ends in ``.safetensors``); ``"inline"`` into a
            zstd-compressed sink (``.onnx.zst``: one self-contained stream; a layout that
            would leave data files beside it raises AdviceError).
        external_data: the data file name for ``"file"`` (a relative location; default the
            .onnx file's name + ``.data``).
        threshold: tensors smaller than this many bytes stay inline (``file``, ``per_tensor``).
        align: every tensor offset in a data file is a multiple of this (default 4096, a page, so
            the data can be mapped; 65536 for Windows readers that map by allocation granule;
            64 for layout ``safetensors``).
        force: write a .onnx file of 2 GiB or more (protobuf-based tools cannot read it);
            without it such a write raises UnsupportedError. Also replace an existing data file
            that may belong to another model: without it, a data file (its name chosen by the
            layout or given with ``external_data``) may replace an existing file only when the
            model was read from that file or the destination .onnx file references it;
            otherwise IoError, before anything is written.
        base_dir: the directory data files go to; default the directory of the sink's file.
        allow_outside: keep references outside that directory (``keep``); never the default.
        convert_attributes: ``file``/``per_tensor`` also move attribute tensors and sparse
            tensors (as ``onnx``'s ``convert_attribute``); by default only initializers.
        storage_options: fsspec options for data files under a URL.
        max_shard_size: layout ``safetensors`` in shards of at most this many tensor bytes, with
            a Hugging Face index (:func:`write_layout`).

    Large tensor contents are streamed: copied file to file when they are untouched views of a
    local source (``copy_file_range`` or ``splice``, a bounded buffered copy where the kernel
    does neither: ``Sink.write_blob`` decides), else written from their buffers in bounded
    chunks; nothing is concatenated in memory. Data files are written to temporary files renamed
    into place, so writing onto the files the model is mapped from is safe (the maps keep the old
    files alive) and an existing file is never appended to. Raises InvalidModelError (among
    others for a repeated field holding None, not a list, naming it, as the OneModel writer
    does), UnsupportedError, IoError; on error no data file is changed.
    """
    if not isinstance(model, Model):
        raise TypeError("write() takes an onemodel.ir.Model")
    # what the reader would refuse is not written (InvalidModelError with the field path), a
    # repeated field holding None included
    with _none_lists_refused(model):
        check_tensors(model, [(t, None) for _, t in iter_tensors(model)], sink.name)
        write_layout(model, sink, layout=layout, external_data=external_data,
                     threshold=threshold, align=align, force=force, base_dir=base_dir,
                     allow_outside=allow_outside, convert_attributes=convert_attributes,
                     storage_options=storage_options, max_shard_size=max_shard_size)


__all__ = ["LAYOUTS", "MAX_ALIGN", "write", "write_layout", "encode_message", "encode_model",
           "stream_pieces"]
