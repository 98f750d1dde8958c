"""The C passes over node lists (``onemodel/ir/_cpass.c``), when they are built: the graph
rules' one pass (:mod:`onemodel.ir.graph_rules`), the operator checks' binding of nodes to
definitions (:mod:`onemodel.validation.operators`), the value_info entries
:func:`onemodel.inference.annotate` adds, and the deep copy of records
(:meth:`onemodel.ir.record.Record.copy`). Each is specified by the Python code it
replaces, which runs instead when the extension was not built (no C compiler at install) or
``ONEMODEL_PURE_PYTHON=1`` is set (read at each call)."""

from __future__ import annotations

import os

_C = False  # not looked up yet


def passes():
    """The ``_cpass`` module, set up for :class:`onemodel.ir.Node` and
    :class:`onemodel.ir.ValueInfo`, or None."""
    global _C
    if _C is False:
        try:
            from . import _cpass
            from .model import Node, ValueInfo

            _cpass.setup(Node, ValueInfo)
            _C = _cpass
        except (ImportError, TypeError):
            _C = None
    return _C if _C is not None and os.environ.get("ONEMODEL_PURE_PYTHON") != "1" else None


def copy_record(record):
    """``record.copy()`` (deep) in C, or None when the C passes are not in use or a record in
    it is of a class the copy has no plan for (the caller copies in Python then). The plans
    (each record class's slots and how a copy treats them) are made from the classes known at
    the first copy, and again when a newer class appears."""
    c = passes()
    if c is None:
        return None
    global _PLANNED
    from .record import _CLASSES

    if _PLANNED != len(_CLASSES):
        c.setup_copy(_plans(_CLASSES.values()))
        _PLANNED = len(_CLASSES)
    try:
        return c.copy(record)
    except (LookupError, TypeError):
        return None


_PLANNED = -1  # how many record classes the copy plans were made from


def _plans(classes) -> list:
    """``(cls, ((slot, how), ...))`` for each record class whose every slot is a field, an
    extra or ``unknown`` (how: 0 shared, 1 a record, 2 a list of records, 3 a list)."""
    from .record import LIST_KINDS, LIST_MSG, MSG

    out = []
    for cls in classes:
        slots = [s for k in reversed(cls.__mro__) for s in k.__dict__.get("__slots__", ())]
        if len(set(slots)) != len(slots) or "__dict__" in slots or "__weakref__" in slots or \
                cls.__basicsize__ != object.__basicsize__ + len(slots) * _POINTER:
            continue  # (not copied in C)
        how = {MSG: 1, LIST_MSG: 2}
        out.append((cls, tuple((s, how.get(cls.KIND.get(s), 3 if cls.KIND.get(s) in LIST_KINDS
                                          else 0)) for s in slots)))
    return out


_POINTER = 8 if (1 << 32) < __import__("sys").maxsize else 4


__all__ = ["passes", "copy_record"]
