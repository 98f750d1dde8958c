"""``onemodel view A B``: what changed from model A to model B, on B's page.

Nodes of the main graphs are aligned by name (a node without one by its first output's name),
initializers by name. A node of B is **added** when A has none of its name; **changed** when
its op type, domain, attributes, an output's inferred type, or an initializer it reads
(element type, shape or bytes) differs from A's; the nodes of A that B lacks are **removed**
(listed: B's page cannot draw them). Weights are compared byte for byte where they lie (a
mapped file is not copied; a remote one is fetched).
"""

from __future__ import annotations

from ..errors import OneModelError


def _key(n: dict, values: list) -> str:
    if n["n"]:
        return n["n"]
    first = next((v for v in n["u"] if v >= 0), -1)
    return "#" + (values[first][0] if first >= 0 else "")


def _types(n: dict, data: dict) -> list:
    return [(data["values"][v][0], data["types"][data["values"][v][1]]
             if data["values"][v][1] >= 0 else "?") for v in n["u"] if v >= 0]


def annotate_diff(data_b: dict, model_b, data_a: dict, model_a, title_a: str) -> dict:
    """Mark ``data_b`` (the page data of ``model_b``) with its differences from ``model_a``
    (page data ``data_a``): each added or changed node gets ``"df"`` (``"added"``,
    ``"changed"``) and ``"dr"`` (the reasons, one line each); ``data_b["diff"]`` is ``{"against":
    title_a, "added": n, "changed": n, "removed": [[name, op]], "weights": n}``. Returns that
    record. Only the main graph is compared; its nodes are the page's with kind ``op`` and no
    enclosing subgraph or function."""
    def main_ops(data):
        inside = {g for g, gr in enumerate(data["groups"]) if gr["k"] in ("subgraph", "function")}
        out = {}
        for k, n in enumerate(data["nodes"]):
            if n["k"] != "op" or _under(n["p"], data["groups"], inside):
                continue
            out.setdefault(_key(n, data["values"]), k)
        return out
    ops_a, ops_b = main_ops(data_a), main_ops(data_b)
    weights = _changed_weights(model_a, model_b)
    added = changed = 0
    for key, k in ops_b.items():
        n = data_b["nodes"][k]
        if key not in ops_a:
            n["df"], n["dr"] = "added", [f"not in {title_a}"]
            added += 1
            continue
        m = data_a["nodes"][ops_a[key]]
        reasons = []
        if (m["o"], m["d"]) != (n["o"], n["d"]):
            reasons.append(f"op {m['d'] + '.' if m['d'] else ''}{m['o']} -> "
                           f"{n['d'] + '.' if n['d'] else ''}{n['o']}")
        before, after = dict(m.get("a", [])), dict(n.get("a", []))
        for name in sorted(set(before) | set(after)):
            if before.get(name) != after.get(name):
                reasons.append(f"attribute {name}: {before.get(name, '(none)')} -> "
                               f"{after.get(name, '(none)')}")
        for (name, t), (name_a, t_a) in zip(_types(n, data_b), _types(m, data_a)):
            if t != t_a:
                reasons.append(f"type of {name}: {t_a} -> {t}")
        for v in n["i"]:
            if v >= 0 and data_b["values"][v][0] in weights:
                reasons.append(weights[data_b["values"][v][0]])
        if reasons:
            n["df"], n["dr"] = "changed", reasons
            changed += 1
    removed = [[data_a["nodes"][k]["n"], data_a["nodes"][k]["o"]]
               for key, k in ops_a.items() if key not in ops_b]
    record = {"against": title_a, "added": added, "changed": changed, "removed": removed,
              "weights": len(weights)}
    data_b["diff"] = record
    return record


def _under(g: int, groups: list, inside: set) -> bool:
    while g >= 0:
        if g in inside:
            return True
        g = groups[g]["p"]
    return False


def _changed_weights(model_a, model_b) -> dict[str, str]:
    """Initializer name -> how it changed, for the main graph's initializers of both models
    that differ (element type, shape, or bytes)."""
    from ..ir.dtypes import DataType, name_of

    STRING = DataType.STRING
    a = model_a.graph.initializer_map()
    out = {}
    for name, t in model_b.graph.initializer_map().items():
        s = a.get(name)
        if s is None:
            continue
        before = f"{name_of(s.data_type or 0)}{list(s.dims)}"
        after = f"{name_of(t.data_type or 0)}{list(t.dims)}"
        if before != after:
            out[name] = f"weight {name}: {before} -> {after}"
            continue
        try:
            same = (list(s.string_data) == list(t.string_data) if s.data_type == STRING
                    else s.raw_view() == t.raw_view())
        except OneModelError as e:
            out[name] = f"weight {name}: not compared ({e})"
            continue
        if not same:
            out[name] = f"weight {name}: values changed"
    return out


def annotate_run(data_b: dict, report, verdict: str | None) -> dict:
    """Mark ``data_b`` with a run of both models (``report``: the
    :class:`onemodel.bisect.BisectReport` of A against B on the same inputs): each main-graph
    node of B whose outputs were compared gets ``"rd"``, the largest ``max_abs`` of its
    outputs (``None`` when a structure or dtype differs, or no element is finite on both
    sides), and ``"rw"``, whether every output is within tolerance; ``data_b["run"]`` is
    ``{"first": B's node of the first differing node (-1: none), "verdict": its verdict
    line, "differing", "compared", "nodes", "engines"}``. Returns that record."""
    comparisons = report.comparisons
    values = data_b["values"]
    first_name = None if report.first is None else report.first.name
    first_outputs = set() if report.first is None else {n for n, _ in report.first.outputs}
    first = -1
    for k, n in enumerate(data_b["nodes"]):
        if n["k"] != "op":
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
