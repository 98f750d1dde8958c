"""`onemodel infer IN OUT`: value_info added for every node output whose type inference knows,
nothing else changed (ONNX and OneModel, inline and external data, subgraphs); --check, --json,
errors; `onemodel info --shapes`."""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from servers.fixtures import http_server, http_server_session  # noqa: F401
from typer.testing import CliRunner

import onemodel
from onemodel.cli import app
from onemodel.operators import Operator, register, unregister
from onemodel.verify import compare_models

runner = CliRunner()


def _chain(value_info=(), w_dims=(2, 3), ir_version=8) -> onnx.ModelProto:
    """x [N,2,3] + w -> a; Neg -> b; Shape(b) -> s; Reshape(b, Concat(Shape(b)[0:1], [-1]))
    -> y: a [N,2,3], b [N,2,3], s [3] with elements [N,2,3], the head [1], the target [2],
    y [N,6]."""
    w = numpy_helper.from_array(np.arange(np.prod(w_dims), dtype=np.float32).reshape(w_dims),
                                "w")
    minus1 = numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus1")
    nodes = [helper.make_node("Add", ["x", "w"], ["a"], name="add"),
             helper.make_node("Neg", ["a"], ["b"]),
             helper.make_node("Shape", ["b"], ["s"]),
             helper.make_node("Shape", ["b"], ["head"], end=1),
             helper.make_node("Concat", ["head", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["b", "target"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, ["N", 2, 3])],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)], [w, minus1],
                          value_info=list(value_info))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = ir_version
    return m


#: What inference adds to _chain(): name -> type text.
CHAIN_ADDED = {"a": "tensor(float)[N,2,3]", "b": "tensor(float)[N,2,3]", "s": "tensor(int64)[3]",
               "head": "tensor(int64)[1]", "target": "tensor(int64)[2]"}


def _save(path, m) -> str:
    path.write_bytes(m.SerializeToString())
    return str(path)


def _added(out_model, before: int, graph=None) -> dict:
    g = graph if graph is not None else out_model.graph
    return {vi.name: str(vi.type) for vi in g.value_info[before:]}


#: What infer completes of _chain()'s graph output y (declared float, no shape), by graph path:
#: its shape, as onnx's inference does (test_onnx_to_onnx_splices_the_entries_into_the_...).
CHAIN_OUTPUTS = {"graph": {"y": "tensor(float)[N,6]"}}


def _only_value_info_added(src: str, dst: str, before: dict,
                           completed: dict = CHAIN_OUTPUTS) -> None:
    """OUT equals IN field by field once the entries OUT's graphs gained are dropped
    (``before``: graph path -> count of IN's value_info) and the graph outputs infer completed
    (``completed``: graph path -> {output name: its type in OUT}, each asserted) are given IN's
    types back."""
    from onemodel.ir.walk import iter_graphs

    a, b = onemodel.load(src), onemodel.load(dst)
    ins = dict(iter_graphs(a.graph))
    seen: dict = {}
    for path, g in iter_graphs(b.graph):
        del g.value_info[before.get(path, 0):]
        for vi, was in zip(g.outputs, ins[path].outputs):
            if vi.type != was.type:
                seen.setdefault(path, {})[vi.name] = str(vi.type)
                vi.type = was.type
    assert seen == completed
    assert compare_models(a, b) == []
    a.close()
    b.close()


def test_onnx_to_onnx_splices_the_entries_into_the_files_octets(tmp_path):
    src = _save(tmp_path / "m.onnx", _chain())
    dst = str(tmp_path / "out.onnx")
    r = runner.invoke(app, ["infer", src, dst])
    assert r.exit_code == 0, r.output
    assert "5 value_info entries added" in r.stdout
    out = onnx.load(dst)
    assert [vi.name for vi in out.graph.value_info] == list(CHAIN_ADDED)
    with onemodel.load(dst) as m:
        assert _added(m, 0) == CHAIN_ADDED
    # onnx's inference (data propagation on) gives the same types
    theirs = onnx.shape_inference.infer_shapes(onnx.load(src), strict_mode=True, data_prop=True)
    assert {vi.name: vi for vi in theirs.graph.value_info} == \
        {vi.name: vi for vi in out.graph.value_info}
    # and completes the graph output's shape as onnx's inference does: onnx leaves Reshape's
    # -1 a fresh variable (unk__0), onemodel computes it (2 * 3)
    assert "1 graph output completed" in r.stdout
    theirs_y, ours_y = (o.graph.output[0].type.tensor_type for o in (theirs, out))
    assert theirs_y.elem_type == ours_y.elem_type == T.FLOAT
    assert [d.dim_param for d in theirs_y.shape.dim] == ["N", "unk__0"]
    assert [d.dim_param or d.dim_value for d in ours_y.shape.dim] == ["N", 6]
    with onemodel.load(dst) as m:
        assert str(m.graph.outputs[0].type) == CHAIN_OUTPUTS["graph"]["y"]
    del out.graph.value_info[:]
    out.graph.output[0].CopyFrom(onnx.load(src).graph.output[0])
    # every other octet as IN's (onnx serializes canonically, so IN is its own encoding)
    assert out.SerializeToString() == open(src, "rb").read()


def test_existing_value_info_is_kept_and_not_repeated(tmp_path):
    declared = helper.make_tensor_value_info("b", T.FLOAT, ["N", 2, 3])
    src = _save(tmp_path / "m.onnx", _chain([declared]))
    dst = str(tmp_path / "out.onnx")
    assert runner.invoke(app, ["infer", src, dst]).exit_code == 0
    with onemodel.load(dst) as m:
        assert m.graph.value_info[0].name == "b"
        assert _added(m, 1) == {k: v for k, v in CHAIN_ADDED.items() if k != "b"}
    _only_value_info_added(src, dst, {"graph": 1})


@pytest.mark.parametrize("out_name", ["out.onemodel", "out.onnx.zst"])
def test_onnx_to_other_formats_adds_only_value_info(tmp_path, out_name):
    src = _save(tmp_path / "m.onnx", _chain())
    dst = str(tmp_path / out_name)
    r = runner.invoke(app, ["infer", src, dst, "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    fmt = "onemodel" if out_name.endswith(".onemodel") else "onnx"
    assert (doc["source_format"], doc["target_format"], doc["value_info_added"]) == \
        ("onnx", fmt, 5)
    # x, w, minus1 and the six node outputs: every one typed, every extent known
    assert (doc["values"], doc["typed"], doc["complete"]) == (9, 9, 9)
    assert doc["contradictions"] == [] and doc["no_rule"] == []
    with onemodel.load(dst) as m:
        assert _added(m, 0) == CHAIN_ADDED
    _only_value_info_added(src, dst, {})


def test_onemodel_to_onnx(tmp_path):
    src = str(tmp_path / "m.onemodel")
    onemodel.convert(_save(tmp_path / "m.onnx", _chain()), src)
    dst = str(tmp_path / "out.onnx")
    assert runner.invoke(app, ["infer", src, dst]).exit_code == 0
    with onemodel.load(dst) as m:
        assert m.format == "onnx" and _added(m, 0) == CHAIN_ADDED
    _only_value_info_added(src, dst, {})


def _external_chain(tmp_path) -> str:
    """_chain with w (6 floats) in w.bin, external data (Clause 13), in tmp_path/in."""
    m = _chain(w_dims=(2, 3))
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3) + 0.5, "w")
    w.ClearField("raw_data")
    w.data_location = T.EXTERNAL
    for k, v in (("location", "w.bin"), ("offset", "0"), ("length", "24")):
        e = w.external_data.add()
        e.key, e.value = k, v
    m.graph.initializer[0].CopyFrom(w)
    d = tmp_path / "in"
    d.mkdir()
    (d / "w.bin").write_bytes((np.arange(6, dtype=np.float32) + 0.5).tobytes())
    return _save(d / "m.onnx", m)


def test_external_data_in_the_same_directory_is_shared(tmp_path):
    src = _external_chain(tmp_path)
    data = os.path.join(os.path.dirname(src), "w.bin")
    stat = os.stat(data)
    dst = os.path.join(os.path.dirname(src), "out.onnx")
    assert runner.invoke(app, ["infer", src, dst]).exit_code == 0
    after = os.stat(data)
    assert (after.st_ino, after.st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns)  # not rewritten
    out = onnx.load(dst)  # the reference holds from OUT
    w = numpy_helper.to_array(out.graph.initializer[0])
    np.testing.assert_array_equal(w, np.arange(6, dtype=np.float32).reshape(2, 3) + 0.5)
    assert len(out.graph.value_info) == 5
    _only_value_info_added(src, dst, {})


def test_external_data_elsewhere_is_written_beside_out_as_convert_keeps_it(tmp_path):
    src = _external_chain(tmp_path)
    (tmp_path / "out").mkdir()
    dst = str(tmp_path / "out" / "m.onnx")
    assert runner.invoke(app, ["infer", src, dst]).exit_code == 0
    assert (tmp_path / "out" / "w.bin").read_bytes() == \
        (tmp_path / "in" / "w.bin").read_bytes()
    out = onnx.load(dst, load_external_data=False)
    assert [(e.key, e.value) for e in out.graph.initializer[0].external_data] == \
        [("location", "w.bin"), ("offset", "0"), ("length", "24")]
    _only_value_info_added(src, dst, {})


def test_another_models_data_file_beside_out_is_kept_with_a_hint_infer_takes(tmp_path):
    """A data file beside OUT of the name IN's tensors go to, and of another model, is not
    replaced (as convert refuses it); the error told to use --force or --external-data NAME,
    flags infer does not have (a usage error if tried): it says what infer can do."""
    src = _external_chain(tmp_path)
    (tmp_path / "out").mkdir()
    other = tmp_path / "out" / "w.bin"
    other.write_bytes(b"another model's weights")
    dst = str(tmp_path / "out" / "m.onnx")
    r = runner.invoke(app, ["infer", src, dst])
    assert r.exit_code == 2, r.output
    line, = r.stderr.splitlines()
    assert line.startswith("Io: data file ") and "already exists and may hold another " \
        "model's weights" in line, line
    assert "--force" not in line and "--external-data" not in line, line
    assert "write OUT in another directory" in line, line
    assert other.read_bytes() == b"another model's weights" and not os.path.exists(dst)


def _wrap_rule(ctx, x):
    """A test operator com.test.Wrap: its output is the body graph's output (inferred with the
    node's input)."""
    outs = ctx.infer_graph("body", [x])
    return outs[0] if outs else None


@pytest.fixture
def wrap_registered():
    """com.test.Wrap registered for the process (the command runs in this one) for one test."""
    register(Operator("Wrap", "com.test", inputs=[("x", "T")], outputs=[("y", "T")],
                      attributes={"body": "GRAPH"}, constraints={"T": ["tensor(float)"]},
                      rule=_wrap_rule))
    yield
    unregister("com.test", "Wrap")


def test_subgraph_values_are_annotated_in_their_graph(tmp_path, wrap_registered):
    body = helper.make_graph(
        [helper.make_node("Neg", ["bx"], ["bn"]), helper.make_node("Shape", ["bn"], ["bs"]),
         helper.make_node("Identity", ["bn"], ["by"])], "body",
        [helper.make_tensor_value_info("bx", T.FLOAT, None)],
        [helper.make_tensor_value_info("by", T.FLOAT, None)])
    g = helper.make_graph([helper.make_node("Wrap", ["x"], ["y"], domain="com.test", body=body)],
                          "g", [helper.make_tensor_value_info("x", T.FLOAT, ["N", 4])],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("com.test", 1)])
    src = _save(tmp_path / "m.onnx", m)
    dst = str(tmp_path / "out.onnx")
    r = runner.invoke(app, ["infer", src, dst])
    assert r.exit_code == 0, r.output
    with onemodel.load(dst) as out:
        sub = out.graph.nodes[0].attributes[0].g
        assert _added(out, 0, sub) == {"bn": "tensor(float)[N,4]", "bs": "tensor(int64)[2]"}
        # y is a graph output (declared): its type is not repeated as value_info; the outputs
        # of both graphs, declared without a shape, get theirs (the subgraph's: written by the
        # writer, not spliced)
        assert out.graph.value_info == []
    _only_value_info_added(src, dst, {}, {"graph": {"y": "tensor(float)[N,4]"},
                                          "graph.nodes[0].attributes[0].g": {
                                              "by": "tensor(float)[N,4]"}})
    r = runner.invoke(app, ["info", src, "--shapes", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["values"] == {
        "graph": [{"name": "x", "type": "tensor(float)[N,4]"},
                  {"name": "y", "type": "tensor(float)[N,4]"}],
        "graph.node[0].attribute[0].g": [
            {"name": "bx", "type": "tensor(float)[N,4]"},
            {"name": "bn", "type": "tensor(float)[N,4]"},
            {"name": "bs", "type": "tensor(int64)[2]"},
            {"name": "by", "type": "tensor(float)[N,4]"}]}
    r = runner.invoke(app, ["info", src, "--shapes"])
    assert "values of graph.node[0].attribute[0].g: 4" in r.stdout


def test_check_lists_contradictions_and_exits_1(tmp_path):
    wrong = helper.make_tensor_value_info("a", T.FLOAT, ["N", 2, 5])
    src = _save(tmp_path / "m.onnx", _chain([wrong]))
    dst = str(tmp_path / "out.onnx")
    r = runner.invoke(app, ["infer", src, dst])
    assert r.exit_code == 0  # written; the contradiction is counted
    assert "1 contradiction (declared types the operators do not give, or inputs an operator " \
        "cannot take); --check lists them" in r.stdout
    r = runner.invoke(app, ["infer", src, dst, "--check"])
    assert r.exit_code == 1
    line, = [t for t in r.stdout.splitlines() if t.startswith("contradiction:")]
    assert line == ("contradiction: 'a' is declared [N,2,5] but inferred [N,2,3] (axis 2) "
                    "[graph.node[0]]")
    r = runner.invoke(app, ["infer", src, dst, "--check", "--json"])
    assert r.exit_code == 1
    assert json.loads(r.stdout)["contradictions"] == [
        {"path": "graph.node[0]",
         "message": "'a' is declared [N,2,5] but inferred [N,2,3] (axis 2)"}]
    r = runner.invoke(app, ["infer", src, dst, "--check", "-q"])  # only the contradictions
    assert r.exit_code == 1 and r.stdout.splitlines() == [line]
    ok = _save(tmp_path / "ok.onnx", _chain())
    r = runner.invoke(app, ["infer", ok, dst, "--check", "-q"])
    assert r.exit_code == 0 and r.stdout == ""


def test_an_operators_contradiction_is_reported_in_onemodel_terms(tmp_path):
    onnx_path = _save(tmp_path / "m.onnx", _chain(w_dims=(2, 4)))  # [N,2,3] + [2,4]
    src = str(tmp_path / "m.onemodel")
    onemodel.convert(onnx_path, src)
    r = runner.invoke(app, ["infer", src, str(tmp_path / "o.onnx"), "--check", "--json"])
    assert r.exit_code == 1
    c, = json.loads(r.stdout)["contradictions"]
    assert c["path"] == "manifest.graph.nodes[0]" and "broadcast" in c["message"]


def test_operators_without_a_rule_are_named(tmp_path):
    g = helper.make_graph([helper.make_node("Foo", ["x"], ["y"], domain="com.x")], "g",
                          [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("com.x", 3)])
    src = _save(tmp_path / "m.onnx", m)
    r = runner.invoke(app, ["infer", src, str(tmp_path / "o.onnx")])
    assert r.exit_code == 0
    assert "no inference rule (outputs typed by the constraints only): com.x Foo-3" in r.stdout
    r = runner.invoke(app, ["info", src, "--shapes"])
    assert "no inference rule (outputs typed by the constraints only): com.x Foo-3" in r.stdout
    assert json.loads(runner.invoke(app, ["info", src, "--shapes", "--json"]).stdout)[
        "no_rule"] == ["com.x Foo-3"]


@pytest.mark.parametrize("case", ["malformed", "missing", "suffix"])
def test_errors_exit_2_with_one_line(tmp_path, case):
    src = str(tmp_path / "m.onnx")
    dst = str(tmp_path / "o.onnx")
    if case == "malformed":
        open(src, "wb").write(b"\x08\x07\x12\xff\xff")
        kind = "Malformed:"
    elif case == "missing":
        kind = "Io:"
    else:
        _save(tmp_path / "m.onnx", _chain())
        dst = str(tmp_path / "o.txt")
        kind = "Unsupported:"
    r = runner.invoke(app, ["infer", src, dst])
    assert r.exit_code == 2
    line, = r.stderr.splitlines()
    assert line.startswith(kind), line
    assert not os.path.exists(dst)
    if case == "suffix":  # (no advice to give a format: infer has no --to)
        assert line == ("Unsupported: cannot tell the output format from the file name: name it "
                        f".onnx or .onemodel (or .zst of either) in {dst}")


def test_a_model_breaking_a_graph_rule_names_the_file_and_its_field(tmp_path):
    """A new-user trial: infer (and convert) named an undefined graph output in the IR's terms
    (graph.outputs[1]) without the file; now as the readers' errors: the ONNX field, the file."""
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [2]),
                           helper.make_tensor_value_info("nothing", T.FLOAT, [2])])
    src = _save(tmp_path / "m.onnx", helper.make_model(g))
    for command, dst in (("infer", "o.onnx"), ("convert", "o.onemodel")):
        r = runner.invoke(app, [command, src, str(tmp_path / dst)])
        assert (r.exit_code, r.stderr) == (2, "InvalidModel: name 'nothing' is not defined in "
                                           "this graph or an enclosing one [graph.output[1]] "
                                           f"in {src}\n"), command
        assert not (tmp_path / dst).exists()


def test_a_url_is_read(http_server, tmp_path):  # noqa: F811
    http_server.files["m.onnx"] = _chain().SerializeToString()
    dst = str(tmp_path / "o.onnx")
    r = runner.invoke(app, ["infer", http_server.url("m.onnx"), dst])
    assert r.exit_code == 0, r.output
    with onemodel.load(dst) as m:
        assert _added(m, 0) == CHAIN_ADDED
    r = runner.invoke(app, ["info", http_server.url("m.onnx"), "--shapes", "--json"])
    assert r.exit_code == 0, r.output
    assert {v["name"]: v["type"] for v in json.loads(r.stdout)["values"]["graph"]} == \
        CHAIN_SHAPES


def test_a_url_read_with_storage_options_is_written_to_a_local_out(http_server, tmp_path):  # noqa: F811
    """``-S`` options are for IN (a URL), OUT is local: the options reach IN's server and the
    write to OUT neither uses nor refuses them (it was `Usage error: storage options are for
    URLs ... every file of this operation is local (OUT)`, exit 2)."""
    http_server.files["m.onnx"] = _chain().SerializeToString()
    dst = str(tmp_path / "o.onnx")
    r = runner.invoke(app, ["infer", http_server.url("m.onnx"), dst,
                            "-S", "http.headers.X-Api-Key=KEY42"])
    assert r.exit_code == 0, r.output
    assert http_server.log and all(q.headers.get("X-Api-Key") == "KEY42" for q in http_server.log)
    assert "KEY42" not in r.output
    with onemodel.load(dst) as m:
        assert _added(m, 0) == CHAIN_ADDED


# -- info --shapes -----------------------------------------------------------------------------

CHAIN_SHAPES = {"x": "tensor(float)[N,2,3]", "w": "tensor(float)[2,3]",
                "minus1": "tensor(int64)[1]", **CHAIN_ADDED, "y": "tensor(float)[N,6]"}


def test_info_shapes_lists_every_value(tmp_path):
    src = _save(tmp_path / "m.onnx", _chain())
    r = runner.invoke(app, ["info", src, "--shapes"])
    assert r.exit_code == 0, r.output
    text = r.stdout
    assert "values of graph: 9" in text
    rows = {}
    for line in text[text.index("values of graph"):].splitlines()[1:]:
        parts = [p.strip() for p in line.split("\u2502")]  # the table's column rule
        if len(parts) == 2 and parts[0] in CHAIN_SHAPES:
            rows[parts[0]] = parts[1]
    assert rows == CHAIN_SHAPES
    assert "values of graph" not in runner.invoke(app, ["info", src]).stdout


def test_info_shapes_json_onemodel_and_subgraphs(tmp_path, monkeypatch):
    onemodel.convert(_save(tmp_path / "m.onnx", _chain()), str(tmp_path / "m.onemodel"))
    r = runner.invoke(app, ["info", str(tmp_path / "m.onemodel"), "--shapes", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    (path, values), = doc["values"].items()
    assert path == "manifest.graph"
    assert {v["name"]: v["type"] for v in values} == CHAIN_SHAPES
    assert [v["name"] for v in values][:3] == ["x", "w", "minus1"]  # inputs, initializers, nodes
    assert doc["contradictions"] == [] and doc["no_rule"] == []
    assert "values" not in json.loads(runner.invoke(app, ["info", str(tmp_path / "m.onemodel"),
                                                          "--json"]).stdout)


def test_info_shapes_prints_the_contradictions(tmp_path):
    wrong = helper.make_tensor_value_info("a", T.FLOAT, ["N", 2, 5])
    src = _save(tmp_path / "m.onnx", _chain([wrong]))
    r = runner.invoke(app, ["info", src, "--shapes"])
    assert r.exit_code == 0  # info describes; check and infer --check judge
    assert "contradiction: 'a' is declared [N,2,5] but inferred [N,2,3] (axis 2) " \
        "[graph.node[0]]" in r.stdout
    doc = json.loads(runner.invoke(app, ["info", src, "--shapes", "--json"]).stdout)
    assert doc["contradictions"] == [{"path": "graph.node[0]", "message": "'a' is declared "
                                      "[N,2,5] but inferred [N,2,3] (axis 2)"}]
    # the declared extent is kept where they contradict (Clause 9.4: reported, not chosen)
    assert {v["name"]: v["type"] for v in doc["values"]["graph"]}["a"] == "tensor(float)[N,2,5]"


def test_annotate_in_python_adds_each_entry_once_and_shares_type_records(tmp_path):
    from onemodel.inference import annotate, infer_model

    with onemodel.load(_save(tmp_path / "m.onnx", _chain())) as m:
        res = infer_model(m)
        assert annotate(m, res) == 5
        assert {vi.name: str(vi.type) for vi in m.graph.value_info} == CHAIN_ADDED
        a, b = m.graph.value_info[0], m.graph.value_info[1]
        assert a.type is b.type  # equal inferred types: one Type record
        assert annotate(m, res) == 0  # declared now: nothing added twice
        assert onemodel.infer(m)["y"] == onemodel.ir.Type.tensor(T.FLOAT, ["N", 6])
        # each entry is the record the constructor makes (annotate sets the fields directly):
        # every field of ValueInfo.FIELDS and unknown, equal field by field
        from onemodel.ir import ValueInfo
        for vi in m.graph.value_info:
            assert vi == ValueInfo(name=vi.name, type=vi.type)
            assert [getattr(vi, f) for f, _, _ in ValueInfo.FIELDS[2:]] == [None, []]
            assert vi.unknown == b""


def test_a_model_convert_refuses_is_not_written_either(tmp_path):
    # an undefined input and a value defined twice: the graph rules refuse both, as convert does
    for name, nodes in (("undef", [onnx.helper.make_node("Relu", ["nope"], ["y"])]),
                        ("dup", [onnx.helper.make_node("Relu", ["x"], ["y"]),
                                 onnx.helper.make_node("Neg", ["x"], ["y"])])):
        g = onnx.helper.make_graph(nodes, "g",
                                   [onnx.helper.make_tensor_value_info("x", 1, [2])],
                                   [onnx.helper.make_tensor_value_info("y", 1, [2])])
        src = _save(tmp_path / f"{name}.onnx", onnx.helper.make_model(
            g, opset_imports=[onnx.helper.make_opsetid("", 17)]))
        out = tmp_path / f"{name}.out.onnx"
        r = runner.invoke(app, ["infer", src, str(out)])
        assert r.exit_code == 2 and "InvalidModel" in r.output, r.output
        assert not out.exists()
        assert runner.invoke(app, ["convert", src, str(tmp_path / "c.onnx")]).exit_code == 2
