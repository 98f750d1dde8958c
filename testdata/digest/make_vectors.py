"""Write the content-digest test vectors of docs/content-digest.md: small models made with the
onnx helper (fixed values), and vectors.json with each file's model digest and tensor digests,
computed by onemodel.content_digest. Run from the repository root::

    .venv/bin/python testdata/digest/make_vectors.py          # writes the files
    .venv/bin/python testdata/digest/make_vectors.py --check  # exit 1 if anything differs

tests/digest/test_vectors.py checks the committed digests, and recomputes one of them with
onnx's own serializer and hashlib, as another implementation would.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import numpy as np
from onnx import TensorProto as T
from onnx import external_data_helper, helper, numpy_helper

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def tiny():
    w = numpy_helper.from_array(np.array([[1, 2], [3, 4]], np.float32), "w")
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "tiny",
                          [helper.make_tensor_value_info("x", T.FLOAT, ["N", 2])],
                          [helper.make_tensor_value_info("y", T.FLOAT, ["N", 2])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], producer_name="v")
    m.ir_version = 10
    return m


def types():
    inits = [
        helper.make_tensor("f16", T.FLOAT16, [3], np.array([1, -0.5, 65504], np.float16)
                           .view(np.uint16).tolist()),
        helper.make_tensor("bf16", T.BFLOAT16, [2], [0x3F80, 0xC000]),
        helper.make_tensor("i4", T.INT4, [3], [-8, 1, 7]),
        helper.make_tensor("u4", T.UINT4, [4], [0, 15, 3, 9]),
        helper.make_tensor("b", T.BOOL, [3], [True, False, True]),
        helper.make_tensor("s", T.STRING, [2], [b"onnx", b""]),
        helper.make_tensor("c64", T.COMPLEX64, [1], [complex(1.0, -2.0)]),
        helper.make_tensor("f8", T.FLOAT8E4M3FN, [2], [0x38, 0xB8], raw=False),
        helper.make_tensor("i64", T.INT64, [2, 0], []),
        numpy_helper.from_array(np.array([1.5, -0.25], np.float64), "f64"),
    ]
    g = helper.make_graph([], "types", [], [helper.make_tensor_value_info("f64", T.DOUBLE, [2])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m


def nested():
    c = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(
        np.array([7], np.int64), "cv"))
    then_g = helper.make_graph([helper.make_node("Identity", ["c"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", T.INT64, [1])])
    else_g = helper.make_graph(
        [helper.make_node("Constant", [], ["e"], value=numpy_helper.from_array(
            np.array([9], np.int64), "ev"))], "else", [],
        [helper.make_tensor_value_info("e", T.INT64, [1])])
    sp = helper.make_sparse_tensor(numpy_helper.from_array(np.array([5.0], np.float32), "sv"),
                                   numpy_helper.from_array(np.array([2], np.int64), "si"), [4])
    f = helper.make_function("local", "Twice", ["a"], ["b"],
                             [helper.make_node("Add", ["a", "a"], ["b"])],
                             [helper.make_opsetid("", 21)])
    g = helper.make_graph(
        [c, helper.make_node("If", ["cond"], ["r"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Twice", ["r"], ["y"], domain="local")], "nested",
        [helper.make_tensor_value_info("cond", T.BOOL, [])],
        [helper.make_tensor_value_info("y", T.INT64, [1])], sparse_initializer=[sp])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21),
                                            helper.make_opsetid("local", 1)], functions=[f])
    m.ir_version = 10
    m.metadata_props.add(key="author", value="vectors")
    return m


def write(directory: pathlib.Path) -> None:
    """Write the vector models into ``directory``."""
    (directory / "tiny.onnx").write_bytes(tiny().SerializeToString())
    (directory / "types.onnx").write_bytes(types().SerializeToString())
    (directory / "nested.onnx").write_bytes(nested().SerializeToString())
    ext = tiny()
    external_data_helper.convert_model_to_external_data(ext, location="tiny.data",
                                                        size_threshold=0)
    (directory / "external").mkdir(exist_ok=True)
    external_data_helper.write_external_data_tensors(ext, str(directory / "external"))
    (directory / "external" / "tiny.onnx").write_bytes(ext.SerializeToString())


FILES = ["tiny.onnx", "types.onnx", "nested.onnx", "external/tiny.onnx"]


def vectors(directory: pathlib.Path) -> dict:
    """File -> {digest, tensors: {path: [name, digest]}} for the vectors and testdata/models."""
    sys.path.insert(0, str(ROOT))
    from onemodel.content_digest import digest

    out = {}
    models = sorted(p.relative_to(ROOT / "testdata").as_posix()
                    for p in (ROOT / "testdata" / "models").rglob("*.onnx"))
    for rel in [f"digest/{f}" for f in FILES] + models:
        d = digest(str(ROOT / "testdata" / rel) if not rel.startswith("digest/")
                   else str(directory / rel[len("digest/"):]))
        out[rel] = {"digest": d.hex,
                    "tensors": {p: [n, h] for p, (n, h) in d.tensor_hex().items()}}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    if a.check:
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            tmp = pathlib.Path(d)
            write(tmp)
            same = all((tmp / f).read_bytes() == (HERE / f).read_bytes() for f in FILES)
        want = json.loads((HERE / "vectors.json").read_text())
        ok = same and vectors(HERE) == want
        print("up to date" if ok else "out of date")
        return 0 if ok else 1
    write(HERE)
    (HERE / "vectors.json").write_text(json.dumps(vectors(HERE), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
