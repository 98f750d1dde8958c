"""`onemodel view --format svg`: a static picture, deterministic, escaped, `--depth` levels."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from onnx import helper
from typer.testing import CliRunner
from view_models import MODELS, save, vi

import onemodel
import onemodel.cli as cli
from onemodel.errors import UnsupportedError
from onemodel.view import render_svg
from onemodel.view import svg as svg_module
from onemodel.view.svg import _layers

pytest.importorskip("igraph", reason="igraph (the view extra) is not installed")
SVG = "{http://www.w3.org/2000/svg}"


def _chain(tmp_path, n=2000):
    nodes, prev = [], "x"
    for i in range(n):
        nodes.append(helper.make_node("Relu", [prev], [f"t{i}"], name=f"n{i}"))
        prev = f"t{i}"
    return save(tmp_path / "chain.onnx", nodes, [vi("x")], [vi(prev)])


def _counts(text: str) -> tuple[int, int]:
    root = ET.fromstring(text)
    return len(root.findall(f".//{SVG}rect")), len(root.findall(f".//{SVG}path"))


def test_depth_is_the_levels_shown(tmp_path):
    # 2,002 items (input, 2,000 Relu, output): 51 runs of at most 40, then 2 runs of them
    with onemodel.load(_chain(tmp_path)) as m:
        got = [_counts(render_svg(m, "chain", d)) for d in (1, 2, 3)]
    assert got == [(2, 1), (51, 50), (2002, 2001)]  # (items, edges): a chain


def test_the_picture_is_the_same_bytes_in_every_process(tmp_path):
    cmd = [sys.executable, "-m", "onemodel", "view", str(MODELS / "detector_legacy.onnx"),
           "--format", "svg", "-o", "-"]
    outs = [subprocess.run(cmd, capture_output=True, timeout=120, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout
            for seed in ("1", "2")]
    assert outs[0] == outs[1] and outs[0].startswith(b"<svg ")
    rects, paths = _counts(outs[0].decode())
    assert rects > 40 and paths > 40


def test_model_text_in_the_picture_is_text(tmp_path):
    evil = "<script>alert(1)</script>"
    path = save(tmp_path / "evil.onnx",
                [helper.make_node("Relu", ["x"], ["y"], name=evil)], [vi("x")], [vi("y")],
                name=evil)
    out = tmp_path / "evil.svg"
    r = CliRunner().invoke(cli.app, ["view", str(path), "-o", str(out)])  # (.svg: the format)
    assert r.exit_code == 0, r.stderr
    text = out.read_text("utf-8")
    assert "<script" not in text
    root = ET.fromstring(text)
    assert root.find(f"{SVG}title").text == f"{evil} (evil.onnx)"
    assert evil in [t.text for t in root.iter(f"{SVG}text")]


def test_a_consumer_pulls_its_constant_down():
    # 0 -> 1 -> 2 -> 3 and a constant 4 -> 3: the constant sits one layer above 3
    assert _layers(5, [(0, 1), (1, 2), (2, 3), (4, 3)]) == [0, 1, 2, 3, 2]


def test_refusals(tmp_path, monkeypatch):
    with onemodel.load(_chain(tmp_path, 100)) as m:
        monkeypatch.setattr(svg_module, "MAX_ITEMS", 50)
        with pytest.raises(UnsupportedError, match="more than 50: give a smaller depth"):
            render_svg(m, "chain", 3)
        monkeypatch.setitem(sys.modules, "igraph", None)
        with pytest.raises(UnsupportedError, match="pip install igraph"):
            render_svg(m, "chain", 1)
