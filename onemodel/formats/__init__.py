"""The format registry: plugins by name, suffix and magic bytes.

A format plugin is a small object with

* ``name``: short name used by ``--to`` and ``save(format=...)`` (``onnx``, ``onemodel``);
* ``suffixes``: file name suffixes it claims (``.onnx``), without compression suffixes;
* ``sniff(head: bytes) -> bool``: whether the first bytes of a file are this format;
* ``read(source, *, ...) -> Model`` and ``write(model, sink, *, ...) -> None``, whose keyword
  parameters are the options they take: :func:`onemodel.load` and :func:`onemodel.save`
  refuse any other (UnsupportedError) and pass ``storage_options`` only to a plugin that
  declares it.

Built-in plugins are registered on first use, each on its own: reading an ONNX file imports
nothing of the OneModel container package and the reverse (:data:`_BUILTIN` names each one's
suffixes and magic, so detection imports only the plugin that can answer). Third parties add
theirs with :func:`register` (which refuses a name already taken unless ``replace=True``) or
through the ``onemodel.formats`` entry point group (a plugin whose name is taken is left out,
with a warning), without touching this package. ONNX external data layouts have a registry of
their own (:mod:`.layouts`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable, Protocol

from ..errors import MalformedError, OneModelError, UnsupportedError, quote
from ..storage.compressed import ZSTD_SUFFIX, has_zstd_suffix, set_format_sniff


class FormatPlugin(Protocol):
    """What a format plugin provides (the module documentation says what each member does):
    ``name``, ``suffixes``, ``sniff(head)``, ``read(source, **options) -> Model`` and
    ``write(model, sink, **options)``. Any object with these members is one; :class:`Plugin`
    builds one from its parts."""

    name: str
    suffixes: tuple[str, ...]

    def sniff(self, head: bytes) -> bool: ...

    def read(self, source, **options): ...

    def write(self, model, sink, **options) -> None: ...


@dataclass(frozen=True)
class Plugin:
    """A format plugin built from its parts (what the built-in formats use)."""

    name: str
    suffixes: tuple[str, ...]
    sniff: Callable[[bytes], bool]
    read: Callable
    write: Callable


_PLUGINS: dict[str, FormatPlugin] = {}
#: The built-in formats, asked in this order: name -> (``module:attribute`` of the plugin, the
#: suffixes it claims, its magic bytes or ``None`` when it has none). A plugin's package is
#: imported only when a file can be of its format (its magic starts the file, it has no magic, or
#: the name has its suffix) or it is asked for by name; the plugin's own ``sniff`` decides.
#: The magic must be the plugin's own (a test checks it against the container header's).
_BUILTIN: dict[str, tuple[str, tuple[str, ...], bytes | None]] = {
    "onemodel": ("onemodel.formats.container:PLUGIN", (".onemodel",), b"ONEMODEL"),
    "onnx": ("onemodel.formats.onnx:PLUGIN", (".onnx",), None),
}
_builtins_loaded: set[str] = set()
_entry_points_loaded = False


def register(plugin: FormatPlugin, *, replace: bool = False) -> None:
    """Add a format plugin under ``plugin.name``. A name already taken (a built-in format's
    included, loaded or not) raises ValueError unless ``replace=True`` (as fsspec's
    ``register_implementation(clobber=False)`` refuses), so a plugin never replaces another
    silently."""
    name = plugin.name
    if not replace and (name in _PLUGINS or name.lower() in _BUILTIN):
        raise ValueError(f"a format named {quote(name)} is already registered; pass "
                         "replace=True to replace it")
    if name.lower() in _BUILTIN:
        _load_builtin(name.lower())  # (so the built-in one never comes back over it)
    _PLUGINS[name] = plugin


def _load_builtin(name: str) -> None:
    """Import the built-in plugin ``name`` (once); a plugin registered under that name before
    keeps its place."""
    if name not in _builtins_loaded:
        mod, attr = _BUILTIN[name][0].split(":")
        plugin = getattr(importlib.import_module(mod), attr)
        _PLUGINS.setdefault(plugin.name, plugin)
        _builtins_loaded.add(name)


def _load_builtins(magic_less: bool = False) -> None:
    """Import every built-in plugin (``magic_less``: those of formats without magic bytes)."""
    for name, (_, _, magic) in _BUILTIN.items():
        if not magic_less or magic is None:
            _load_builtin(name)


def _base_name(name: str) -> str:
    return (name[:-len(ZSTD_SUFFIX)] if has_zstd_suffix(name) else name).lower()


def _load_candidates(head: bytes | None, name: str | None) -> None:
    """Import the built-in plugins whose magic starts ``head`` or whose suffix ends ``name``."""
    base = _base_name(name) if name else None
    for key, (_, suffixes, magic) in _BUILTIN.items():
        if (head and magic is not None and bytes(head[:len(magic)]) == magic) or (
                base is not None and any(base.endswith(s) for s in suffixes)):
            _load_builtin(key)


def _load_entry_points() -> None:
    """Third-party plugins of the ``onemodel.formats`` entry point group. Loaded only when the
    built-in formats do not answer (importing importlib.metadata costs tens of milliseconds)."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    from importlib import metadata
    try:
        eps = metadata.entry_points(group="onemodel.formats")
    except Exception:  # pragma: no cover - broken environments
        eps = ()
    for ep in eps:
        try:
            register(ep.load())
        except ValueError as e:  # a name taken: the first one keeps it
            import warnings
            warnings.warn(f"entry point {ep.name!r} of onemodel.formats: {e}", stacklevel=2)


def plugins() -> list[FormatPlugin]:
    """Every registered plugin, built-in and third-party."""
    _load_builtins()
    _load_entry_points()
    return list(_PLUGINS.values())


def by_name(name: str) -> FormatPlugin:
    """The plugin called ``name``; UnsupportedError naming the known formats otherwise."""
    if name not in _PLUGINS and name.lower() in _BUILTIN:
        _load_builtin(name.lower())
    if name not in _PLUGINS and name.lower() in _PLUGINS:
        name = name.lower()
    if name not in _PLUGINS:
        _load_builtins()
        _load_entry_points()
    try:
        return _PLUGINS[name]
    except KeyError:
        raise UnsupportedError(f"unknown format {quote(name)}; known: "
                               f"{', '.join(sorted(_PLUGINS))}") from None


def _match(head: bytes | None, name: str | None) -> FormatPlugin | None:
    if head:
        for p in _PLUGINS.values():
            if p.sniff(head):
                return p
    if name:
        base = _base_name(name)
        for p in _PLUGINS.values():
            if any(base.endswith(s) for s in p.suffixes):
                return p
    return None


def detect(head: bytes | None = None, name: str | None = None) -> FormatPlugin:
    """The plugin for a file: by its first bytes when they are given, else by its name's suffix.

    Magic bytes win over the suffix; built-in formats are asked first, third-party plugins when
    no built-in format answers. Raises UnsupportedError when none decides.
    """
    _load_candidates(head, name)
    found = _match(head, None)
    if found is None and head:  # a format without magic answers from the bytes before a suffix
        _load_builtins(magic_less=True)
        found = _match(head, None)
    if found is None:
        found = _match(None, name)
    if found is None and len(_builtins_loaded) < len(_BUILTIN):
        _load_builtins()
        found = _match(head, name)
    if found is None and not _entry_points_loaded:
        _load_entry_points()
        found = _match(head, name)
    if found is None:
        from .layouts import weights_layout

        weights = weights_layout(_base_name(name) if name else None, head)
        if weights is not None:  # (a file of tensors only: a layout's weights file)
            from ..errors import Placeholder, Setting, WeightsFileError

            e = WeightsFileError.advising(weights.weights_note,
                                          Setting("into", Placeholder("MODEL")), source=name)
            e.layout = weights.name
            raise e
        raise UnsupportedError("cannot tell the format of the file from its first bytes or its "
                               "name", source=name)
    return found


def open_and_read(target, read: Callable, *, format: str | None = None, name: str | None = None,
                  storage_options: dict | None = None, progress=None):
    """``read(plugin, source)`` for the file ``target`` (a path, URL or Source): the one
    open-detect-read path of :func:`onemodel.load` and of ``onemodel check``. ``target`` is
    opened (:func:`onemodel.storage.open_source`, with ``storage_options`` and ``progress``),
    its plugin is the one named ``format``, else :func:`detect` of its first 16 bytes and
    ``name`` (default: the source's name), and ``read`` reads it; the model ``read`` returns
    owns the source. When anything fails the source is closed, and a OneModelError gets the
    source's name (``e.at(source=...)``).

    Raises what ``open_source``, :func:`by_name`, :func:`detect` and ``read`` raise;
    MalformedError for an empty file (0 bytes: a model of no format; protobuf would decode it
    as a ModelProto with no field, Clause 12.2, which ``check`` would list as missing fields
    where ``load`` refuses it)."""
    from ..storage import open_source

    source = open_source(target, storage_options=storage_options, progress=progress)
    try:
        if source.size == 0:
            raise MalformedError("the file is empty (0 bytes): it holds no model", offset=0)
        if format:
            plugin = by_name(format)
        else:
            head = bytes(source.read(0, min(16, source.size)))
            plugin = detect(head, name or source.name)
        return read(plugin, source)
    except OneModelError as e:
        source.close()
        raise e.at(source=source.name)
    except BaseException:
        source.close()
        raise


def _starts_a_model(head: bytes) -> bool:
    """Whether ``head`` is the start of a file of a registered format (:func:`detect` by its
    first bytes): the check a decompressed ``.zst`` passes (storage.compressed)."""
    try:
        detect(head)  # built-in formats first; third-party plugins when none answers
    except UnsupportedError:
        return False
    return True


def __getattr__(name: str):
    """``onemodel.formats.layouts`` (the layout registry) without importing it at start-up."""
    if name == "layouts":
        return importlib.import_module(".layouts", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


set_format_sniff(_starts_a_model)  # storage asks the formats through this, never imports them
