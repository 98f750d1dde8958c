"""No string of a model reaches the terminal raw (issue 23, item 6): an op_type, domain, name,
dim_param or producer holding escape codes, carriage returns, newlines or rich markup is
printed escaped (``\\x1b``, ``\\r``, ``\\n``: :func:`onemodel.errors.printable`) by ``check``
(text, --json, --sarif), ``infer``, ``info``, ``info --shapes`` and ``run``, so a model can
neither erase a line nor print a line of its own; the JSON documents carry no raw control
character either."""

from __future__ import annotations

import json

import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onemodel.cli import app
from onemodel.errors import printable, quote

runner = CliRunner()

#: ESC sequences (erase line, clear screen, set the window title with BEL), CR, LF and rich
#: markup; the second one is not ASCII, so that ``info`` draws its tables with rich
OPS = ["Re\x1b[2K\rlu\n[bold]FAKE[/bold]", "Ré\x1b[2K\rlu\n[bold]FAKE[/bold]"]
DOMAIN = "ev\x1b]0;t\x07il\r\n[red]x"
RAW = ("\x1b", "\r", "\x07")


def _model(path, op: str, custom: bool) -> str:
    """A Relu then (``custom``) a node of ``op`` in :data:`DOMAIN`; names, a dim_param and the
    producer hold escape codes too."""
    nodes = [helper.make_node("Relu", ["x\x1b[31m"], ["h\r\nFAKE"], name="n\x1b[1m")]
    opsets = [helper.make_opsetid("", 17)]
    out = "h\r\nFAKE"
    if custom:
        nodes.append(helper.make_node(op, ["h\r\nFAKE"], ["y"], domain=DOMAIN))
        opsets.append(helper.make_opsetid(DOMAIN, 1))
        out = "y"
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x\x1b[31m", TensorProto.FLOAT, [1, "d\x1b[5m"])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=opsets, producer_name="p\x1b[2J")
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def _cli(*args):
    r = runner.invoke(app, [str(a) for a in args])
    return r, r.stdout + r.stderr


def _assert_escaped(text: str, *strings: str) -> None:
    """No raw control character in ``text``; each of ``strings`` appears escaped, whole on
    one line (its injected text never starts a line of its own)."""
    for c in RAW:
        assert c not in text, (c, text)
    for s in strings:
        assert printable(s) in text, (printable(s), text)
    for line in text.split("\n"):
        assert not line.lstrip().startswith(("[bold]FAKE", "FAKE", "lu\\n", "[red]x")), text


@pytest.mark.parametrize("op", OPS)
def test_check_infer_info_escape_every_model_string(tmp_path, op):
    path = _model(tmp_path / "m.onnx", op, custom=True)
    for args in (("check",), ("check", "--full")):
        r, text = _cli(*args, path)
        assert r.exit_code == 0, text
        _assert_escaped(text, op, DOMAIN)
        assert f"operator {quote(op)} of domain {quote(DOMAIN)} has no schema" in text
    for flag in ("--json", "--sarif"):
        r, text = _cli("check", "--full", path, flag)
        assert r.exit_code == 0, text
        _assert_escaped(text)
        doc = json.loads(r.stdout)
        messages = [f["message"] for f in doc["findings"]] if flag == "--json" else \
            [x["message"]["text"] for x in doc["runs"][0]["results"]]
        assert any(f"operator {quote(op)} of domain {quote(DOMAIN)}" in m for m in messages)
        assert any(f"({printable(DOMAIN)} {printable(op)}-1)" in m for m in messages)
        assert not any(c in m for m in messages for c in RAW + ("\n",))
    for args in (("info",), ("info", "--shapes")):
        r, text = _cli(*args, path)
        assert r.exit_code == 0, text
        _assert_escaped(text, f"{DOMAIN}.{op}", "x\x1b[31m", "d\x1b[5m", "p\x1b[2J")
        assert f"opsets: ai.onnx 17, {printable(DOMAIN)} 1" in text
        assert "[bold]FAKE[/bold]" in text  # rich markup shown, not applied
    r, text = _cli("info", "--shapes", path)
    assert "h\\r\\nFAKE" in text
    assert f"no inference rule (outputs typed by the constraints only): {printable(DOMAIN)} " \
        f"{printable(op)}-1" in text
    r, text = _cli("info", "--json", path)  # the data as it is, JSON-escaped
    _assert_escaped(text)
    assert json.loads(r.stdout)["ops"][f"{DOMAIN}.{op}"] == 1
    r, text = _cli("infer", path, tmp_path / "o.onnx")
    assert r.exit_code == 0, text
    _assert_escaped(text, f"{DOMAIN} {op}-1")
    r, text = _cli("infer", path, tmp_path / "o.onnx", "--json")
    _assert_escaped(text)
    assert json.loads(r.stdout)["no_rule"] == [f"{printable(DOMAIN)} {printable(op)}-1"]


@pytest.mark.parametrize("op", OPS)
def test_run_escapes_the_operator_and_the_output_names(tmp_path, op):
    r, text = _cli("run", _model(tmp_path / "m.onnx", op, custom=True), "--random")
    assert r.exit_code == 2, text
    _assert_escaped(text, f"({DOMAIN}, {op}, 1)")
    assert text.startswith("Unsupported: 1 operator(s) cannot be evaluated")
    r, text = _cli("run", _model(tmp_path / "r.onnx", op, custom=False), "--random",
                   "--output-dir", tmp_path / "out")
    assert r.exit_code == 0, text
    _assert_escaped(text, "h\r\nFAKE", "x\x1b[31m", "d\x1b[5m")
    assert "h\\r\\nFAKE: shape [1, 1] dtype float32 sha256:" in text
    assert "saved h\\r\\nFAKE -> " in text


def test_printable_escapes_what_is_not_printable_and_nothing_else():
    assert printable("plain name/with:chars [x]") == "plain name/with:chars [x]"
    assert printable("é\u00a0") == "é\\xa0"
    assert printable("a\x1b[2Kb\r\n\t\u202e\x07") == "a\\x1b[2Kb\\r\\n\\t\\u202e\\x07"
    # error lines and warnings are made printable whatever their message quoted
    from onemodel.errors import InvalidModelError, OneModelWarning, UsageError
    assert str(InvalidModelError("bad\x1b[2K\nline", path="graph.node[0]")) == \
        "InvalidModel: bad\\x1b[2K\\nline [graph.node[0]]"
    assert str(UsageError("x\ry")) == "x\\ry"
    assert str(OneModelWarning("x\ny")) == "x\\ny"
