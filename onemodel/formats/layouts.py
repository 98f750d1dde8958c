"""The layout registry: how a written ONNX model's tensors are laid out in external data files
(ONNX Part 1, Clause 13), one plugin per layout, by name.

A layout plugin is a small object (:class:`Layout` gives every member a default) with

* ``name``: what ``layout=`` and ``convert --layout`` call it;
* ``options``: the writer options it takes beyond the common ones, each with what it takes
  (``{"max_shard_size": "a positive integer (bytes)"}``); the writer refuses such an option
  with any other layout, and :meth:`Layout.check_options` checks their values;
* ``suffixes``: data file name suffixes that select it when ``external_data`` names a file
  without a layout (``.safetensors``); ``takes_external_data``: whether ``external_data`` names
  its data file at all; ``default_align``: its alignment when none is given (``None``: the
  page, :data:`~onemodel.limits.EXTERNAL_DATA_ALIGNMENT`);
* ``default_location(model_name)``: its data file's name when ``external_data`` is not given;
* ``plan(tensors, location, align, used_names, **options)``: the data files to write for the
  tensors to move (:class:`Placed`, in the model's order): a list of :class:`PlannedFile`, each
  piece either a tensor's bytes at an offset or bytes of the layout's own (a header, an index).
  The writer streams each file through its sink, gaps as zeros, and points each tensor's
  reference at its piece;
* weights files (optional; :attr:`Layout.weights_note` not None): a file of the layout holding
  tensors only, no model (``convert MODEL W.safetensors``, ``convert W --into MODEL OUT``,
  ``info W``): ``is_weights_file``, ``write_weights``, ``weights_of``, ``apply_weights``,
  ``list_weights``;
* reading (each optional): ``open_data_file(source, location)``, the layout's checker of a data
  file it recognises (``None`` otherwise), whose ``check(tensor, offset, length)`` refuses a
  reference the file does not hold; ``describe(source)``, what ``onemodel info`` reports of such
  a file (under the layout's name); ``companions(path)``, the files beside a data file that
  belong to it (a shard index), which no output may replace; ``index_names(data)``, the data
  files an index file of the layout names (whether an existing one belongs to the destination);
  ``kept_ranges(source, end)``, the bytes of its own (a header) that layout ``keep`` carries
  over when it rewrites such a file.

``keep`` and ``inline`` are the writer's own (nothing is placed: tensors stay where they are, or
all go into the .onnx file); ``file`` and ``per_tensor`` are :mod:`.onnx.layouts`, ``safetensors``
:mod:`.safetensors.plugin`. Built-in layouts are imported on first use; third parties add theirs
with :func:`register` or through the ``onemodel.layouts`` entry point group (loaded when a name is
not found or every layout is listed), without touching this package. A data file being read is
offered to the layouts registered so far (built-in and registered ones; entry points once loaded).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import NamedTuple

from ..errors import UnsupportedError, quote


class Placed(NamedTuple):
    """A tensor a layout places: its name, ONNX element type code, dims and octets."""

    name: str
    data_type: int
    dims: tuple
    nbytes: int


@dataclass
class Piece:
    """Bytes of a planned data file at ``offset``: the tensor ``tensor`` (its index in the list
    given to ``plan``; its reference will point here) or ``data`` (the layout's own bytes)."""

    offset: int
    nbytes: int
    tensor: int | None = None
    data: bytes | None = None


@dataclass
class PlannedFile:
    """A data file a layout writes: its location (relative, '/'-separated) and its pieces;
    ``index``: a file no tensor references (an index of shards)."""

    location: str
    pieces: list = field(default_factory=list)
    index: bool = False


class PlacementError(Exception):
    """Raised by ``plan`` for a tensor it cannot place: ``index`` in the list given, ``error``
    the OneModelError (the writer adds the tensor's path)."""

    def __init__(self, index: int, error):
        super().__init__(str(error))
        self.index, self.error = index, error


class Layout:
    """Base of a layout plugin (the module documentation says what each member does)."""

    name: str = ""
    options: dict = {}
    suffixes: tuple = ()
    takes_external_data: bool = False
    default_align: int | None = None
    #: False for ``keep`` and ``inline``, which the writer does itself (no tensor is placed).
    places: bool = True

    def check_options(self, options: dict) -> None:
        """Raise UnsupportedError for a value of one of :attr:`options` the layout refuses."""

    def default_location(self, model_name: str | None) -> str:
        """The data file's name when ``external_data`` is not given."""
        return (model_name or "model.onnx") + ".data"

    def plan(self, tensors: list, location: str, align: int, used_names: set,
             **options) -> list:
        """The :class:`PlannedFile` list for ``tensors`` (:class:`Placed`)."""
        raise NotImplementedError

    def open_data_file(self, source, location: str):
        """A checker of a data file of this layout (``check(tensor, offset, length)``), or
        None when ``source`` is not one."""
        return None

    def describe(self, source) -> dict | None:
        """What ``onemodel info`` reports of a data file of this layout already read, or None."""
        return None

    def companions(self, path: str) -> list:
        """Paths of files beside the data file ``path`` that belong to it."""
        return []

    def index_names(self, data: bytes) -> list | None:
        """The data file names an index file of this layout names (None: not such an index)."""
        return None

    def kept_ranges(self, source, end: int) -> list:
        """``(offset, octets)`` of the bytes of a data file of this layout that no reference
        selects and that layout ``keep`` must carry over for the file to stay one of the layout
        (a safetensors header), when the file is rewritten from ``source`` with its tensors at
        their offsets, the last ending at ``end``; ``[]`` for none."""
        return []

    def summary(self, described: dict, references: int) -> str:
        """What ``onemodel info`` adds to a data file's line from :meth:`describe`'s dict
        (``references``: the references into the file); ``""`` for nothing."""
        return ""

    # -- weights files: a file of this layout holding tensors only (no model) ---------------
    #: What a weights file of this layout is, the message of the
    #: :class:`~onemodel.errors.WeightsFileError` :func:`onemodel.formats.detect` raises for
    #: one, ``{0}`` where the setting that puts its tensors into a model goes (``into=MODEL``,
    #: ``--into MODEL``); ``None``: the layout has no weights files and the members below are
    #: unused.
    weights_note: str | None = None

    def is_weights_file(self, head: bytes | None, name: str | None) -> bool:
        """Whether a file no format takes is a weights file of this layout, from its first
        octets ``head`` and its lower-case ``name`` (compression suffix removed)."""
        return False

    def write_weights(self, model, sink, *, align: int | None = None,
                      metadata: dict | None = None, padding: list | None = None) -> int:
        """Write the initializers of ``model`` as one weights file to ``sink`` (not committed);
        the number written."""
        raise NotImplementedError

    def weights_of(self, model) -> list:
        """The tensors of ``model`` :meth:`write_weights` writes."""
        raise NotImplementedError

    def apply_weights(self, model, source, *, name: str | None = None) -> list:
        """Replace initializers of ``model`` by name with the tensors of the weights file
        ``source``; the tensors replaced."""
        raise NotImplementedError

    def list_weights(self, source, name: str | None = None) -> tuple:
        """``(metadata, rows)`` of a weights file: its metadata dict and one dict per entry
        (``name``, ``dtype``, ``shape``, ``bytes``, ``padding``)."""
        raise NotImplementedError


_LAYOUTS: dict[str, Layout] = {}
#: The built-in layouts, in the order they are listed: name -> ``module:attribute``.
_BUILTIN: dict[str, str | None] = {
    "keep": "onemodel.formats.onnx.layouts:KEEP",
    "inline": "onemodel.formats.onnx.layouts:INLINE",
    "file": "onemodel.formats.onnx.layouts:FILE",
    "per_tensor": "onemodel.formats.onnx.layouts:PER_TENSOR",
    "safetensors": "onemodel.formats.safetensors.plugin:LAYOUT",
}
#: The built-in layout names, in order (``onemodel.formats.onnx.writer.LAYOUTS``).
BUILTIN = tuple(_BUILTIN)
_entry_points_loaded = False


def register(layout: Layout, *, replace: bool = False) -> None:
    """Add a layout plugin under ``layout.name``. A name already taken (a built-in layout's
    included) raises ValueError unless ``replace=True``."""
    name = layout.name
    if not isinstance(name, str) or not name:
        raise ValueError(f"a layout plugin needs a non-empty name, not {quote(name)}")
    if not replace and (name in _LAYOUTS or name in _BUILTIN):
        raise ValueError(f"a layout named {quote(name)} is already registered; pass "
                         "replace=True to replace it")
    _load_builtins()  # (so a built-in one never comes back over it)
    _LAYOUTS[name] = layout


def _load_builtins() -> None:
    for name, where in _BUILTIN.items():
        if name not in _LAYOUTS:
            mod, attr = where.split(":")
            _LAYOUTS[name] = getattr(importlib.import_module(mod), attr)


def _load_entry_points() -> None:
    """Third-party layouts of the ``onemodel.layouts`` entry point group; one whose name is
    taken is left out with a warning (:func:`register` refuses it)."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    import warnings
    from importlib import metadata
    try:
        eps = metadata.entry_points(group="onemodel.layouts")
    except Exception:  # pragma: no cover - broken environments
        eps = ()
    for ep in eps:
        try:
            register(ep.load())
        except ValueError as e:
            warnings.warn(f"entry point {ep.name!r} of onemodel.layouts: {e}", stacklevel=2)


def layouts() -> list[Layout]:
    """Every layout registered so far (built-in first), without loading entry points: the
    ones a data file being read is offered to."""
    _load_builtins()
    return list(_LAYOUTS.values())


def names() -> list[str]:
    """The names of every layout, built-in (in their order) and third-party."""
    _load_builtins()
    _load_entry_points()
    return list(_LAYOUTS)


def by_name(name: str) -> Layout:
    """The layout called ``name``; UnsupportedError naming the known layouts otherwise."""
    _load_builtins()
    if not isinstance(name, str) or name not in _LAYOUTS:
        _load_entry_points()
    try:
        return _LAYOUTS[name if isinstance(name, str) else None]
    except KeyError:
        raise UnsupportedError(f"layout must be one of {', '.join(_LAYOUTS)}, not "
                               f"{quote(name)}") from None


def for_data_file(location: str) -> Layout:
    """The layout a data file name selects when no layout is given: the first whose suffix ends
    it (case-insensitive), else ``file``."""
    low = location.lower()
    for layout in layouts():
        if layout.takes_external_data and any(low.endswith(s) for s in layout.suffixes):
            return layout
    return by_name("file")


def open_data_file(source, location: str):
    """The checker of the first layout that recognises the data file ``source`` (None when
    none does): its ``check(tensor, offset, length)`` is run for every reference into it."""
    for layout in layouts():
        found = layout.open_data_file(source, location)
        if found is not None:
            return found
    return None


def weights_layout(name: str | None = None, head: bytes | None = None,
                   default: bool = False) -> Layout | None:
    """The layout whose weights files the file named ``name`` (lower case, compression suffix
    removed) starting with ``head`` is (:meth:`Layout.is_weights_file`); None when no layout
    says so, or with ``default`` the first layout that has weights files (``safetensors``)."""
    first = None
    for layout in layouts():
        if layout.weights_note is None:
            continue
        first = first or layout
        if layout.is_weights_file(head, name):
            return layout
    return first if default else None


def kept_ranges(source, end: int) -> list:
    """The ranges of the data file ``source`` that layout ``keep`` carries over besides the
    referenced tensors, by every layout registered (:meth:`Layout.kept_ranges`)."""
    return [r for layout in layouts() for r in layout.kept_ranges(source, end)]


def companions(path: str) -> list[str]:
    """Paths of the files that belong to the data file ``path`` (a shard's index), by every
    layout registered."""
    return [p for layout in layouts() for p in layout.companions(path)]


__all__ = ["Layout", "Placed", "Piece", "PlannedFile", "PlacementError", "BUILTIN", "register",
           "layouts", "names", "by_name", "for_data_file", "open_data_file", "weights_layout",
           "kept_ranges", "companions"]
