"""The page of `onemodel view`: self-contained, model text escaped, groups, findings on nodes."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import numpy as np
from onnx import helper
from view_models import MODELS, save, tensor, vi

import onemodel
from onemodel.view import render
from onemodel.view.grouping import GROUP_SIZE, group_items, scope_of
from onemodel.view.html import script_json
from onemodel.view.page_model import page_model

SVG_NAMESPACE = "http://www.w3.org/2000/svg"


class _Page(HTMLParser):
    """Every start tag with its attributes, and the text of the JSON data element."""

    def __init__(self):
        super().__init__()
        self.tags: list = []
        self.data = None
        self._in_data = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_data = tag == "script" and dict(attrs).get("id") == "model-data"

    def handle_data(self, data):
        if self._in_data:
            self.data = (self.data or "") + data

    def handle_endtag(self, tag):
        self._in_data = False


def _parse(page: str) -> _Page:
    p = _Page()
    p.feed(page)
    return p


def _page_of(path) -> str:
    with onemodel.load(path) as m:
        return render(m, f"{m.graph.name} ({path.name})")


def test_the_page_is_self_contained():
    page = _page_of(MODELS / "detector_legacy.onnx")
    p = _parse(page)
    for tag, attrs in p.tags:
        for k in ("src", "href", "action", "data", "srcset", "poster"):
            assert k not in attrs or not re.match(r"\s*(https?:)?//", attrs[k]), (tag, attrs)
        assert tag not in ("link", "iframe", "img", "object", "embed"), tag
    scripts = [a for t, a in p.tags if t == "script"]
    assert scripts and all("src" not in a for a in scripts)  # every script inline
    # the only URL anywhere is the SVG namespace name, which nothing fetches
    assert set(re.findall(r"https?://[^\s\"'<>)]*", page)) == {SVG_NAMESPACE}
    assert "@import" not in page and "url(http" not in page
    csp = [a["content"] for t, a in p.tags if t == "meta" and a.get("http-equiv")]
    assert csp and "default-src 'none'" in csp[0]


def test_text_of_the_model_is_escaped(tmp_path):
    evil = "<script>alert(1)</script>"
    doc = "<img src=x onerror=alert(2)> & </script><b>"
    path = save(tmp_path / "evil.onnx",
                [helper.make_node("Relu", ["x"], [evil], name=evil, doc_string=doc)],
                [vi("x")], [vi(evil)], name="</title><script>alert(3)</script>")
    page = _page_of(path)
    assert "<script>alert" not in page and "<img" not in page and "<b>" not in page
    assert "&lt;/title&gt;&lt;script&gt;alert(3)" in page  # the title, as text
    p = _parse(page)
    assert [t for t, _ in p.tags].count("script") == 3  # data, dagre, the page's own
    data = json.loads(p.data)
    relu = [n for n in data["nodes"] if n["o"] == "Relu"][0]
    assert relu["n"] == evil and relu["doc"] == doc  # the same text, shown as text
    assert data["values"][relu["u"][0]][0] == evil


def test_script_json_cannot_close_its_element():
    text = script_json({"a": "</script><!-- \u2028 & >"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"a": "</script><!-- \u2028 & >"}


def test_scopes_become_groups():
    assert scope_of("/a/b/Conv") == ("a", "b") and scope_of("Conv_3") == ()
    names = ["/a/b/Conv", "/a/b/Relu", "/a/c/Add", "/d/Mul", "e"]
    groups: list = []
    placed = group_items(groups, -1, [(k, scope_of(n), n.rsplit("/")[-1])
                                      for k, n in enumerate(names)])
    # a holds the group b and Add (c had one node: dropped); d had one node: dropped
    assert [(g["l"], g["p"], g["c"]) for g in groups] == [("a", -1, 3), ("b", 0, 2)]
    assert placed == {0: 1, 1: 1, 2: 0, 3: -1, 4: -1}


def test_a_chain_of_50000_nodes_opens_on_a_screenful():
    groups: list = []
    placed = group_items(groups, -1, [(k, (), "Relu") for k in range(50_000)])
    # 1,250 runs of 40 nodes, then ceil(1250 / 40) = 32 runs of them: 31 of 40 and one of 10
    assert len(groups) == 1250 + 32
    top = [g for g in groups if g["p"] == -1]
    assert len(top) == 32 and sum(g["c"] for g in top) == 50_000
    children: dict = {}
    for k, g in enumerate(groups):
        children[g["p"]] = children.get(g["p"], 0) + 1
    for p in placed.values():
        children[p] = children.get(p, 0) + 1
    assert max(children.values()) <= GROUP_SIZE
    assert top[0]["l"] == "Relu \u00d71600" and top[-1]["l"] == "Relu \u00d7400"


def _data(path):
    with onemodel.load(path) as m:
        return page_model(m, path.name)


def test_groups_of_the_testdata_models():
    for name in ("detector_legacy", "transformer_legacy", "gpt2_tiny", "cnn_dynamo"):
        d = _data(MODELS / f"{name}.onnx")
        with onemodel.load(MODELS / f"{name}.onnx") as m:
            n_ops = len(m.graph.nodes)
            n_io = len(m.graph.inputs) + len(m.graph.outputs)
            inits = {t.name for t in m.graph.initializers}
            n_io -= sum(1 for i in m.graph.inputs if i.name in inits)
        assert len(d["nodes"]) == n_ops + n_io
        top = sum(1 for g in d["groups"] if g["p"] == -1) + \
            sum(1 for n in d["nodes"] if n["p"] == -1)
        assert top <= GROUP_SIZE, name
        for g in d["groups"]:  # every group holds what it counts
            assert g["c"] >= 1
    d = _data(MODELS / "detector_legacy.onnx")
    top = [g["l"] for g in d["groups"] if g["p"] == -1]
    assert top[:7] == ["stem", "stage1", "stage2", "stage3", "lateral", "up", "fuse"]
    assert _data(MODELS / "cnn_dynamo.onnx")["groups"] == []  # 16 nodes, no scopes


def test_node_facts_and_inferred_types(tmp_path):
    w = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    path = save(tmp_path / "mm.onnx",
                [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"),
                 helper.make_node("Softmax", ["y"], ["z"], name="sm", axis=-1)],
                [helper.make_tensor_value_info("x", 1, ["batch", 2])],
                [helper.make_tensor_value_info("z", 1, None)], [tensor("w", w)])
    d = _data(path)
    sm = [n for n in d["nodes"] if n["n"] == "sm"][0]
    assert (sm["o"], sm["d"], sm["v"], sm["a"]) == ("Softmax", "", 17, [["axis", "-1"]])
    z = d["values"][sm["u"][0]]
    assert d["types"][z[1]] == "tensor(float)[batch,3]"  # inferred, not declared
    mm = [n for n in d["nodes"] if n["n"] == "mm"][0]
    init = d["inits"][d["values"][mm["i"][1]][2]]
    assert (init["n"], init["t"], init["s"], init["b"]) == ("w", "float", [2, 3], 24)
    assert (init["st"]["min"], init["st"]["max"], init["st"]["mean"]) == (-2.0, 3.0, 0.5)
    assert d["summary"]["nodes"] == 2 and d["title"] == "mm.onnx"


def test_a_seeded_defect_is_on_its_node(tmp_path):
    path = save(tmp_path / "seed.onnx",
                [helper.make_node("Relu", ["x"], ["a"], name="ok"),
                 helper.make_node("Relu", ["a"], ["y"], name="bad_relu", alpha=2.0)],
                [vi("x")], [vi("y")])
    d = _data(path)
    bad = [k for k, n in enumerate(d["nodes"]) if n["n"] == "bad_relu"][0]
    ok = [k for k, n in enumerate(d["nodes"]) if n["n"] == "ok"][0]
    found = [d["findings"][f] for f in d["nodes"][bad]["f"]]
    assert [(f["c"], f["s"], f["node"]) for f in found] == [("OM308", "error", bad)]
    assert "alpha" in found[0]["m"] and "f" not in d["nodes"][ok]


def test_subgraphs_and_functions_are_groups_that_open(tmp_path):
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="then_relu")],
                               "then", [], [vi("t")])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="else_neg")],
                               "else", [], [vi("e")])
    fn = helper.make_function("local", "Double", ["a"], ["b"],
                              [helper.make_node("Add", ["a", "a"], ["b"], name="fadd")],
                              [helper.make_opsetid("", 17)])
    path = save(tmp_path / "if.onnx",
                [helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g,
                                  else_branch=else_g),
                 helper.make_node("Double", ["y"], ["z"], name="call", domain="local")],
                [vi("c", 9, ()), vi("x")], [vi("z")], functions=[fn])
    d = _data(path)
    kinds = [(g["l"], g["k"]) for g in d["groups"]]
    assert ("If branch", "node") in kinds and ("function local.Double", "function") in kinds
    holder = [k for k, g in enumerate(d["groups"]) if g["k"] == "node"][0]
    subs = [k for k, g in enumerate(d["groups"]) if g["k"] == "subgraph"]
    label = {d["groups"][k]["l"]: k for k in subs}  # (in attribute order: onnx sorts them)
    assert sorted(label) == ["else_branch (else)", "then_branch (then)"]
    assert all(d["groups"][k]["p"] == holder for k in subs)
    by_name = {n["n"]: n for n in d["nodes"]}
    assert by_name["branch"]["p"] == holder
    assert by_name["then_relu"]["p"] == label["then_branch (then)"]
    assert by_name["else_neg"]["p"] == label["else_branch (else)"]
    # the inner Relu reads the outer x: its input is the main graph's value, with its producer
    x = by_name["then_relu"]["i"][0]
    assert d["nodes"][d["values"][x][3]]["k"] == "input"
    fgroup = [k for k, g in enumerate(d["groups"]) if g["k"] == "function"][0]
    assert by_name["fadd"]["p"] == fgroup and by_name["call"]["fn"] == fgroup
