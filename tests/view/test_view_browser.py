"""The page of `onemodel view` in headless Chromium (the distribution's `chromium` and
`chromium-driver`, driven by selenium): it loads without a console error, shows the groups and
nodes of its data, opens a group, finds a node, marks a finding, runs nothing of the model.

Skipped, with the reason, where Chromium, its driver or selenium is not installed
(`apt-get install chromium chromium-driver`, `pip install selenium`)."""

from __future__ import annotations

import shutil
import time

import pytest
from onnx import helper
from view_models import MODELS, save, vi

import onemodel
from onemodel.view import render
from onemodel.view.grouping import GROUP_SIZE
from onemodel.view.page_model import page_model

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (BROWSER and DRIVER),
                                reason="chromium and chromium-driver are not installed")

READY_SECONDS = 60  # generous: the pages here are ready in well under a second


@pytest.fixture(scope="module")
def browser():
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = BROWSER
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,900"):
        options.add_argument(a)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(DRIVER), options=options)
    yield d
    d.quit()


def _open(browser, tmp_path, model_path, name="page.html") -> dict:
    with onemodel.load(model_path) as m:
        page = render(m, f"{m.graph.name} ({model_path.name})")
    out = tmp_path / name
    out.write_text(page, "utf-8")
    browser.get(out.as_uri())
    deadline = time.monotonic() + READY_SECONDS
    while browser.execute_script("return document.body.getAttribute('data-ready')") != "1":
        assert time.monotonic() < deadline, "the page never became ready"
        time.sleep(0.05)
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
    return browser.execute_script(
        "const v = window.onemodelView; return {nodes: v.data.nodes.length, "
        "groups: v.data.groups.length, leaves: v.state.leaves};")


def _expected_nodes(path) -> int:
    """The page's node count, from the file read by onnx (the oracle): every node of every
    graph and function body, and each graph's inputs (not those with an initializer) and
    outputs."""
    import onnx

    def graph(g) -> int:
        inits = {t.name for t in g.initializer}
        n = len([i for i in g.input if i.name not in inits]) + len(g.output)
        for node in g.node:
            n += 1
            for a in node.attribute:
                n += sum(graph(sub) for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs))
        return n
    m = onnx.load(str(path), load_external_data=False)
    return graph(m.graph) + sum(len(f.node) for f in m.functions)


def _open_a_group(browser) -> None:
    """Click the first closed group: it becomes a cluster, and more items are shown."""
    groups = browser.find_elements("css selector", "#viewport .item.group")
    assert groups
    before = _items(browser)
    g = groups[0].get_attribute("data-group")
    groups[0].click()
    assert browser.find_elements("css selector", f"#viewport .cluster[data-group='{g}']")
    assert _items(browser) > before


def _search(browser, text: str) -> str:
    """Search ``text``: the one node selected, its name."""
    box = browser.find_element("id", "search")
    box.clear()
    box.send_keys(text + "\n")
    sel = browser.find_elements("css selector", "#viewport .node.selected")
    assert len(sel) == 1
    return browser.execute_script(
        f"return window.onemodelView.data.nodes[{sel[0].get_attribute('data-node')}].n")


def _levels(n: int) -> list[int]:
    """The groups of runs that chunk ``n`` unscoped nodes (:mod:`onemodel.view.grouping`):
    ceil(n / GROUP_SIZE) runs, then runs of those, until a level has at most GROUP_SIZE."""
    out = []
    while n > GROUP_SIZE:
        n = -(-n // GROUP_SIZE)
        out.append(n)
    return out


def _items(browser) -> int:
    return browser.execute_script("return document.querySelectorAll('#viewport .item').length")


@pytest.mark.parametrize("name", ["detector_legacy", "transformer_legacy", "gpt2_tiny"])
def test_testdata_pages_load_open_and_search(browser, tmp_path, name):
    got = _open(browser, tmp_path, MODELS / f"{name}.onnx")
    with onemodel.load(MODELS / f"{name}.onnx") as m:
        last_op = m.graph.nodes[-1]
        groups = len(page_model(m, name)["groups"])
    assert got["nodes"] == _expected_nodes(MODELS / f"{name}.onnx") and got["groups"] == groups
    status = browser.find_element("id", "status").text
    assert f"{got['nodes']} nodes" in status and f"{got['groups']} groups" in status
    assert _items(browser) == got["leaves"] > 0
    groups = browser.find_elements("css selector", "#viewport .item.group")
    if groups:  # open one: it becomes a cluster, and more is shown
        before = _items(browser)
        g = groups[0].get_attribute("data-group")
        groups[0].click()
        assert browser.find_elements("css selector", f"#viewport .cluster[data-group='{g}']")
        assert _items(browser) > before
    box = browser.find_element("id", "search")
    box.clear()
    box.send_keys(last_op.name + "\n")
    selected = browser.find_elements("css selector", "#viewport .node.selected")
    assert len(selected) == 1
    k = int(selected[0].get_attribute("data-node"))
    assert browser.execute_script(f"return window.onemodelView.data.nodes[{k}].n") == \
        last_op.name
    assert browser.find_element("css selector", "#panel h2").text == last_op.op_type


def test_a_chain_of_50000_nodes(browser, tmp_path):
    nodes, prev = [], "x"
    for i in range(50_000):
        nodes.append(helper.make_node("Relu", [prev], [f"t{i}"], name=f"n{i}"))
        prev = f"t{i}"
    path = save(tmp_path / "chain.onnx", nodes, [vi("x")], [vi(prev)])
    got = _open(browser, tmp_path, path)
    assert got["nodes"] == 50_002 and got["leaves"] <= 60 and _items(browser) == got["leaves"]
    # the 50,002 items (the input, the nodes, the output) in runs of GROUP_SIZE, nested
    assert got["groups"] == sum(_levels(50_002)) == 1251 + 32
    _open_a_group(browser)
    box = browser.find_element("id", "search")
    box.send_keys("n31337\n")
    sel = browser.find_elements("css selector", "#viewport .node.selected")
    assert len(sel) == 1 and browser.execute_script(
        f"return window.onemodelView.data.nodes[{sel[0].get_attribute('data-node')}].n") == "n31337"


def test_a_finding_is_on_its_node_and_model_text_runs_nothing(browser, tmp_path):
    evil = "<script>alert(1)</script>"
    path = save(tmp_path / "seed.onnx",
                [helper.make_node("Relu", ["x"], ["a"], name=evil,
                                  doc_string="<img src=x onerror=alert(2)>"),
                 helper.make_node("Relu", ["a"], ["y"], name="bad_relu", alpha=2.0)],
                [vi("x")], [vi("y")], name=evil)
    _open(browser, tmp_path, path)  # an alert would make every later call fail
    assert browser.find_element("id", "title").text == f"{evil} (seed.onnx)"
    bad = browser.find_element("css selector", "#viewport .node.has-finding")
    assert "sev-error" in bad.get_attribute("class")
    bad.click()
    panel = browser.find_element("id", "panel").text
    assert "OM308" in panel and "alpha" in panel
    box = browser.find_element("id", "search")
    box.send_keys("alert\n")
    browser.find_element("css selector", "#viewport .node.selected").click()
    assert evil in browser.find_element("id", "panel").text
    assert browser.execute_script("return document.querySelectorAll('img').length") == 0


def test_the_changed_conv_is_highlighted_in_a_diff(browser, tmp_path):
    from test_view_diff import CONV, DETECTOR, changed_detector

    from onemodel.view import render_diff

    b, _ = changed_detector(tmp_path / "b.onnx")
    with onemodel.load(DETECTOR) as ma, onemodel.load(b) as mb:
        page = render_diff(ma, "a", mb, "b")
    out = tmp_path / "diff.html"
    out.write_text(page, "utf-8")
    browser.get(out.as_uri())
    deadline = time.monotonic() + READY_SECONDS
    while browser.execute_script("return document.body.getAttribute('data-ready')") != "1":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    panel = browser.find_element("id", "panel").text
    assert "1 changed" in panel and CONV in panel
    assert browser.execute_script("return window.onemodelView.data.nodes.length") == \
        _expected_nodes(b)
    browser.find_element("id", "close-all").click()  # closed, its group is marked
    marked = browser.find_elements("css selector", "#viewport .item.group.has-diff")
    assert [e.get_attribute("data-group") for e in marked] == [str(
        browser.execute_script("return window.onemodelView.data.groups.findIndex("
                               "g => g.l === 'fuse' && g.p === -1)"))]
    _open_a_group(browser)
    assert _search(browser, CONV) == CONV
    browser.find_element("id", "summary").click()
    browser.find_element("css selector", "#panel li.diff-changed").click()  # reveal it
    sel = browser.find_element("css selector", "#viewport .node.selected")
    assert "diff-changed" in sel.get_attribute("class")
    assert browser.execute_script(
        f"return window.onemodelView.data.nodes[{sel.get_attribute('data-node')}].n") == CONV
    assert "values changed" in browser.find_element("id", "panel").text


def test_a_graph_without_nodes_loads(browser, tmp_path):
    for k, (ins, outs) in enumerate((([], []), ([vi("x")], [vi("x")]))):
        path = save(tmp_path / f"empty{k}.onnx", [], ins, outs)
        got = _open(browser, tmp_path, path, f"empty{k}.html")  # (no console error)
        assert got["nodes"] == got["leaves"] == 2 * k


def test_a_run_marks_the_first_differing_node(browser, tmp_path):
    from test_view_diff import CONV, DETECTOR, changed_detector
    from typer.testing import CliRunner

    import onemodel.cli as cli

    b, _ = changed_detector(tmp_path / "b.onnx")
    out = tmp_path / "run.html"
    r = CliRunner().invoke(cli.app, ["view", str(DETECTOR), str(b), "--run", "-o", str(out)])
    assert r.exit_code == 0, r.stderr
    browser.get(out.as_uri())
    deadline = time.monotonic() + READY_SECONDS
    while browser.execute_script("return document.body.getAttribute('data-ready')") != "1":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    browser.find_element("css selector", "#panel p.link").click()  # "first differing node"
    sel = browser.find_element("css selector", "#viewport .node.selected")
    assert {"run-first", "run-beyond"} <= set(sel.get_attribute("class").split())
    assert browser.execute_script(
        f"return window.onemodelView.data.nodes[{sel.get_attribute('data-node')}].n") == CONV


def _ready(browser, page_path) -> None:
    browser.get(page_path.as_uri())
    deadline = time.monotonic() + READY_SECONDS
    while browser.execute_script("return document.body.getAttribute('data-ready')") != "1":
        assert time.monotonic() < deadline, "the page never became ready"
        time.sleep(0.05)
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def test_a_change_inside_an_if_branch_is_highlighted_in_place(browser, tmp_path):
    from test_view_diff import _nested

    from onemodel.view import render_diff

    a, b = _nested(tmp_path / "a.onnx"), _nested(tmp_path / "b.onnx", alpha=0.2)
    with onemodel.load(a) as ma, onemodel.load(b) as mb:
        (tmp_path / "nested.html").write_text(render_diff(ma, "a", mb, "b"), "utf-8")
    _ready(browser, tmp_path / "nested.html")
    assert "1 changed" in browser.find_element("id", "panel").text
    browser.find_element("id", "close-all").click()  # closed, the If's group is marked
    marked = browser.find_elements("css selector", "#viewport .item.group.has-diff")
    labels = browser.execute_script("return window.onemodelView.data.groups.map(g => g.l)")
    assert [labels[int(e.get_attribute("data-group"))] for e in marked] == ["If branch"]
    browser.find_element("css selector", "#panel li.diff-changed").click()  # reveal it
    sel = browser.find_element("css selector", "#viewport .node.selected")
    assert "diff-changed" in sel.get_attribute("class")
    assert browser.execute_script(
        f"return window.onemodelView.data.nodes[{sel.get_attribute('data-node')}].n") == \
        "then_relu"
    assert "attribute alpha: 0.1 -> 0.2" in browser.find_element("id", "panel").text


def test_text_from_the_model_is_shown_as_text_and_runs_nothing(browser, tmp_path):
    """Every string of the model that reaches the page (node, value, graph and producer names,
    doc strings, a string attribute, metadata) carries markup that would set window.ran if it
    ran: it is shown as the same text, and nothing set it."""
    import onnx

    name = "<script>alert(1)</script>"
    doc = '<img src=x onerror="window.ran=2"><b>bold?</b>'
    value = '<iframe srcdoc="<script>parent.ran=3</script>">'
    nodes = [helper.make_node("Relu", ["x"], [value], name=name, doc_string=doc),
             helper.make_node("Constant", [], ["s"], name="const",
                              value_string='<svg onload="window.ran=4">'),
             helper.make_node("Relu", [value], ["y"], name="second")]
    g = helper.make_graph(nodes, '<style>*{display:none}</style>', [vi("x")], [vi("y")],
                          doc_string=doc)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name='<a href="javascript:window.ran=5">p</a>', doc_string=doc)
    helper.set_model_props(m, {"<u>key</u>": '<script>window.ran=6</script>'})
    path = tmp_path / "xss.onnx"
    onnx.save(m, str(path))
    _open(browser, tmp_path, path, "xss.html")
    assert browser.find_element("id", "title").text.startswith("<style>")
    box = browser.find_element("id", "search")
    box.send_keys("alert\n")
    browser.find_element("css selector", "#viewport .node.selected").click()
    panel = browser.find_element("id", "panel").text
    assert name in panel and "<b>bold?</b>" in panel and 'onerror="window.ran=2"' in panel
    assert value in panel
    box.clear()
    box.send_keys("const\n")
    browser.find_element("css selector", "#viewport .node.selected").click()
    assert '<svg onload="window.ran=4">' in browser.find_element("id", "panel").text
    browser.find_element("id", "summary").click()
    summary = browser.find_element("id", "panel").text
    assert '<a href="javascript:window.ran=5">p</a>' in summary and "<u>key</u>" in summary
    assert browser.execute_script(
        "return [window.ran, document.querySelectorAll('img, iframe, b, u, a[href]').length, "
        "document.querySelectorAll('script').length, document.querySelectorAll('style').length"
        "]") == [None, 0, 3, 1]  # the page's own scripts (data, dagre, its own) and style
