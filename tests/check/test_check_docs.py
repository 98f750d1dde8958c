"""docs/check.md's synopsis lists every option `onemodel check -h` shows; the byte offsets of a
`.zst` model are offsets in its decompressed bytes, as check.md says and the SARIF run's
properties state."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import zstandard
from check_models import model
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onemodel.cli import app
from onemodel.validation.output import is_compressed

_spec = importlib.util.spec_from_file_location(
    "make_check", Path(__file__).resolve().parents[2] / "docs" / "make_check.py")
make_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_check)
render, synopsis = make_check.render, make_check.synopsis

runner = CliRunner()


def test_synopsis_lists_every_option_of_the_help():
    r = runner.invoke(app, ["check", "-h"], env={"COLUMNS": "200"})
    assert r.exit_code == 0
    shown = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[A-Za-z])\b", r.stdout))
    assert {"--json", "--allow-external-outside", "--storage-option", "-S", "-h"} <= shown
    syn = synopsis()
    words = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[A-Za-z])\b", syn))
    assert words == shown, (words ^ shown)
    assert syn.startswith("onemodel check FILE|URL [--json] ")
    assert "[-S|--storage-option KEY=VALUE]..." in syn and "[-h|--help]" in syn
    assert all(len(line) <= 100 for line in syn.splitlines())
    assert f"```\n{syn}\n```" in render()


def _bad_tensor_model():
    """A model with a 5000-character doc_string (written before the graph, compressing to a
    few bytes) and one initializer whose raw_data is 4 bytes short: its OM201 offset lies past
    the end of the compressed file."""
    bad = helper.make_tensor("w", TensorProto.FLOAT, [4], [0.0] * 4)
    bad.raw_data = b"\0" * 12  # 4 floats need 16 bytes
    del bad.float_data[:]
    m = model(initializers=[bad], doc_string="a" * 5000)
    return m.SerializeToString(), bad.SerializeToString()


def test_zst_offsets_are_in_the_decompressed_bytes(tmp_path):
    data, tensor = _bad_tensor_model()
    # the field holding the TensorProto: its key (1 byte) and its length (1 byte) come first
    want = data.find(tensor) - 2
    plain = tmp_path / "m.onnx"
    plain.write_bytes(data)
    packed = tmp_path / "m.onnx.zst"
    packed.write_bytes(zstandard.ZstdCompressor().compress(data))
    assert want > packed.stat().st_size  # not an offset the .zst file has
    for path, compressed in ((plain, False), (packed, True)):
        r = runner.invoke(app, ["check", str(path), "--sarif"])
        assert r.exit_code == 1, r.stdout
        run = json.loads(r.stdout)["runs"][0]
        result, = run["results"]
        assert result["ruleId"] == "OM201"
        assert result["locations"][0]["physicalLocation"]["region"]["byteOffset"] == want
        if compressed:
            assert run["properties"]["byteOffsets"] == "decompressed"
            assert "decompressed" in run["properties"]["byteOffsetsNote"]
        else:
            assert "properties" not in run
        r = runner.invoke(app, ["check", str(path), "--json"])
        assert json.loads(r.stdout)["findings"][0]["offset"] == want
    assert "they count in the decompressed bytes" in render()


def test_is_compressed_follows_the_suffix_as_open_source_does():
    assert is_compressed("m.onnx.zst") and is_compressed("/d/M.ONNX.ZST")
    assert is_compressed("https://h/m.onnx.zst?X-Amz-Signature=s")
    assert not is_compressed("https://h/m.onnx?name=x.zst")  # the query is not the name
    assert not is_compressed("m.onnx") and not is_compressed(None)
