"""The engine registry: what runs models for ``verify --run``, ``--engines`` and ``--bisect``.

An engine (:class:`~.base.Engine`, :mod:`.base` says what each member does and which errors
it raises) has a ``name``, ``check()``, ``run(model, feeds)`` and ``observe(model, feeds,
observer)``. :func:`onemodel.verify.verify`, :mod:`onemodel.bisect` and the command line ask
this registry for an engine by name and use only that interface; no caller tests for an
engine's name.

Built-in engines are imported on first use, each on its own: ``onemodel`` (the evaluator,
:mod:`.onemodel_engine`) and ``onnxruntime`` (:mod:`.onnxruntime_engine`, which imports
onnxruntime only when it runs). Third parties add theirs with :func:`register` (which refuses a
name already taken, a built-in one's included, unless ``replace=True``) or through the
``onemodel.engines`` entry point group (an engine whose name is taken is left out, with a
warning), without touching this package.
"""

from __future__ import annotations

import importlib

from ..errors import UnsupportedError, quote
from .base import Engine, exposed_copy, node_output_names

__all__ = ["Engine", "exposed_copy", "get", "names", "node_output_names", "register"]

#: The built-in engines: name -> ``module:attribute`` of the engine, imported on first use.
_BUILTIN: dict[str, str] = {
    "onemodel": "onemodel.engines.onemodel_engine:ENGINE",
    "onnxruntime": "onemodel.engines.onnxruntime_engine:ENGINE",
}
#: The entry point group third-party engines are found in.
GROUP = "onemodel.engines"

#: The methods every engine has (:class:`Engine` gives ``check`` and ``observe``).
_METHODS = ("check", "run", "observe")

_ENGINES: dict[str, Engine] = {}
_entry_points_loaded = False


def register(engine: Engine, *, replace: bool = False) -> None:
    """Add ``engine`` under ``engine.name`` (an instance of a subclass of :class:`Engine`, or
    any object with its members: ``name``, ``check``, ``run``, ``observe``). ValueError when
    the name is taken (a built-in engine's included, loaded or not) unless ``replace=True``, so
    that an engine never replaces another silently; ValueError too for a name that is not a
    non-empty string without commas and spaces (``--engines E1,E2`` splits on commas) or an
    engine lacking one of the methods."""
    name = getattr(engine, "name", None)
    if not isinstance(name, str) or not name or any(c in name for c in ", \t\n"):
        raise ValueError(f"an engine's name must be a non-empty string without commas or "
                         f"spaces, not {quote(name)}")
    lacking = [m for m in _METHODS if not callable(getattr(engine, m, None))]
    if lacking:
        raise ValueError(f"engine {quote(name)} has no {', '.join(lacking)} method (subclass "
                         "onemodel.engines.Engine for the default check and observe)")
    if not replace and (name in _ENGINES or name in _BUILTIN):
        raise ValueError(f"an engine named {quote(name)} is already registered; pass "
                         "replace=True to replace it")
    _ENGINES[name] = engine  # (a built-in one is never loaded over it: _load_builtin)


def _load_builtin(name: str) -> None:
    """Import the built-in engine ``name`` (once); an engine registered under that name before
    keeps its place."""
    if name not in _ENGINES:
        mod, attr = _BUILTIN[name].split(":")
        _ENGINES[name] = getattr(importlib.import_module(mod), attr)


def _load_entry_points() -> None:
    """Third-party engines of the ``onemodel.engines`` entry point group (each an engine or an
    :class:`Engine` subclass, made with no arguments); one that cannot be loaded or registered
    is left out with a warning. Loaded only when a name is not a
    built-in one, or all names are asked for (importing importlib.metadata costs tens of
    milliseconds)."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    from importlib import metadata
    try:
        eps = metadata.entry_points(group=GROUP)
    except Exception:  # pragma: no cover - broken environments
        eps = ()
    import warnings
    for ep in eps:
        try:
            engine = ep.load()
            engine = engine() if isinstance(engine, type) else engine
        except Exception as e:  # noqa: BLE001 - another package's fault: that engine only
            warnings.warn(f"entry point {ep.name!r} of {GROUP} could not be loaded: "
                          f"{type(e).__name__}: {e}", stacklevel=2)
            continue
        try:
            register(engine)
        except ValueError as e:  # a name taken: the first one keeps it
            warnings.warn(f"entry point {ep.name!r} of {GROUP}: {e}", stacklevel=2)


def names() -> list[str]:
    """The names of every engine: the built-in ones (``onemodel``, ``onnxruntime``), then the
    third-party ones in the order they were registered. Imports no engine."""
    _load_entry_points()
    return list(_BUILTIN) + [n for n in _ENGINES if n not in _BUILTIN]


def get(name: str, *, check: bool = True) -> Engine:
    """The engine called ``name``; UnsupportedError naming the known engines otherwise.
    ``check``: also call its ``check()``, UnsupportedError when it cannot run here (onnxruntime
    not installed: ``pip install onnxruntime``)."""
    if not isinstance(name, str):
        raise UnsupportedError(f"unknown engine {quote(name)}; known: {', '.join(names())}")
    if name in _BUILTIN:
        _load_builtin(name)
    elif name not in _ENGINES:
        _load_entry_points()
    try:
        engine = _ENGINES[name]
    except KeyError:
        raise UnsupportedError(f"unknown engine {quote(name)}; known: "
                               f"{', '.join(names())}") from None
    if check:
        engine.check()
    return engine
