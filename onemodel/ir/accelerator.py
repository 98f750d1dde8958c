"""The C passes over node lists (``onemodel/ir/_cpass.c``), when they are built: the graph
rules' one pass (:mod:`onemodel.ir.graph_rules`), the operator checks' binding of nodes to
definitions (:mod:`onemodel.validation.operators`) and the value_info entries
:func:`onemodel.inference.annotate` adds. Each is specified by the Python code it replaces,
which runs instead when the extension was not built (no C compiler at install) or
``ONEMODEL_PURE_PYTHON=1`` is set (read at each call). (The deep copy of records in C,
:meth:`onemodel.ir.record.Record.copy`, is set up by the record module itself.)"""

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


__all__ = ["passes"]
