"""The header entry an ONNX reference selects in a safetensors data file must be the tensor's:
its key is the tensor's name (or the name ``__metadata__["onemodel.names"]`` records for the
key). Swapped shard files, a header that labels a range with another tensor's name, or a renamed
key are refused with one error naming the tensor, the file and the header entry; ``check
--full`` reports it and ``info`` no longer says every reference is consistent (issue 23, item
3: the swapped shards used to load each tensor with the other's values)."""

from __future__ import annotations

import json
import struct

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from typer.testing import CliRunner

import onemodel
from onemodel.cli import app
from onemodel.errors import InvalidModelError

runner = CliRunner()


def _two_tensors(tmp_path, max_shard_size=None):
    """y = a + b, a = 0..255 and b = 1000..1255 (float32 [16, 16] each, 1 KiB), written with
    layout safetensors (``w.safetensors``; in two shards with ``max_shard_size``)."""
    a = numpy_helper.from_array(np.arange(256, dtype=np.float32).reshape(16, 16), "a")
    b = numpy_helper.from_array(np.arange(1000, 1256, dtype=np.float32).reshape(16, 16), "b")
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", T.FLOAT, [16, 16])], [a, b])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]),
              str(tmp_path / "m.onnx"))
    out = tmp_path / "o" / "m.onnx"
    out.parent.mkdir()
    onemodel.convert(str(tmp_path / "m.onnx"), str(out), external_data="w.safetensors",
                     threshold=0, max_shard_size=max_shard_size)
    return out


def _header(path):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return data, n, json.loads(data[8:8 + n])


def _rewrite_header(path, change):
    """Rewrite the header of safetensors file ``path`` with ``change(doc)`` applied, padded
    with spaces to its old length (so every data offset stays where it was)."""
    data, n, doc = _header(path)
    change(doc)
    text = json.dumps(doc, separators=(",", ":")).encode()
    assert len(text) <= n
    path.write_bytes(data[:8] + text + b" " * (n - len(text)) + data[8 + n:])


def _refused(model_path, tensor, location, key):
    with pytest.raises(InvalidModelError) as e:
        onemodel.load(str(model_path))
    msg = str(e.value)
    assert f"tensor '{tensor}', external data location '{location}'" in msg
    assert f'header entry there is safetensors["{key}"]' in msg
    assert f"not tensor '{tensor}'" in msg
    report = onemodel.check(str(model_path), full=True)
    assert not report.ok
    assert any(f.severity == "error" and f'safetensors["{key}"]' in f.message
               and f"tensor '{tensor}'" in f.message for f in report.findings)
    r = runner.invoke(app, ["info", str(model_path)])
    assert "every referenced tensor consistent" not in r.output
    return msg


def test_swapped_shards_are_refused(tmp_path):
    out = _two_tensors(tmp_path, max_shard_size=1024)
    d = out.parent
    s1, s2 = d / "w-00001-of-00002.safetensors", d / "w-00002-of-00002.safetensors"
    with onemodel.load(str(out)) as m:  # as written: each tensor its own values
        got = {t.name: t.numpy().copy() for t in m.graph.initializers}
    assert got["a"][0, 1] == 1 and got["b"][0, 1] == 1001
    one, two = s1.read_bytes(), s2.read_bytes()
    assert len(one) == len(two)  # same layout: only the names tell them apart
    s1.write_bytes(two)
    s2.write_bytes(one)
    _refused(out, "a", "w-00001-of-00002.safetensors", "b")
    r = runner.invoke(app, ["check", "--full", str(out)])
    assert r.exit_code == 1 and 'safetensors["b"]' in r.output, r.output


def test_a_header_labelling_a_range_with_another_tensors_name(tmp_path):
    out = _two_tensors(tmp_path)
    st = out.parent / "w.safetensors"

    def swap(doc):
        doc["a"]["data_offsets"], doc["b"]["data_offsets"] = \
            doc["b"]["data_offsets"], doc["a"]["data_offsets"]
    _rewrite_header(st, swap)
    # the header is a valid safetensors header: safetensors itself reads it (with swapped values)
    from safetensors.numpy import load_file
    assert load_file(str(st))["a"][0, 1] == 1001
    _refused(out, "a", "w.safetensors", "b")


def test_a_renamed_key_is_refused(tmp_path):
    out = _two_tensors(tmp_path)
    st = out.parent / "w.safetensors"

    def rename(doc):
        doc["z"] = doc.pop("a")
        types = json.loads(doc["__metadata__"]["onemodel.types"])
        types["z"] = types.pop("a")
        doc["__metadata__"]["onemodel.types"] = json.dumps(types)
    _rewrite_header(st, rename)
    _refused(out, "a", "w.safetensors", "z")


def test_a_recorded_name_for_a_renamed_key_is_the_tensors(tmp_path):
    """Three initializers named ``w`` (main graph, then and else branches) are stored under
    ``w``, ``w.2`` and ``w.3``; ``onemodel.names`` records ``w.2`` and ``w.3`` -> ``w``, so
    every reference holds."""
    w = numpy_helper.from_array(np.arange(256, dtype=np.float32), "w")
    w2 = numpy_helper.from_array(np.arange(256, 512, dtype=np.float32), "w")
    branch = helper.make_graph([helper.make_node("Identity", ["w"], ["o"])], "b", [],
                               [helper.make_tensor_value_info("o", T.FLOAT, [256])], [w2])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=branch,
                                            else_branch=branch)], "g",
                          [helper.make_tensor_value_info("c", T.BOOL, [])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [256])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]),
              str(tmp_path / "m.onnx"))
    onemodel.convert(str(tmp_path / "m.onnx"), str(tmp_path / "o.onnx"),
                     external_data="w.safetensors", threshold=0)
    _, _, doc = _header(tmp_path / "w.safetensors")
    assert json.loads(doc["__metadata__"]["onemodel.names"]) == {"w.2": "w", "w.3": "w"}
    with onemodel.load(str(tmp_path / "o.onnx")) as m:
        assert m.graph.initializers[0].numpy()[1] == 1
    r = runner.invoke(app, ["info", str(tmp_path / "o.onnx")])
    assert "every referenced tensor consistent with its entry" in r.output, r.output
