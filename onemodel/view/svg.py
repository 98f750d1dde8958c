"""``onemodel view MODEL --format svg``: a static, deterministic picture of the page's graph
(the same model gives the same bytes), drawn without a browser, ``depth`` levels of it shown.

The layered layout is igraph's Sugiyama layout (``igraph``, the ``view`` extra: barycenter
crossing reduction within layers), run in Python over what is shown: ``depth`` levels, the top
level the first: with ``depth`` 1 each top-level group is one box (labelled with its name and
node count), with 2 the top-level groups are open and the groups in them are boxes, and so on;
open groups are drawn (their items drawn, without a frame: a layered layout does not keep
a group's items together). The layers are the longest path from the inputs, each item then
moved down to just above its first consumer (a Constant beside the node that reads it, not
at the top).
"""

from __future__ import annotations

from html import escape

from ..errors import UnsupportedError
from .categories import COLOURS, category

#: Items (nodes and closed groups) one picture draws at most.
MAX_ITEMS = 5000

#: Pixels of a layer (vertical) and of an item's slot (horizontal, at least).
LAYER, SLOT, HEIGHT, PAD = 72, 40, 40, 10


def page_svg(data: dict, depth: int = 2) -> str:
    """The SVG picture of the page data of :func:`.page_model.page_model`, ``depth`` (>= 1)
    levels shown. Raises UnsupportedError when igraph is not installed (``pip install
    igraph``, or the ``view`` extra), or for more than :data:`MAX_ITEMS` items to draw."""
    try:
        import igraph
    except ImportError:
        raise UnsupportedError("the SVG picture is laid out with igraph, which is not "
                               "installed: pip install igraph (or onemodel-onnx[view])") from None
    groups, nodes, values = data["groups"], data["nodes"], data["values"]
    level = _levels(groups)
    items: dict[tuple, int] = {}  # ("n", k) | ("g", g) -> index, in first-seen node order
    rep = []
    for k, n in enumerate(nodes):
        r = _rep(k, n, groups, level, depth - 1)
        rep.append(items.setdefault(r, len(items)))
    edges = []
    seen = set()
    for k, n in enumerate(nodes):
        b = rep[k]
        for v in n["i"]:
            if v < 0 or values[v][3] < 0:
                continue
            a = rep[values[v][3]]
            if a != b and (a, b) not in seen:
                seen.add((a, b))
                edges.append((a, b))
    keys = list(items)
    if len(keys) > MAX_ITEMS:
        raise UnsupportedError(f"{len(keys)} items to draw at depth {depth}, more than "
                               f"{MAX_ITEMS}: give a smaller depth")
    g = igraph.Graph(n=len(keys), edges=edges, directed=True)
    coords = g.layout_sugiyama(layers=_layers(len(keys), edges)).coords[:len(keys)] \
        if keys else []
    labels = [_label(key, data) for key in keys]
    widths = [min(280, 16 + 7 * max(len(a), len(b))) for a, b in labels]
    slot = max([SLOT] + widths) + 12
    xs = [x for x, _ in coords]
    x0 = min(xs, default=0)
    pos = [(PAD + (x - x0) * slot + slot / 2, PAD + 24 + y * LAYER + HEIGHT / 2)
           for x, y in coords]
    width = max((px + slot / 2 for px, _ in pos), default=200) + PAD
    height = max((py + HEIGHT / 2 for _, py in pos), default=40) + PAD
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="sans-serif" font-size="12">',
           f"<title>{escape(str(data.get('title', '')))}</title>",
           f'<text x="{PAD}" y="{PAD + 12}" font-weight="bold">'
           f"{escape(str(data.get('title', '')))}</text>"]
    for a, b in edges:
        (ax, ay), (bx, by) = pos[a], pos[b]
        ay, by = ay + HEIGHT / 2, by - HEIGHT / 2
        mid = (ay + by) / 2
        out.append(f'<path d="M{ax:.1f},{ay:.1f}C{ax:.1f},{mid:.1f} {bx:.1f},{mid:.1f} '
                   f'{bx:.1f},{by:.1f}" fill="none" stroke="#777"/>')
    for i, key in enumerate(keys):
        out.append(_item(key, pos[i], widths[i], labels[i], data))
    out.append("</svg>\n")
    return "\n".join(out)


def _levels(groups: list) -> list[int]:
    level = [-1] * len(groups)

    def lv(g):
        if level[g] < 0:
            p = groups[g]["p"]
            level[g] = 0 if p < 0 else lv(p) + 1
        return level[g]
    for g in range(len(groups)):
        lv(g)
    return level


def _rep(k: int, n: dict, groups: list, level: list, closed: int) -> tuple:
    """The item node ``k`` is drawn as: its outermost group at level ``closed`` or deeper (the
    top level is 0), else itself."""
    chain = []
    p = n["p"]
    while p >= 0:
        chain.append(p)
        p = groups[p]["p"]
    for g in reversed(chain):
        if level[g] >= closed:
            return ("g", g)
    return ("n", k)


def _label(key: tuple, data: dict) -> tuple[str, str]:
    if key[0] == "g":
        g = data["groups"][key[1]]
        return g["l"], f"{g['c']} node" + ("" if g["c"] == 1 else "s")
    n = data["nodes"][key[1]]
    return {"input": "Input", "output": "Output"}.get(n["k"], n["o"]), n["n"]


def _clip(s: str, w: float) -> str:
    n = max(4, int((w - 12) // 7))
    return s if len(s) <= n else s[:n - 1] + "\u2026"


def _item(key: tuple, p: tuple, w: float, label: tuple, data: dict) -> str:
    x, y = p[0] - w / 2, p[1] - HEIGHT / 2
    if key[0] == "g":
        fill, stroke, extra, text = "#fff7d6", "#b59b3b", ' stroke-dasharray="4 2"', "#222"
    else:
        n = data["nodes"][key[1]]
        kind = category(n, data["categories"])
        fill, stroke, extra = COLOURS[kind], "#555", ""
        text = "#fff" if kind == "io" else "#222"
        if n.get("f"):
            sev = {data["findings"][f]["s"] for f in n["f"]}
            stroke = "#d00" if "error" in sev else ("#e80" if "warning" in sev else "#38c")
            extra = ' stroke-width="3"'
    return (f'<g><rect x="{x:.1f}" y="{y:.1f}" width="{w:.0f}" height="{HEIGHT}" rx="4" '
            f'fill="{fill}" stroke="{stroke}"{extra}/>'
            f'<text x="{p[0]:.1f}" y="{y + 16:.1f}" text-anchor="middle" fill="{text}" '
            f'font-weight="bold">{escape(_clip(label[0], w))}</text>'
            f'<text x="{p[0]:.1f}" y="{y + 32:.1f}" text-anchor="middle" fill="{text}" '
            f'font-size="11">{escape(_clip(label[1], w))}</text></g>')


def _layers(n: int, edges: list) -> list[int]:
    """Each item's layer: the longest path to it from an item without inputs, then, in
    reverse order, an item with consumers moved down to one above the first of them. Edges
    that close a cycle (none in a valid graph; a group's aggregate may make one) are left out
    of the layering."""
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for a, b in edges:
        succ[a].append(b)
        indeg[b] += 1
    order = [i for i in range(n) if indeg[i] == 0]
    layer = [0] * n
    k = 0
    while k < len(order):
        a = order[k]
        k += 1
        for b in succ[a]:
            layer[b] = max(layer[b], layer[a] + 1)
            indeg[b] -= 1
            if indeg[b] == 0:
                order.append(b)
    placed = set(order)
    for i in range(n):  # (items on a cycle: after everything else, in index order)
        if i not in placed:
            order.append(i)
    for a in reversed(order):
        below = [layer[b] for b in succ[a] if layer[b] > layer[a]]
        if below:
            layer[a] = min(below) - 1
    return layer
