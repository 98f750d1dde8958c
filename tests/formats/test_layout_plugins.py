"""Layouts of ONNX external data are plugins of a registry (onemodel.formats.layouts): a
third-party layout is registered and used by ``convert --layout NAME`` and the Python API, its
data files checked on read; a registry (layouts, formats) refuses to replace a name unless told
to (issue 25, items 6 and 7)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from typer.testing import CliRunner

import onemodel
from onemodel import formats
from onemodel.cli import app
from onemodel.errors import InvalidModelError, UnsupportedError
from onemodel.formats import layouts
from onemodel.formats.layouts import Layout, Piece, PlannedFile

MAGIC = b"REVERSED"


class _Checker:
    """What the layout says of a data file it recognises: which references it checked."""

    def __init__(self, size: int):
        self.size, self.checked = size, []

    def check(self, tensor, offset: int, length: int) -> None:
        if offset < len(MAGIC):
            raise InvalidModelError(f"tensor {tensor.name!r} points into the header")
        self.checked.append((tensor.name, offset, length))


class Reversed(Layout):
    """A test layout: one data file ``<model>.rev``, the magic, then the tensors in reverse
    order, each right after the one before (no alignment)."""

    name = "reversed"
    takes_external_data = True
    suffixes = (".rev",)
    default_align = 1

    def __init__(self):
        self.opened: list = []

    def default_location(self, model_name):
        return (model_name or "model.onnx") + ".rev"

    def plan(self, tensors, location, align, used_names, **options):
        df = PlannedFile(location, [Piece(0, len(MAGIC), data=MAGIC)])
        pos = len(MAGIC)
        for i in reversed(range(len(tensors))):
            df.pieces.append(Piece(pos, tensors[i].nbytes, tensor=i))
            pos += tensors[i].nbytes
        return [df]

    def open_data_file(self, source, location):
        if bytes(source.read(0, min(source.size, len(MAGIC)))) != MAGIC:
            return None
        checker = _Checker(source.size)
        self.opened.append(checker)
        return checker

    def describe(self, source):
        return {"magic": MAGIC.decode()} if bytes(source.read(0, len(MAGIC))) == MAGIC else None


@pytest.fixture
def registries():
    """The layout and format registries as they were, restored after the test."""
    layouts._load_builtins()
    formats._load_builtins()
    saved = dict(layouts._LAYOUTS), dict(formats._PLUGINS)
    yield
    layouts._LAYOUTS.clear()
    layouts._LAYOUTS.update(saved[0])
    formats._PLUGINS.clear()
    formats._PLUGINS.update(saved[1])


def _model(path):
    a = np.arange(300, dtype=np.float32).reshape(3, 100)
    b = np.arange(200, dtype=np.int64) * 7 - 3  # 1600 bytes, a 1200: both past 1024
    graph = helper.make_graph(
        [helper.make_node("Identity", ["a"], ["y"])], "g", [],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3, 100])],
        [numpy_helper.from_array(a, "a"), numpy_helper.from_array(b, "b")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return a, b


def _check_written(out, a, b, layout):
    data = (out.parent / "out.onnx.rev").read_bytes()
    assert data == MAGIC + b.tobytes() + a.tobytes()  # reversed: b first, right after the magic
    m = onnx.load(str(out), load_external_data=False)
    refs = {t.name: {e.key: e.value for e in t.external_data} for t in m.graph.initializer}
    assert refs == {"a": {"location": "out.onnx.rev", "offset": str(8 + 1600),
                          "length": "1200"},
                    "b": {"location": "out.onnx.rev", "offset": "8", "length": "1600"}}
    with onemodel.load(out) as back:
        got = {t.name: t.numpy() for t in back.graph.initializers}
    np.testing.assert_array_equal(got["a"], a)
    np.testing.assert_array_equal(got["b"], b)
    assert sorted(layout.opened[-1].checked) == [("a", 1608, 1200), ("b", 8, 1600)]


def test_a_registered_layout_is_used_by_convert_layout_name(tmp_path, registries):
    layout = Reversed()
    layouts.register(layout)
    src = tmp_path / "m.onnx"
    a, b = _model(src)
    out = tmp_path / "out.onnx"
    r = CliRunner().invoke(app, ["convert", str(src), str(out), "--layout", "reversed"])
    assert r.exit_code == 0, r.output
    _check_written(out, a, b, layout)
    r = CliRunner().invoke(app, ["info", "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert '"reversed": {\n        "magic": "REVERSED"\n      }' in r.output


def test_a_registered_layout_through_the_api_and_its_suffix(tmp_path, registries):
    layout = Reversed()
    layouts.register(layout)
    src = tmp_path / "m.onnx"
    a, b = _model(src)
    out = tmp_path / "out.onnx"
    onemodel.convert(src, out, layout="reversed")
    _check_written(out, a, b, layout)
    (tmp_path / "two").mkdir()
    out2 = tmp_path / "two" / "out.onnx"
    onemodel.convert(src, out2, external_data="out.onnx.rev")  # its suffix selects it
    _check_written(out2, a, b, layout)


def test_a_reference_the_layout_refuses_is_refused_on_read(tmp_path, registries):
    layout = Reversed()
    layouts.register(layout)
    src = tmp_path / "m.onnx"
    _model(src)
    out = tmp_path / "out.onnx"
    onemodel.convert(src, out, layout="reversed")
    m = onnx.load(str(out), load_external_data=False)
    for e in m.graph.initializer[1].external_data:
        if e.key == "offset":
            e.value = "0"  # b's 1600 bytes from the start: inside the file, into the magic
    onnx.save(m, str(out))
    with pytest.raises(InvalidModelError, match="points into the header"):
        onemodel.load(out)


def test_layout_options_belong_to_the_layout_that_declares_them(tmp_path, registries):
    layouts.register(Reversed())
    src = tmp_path / "m.onnx"
    _model(src)
    with pytest.raises(UnsupportedError, match="max_shard_size must be a positive integer "
                       r"\(bytes\) with layout 'safetensors', not 10 with layout 'reversed'"):
        onemodel.convert(src, tmp_path / "out.onnx", layout="reversed", max_shard_size=10)
    with pytest.raises(UnsupportedError, match="external_data names the data file of layout "
                       "'file', 'safetensors' or 'reversed' only, not of layout 'per_tensor'"):
        onemodel.convert(src, tmp_path / "out.onnx", layout="per_tensor", external_data="x")
    r = CliRunner().invoke(app, ["convert", str(src), str(tmp_path / "o.onnx"), "--layout",
                                 "bogus"])
    assert r.exit_code == 2
    assert "one of keep, inline, file, per_tensor, safetensors, reversed" in r.output


def test_the_layout_registry_refuses_a_name_taken_unless_told(registries):
    with pytest.raises(ValueError, match="a layout named 'safetensors' is already registered; "
                       "pass replace=True"):
        layouts.register(type("Other", (Layout,), {"name": "safetensors"})())
    mine = Reversed()
    layouts.register(mine)
    with pytest.raises(ValueError, match="'reversed' is already registered"):
        layouts.register(Reversed())
    assert layouts.by_name("reversed") is mine
    again = Reversed()
    layouts.register(again, replace=True)
    assert layouts.by_name("reversed") is again


def test_the_format_registry_refuses_a_name_taken_unless_told(registries):
    onnx_plugin = formats.by_name("onnx")
    fake = formats.Plugin("onnx", (".onnx",), lambda head: False, None, None)
    with pytest.raises(ValueError, match="a format named 'onnx' is already registered; pass "
                       "replace=True"):
        formats.register(fake)
    assert formats.by_name("onnx") is onnx_plugin
    toy = formats.Plugin("toy-layout-test", (".toy",), lambda head: False, None, None)
    formats.register(toy)
    with pytest.raises(ValueError, match="'toy-layout-test' is already registered"):
        formats.register(formats.Plugin("toy-layout-test", (), lambda head: False, None, None))
    assert formats.by_name("toy-layout-test") is toy
    formats.register(fake, replace=True)
    assert formats.by_name("onnx") is fake


def test_a_built_in_format_not_yet_loaded_is_not_replaced_silently(registries, monkeypatch):
    """The container plugin may not be imported yet: its name is still taken."""
    monkeypatch.setattr(formats, "_builtins_loaded", set())
    formats._PLUGINS.pop("onemodel", None)
    with pytest.raises(ValueError, match="'onemodel' is already registered"):
        formats.register(formats.Plugin("onemodel", (), lambda head: False, None, None))
