"""ONNX files (Part 1, Clause 12 and Annex B): reading into and writing from :mod:`onemodel.ir`.

No ``onnx`` or ``protobuf`` import happens at run time: the wire codec is :mod:`.wire_decode`
(with its C accelerator ``_cdecode``) and :mod:`.wire_encode`, driven by the message table of
:mod:`.schema`.

* ``PLUGIN``: the format plugin: ``read(source)`` is :func:`.reader.read`, ``write(model, sink)``
  is :func:`.writer.write`.
* :mod:`.reader`: decoding, the tensor checks (:mod:`.checks`) and the resolution of external
  data (Clause 13) under the Clause 15.3 checks of :mod:`.external`.
  :func:`decode_model` / :func:`decode_message`: bytes -> Model, or any Annex B message
  (TensorProto, SequenceProto, MapProto, OptionalProto ...), e.g. the .pb files of the
  conformance tests.
* :mod:`.writer`: encoding and the external data layouts (keep, inline, one file, one file per
  tensor). :func:`encode_model` / :func:`encode_message`: Model or any record -> bytes.
* :func:`external_data_report` (:mod:`.external_report`): per data file, the bytes referenced and
  unreferenced and whether every offset can be mapped.
"""

from __future__ import annotations

from ...errors import MalformedError
from .. import Plugin
from .external import resolve_external_data
from .external_report import external_data_report
from .reader import decode_message, decode_model, read
from .schema import BY_CLASS
from .writer import encode_message, encode_model, write


def _sniff(head: bytes) -> bool:
    # ONNX has no magic; an exporter's file starts with ir_version (field 1, varint: 0x08).
    return len(head) > 1 and head[0] == 0x08 and head[1] < 0x80


PLUGIN = Plugin("onnx", (".onnx",), _sniff, read, write)

__all__ = ["decode_model", "encode_model", "decode_message", "encode_message", "read", "write",
           "PLUGIN", "BY_CLASS", "MalformedError", "resolve_external_data",
           "external_data_report"]
