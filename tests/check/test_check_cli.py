"""`onemodel check`: exit status 0/1/2, text grouped and counted, --json, --sarif, --full."""

from __future__ import annotations

import json

from check_models import model, save
from onnx import helper
from typer.testing import CliRunner

import onemodel
from onemodel.cli import app
from onemodel.validation.codes import CODES

runner = CliRunner()


def _two_defects(tmp_path):
    nodes = [helper.make_node("Add", ["x", "nope"], ["y"]), helper.make_node("Neg", ["x"], ["y"])]
    return save(tmp_path, model(nodes, outputs=("y", "gone")))


def test_exit_status_and_text(tmp_path):
    r = runner.invoke(app, ["check", save(tmp_path, model(), "ok.onnx")])
    assert r.exit_code == 0 and "ok: 0 error(s), 0 warning(s)" in r.stdout
    r = runner.invoke(app, ["check", _two_defects(tmp_path)])
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    assert lines[0].startswith("OM109 error (1): ")
    assert lines[2].startswith("OM112 error (2): ")
    assert "  graph.node[0].input[1]: input 'nope' of node 'Add' is not defined" in lines[3]
    assert "  graph.output[1]: name 'gone'" in lines[4]
    assert lines[-1].endswith("not valid: 3 error(s), 0 warning(s), 0 info")


def test_unreadable_is_exit_2_one_line(tmp_path):
    p = tmp_path / "bad.onnx"
    p.write_bytes(b"\x08\x07\x12\xff\xff")
    r = runner.invoke(app, ["check", str(p)])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith("Malformed: ") and len(r.stderr.strip().splitlines()) == 1


def test_json(tmp_path):
    r = runner.invoke(app, ["check", _two_defects(tmp_path), "--json"])
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["counts"] == {"error": 3, "warning": 0, "info": 0, "total": 3}
    assert doc["findings"][0] == {
        "code": "OM109", "severity": "error", "message": "name 'y' is defined twice in one graph",
        "path": "graph.node[1].output[0]", "offset": None,
        "clause": "ONNX Part 1, Clauses 5.4.2, 7.5, 10.2"}


def test_sarif_and_full(tmp_path):
    p = _two_defects(tmp_path)
    r = runner.invoke(app, ["check", p, "--sarif", "--full", "--ignore", "OM109"])
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["version"] == "2.1.0"
    run, = doc["runs"]
    assert [x["id"] for x in run["tool"]["driver"]["rules"]] == ["OM112"]
    res = run["results"]
    assert [(x["ruleId"], x["level"]) for x in res] == [("OM112", "error"), ("OM112", "error")]
    assert run["tool"]["driver"]["name"] == "onemodel"
    assert res[0]["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] == \
        "graph.node[0].input[1]"
    r = runner.invoke(app, ["check", save(tmp_path, model(), "ok.onnx"), "--full"])
    assert r.exit_code == 0 and "ok: 0 error(s), 0 warning(s)" in r.stdout
    custom = model([helper.make_node("Foo", ["x"], ["y"], domain="com.x")],
                   opsets=(("", 17), ("com.x", 1)))
    r = runner.invoke(app, ["check", save(tmp_path, custom, "custom.onnx"), "--full", "--strict",
                            "--ignore", "OM304"])
    assert r.exit_code == 0 and "OM411 info (1)" in r.stdout  # strict leaves an info an info


def test_a_url_is_checked_and_masked(http_server, tmp_path):
    nodes = [helper.make_node("Add", ["x", "nope"], ["y"])]
    http_server.files["m.onnx"] = open(save(tmp_path, model(nodes)), "rb").read()
    url = http_server.url("m.onnx").replace("http://", "http://alice:hunter2@") + \
        "?X-Amz-Signature=SIGSECRET&token=TOKSECRET"
    for extra in ([], ["--json"], ["--sarif"]):
        r = runner.invoke(app, ["check", url, *extra])
        text = r.stdout + r.stderr
        assert r.exit_code == 1, text
        assert "graph.node[0].input[1]" in text
        for secret in ("alice", "hunter2", "SIGSECRET", "TOKSECRET"):
            assert secret not in text, (secret, text)
    r = runner.invoke(app, ["check", url])
    masked = f"http://***@127.0.0.1:{http_server.port}/m.onnx?X-Amz-Signature=***&token=***"
    assert r.stdout.splitlines()[-1] == f"{masked}: not valid: 1 error(s), 0 warning(s), 0 info"


def test_short_help_option():
    for args in (["-h"], ["check", "-h"], ["info", "-h"]):
        r = runner.invoke(app, args)
        assert r.exit_code == 0, args
        assert "Usage: " in r.stdout and "--help" in r.stdout
    r = runner.invoke(app, ["check", "-h"])
    assert "--sarif" in r.stdout


def test_unreadable_json_and_sarif_say_why(tmp_path):
    p = tmp_path / "rand.onnx"
    p.write_bytes(b"\x08\x07\x12\xff\xff")
    line = runner.invoke(app, ["check", str(p)]).stderr.strip()
    assert line.startswith("Malformed: ")
    r = runner.invoke(app, ["check", str(p), "--json"])
    assert r.exit_code == 2 and r.stderr.strip() == line  # the stderr line stays
    doc = json.loads(r.stdout)
    assert doc == {"findings": [], "counts": {"error": 0, "warning": 0, "info": 0, "total": 0},
                   "error": {"kind": "Malformed", "message": line[len("Malformed: "):]}}
    r = runner.invoke(app, ["check", str(p), "--sarif"])
    assert r.exit_code == 2 and r.stderr.strip() == line
    run = json.loads(r.stdout)["runs"][0]
    assert run["results"] == [] and run["tool"]["driver"]["name"] == "onemodel"
    inv = run["invocations"][0]
    assert inv["executionSuccessful"] is False
    assert inv["toolExecutionNotifications"] == [
        {"level": "error", "message": {"text": line[len("Malformed: "):]},
         "descriptor": {"id": "Malformed"}}]


def test_unreadable_json_message_is_masked():
    url = "https://user:secret@example.invalid/m.onnx?sig=abc"
    r = runner.invoke(app, ["check", url, "--json"])
    assert r.exit_code == 2
    doc = json.loads(r.stdout)
    assert doc["findings"] == [] and doc["error"]["kind"] in ("Io", "Unsupported")
    assert "secret" not in r.stdout and "sig=abc" not in r.stdout
    assert "\n" not in doc["error"]["message"]


def test_om112_names_the_node(tmp_path):
    nodes = [helper.make_node("Transpose", ["nope"], ["y"], name="tr")]
    r = onemodel.check(save(tmp_path, model(nodes)))
    assert [(f.code, f.path, f.message) for f in r.findings] == [
        ("OM112", "graph.node[0].input[0]", CODES["OM112"].example)]
    assert r.findings[0].message == ("input 'nope' of node 'Transpose' named 'tr' is not "
                                     "defined in this graph or an enclosing one")


def test_json_and_sarif_together_is_a_usage_error(tmp_path):
    from typer.testing import CliRunner

    from onemodel.cli import app

    p = tmp_path / "m.onnx"
    p.write_bytes(b"")
    r = CliRunner().invoke(app, ["check", str(p), "--json", "--sarif"])
    assert r.exit_code == 2 and "choose one of --json and --sarif" in r.output


def _missing_data_file(tmp_path, n: int) -> str:
    """A model of ``n`` external tensors whose one data file is gone: ``n`` OM204 findings
    whose messages differ only in the tensor's name."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    ws = [numpy_helper.from_array(np.full(300, i, np.float32), f"layer.{i}.weight")
          for i in range(n)]
    g = helper.make_graph([helper.make_node("Add", ["layer.0.weight", "layer.1.weight"], ["y"])],
                          "g", [], [helper.make_tensor_value_info("y", 1, [300])], ws)
    path = tmp_path / "m.onnx"
    onnx.save_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path),
                    save_as_external_data=True, location="m.onnx.data", size_threshold=0)
    (tmp_path / "m.onnx.data").unlink()
    return str(path)


def test_findings_alike_but_for_their_subject_are_one_line(tmp_path):
    """issue 24 item 6: one 330-character message 28 times, once per tensor, is one line with
    the count and the first few subjects and paths; --json and --sarif keep every one."""
    p = _missing_data_file(tmp_path, 28)
    r = runner.invoke(app, ["check", p])
    assert r.exit_code == 1
    assert r.stdout.splitlines() == [
        f"OM204 error (28): {CODES['OM204'].summary} [{CODES['OM204'].clause}]",
        "  graph.initializer[0] at offset 0x32: tensor 'layer.0.weight', external data location "
        "'m.onnx.data': 'm.onnx.data' does not exist (and 27 more alike: 'layer.1.weight' at "
        "graph.initializer[1], 'layer.2.weight' at graph.initializer[2], 'layer.3.weight' at "
        "graph.initializer[3], …; --json lists every one)",
        f"{p}: not valid: 28 error(s), 0 warning(s), 0 info"]
    doc = json.loads(runner.invoke(app, ["check", p, "--json"]).stdout)
    assert [f["path"] for f in doc["findings"]] == [f"graph.initializer[{i}]" for i in range(28)]
    sarif = json.loads(runner.invoke(app, ["check", p, "--sarif"]).stdout)
    assert len(sarif["runs"][0]["results"]) == 28


def test_findings_that_differ_elsewhere_stay_apart():
    from onemodel.validation import Finding, Report
    from onemodel.validation.output import text_lines

    def f(message, path):
        return Finding("OM112", "error", message, path)

    report = Report([f("input 'a' of node 'Add' is not defined", "p0"),
                     f("input 'b' of node 'Mul' is not defined", "p1"),  # the node differs
                     f("input 'c' of node 'Add' is not defined", "p2"),
                     f("the same words", "p3"), f("the same words", "p4")])
    assert text_lines(report, "m.onnx")[1:-1] == [
        "  p0: input 'a' of node 'Add' is not defined (and 1 more alike: 'c' at p2; --json "
        "lists every one)",
        "  p1: input 'b' of node 'Mul' is not defined",
        "  p3: the same words (and 1 more alike: p4; --json lists every one)"]
