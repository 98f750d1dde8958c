"""Every model of testdata/ checks clean (ONNX and its OneModel conversion); every hostile
OneModel file of testdata/format/hostile is refused as its name says (Malformed: unreadable;
InvalidModel and Unsupported: an error finding, or Unsupported raised when decoding stops); and
docs/check.md is the registry's rendering."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import onemodel
from onemodel.validation.codes import CODES

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("make_check", ROOT / "docs" / "make_check.py")
make_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_check)
render = make_check.render
MODELS = sorted((ROOT / "testdata" / "models").rglob("*.onnx"))
HOSTILE = sorted((ROOT / "testdata" / "format" / "hostile").glob("*.onemodel"))


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.name)
def test_testdata_models_check_clean(path, tmp_path):
    r = onemodel.check(str(path))
    assert r.ok and r.findings == [], r.findings
    om = tmp_path / (path.stem + ".onemodel")
    onemodel.convert(str(path), str(om))
    r = onemodel.check(str(om))
    assert r.ok and r.findings == [], r.findings


@pytest.mark.parametrize("path", HOSTILE, ids=lambda p: p.name)
def test_hostile_onemodel_files(path):
    kind = path.name.split("-", 1)[0]
    if kind == "Malformed":
        with pytest.raises(onemodel.MalformedError):
            onemodel.check(str(path))
        return
    try:
        r = onemodel.check(str(path))
    except onemodel.UnsupportedError:
        assert kind == "Unsupported"
        return
    assert not r.ok and r.errors[0].path.startswith(("manifest", "header")), r.findings


def test_docs_check_md_is_up_to_date():
    assert (ROOT / "docs" / "check.md").read_text() == render(), \
        "run: python docs/make_check.py > docs/check.md"
    for c in CODES.values():
        assert c.severity in ("error", "warning", "info") and c.clause and c.example
