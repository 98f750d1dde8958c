"""``onemodel info`` states the alignment an external data file has and what it allows (the
line of ``_print_data_file``, from
:func:`onemodel.formats.onnx.external_report.describe_alignment`)."""

from __future__ import annotations

import pathlib

import pytest
from typer.testing import CliRunner

from onemodel.cli import app

DYNAMO = pathlib.Path(__file__).resolve().parents[3] / "testdata" / "models" / "external" / \
    "mlp_dynamo.onnx"


def _cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.mark.parametrize("align,words", [
    ("64", "offsets aligned to 1 KiB (64-byte aligned in a whole-file map: yes; mapping a "
           "tensor by itself needs 4096)"),
    ("4096", "offsets aligned to 4 KiB (each tensor can be mapped by itself; Windows maps at "
             "64 KiB)")])
def test_info_of_a_file_written_with_align(tmp_path, align, words):
    # the dynamo export's tensors are 64 KiB, 1 KiB, 256 KiB, 1 KiB, 10 KiB: with --align 64
    # they lie back to back, every offset a multiple of 1024 (and the file says so, not
    # "NOT aligned"); with --align 4096 every offset is a page
    out = tmp_path / "m.onnx"
    r = _cli("convert", DYNAMO, out, "--external-data", "d.bin", "--align", align)
    assert r.exit_code == 0, r.output
    r = _cli("info", out)
    assert r.exit_code == 0, r.output
    (line,) = [x for x in r.output.splitlines() if x.startswith("data file d.bin:")]
    assert line.endswith(words)
    assert "NOT aligned" not in r.output
