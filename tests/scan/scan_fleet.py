"""Small generated models and hostile files for the scan tests.

Models are built with ``onnx`` (a test oracle): ``y = x + w0 + w1 + ...``, float32 initializers
of a given shape drawn from a seeded generator, so two models with the same seed share their
tensors byte for byte.
"""

from __future__ import annotations

import os

import numpy as np

import onemodel


def chain_bytes(n: int = 3, shape=(8, 8), seed: int = 0, *, shared_seed: int | None = None,
                producer: str = "onemodel-tests", opset: int = 17) -> bytes:
    """The ONNX file of ``y = x + w0 + ... + w(n-1)``; with ``shared_seed``, ``w0`` is drawn
    from that seed (a tensor shared with the models of that seed) and the rest from ``seed``."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(shape, dtype=np.float32) for _ in range(n)]
    if shared_seed is not None:
        arrays[0] = np.random.default_rng(shared_seed).standard_normal(shape, dtype=np.float32)
    nodes, prev = [], "x"
    for i in range(n):
        nodes.append(helper.make_node("Add", [prev, f"w{i}"], [f"y{i}"]))
        prev = f"y{i}"
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, list(shape))],
        [numpy_helper.from_array(a, f"w{i}") for i, a in enumerate(arrays)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name=producer)
    model.ir_version = 8
    return model.SerializeToString()


def write(path, data: bytes) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def make_fleet(root) -> dict:
    """A directory of models under ``root``: ``{name: (relative path, what it is)}``.

    ``good/m{i}.onnx`` (i < 6, seeds 0..5, ``m5`` sharing ``w0`` with ``m0``),
    ``good/copy_of_m1.onnx`` (byte-identical to ``m1``), ``good/m1.onemodel`` (``m1``
    converted: content-identical), ``good/sub/m2.onnx.zst`` (``m2`` compressed), and files
    that are not models (``good/notes.txt``, ``good/w.data``)."""
    root = str(root)
    for i in range(6):
        write(os.path.join(root, "good", f"m{i}.onnx"),
              chain_bytes(seed=i, shared_seed=0 if i == 5 else None,
                          producer="exporter-b" if i % 2 else "exporter-a"))
    m1 = os.path.join(root, "good", "m1.onnx")
    with open(m1, "rb") as f:
        write(os.path.join(root, "good", "copy_of_m1.onnx"), f.read())
    onemodel.convert(m1, os.path.join(root, "good", "m1.onemodel"))
    os.makedirs(os.path.join(root, "good", "sub"))
    onemodel.convert(os.path.join(root, "good", "m2.onnx"),
                     os.path.join(root, "good", "sub", "m2.onnx.zst"))
    write(os.path.join(root, "good", "notes.txt"), b"not a model\n")
    write(os.path.join(root, "good", "w.data"), b"\0" * 64)
    return root


def make_hostile(root) -> dict:
    """Hostile files under ``root/hostile``: ``{path: the error kind its row must carry}``."""
    import onnx
    from onnx import TensorProto, helper

    base = os.path.join(str(root), "hostile")
    good = chain_bytes(seed=7)
    kinds = {}
    kinds[write(os.path.join(base, "truncated.onnx"), good[:len(good) // 2])] = "Malformed"
    kinds[write(os.path.join(base, "empty.onnx"), b"")] = "Malformed"
    rng = np.random.default_rng(1)
    kinds[write(os.path.join(base, "random.onnx"),
                b"\xff" + rng.integers(0, 256, 4000, dtype=np.uint8).tobytes())] = "Malformed"
    container = onemodel.to_bytes(onemodel.load(good), format="onemodel")
    # the manifest's first octets replaced: JSON that does not parse
    bad = bytearray(container)
    bad[64:72] = b"\x00garbage"
    kinds[write(os.path.join(base, "bad_manifest.onemodel"), bytes(bad))] = "Malformed"
    kinds[write(os.path.join(base, "truncated.onemodel"), container[:100])] = "Malformed"
    # an external reference that escapes the model's directory, and one to a missing file
    for name, location, kind in (("outside.onnx", "../../../etc/passwd", "InvalidModel"),
                                 ("missing_data.onnx", "nowhere.bin", "Io")):
        t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4])
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", location), ("offset", "0"), ("length", "16")):
            e = t.external_data.add()
            e.key, e.value = k, v
        graph = helper.make_graph(
            [helper.make_node("Add", ["x", "w"], ["y"])], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [t])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        kinds[write(os.path.join(base, name), m.SerializeToString())] = kind
    fifo = os.path.join(base, "fifo.onnx")
    os.mkfifo(fifo)
    kinds[fifo] = "Io"
    # hostile OneModel headers and manifests
    import struct

    manifest_length = struct.unpack_from("<Q", container, 24)[0]
    manifest = container[64:64 + manifest_length]

    def with_manifest(text: bytes) -> bytes:
        assert len(text) <= manifest_length
        return container[:64] + text.ljust(manifest_length, b" ") + \
            container[64 + manifest_length:]

    def patched(fmt, offset, value) -> bytes:
        b = bytearray(container)
        struct.pack_into(fmt, b, offset, value)
        return bytes(b)

    for name, data, kind in (
            ("version2.onemodel", patched("<I", 8, 2), "Unsupported"),
            ("flags.onemodel", patched("<I", 12, 1), "Unsupported"),
            ("manifest_length.onemodel", patched("<Q", 24, 2 ** 40), "Malformed"),
            ("nested.onemodel", with_manifest(b"[" * 400 + b"]" * 400), "Malformed"),
            ("no_format.onemodel", with_manifest(b'{"x":1}'), "Malformed"),
            # w2's bytes moved past the end of the data region
            ("past_data.onemodel", with_manifest(manifest.replace(
                b'"offset":512', b'"offset":992')), "Malformed"),
            # w2's length no longer that of its dims and type
            ("wrong_length.onemodel", with_manifest(manifest.replace(
                b'"offset":512,"length":256', b'"offset":512,"length":128')),
             "InvalidModel")):
        kinds[write(os.path.join(base, name), data)] = kind
    # ONNX tensors whose dims do not fit their bytes
    for name, dims in (("huge_dims.onnx", [2 ** 40]), ("negative_dims.onnx", [-4])):
        t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=dims, raw_data=b"\0" * 16)
        graph = helper.make_graph(
            [helper.make_node("Add", ["x", "w"], ["y"])], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [t])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        kinds[write(os.path.join(base, name), m.SerializeToString())] = "InvalidModel"
    # compressed files that are not zstd, or not a model once decompressed
    import zstandard

    kinds[write(os.path.join(base, "not_zstd.onnx.zst"), b"not zstd" * 20)] = "Malformed"
    kinds[write(os.path.join(base, "text.onnx.zst"), zstandard.ZstdCompressor().compress(
        b"plain text, no model\n" * 50))] = "Unsupported"
    # a link to itself and a link to nothing
    for name, target in (("loop.onnx", "loop.onnx"), ("dangling.onnx", "nowhere.onnx")):
        os.symlink(target, os.path.join(base, name))
        kinds[os.path.join(base, name)] = "Io"
    assert onnx  # (the oracle builds these files)
    return kinds
