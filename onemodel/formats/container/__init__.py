"""The OneModel container, format version 1 (docs/onemodel-format-v1.md).

A fixed 64-byte header (:mod:`.header`), a JSON manifest (:mod:`.manifest`, :mod:`.schema`)
and a data region of 64-byte aligned tensor bytes. :mod:`.reader` and :mod:`.writer` implement
sections 1 to 4; the reading rules of section 3 are :mod:`onemodel.ir.graph_rules`;
:mod:`.extension` the ONNX-preservation extension that lets any model the ONNX reader produces
round-trip bit-exactly (docs/format-extension.md).

* ``PLUGIN``: the format plugin (``name`` ``onemodel``, suffix ``.onemodel``, magic ``ONEMODEL``):
  ``read`` is :func:`.reader.read`, ``write`` is :func:`.writer.write`.
* :func:`read_bytes` / :func:`write_bytes` (:mod:`.reader` / :mod:`.writer`): bytes <-> Model, for
  tests and small models.
* :data:`V1_UNHELD` / :func:`v1_unheld` (:mod:`.plain`): the record fields a plain version 1 file
  (``strict_v1``, no extension) cannot hold; ``write(..., strict_v1=True)`` reports them, and
  :func:`onemodel.verify.compare_models` with ``loose=True`` ignores them.
"""

from __future__ import annotations

from .. import Plugin
from .header import MAGIC
from .plain import V1_UNHELD, v1_unheld
from .reader import read, read_bytes
from .writer import write, write_bytes


def _sniff(head: bytes) -> bool:
    return bytes(head[:len(MAGIC)]) == MAGIC


PLUGIN = Plugin("onemodel", (".onemodel",), _sniff, read, write)

__all__ = ["PLUGIN", "read", "write", "read_bytes", "write_bytes", "MAGIC", "V1_UNHELD",
           "v1_unheld"]
