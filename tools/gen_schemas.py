"""Regenerate onemodel/schemas/data/schemas.json.gz from the installed ``onnx`` package, and
onemodel/schemas/data/contrib.json.gz from the installed ``onnxruntime``.

Run by developers when the pinned onnx or onnxruntime version changes (never at install or run
time; both stay dev dependencies and onemodel never imports them)::

    .venv/bin/python tools/gen_schemas.py            # writes both tables
    .venv/bin/python tools/gen_schemas.py --check    # exit 1 when a stored content differs

The contrib table holds the operators onnxruntime registers in domains onnx does not define
(``com.microsoft``, ``com.microsoft.nchwc``, ``com.ms.internal.nhwc``) and those it adds to the
default domain (``SimplifiedLayerNormalization``, the experimental ``Affine``, ``Crop``, ...), in
the same layout, with ``"onnxruntime_version"`` in its header instead of ``"onnx_version"``.

The table holds every operator schema (ONNX Part 2) of every domain onnx defines (``""`` i.e.
ai.onnx, ai.onnx.ml, ai.onnx.preview.training, ai.onnx.preview) at every ``since_version``: formal
inputs and outputs, attributes with their defaults decoded to plain values, type constraints,
deprecation and the input/output count limits. Its layout is described in
onemodel/schemas/table.py, which reads it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import struct
import sys
import zlib
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "onemodel" / "schemas" / "data"
OUT = DATA / "schemas.json.gz"
CONTRIB_OUT = DATA / "contrib.json.gz"
FORMAT = 1

_OPTION = {"Single": "single", "Optional": "optional", "Variadic": "variadic"}


def _formal(p) -> list:
    if hasattr(p, "typeStr"):   # onnxruntime's binding: no min_arity (1, as onnx's default)
        return [p.name, p.typeStr, _OPTION[p.option.name], bool(p.isHomogeneous), 1]
    return [p.name, p.type_str, _OPTION[p.option.name], bool(p.is_homogeneous), int(p.min_arity)]


def _default(attr):
    """The default of a schema attribute as a plain value (JSON-able), or a marker of none.

    FLOAT -> the float32 value stored in the AttributeProto as a Python float (exact), INT ->
    int, STRING -> str (UTF-8), FLOATS/INTS/STRINGS -> lists of those. Any other kind raises:
    onnx 1.23 has none, and a new kind needs a decision about how to store it.
    """
    import onnx

    if hasattr(attr, "_default_value"):  # onnxruntime's binding: a serialized AttributeProto
        dv = onnx.AttributeProto()
        dv.ParseFromString(attr._default_value)
    else:
        dv = attr.default_value
    if dv.type == onnx.AttributeProto.UNDEFINED and not dv.name:
        return _NONE
    kind = dv.type
    if kind == onnx.AttributeProto.FLOAT:
        return float(dv.f)
    if kind == onnx.AttributeProto.INT:
        return int(dv.i)
    if kind == onnx.AttributeProto.STRING:
        return dv.s.decode("utf-8")
    if kind == onnx.AttributeProto.FLOATS:
        return [float(v) for v in dv.floats]
    if kind == onnx.AttributeProto.INTS:
        return [int(v) for v in dv.ints]
    if kind == onnx.AttributeProto.STRINGS:
        return [v.decode("utf-8") for v in dv.strings]
    raise SystemExit(f"gen_schemas: attribute {attr.name} has a default of kind "
                     f"{onnx.AttributeProto.AttributeType.Name(kind)}, which the table cannot "
                     "store yet (extend _default and onemodel/schemas/table.py)")


_NONE = object()


def _attribute(a) -> list:
    entry = [a.name, a.type.name, bool(a.required)]
    default = _default(a)
    if default is not _NONE:
        entry.append(default)
    return entry


def schema_entry(s) -> dict:
    """One schema as the table stores it (see onemodel/schemas/table.py)."""
    entry = {
        "since": int(s.since_version),
        "inputs": [_formal(p) for p in s.inputs],
        "outputs": [_formal(p) for p in s.outputs],
        "attributes": [_attribute(a) for _, a in sorted(s.attributes.items())],
        "constraints": [[c.type_param_str, sorted(c.allowed_type_strs)]
                        for c in s.type_constraints],
        "counts": [int(s.min_input), int(s.max_input), int(s.min_output), int(s.max_output)],
    }
    if s.deprecated:
        entry["deprecated"] = True
    bodies = _function_bodies(s)
    if bodies:
        entry["functions"] = bodies
    return entry


def _function_bodies(s) -> list:
    """The function bodies the definition provides (ONNX Part 2: an operator "defined as a
    function"), one ``[opset, base64 of the FunctionProto]`` per operator set version it is
    written for, ascending; the doc_string cleared (the schema's documentation says it).
    Context-dependent bodies (built from a node's attributes and input types) are not stored.
    Empty for onnxruntime's binding, which does not expose them."""
    import base64

    import onnx

    if not getattr(s, "has_function", False):
        return []
    out = []
    for v in sorted(s.function_opset_versions):
        f = onnx.FunctionProto.FromString(s.get_function_with_opset_version(v))
        f.doc_string = ""
        out.append([int(v), base64.b64encode(f.SerializeToString(deterministic=True))
                    .decode("ascii")])
    return out


def build(contrib: bool = False) -> dict:
    """The whole table from the installed onnx: {"format", "onnx_version", "type_lists",
    "domains": {domain: {op_type: [schema entry, ... by since ascending]}}}; a constraint names
    its allowed types by an index into "type_lists". With ``contrib``, onnxruntime's operators
    of the domains onnx does not define, and "onnxruntime_version"."""
    import onnx
    import onnx.defs

    domains: dict[str, dict[str, list]] = {}
    if contrib:
        import onnxruntime
        from onnxruntime.capi import onnxruntime_pybind11_state as ort

        known = {(s.domain or "", s.name) for s in onnx.defs.get_all_schemas_with_history()}
        standard = {d for d, _ in known}
        # the contrib domains, and the operators onnxruntime adds to the default domain
        schemas = [s for s in ort.get_all_operator_schema()
                   if s.domain not in standard or (s.domain == "" and ("", s.name) not in known)]
        version = ("onnxruntime_version", onnxruntime.__version__)
    else:
        schemas = onnx.defs.get_all_schemas_with_history()
        version = ("onnx_version", onnx.__version__)
    for s in schemas:
        domains.setdefault(s.domain, {}).setdefault(s.name, []).append(schema_entry(s))
    type_lists: dict[tuple, int] = {}
    for _, ops in sorted(domains.items()):
        for _, entries in sorted(ops.items()):
            entries.sort(key=lambda e: e["since"])
            for e in entries:   # each distinct allowed-type list once (half the table's size)
                for c in e["constraints"]:
                    c[1] = type_lists.setdefault(tuple(c[1]), len(type_lists))
    return {"format": FORMAT, version[0]: version[1],
            "type_lists": [list(t) for t in type_lists],
            "domains": {d: dict(sorted(ops.items())) for d, ops in sorted(domains.items())}}


def content(table: dict) -> bytes:
    """The table as stored, before compression: one header line and a body.

    The header is a JSON object {"format", "onnx_version", "type_lists", "index": {domain:
    {op_type: [offset, length]}}}; the body is each operator's list of schema entries as compact
    JSON at its offset (bytes after the header line), so a reader parses only the operators it
    is asked about.
    """
    body, index = bytearray(), {}
    for domain, ops in table["domains"].items():
        for op_type, entries in ops.items():
            text = json.dumps(entries, separators=(",", ":"), ensure_ascii=False,
                              allow_nan=False).encode("utf-8")
            index.setdefault(domain, {})[op_type] = [len(body), len(text)]
            body += text
    header = {k: v for k, v in table.items() if k != "domains"}
    header["index"] = index
    head = json.dumps(header, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return head.encode("utf-8") + b"\n" + bytes(body)


#: The gzip member header (RFC 1952, section 2.3) of the stored file: deflate, no flags, mtime 0,
#: XFL 2 (maximum compression), OS 3 (Unix). Written here rather than by gzip.compress, whose
#: header depends on the interpreter (OS 3 on Python 3.11 and 3.12, 255 on 3.10 and 3.13)
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03"


def encode(table: dict) -> bytes:
    """The stored bytes: :func:`content` as one gzip member (level 9, the fixed
    :data:`GZIP_HEADER`). The deflate stream still depends on the zlib library, so the stored
    file is compared by its content (:func:`is_current`), not byte for byte."""
    data = content(table)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    stream = deflate.compress(data) + deflate.flush()
    return GZIP_HEADER + stream + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


def is_current(stored: Path, table: dict) -> bool:
    """Whether the file ``stored`` holds :func:`content` of ``table`` (decompressed: what any
    gzip writer made of it); False for a missing or unreadable file."""
    try:
        return gzip.decompress(stored.read_bytes()) == content(table)
    except (OSError, EOFError, zlib.error):  # absent, or not gzip (BadGzipFile is an OSError)
        return False


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the stored table only")
    args = ap.parse_args(argv)
    status = 0
    for out, contrib in ((OUT, False), (CONTRIB_OUT, True)):
        table = build(contrib)
        if args.check:
            same = is_current(out, table)
            print(f"{out}: {'up to date' if same else 'differs from the installed package'}")
            status |= not same
            continue
        data = encode(table)
        out.write_bytes(data)
        print(f"wrote {out} ({len(data)} bytes)")
    return status


if __name__ == "__main__":
    sys.exit(main())
