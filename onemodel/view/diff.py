"""``onemodel view A B``: what changed from model A to model B, on B's page.

Nodes of every graph (the main graph, the subgraphs of If, Loop and Scan, model-local
functions' bodies) are aligned by name (a node without one by its first output's name; a
graph's inputs and outputs by their values' names) within the graph aligned with theirs: a
subgraph by its holding node and attribute, a function by its domain, name and overload.
Initializers are aligned by name within their graphs. A node of B is **added** when A has none
of its key; **changed** when its op type, domain, attributes, the names of its inputs, an
output's inferred type, or an initializer it reads (element type, shape or bytes) differs from
A's; the nodes of A that B lacks are **removed** (listed: B's page cannot draw them). Weights
are compared byte for byte where they lie (a mapped file is not copied; a remote one is
fetched).
"""

from __future__ import annotations

from ..errors import OneModelError


def _key(n: dict, values: list) -> str:
    if n["k"] != "op":  # a graph's input or output, by its value's name
        return f"{n['k']}:{n['n']}"
    if n["n"]:
        return n["n"]
    first = next((v for v in n["u"] if v >= 0), -1)
    return "#" + (values[first][0] if first >= 0 else "")


def _types(n: dict, data: dict) -> list:
    """``(name, type)`` of what node ``n`` gives: its outputs; a graph output's value."""
    return [(data["values"][v][0], data["types"][data["values"][v][1]]
             if data["values"][v][1] >= 0 else "?")
            for v in (n["i"] if n["k"] == "output" else n["u"]) if v >= 0]


def _names(vs: list, values: list) -> list:
    return [values[v][0] if v >= 0 else "" for v in vs]


class _Keys:
    """The alignment key of each node, value and graph of one model's page data: the keys of
    the graphs holding it, outermost first, then its own (a node's name, else its first
    output's; a value's name). A subgraph's key is its holding node's and the attribute's
    name and field; a function's is its domain, name and overload."""

    def __init__(self, data: dict, scopes):
        self.data, self.scopes = data, scopes
        self._graphs: dict = {-1: ()}

    def graph(self, g: int) -> tuple:
        key = self._graphs.get(g)
        if key is None:
            tag = self.scopes.tags[g]
            key = (tag,) if tag[0] == "function" else self.node(tag[1]) + (tag[2:],)
            self._graphs[g] = key
        return key

    def node(self, k: int) -> tuple:
        return self.graph(self.scopes.node_graph[k]) + (
            _key(self.data["nodes"][k], self.data["values"]),)

    def value(self, v: int) -> tuple:
        return self.graph(self.scopes.value_graph[v]) + (self.data["values"][v][0],)

    def label(self, k: int) -> str:
        """Node ``k``'s name, after its holding nodes' and attributes' (``If_0 / then_branch /
        Add_3``) or its function's (``function d.f / Add_3``) when it is not in the main
        graph."""
        parts = []
        for part in self.node(k)[:-1]:
            if part[0] == "function":
                parts.append(f"function {part[1] + '.' if part[1] else ''}{part[2]}")
            elif isinstance(part, tuple):
                parts.append(part[0] if part[1] == "g" else f"{part[0]}[{part[1]}]")
            else:
                parts.append(part)
        return " / ".join(parts + [self.data["nodes"][k]["n"]])


def annotate_diff(data_b: dict, scopes_b, data_a: dict, scopes_a, title_a: str) -> dict:
    """Mark ``data_b`` (the page data of model B, with its :class:`.page_model.Scopes`) with
    its differences from model A (``data_a``, ``scopes_a``): each added or changed node, of
    every graph (the main graph, subgraphs of If, Loop and Scan, model-local functions' bodies;
    graph inputs and outputs included), gets ``"df"`` (``"added"``, ``"changed"``) and
    ``"dr"`` (the reasons, one line each); ``data_b["diff"]`` is ``{"against": title_a,
    "added": n, "changed": n, "removed": [[name, op]], "weights": n}``, a removed node's name
    after the graphs holding it (:meth:`_Keys.label`). Returns that record."""
    keys_a, keys_b = _Keys(data_a, scopes_a), _Keys(data_b, scopes_b)

    def items(data, keys):
        out = {}
        for k, n in enumerate(data["nodes"]):
            out.setdefault(keys.node(k), k)
        return out
    nodes_a, nodes_b = items(data_a, keys_a), items(data_b, keys_b)
    weights = _changed_weights(data_a, scopes_a, keys_a, data_b, scopes_b, keys_b)
    added = changed = 0
    for key, k in nodes_b.items():
        n = data_b["nodes"][k]
        if key not in nodes_a:
            n["df"], n["dr"] = "added", [f"not in {title_a}"]
            added += 1
            continue
        m = data_a["nodes"][nodes_a[key]]
        reasons = []
        if (m["o"], m["d"]) != (n["o"], n["d"]):
            reasons.append(f"op {m['d'] + '.' if m['d'] else ''}{m['o']} -> "
                           f"{n['d'] + '.' if n['d'] else ''}{n['o']}")
        before, after = dict(m.get("a", [])), dict(n.get("a", []))
        for name in sorted(set(before) | set(after)):
            if before.get(name) != after.get(name):
                reasons.append(f"attribute {name}: {before.get(name, '(none)')} -> "
                               f"{after.get(name, '(none)')}")
        if n["k"] == "op":
            for what in ("i", "u"):
                before, after = (_names(m[what], data_a["values"]),
                                 _names(n[what], data_b["values"]))
                if before != after:
                    reasons.append(f"{'inputs' if what == 'i' else 'outputs'} "
                                   f"{', '.join(before)} -> {', '.join(after)}")
        for (name, t), (name_a, t_a) in zip(_types(n, data_b), _types(m, data_a)):
            if t != t_a:
                reasons.append(f"type of {name}: {t_a} -> {t}")
        for v in n["i"]:
            if v in weights:
                reasons.append(weights[v])
        if reasons:
            n["df"], n["dr"] = "changed", reasons
            changed += 1
    removed = [[keys_a.label(k), data_a["nodes"][k]["o"]]
               for key, k in nodes_a.items() if key not in nodes_b]
    record = {"against": title_a, "added": added, "changed": changed, "removed": removed,
              "weights": len(weights)}
    data_b["diff"] = record
    return record


def _changed_weights(data_a, scopes_a, keys_a, data_b, scopes_b, keys_b) -> dict[int, str]:
    """B's value -> how its initializer changed, for the initializers of both models, in every
    graph, aligned by their graphs and names, that differ (element type, shape, or bytes)."""
    from ..ir.dtypes import DataType, name_of

    STRING = DataType.STRING
    a = {keys_a.value(v): rec[2] for v, rec in enumerate(data_a["values"]) if rec[2] >= 0}
    out = {}
    for v, rec in enumerate(data_b["values"]):
        if rec[2] < 0 or (i := a.get(keys_b.value(v))) is None:
            continue
        s, t, name = scopes_a.tensors[i], scopes_b.tensors[rec[2]], rec[0]
        before = f"{name_of(s.data_type or 0)}{list(s.dims)}"
        after = f"{name_of(t.data_type or 0)}{list(t.dims)}"
        if before != after:
            out[v] = f"weight {name}: {before} -> {after}"
            continue
        try:
            same = (list(s.string_data) == list(t.string_data) if s.data_type == STRING
                    else s.raw_view() == t.raw_view())
        except OneModelError as e:
            out[v] = f"weight {name}: not compared ({e})"
            continue
        if not same:
            out[v] = f"weight {name}: values changed"
    return out


def annotate_run(data_b: dict, scopes_b, report, verdict: str | None) -> dict:
    """Mark ``data_b`` (with its :class:`.page_model.Scopes`) with a run of both models
    (``report``: the :class:`onemodel.bisect.BisectReport` of A against B on the same inputs,
    which compares the main graph's values): each main-graph node of B whose outputs were
    compared gets ``"rd"``, the largest ``max_abs`` of its outputs (``None`` when a structure
    or dtype differs, or no element is finite on both sides), and ``"rw"``, whether every
    output is within tolerance; ``data_b["run"]`` is ``{"first": B's node of the first
    differing node (-1: none), "verdict": its verdict line, "differing", "compared", "nodes",
    "engines"}``. Returns that record."""
    comparisons = report.comparisons
    values = data_b["values"]
    first_name = None if report.first is None else report.first.name
    first_outputs = set() if report.first is None else {n for n, _ in report.first.outputs}
    first = -1
    for k, n in enumerate(data_b["nodes"]):
        if n["k"] != "op" or scopes_b.node_graph[k] != -1:
            continue
        cs = [comparisons[values[v][0]] for v in n["u"] if v >= 0 and values[v][0] in comparisons]
        if not cs:
            continue
        within = all(c.within for c in cs)
        diffs = [c.max_abs for c in cs]
        n["rd"] = None if any(d is None for d in diffs) and not within else \
            max((d for d in diffs if d is not None), default=0.0)
        n["rw"] = within
        outs = {values[v][0] for v in n["u"] if v >= 0}
        if first < 0 and report.first is not None and (
                (first_name and n["n"] == first_name) or outs & first_outputs):
            first = k
    record = {"first": first, "verdict": verdict, "differing": report.differing,
              "compared": report.nodes_compared, "nodes": report.nodes,
              "engines": list(report.engines)}
    data_b["run"] = record
    return record
