"""Make the hostile OneModel files of testdata/format/hostile/ (OneModel format sections 1.1, 2, 3).

Each file breaks exactly one rule of the format and is named ``<Kind>-<case>.onemodel``, Kind
being the error a reader must raise (Malformed, InvalidModel, Unsupported). ``expected.json``
beside the files maps each file name to that kind and to the path the error must name (a header
field such as ``header.data_offset`` or a manifest path such as ``manifest.graph.nodes[0]``).

The files are assembled from the specification's text with ``struct`` and ``json`` only, from a
small valid model (``x + w -> y``). Run: ``python testdata/format/make_hostile.py [out_dir]``.
The output is deterministic.
"""

from __future__ import annotations

import copy
import json
import os
import struct
import sys

HEADER = struct.Struct("<8sII6Q")
U63 = (1 << 63) - 1


def align(n: int) -> int:
    return -(-n // 64) * 64


def assemble(manifest, data: bytes = b"", *, text: bytes | None = None, **override) -> bytes:
    """Header + manifest + zero padding + data region, with header fields overridden."""
    body = text if text is not None else json.dumps(manifest, separators=(",", ":")).encode()
    data_offset = align(64 + len(body))
    f = dict(magic=b"ONEMODEL", version=1, flags=0, manifest_offset=64,
             manifest_length=len(body), data_offset=data_offset, data_length=len(data),
             file_length=data_offset + len(data), reserved=0)
    f.update(override)
    head = HEADER.pack(f["magic"], f["version"], f["flags"], f["manifest_offset"],
                       f["manifest_length"], f["data_offset"], f["data_length"], f["file_length"],
                       f["reserved"])
    return head + body + bytes(data_offset - 64 - len(body)) + data


def tensor_type(elem=1, shape=(3,)):
    return {"kind": "tensor", "elem": elem, "shape": list(shape)}


def base() -> dict:
    """The valid model: y = x + w, w a float32 [3] initializer at data offset 0."""
    return {
        "format": "onemodel", "version": 1, "ir_version": 10,
        "opsets": [{"domain": "", "version": 21}],
        "graph": {
            "name": "g",
            "inputs": [{"name": "x", "type": tensor_type()}],
            "outputs": [{"name": "y", "type": tensor_type()}],
            "value_info": [],
            "initializers": [{"name": "w", "dtype": 1, "dims": [3],
                              "data": {"offset": 0, "length": 12}}],
            "sparse_initializers": [],
            "nodes": [{"name": "add", "op": "Add", "domain": "", "overload": "",
                       "inputs": ["x", "w"], "outputs": ["y"], "attributes": []}],
        },
    }


DATA = struct.pack("<3f", 1.0, 2.0, 3.0)
CASES: list[tuple[str, str, bytes]] = []  # (file name, path, bytes)


def case(kind: str, name: str, path: str, data: bytes) -> None:
    CASES.append((f"{kind}-{name}.onemodel", path, data))


def variant(edit, data: bytes = DATA) -> bytes:
    """The base model with ``edit(manifest)`` applied."""
    m = copy.deepcopy(base())
    edit(m)
    return assemble(m, data)


def g(m):
    return m["graph"]


def node(m):
    return m["graph"]["nodes"][0]


def init(m):
    return m["graph"]["initializers"][0]


def set_attr(attr):
    def edit(m):
        node(m)["attributes"] = [attr]
    return edit


GOOD = assemble(base(), DATA)
ATTR = "manifest.graph.nodes[0].attributes[0]"
INIT = "manifest.graph.initializers[0]"


def build() -> None:
    """Register every case."""
    # -- section 1.1: the header ------------------------------------------------------------
    case("Malformed", "bad-magic", "header.magic", b"ONEMODEX" + GOOD[8:])
    case("Malformed", "onnx-bytes", "header.magic", b"\x08\x07\x12\x04test" + bytes(60))
    case("Malformed", "empty", "header", b"")
    case("Malformed", "truncated-header", "header", GOOD[:40])
    case("Malformed", "truncated-file", "header.file_length", GOOD[:-5])
    case("Malformed", "extended-file", "header.file_length", GOOD + b"\0" * 7)
    case("Unsupported", "version-2", "header.version", assemble(base(), DATA, version=2))
    case("Unsupported", "version-0", "header.version", assemble(base(), DATA, version=0))
    case("Unsupported", "flags", "header.flags", assemble(base(), DATA, flags=1))
    case("Malformed", "reserved", "header.reserved", assemble(base(), DATA, reserved=1))
    case("Malformed", "u64-above-2-63", "header.manifest_length",
         assemble(base(), DATA, manifest_length=U63 + 1))
    case("Malformed", "file-length-u64-max", "header.file_length",
         assemble(base(), DATA, file_length=(1 << 64) - 1))
    case("Malformed", "manifest-offset", "header.manifest_offset",
         assemble(base(), DATA, manifest_offset=128))
    case("Malformed", "manifest-longer-than-file", "header.manifest_length",
         assemble(base(), DATA, manifest_length=len(GOOD)))
    text = json.dumps(base(), separators=(",", ":")).encode()
    off = align(64 + len(text))
    case("Malformed", "data-offset-unaligned", "header.data_offset",
         assemble(base(), DATA, data_offset=off + 4, data_length=len(DATA) - 4))
    case("Malformed", "data-offset-in-manifest", "header.data_offset",
         assemble(base(), DATA, data_offset=64, data_length=len(GOOD) - 64))
    case("Malformed", "data-offset-past-end", "header.data_offset",
         assemble(base(), DATA, data_offset=align(len(GOOD)) + 64, data_length=0))
    case("Malformed", "data-length", "header.data_length",
         assemble(base(), DATA, data_length=len(DATA) + 1))

    # -- section 1.2: the manifest text -----------------------------------------------------
    case("Malformed", "manifest-bom", "manifest", assemble(None, DATA, text=b"\xef\xbb\xbf" + text))
    case("Malformed", "manifest-invalid-utf8", "manifest",
         assemble(None, DATA, text=text.replace(b'"g"', b'"\xff"')))
    case("Malformed", "manifest-invalid-json", "manifest", assemble(None, DATA, text=text[:-2]))
    case("Malformed", "manifest-not-object", "manifest", assemble(None, DATA, text=b"[1,2]"))
    case("Malformed", "manifest-nan", "manifest",
         assemble(None, DATA, text=text.replace(b'"ir_version":10', b'"ir_version":NaN')))
    case("Malformed", "manifest-infinity", "manifest",
         assemble(None, DATA, text=text.replace(b'"ir_version":10', b'"ir_version":-Infinity')))
    case("Malformed", "manifest-duplicate-key", "manifest",
         assemble(None, DATA, text=text.replace(b'"ir_version":10', b'"ir_version":10,'
                                                b'"ir_version":11')))
    deep = b"[" * 1025 + b"]" * 1025
    case("Unsupported", "json-depth-1025", "manifest",
         assemble(None, DATA, text=text[:-1] + b',"deep":' + deep + b"}"))
    case("Malformed", "huge-integer", "manifest",
         assemble(None, DATA, text=text.replace(b'"ir_version":10', b'"ir_version":1' +
                                                b"0" * 5000)))

    # -- section 2: the schema ---------------------------------------------------------------
    def put(key, value):
        def edit(m):
            m[key] = value
        return edit

    def drop(key):
        def edit(m):
            del m[key]
        return edit

    case("Malformed", "format-not-onemodel", "manifest.format", variant(put("format", "onnx")))
    case("Malformed", "format-missing", "manifest", variant(drop("format")))
    case("Malformed", "version-mismatch", "manifest.version", variant(put("version", 2)))
    case("Unsupported", "ir-version-2", "manifest.ir_version", variant(put("ir_version", 2)))
    case("Malformed", "ir-version-float", "manifest.ir_version",
         assemble(None, DATA, text=text.replace(b'"ir_version":10', b'"ir_version":10.0')))
    case("Malformed", "ir-version-exponent", "manifest.ir_version",
         assemble(None, DATA, text=text.replace(b'"ir_version":10', b'"ir_version":1e1')))
    case("Malformed", "ir-version-boolean", "manifest.ir_version", variant(put("ir_version", True)))
    case("Malformed", "model-version-above-int64", "manifest.model_version",
         variant(put("model_version", 1 << 63)))
    case("Malformed", "graph-missing", "manifest", variant(drop("graph")))
    case("Malformed", "graph-wrong-type", "manifest.graph", variant(put("graph", "g")))
    case("Malformed", "inputs-wrong-type", "manifest.graph.inputs",
         variant(lambda m: g(m).update(inputs={"x": 1})))
    case("Malformed", "opset-version-missing", "manifest.opsets[0]",
         variant(lambda m: m["opsets"][0].pop("version")))
    case("Malformed", "node-op-missing", "manifest.graph.nodes[0]",
         variant(lambda m: node(m).pop("op")))
    case("Malformed", "node-input-not-string", "manifest.graph.nodes[0].inputs[1]",
         variant(lambda m: node(m).update(inputs=["x", 7])))
    case("Malformed", "typed-name-missing-name", "manifest.graph.inputs[0]",
         variant(lambda m: g(m)["inputs"][0].pop("name")))
    case("Unsupported", "unknown-dtype", f"{INIT}.dtype",
         variant(lambda m: init(m).update(dtype=99)))
    case("Unsupported", "dtype-undefined", f"{INIT}.dtype",
         variant(lambda m: init(m).update(dtype=0)))
    case("Malformed", "dims-missing", INIT, variant(lambda m: init(m).pop("dims")))
    case("Malformed", "data-missing", INIT, variant(lambda m: init(m).pop("data")))
    case("Malformed", "dims-float", f"{INIT}.dims[0]",
         assemble(None, DATA, text=text.replace(b'"dims":[3]', b'"dims":[3.0]')))
    case("Unsupported", "unknown-attribute-type", f"{ATTR}.type",
         variant(set_attr({"name": "a", "type": 15, "value": 1})))
    case("InvalidModel", "attribute-type-0", f"{ATTR}.type",
         variant(set_attr({"name": "a", "type": 0, "value": 1})))
    case("Malformed", "attribute-value-missing", ATTR, variant(set_attr({"name": "a", "type": 2})))
    case("Malformed", "attribute-type-missing", ATTR, variant(set_attr({"name": "a", "value": 2})))
    case("Malformed", "attribute-float-as-decimal", f"{ATTR}.value",
         assemble(None, DATA, text=text.replace(
             b'"attributes":[]', b'"attributes":[{"name":"a","type":1,"value":1.5}]')))
    case("Malformed", "attribute-float-bits-above-u32", f"{ATTR}.value",
         variant(set_attr({"name": "a", "type": 1, "value": 1 << 32})))
    case("Malformed", "attribute-floats-negative-bits", f"{ATTR}.value[1]",
         variant(set_attr({"name": "a", "type": 6, "value": [0, -1]})))
    case("Malformed", "attribute-bad-base64", f"{ATTR}.value",
         variant(set_attr({"name": "a", "type": 3, "value": "abc"})))
    case("Malformed", "attribute-base64-not-canonical", f"{ATTR}.value",
         variant(set_attr({"name": "a", "type": 3, "value": "QR=="})))
    case("Malformed", "attribute-base64-urlsafe", f"{ATTR}.value[0]",
         variant(set_attr({"name": "a", "type": 8, "value": ["-_8="]})))
    case("Malformed", "attribute-graph-not-object", f"{ATTR}.value",
         variant(set_attr({"name": "a", "type": 5, "value": []})))
    case("Unsupported", "unknown-type-kind", "manifest.graph.inputs[0].type.kind",
         variant(lambda m: g(m)["inputs"][0].update(type={"kind": "matrix"})))
    case("Malformed", "type-kind-missing", "manifest.graph.inputs[0].type",
         variant(lambda m: g(m)["inputs"][0].update(type={"elem": 1})))
    case("InvalidModel", "type-negative-dim", "manifest.graph.inputs[0].type.shape[0]",
         variant(lambda m: g(m)["inputs"][0].update(type=tensor_type(shape=(-3,)))))
    case("Malformed", "type-dim-wrong-type", "manifest.graph.inputs[0].type.shape[0]",
         variant(lambda m: g(m)["inputs"][0].update(type=tensor_type(shape=([3],)))))

    # -- sections 2.5 and 3.1: tensor ranges and sizes -----------------------------------------
    case("Malformed", "range-past-data-region", f"{INIT}.data",
         variant(lambda m: init(m).update(data={"offset": 64, "length": 12})))
    case("Malformed", "range-negative-offset", f"{INIT}.data",
         variant(lambda m: init(m).update(data={"offset": -64, "length": 12})))
    case("Malformed", "range-offset-above-int64", f"{INIT}.data.offset",
         variant(lambda m: init(m).update(data={"offset": 1 << 64, "length": 12})))
    case("Malformed", "offset-not-aligned", f"{INIT}.data.offset",
         variant(lambda m: init(m).update(data={"offset": 4, "length": 12}), DATA + bytes(16)))
    case("InvalidModel", "length-mismatch", f"{INIT}.data.length",
         variant(lambda m: init(m).update(data={"offset": 0, "length": 8})))
    case("InvalidModel", "negative-dim", f"{INIT}.dims[1]",
         variant(lambda m: init(m).update(dims=[3, -1])))
    case("Unsupported", "element-count-2-60", f"{INIT}.dims",
         variant(lambda m: init(m).update(dtype=2, dims=[1 << 30, 1 << 30],
                                          data={"offset": 0, "length": 1 << 60})))
    case("Unsupported", "tensor-over-2-31-bytes", f"{INIT}.dims",
         variant(lambda m: init(m).update(dtype=2, dims=[1 << 31],
                                          data={"offset": 0, "length": 1 << 31})))
    case("InvalidModel", "string-count-mismatch", f"{INIT}.strings",
         variant(lambda m: init(m).update(dtype=8, dims=[1 << 40], strings=["YQ=="]) or
                 init(m).pop("data")))

    # -- section 3.1: nesting ------------------------------------------------------------------
    def nest_graphs(m):
        inner = {"nodes": []}
        for _ in range(64):
            inner = {"nodes": [{"name": "", "op": "If", "inputs": [], "outputs": [],
                                "attributes": [{"name": "then_branch", "type": 5,
                                                "value": inner}]}]}
        g(m)["nodes"].append(inner["nodes"][0])

    gpath = "manifest.graph.nodes[1]" + ".attributes[0].value.nodes[0]" * 64
    gpath = gpath[:-len(".nodes[0]")]
    case("Unsupported", "graph-nesting-65", gpath, variant(nest_graphs))

    def nest_types(m):
        t = tensor_type()
        for _ in range(63):
            t = {"kind": "sequence", "inner": t}
        g(m)["value_info"] = [{"name": "s", "type": t}]

    case("Unsupported", "type-nesting-65", "manifest.graph.value_info[0].type" + ".inner" * 63,
         variant(nest_types))

    # -- section 3: reading rules --------------------------------------------------------------
    case("InvalidModel", "duplicate-initializer", "manifest.graph.initializers[1].name",
         variant(lambda m: g(m)["initializers"].append(copy.deepcopy(init(m)))))
    case("InvalidModel", "duplicate-input", "manifest.graph.inputs[1].name",
         variant(lambda m: g(m)["inputs"].append(copy.deepcopy(g(m)["inputs"][0]))))
    case("InvalidModel", "output-redefines-input", "manifest.graph.nodes[0].outputs[0]",
         variant(lambda m: node(m).update(outputs=["x"]) or
                 g(m)["outputs"][0].update(name="x")))
    case("InvalidModel", "sparse-redefines-initializer",
         "manifest.graph.sparse_initializers[0].values.name",
         variant(lambda m: g(m)["sparse_initializers"].append({
             "values": {"name": "w", "dtype": 1, "dims": [0], "data": {"offset": 0, "length": 0}},
             "indices": {"dtype": 7, "dims": [0], "data": {"offset": 0, "length": 0}},
             "dims": [3]})))
    case("InvalidModel", "undefined-input", "manifest.graph.nodes[0].inputs[1]",
         variant(lambda m: node(m).update(inputs=["x", "nowhere"])))
    case("InvalidModel", "undefined-graph-output", "manifest.graph.outputs[0]",
         variant(lambda m: g(m)["outputs"][0].update(name="nowhere")))
    case("InvalidModel", "subgraph-undefined-name",
         "manifest.graph.nodes[1].attributes[0].value.nodes[0].inputs[0]",
         variant(lambda m: g(m)["nodes"].append(
             {"op": "If", "inputs": ["x"], "outputs": ["z"], "attributes": [
                 {"name": "then_branch", "type": 5, "value": {"outputs": [{"name": "q"}], "nodes": [
                     {"op": "Identity", "inputs": ["zz"], "outputs": ["q"]}]}}]})))
    def cycle(m):
        g(m)["nodes"] = [{"op": "Relu", "inputs": ["b"], "outputs": ["a"]},
                         {"op": "Relu", "inputs": ["a"], "outputs": ["b"]},
                         {"op": "Add", "inputs": ["x", "w"], "outputs": ["y"]}]

    case("InvalidModel", "cycle", "manifest.graph.nodes[0]", variant(cycle))
    case("InvalidModel", "undeclared-domain", "manifest.graph.nodes[0].domain",
         variant(lambda m: node(m).update(domain="com.example")))

    # -- the ONNX-preservation extension ----------------------------------------------------
    case("Malformed", "extension-not-object", "manifest.graph.nodes[0].onnx",
         variant(lambda m: node(m).update(onnx="x")))
    case("Malformed", "extension-node-order", "manifest.graph.onnx.node_order",
         variant(lambda m: g(m).update(onnx={"node_order": [0, 0]})))
    case("Malformed", "extension-typed-field", f"{INIT}.onnx.typed",
         variant(lambda m: init(m).update(onnx={"typed": "int64_data"})))
    case("Malformed", "extension-unknown-base64", "manifest.graph.onnx.unknown",
         variant(lambda m: g(m).update(onnx={"unknown": "%%"})))
    case("Malformed", "extension-array-length", f"{INIT}.onnx.float_data",
         variant(lambda m: init(m).update(onnx={"float_data": "AAA="})))
    case("InvalidModel", "extension-raw-data-length", f"{INIT}.onnx.raw_data",
         variant(lambda m: init(m).update(onnx={"raw_data": "AAA="})))


def main(out_dir: str | None = None) -> list[str]:
    """Write every case and ``expected.json`` to ``out_dir``; return the file names."""
    out_dir = out_dir or os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile")
    CASES.clear()
    build()
    os.makedirs(out_dir, exist_ok=True)
    expected = {}
    for fname, path, data in CASES:
        kind = fname.split("-", 1)[0]
        assert fname not in expected, fname
        expected[fname] = {"kind": kind, "path": path}
        with open(os.path.join(out_dir, fname), "wb") as f:
            f.write(data)
    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
    return sorted(expected)


if __name__ == "__main__":
    names = main(sys.argv[1] if len(sys.argv) > 1 else None)
    print(f"{len(names)} hostile files")
