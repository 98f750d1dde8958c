"""Reading the stored schema table, data/schemas.json.gz (written by tools/gen_schemas.py).

The file is gzip of one JSON header line and a body (data/contrib.json.gz, onnxruntime's contrib
operators, has ``"onnxruntime_version"`` instead of ``"onnx_version"``). The header is
``{"format": 1, "onnx_version": "1.23.2", "type_lists": [[type string, ...], ...], "index":
{domain: {op_type: [offset, length]}}}``; at ``offset`` after the header line, the body holds
the operator's definitions, one JSON list of entries by ``since`` ascending::

    {"since": 13, "deprecated": true (only when it is),
     "inputs": [[name, type_str, "single"|"optional"|"variadic", is_homogeneous, min_arity]...],
     "outputs": [...the same...],
     "attributes": [[name, type, required(, default)]...],      # default only when there is one
     "constraints": [[param, index into type_lists]...],
     "counts": [min_input, max_input, min_output, max_output],
     "functions": [[opset, base64 of a FunctionProto], ...]}   # only when it has a body

``functions`` are the function bodies the definition provides (ONNX Part 2, an operator defined
as a function), each written for one operator set version (ascending); the context-dependent
bodies onnx builds from a node are not stored.

The header is read on first use (a few ms); an operator's entries are parsed and turned into
:class:`~onemodel.schemas.types.Schema` records when it is first asked for.
"""

from __future__ import annotations

import json
import os
import zlib

from .types import AttributeSpec, Formal, Schema, frozen_mapping

PATH = os.path.join(os.path.dirname(__file__), "data", "schemas.json.gz")
#: onnxruntime's contrib operators, in the same format (tools/gen_schemas.py)
CONTRIB_PATH = os.path.join(os.path.dirname(__file__), "data", "contrib.json.gz")
FORMAT = 1


class Table:
    """The schema table of one file: header parsed, operators decoded on demand.

    Raises ``ValueError`` when the file is not a table of format :data:`FORMAT` (a package
    built with another generator), ``OSError`` when it cannot be read.
    """

    def __init__(self, path: str = PATH):
        with open(path, "rb") as f:
            raw = zlib.decompress(f.read(), 31)   # wbits 31: the gzip container
        end = raw.index(b"\n")
        header = json.loads(raw[:end])
        if header.get("format") != FORMAT:
            raise ValueError(f"{path}: schema table format {header.get('format')!r}, "
                             f"expected {FORMAT}")
        #: the version of the package the table was generated from: onnx's for the ONNX table,
        #: onnxruntime's (``onnxruntime_version``) for the contrib one
        self.onnx_version: str | None = header.get("onnx_version")
        self.onnxruntime_version: str | None = header.get("onnxruntime_version")
        self._types = [tuple(t) for t in header["type_lists"]]
        self._index: dict[str, dict[str, list]] = header["index"]
        self._body = memoryview(raw)[end + 1:]
        self._decoded: dict[tuple[str, str], tuple[Schema, ...]] = {}
        self._bodies: dict[tuple[str, str, int], tuple] = {}

    def domains(self) -> tuple[str, ...]:
        return tuple(self._index)

    def operators(self, domain: str) -> tuple[str, ...]:
        return tuple(self._index.get(domain, ()))

    def schemas(self, domain: str, op_type: str) -> tuple[Schema, ...]:
        """Every definition of the operator, by ``since_version`` ascending; ``()`` if none."""
        key = (domain, op_type)
        found = self._decoded.get(key)
        if found is None:
            where = self._index.get(domain, {}).get(op_type)
            if where is None:
                return ()
            off, n = where
            entries = json.loads(bytes(self._body[off:off + n]))
            found = self._decoded[key] = tuple(self._schema(domain, op_type, e) for e in entries)
        return found

    def function_bodies(self, domain: str, op_type: str, since: int) -> tuple:
        """The function bodies of the definition of the operator introduced at ``since``:
        ``((opset, FunctionProto bytes), ...)`` by opset ascending; ``()`` when it has none."""
        self.schemas(domain, op_type)
        return self._bodies.get((domain, op_type, since), ())

    def _schema(self, domain: str, op_type: str, e: dict) -> Schema:
        if "functions" in e:
            import base64
            self._bodies[(domain, op_type, e["since"])] = tuple(
                (v, base64.b64decode(b)) for v, b in e["functions"])
        attrs = {}
        for a in e["attributes"]:
            attrs[a[0]] = AttributeSpec(a[0], a[1], a[2], len(a) > 3, a[3] if len(a) > 3 else None)
        return Schema(
            name=op_type, domain=domain, since_version=e["since"],
            deprecated=e.get("deprecated", False),
            inputs=tuple(Formal(*p) for p in e["inputs"]),
            outputs=tuple(Formal(*p) for p in e["outputs"]),
            attributes=frozen_mapping(attrs),
            constraints=frozen_mapping({c[0]: self._types[c[1]] for c in e["constraints"]}),
            min_input=e["counts"][0], max_input=e["counts"][1],
            min_output=e["counts"][2], max_output=e["counts"][3])
