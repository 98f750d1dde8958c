"""`onemodel view MODEL -o page.html`: written, any readable source, one-line errors."""

from __future__ import annotations

import json
import re

import zstandard
from typer.testing import CliRunner
from view_models import MODELS

import onemodel
import onemodel.cli as cli
from onemodel.cli.view import default_output

MODEL = MODELS / "detector_legacy.onnx"
with onemodel.load(MODEL) as _m:  # its nodes, one input, one output
    NODES = len(_m.graph.nodes) + len(_m.graph.inputs) + len(_m.graph.outputs)


def _data(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="model-data">(.*?)</script>', page, re.S)
    return json.loads(m.group(1))


def test_view_writes_the_page(tmp_path):
    out = tmp_path / "d.html"
    r = CliRunner().invoke(cli.app, ["view", str(MODEL), "-o", str(out)])
    assert r.exit_code == 0, r.output
    page = out.read_text("utf-8")
    assert "<title>main_graph (detector_legacy.onnx) - onemodel view</title>" in page
    assert len(_data(page)["nodes"]) == NODES


def test_view_of_a_zst_model_and_to_stdout(tmp_path):
    zst = tmp_path / "m.onnx.zst"
    zst.write_bytes(zstandard.ZstdCompressor().compress(MODEL.read_bytes()))
    r = CliRunner().invoke(cli.app, ["view", str(zst), "-o", "-"])
    assert r.exit_code == 0, r.stderr
    assert len(_data(r.stdout)["nodes"]) == NODES


def test_view_of_a_url(http_server, tmp_path):
    http_server.files["m.onnx"] = MODEL.read_bytes()
    out = tmp_path / "u.html"
    r = CliRunner().invoke(cli.app, ["view", http_server.url("m.onnx"), "-o", str(out)])
    assert r.exit_code == 0, r.stderr
    assert len(_data(out.read_text("utf-8"))["nodes"]) == NODES


def test_unreadable_models_give_infos_one_line(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x0f\xff\xff garbage")
    for model in (bad, tmp_path / "missing.onnx"):
        view = CliRunner().invoke(cli.app, ["view", str(model), "-o", str(tmp_path / "o.html")])
        info = CliRunner().invoke(cli.app, ["info", str(model)])
        assert view.exit_code == info.exit_code == 2
        assert view.stderr == info.stderr and len(view.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o.html").exists()


def test_every_unreadable_model_gives_infos_one_line(tmp_path):
    """Each kind of unreadable input, as MODEL, as B of a diff, and for --format svg: the line
    `info` prints for it, exit 2, no page written."""
    good = MODEL.read_bytes()
    cases = {"empty.onnx": b"", "truncated.onnx": good[:len(good) // 2],
             "bad.onnx.zst": b"(\xb5/\xfd not a zstd frame",
             "dangling.onnx": good + b"\x0a\xff\xff\xff\xff\x0f"}  # a field past the end
    out = tmp_path / "o.html"
    for name, data in cases.items():
        bad = tmp_path / name
        bad.write_bytes(data)
        info = CliRunner().invoke(cli.app, ["info", str(bad)])
        assert info.exit_code == 2 and len(info.stderr.strip().splitlines()) == 1, name
        for args in ([bad], [MODEL, bad], [bad, MODEL], [bad, "--format", "svg"]):
            view = CliRunner().invoke(cli.app, ["view", *map(str, args), "-o", str(out)])
            assert (view.exit_code, view.stderr) == (2, info.stderr), (name, args)
            assert not out.exists()


def test_the_page_never_replaces_the_model(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(MODEL.read_bytes())
    r = CliRunner().invoke(cli.app, ["view", str(model), "-o", str(model)])
    assert r.exit_code == 2 and model.read_bytes() == MODEL.read_bytes()


def test_default_output_name():
    assert default_output("s3://b/dir/m.onnx.zst") == "m.html"
    assert default_output("https://h/x/model.onemodel?sig=1") == "model.html"
    assert default_output("/a/b/net") == "net.html"


def test_statistics_of_a_remote_model_take_few_requests(http_server, tmp_path):
    """300 initializers of 4 KiB (1.2 MB past the 64 KiB kept head): their statistics come
    from few range requests (one fetch_many, coalesced), and are right."""
    import numpy as np
    from onnx import helper
    from view_models import save, tensor, vi

    arrays = [np.full(1024, k, np.float32) for k in range(300)]
    nodes = [helper.make_node("Identity", [f"w{k}"], [f"o{k}"]) for k in range(300)]
    path = save(tmp_path / "many.onnx", nodes, [], [vi(f"o{k}") for k in range(300)],
                [tensor(f"w{k}", a) for k, a in enumerate(arrays)])
    http_server.files["many.onnx"] = path.read_bytes()
    r = CliRunner().invoke(cli.app, ["view", http_server.url("many.onnx"), "-o", "-"])
    assert r.exit_code == 0, r.stderr
    inits = {i["n"]: i["st"] for i in _data(r.stdout)["inits"]}
    assert inits["w7"]["mean"] == 7.0 and inits["w299"]["max"] == 299.0
    assert http_server.requests < 30, http_server.requests


def test_view_of_a_onemodel_file_and_refusal_of_a_weights_file(tmp_path):
    import numpy as np
    from safetensors.numpy import save_file

    om = tmp_path / "d.onemodel"
    onemodel.convert(str(MODEL), str(om))
    r = CliRunner().invoke(cli.app, ["view", str(om), "-o", "-"])
    assert r.exit_code == 0, r.stderr
    assert len(_data(r.stdout)["nodes"]) == NODES
    w = tmp_path / "w.safetensors"
    save_file({"a": np.zeros(3, np.float32)}, str(w))
    r = CliRunner().invoke(cli.app, ["view", str(w), "-o", str(tmp_path / "w.html")])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert r.stderr.startswith("Unsupported: a safetensors weights file")
