"""The model as the page of ``onemodel view`` shows it: plain data, JSON-ready.

:func:`page_model` walks every graph (the main graph, each subgraph of If, Loop and Scan, each
model-local function's body) and returns tables the page's script reads:

* ``nodes``: ``{"n": name, "o": op_type, "d": domain, "v": version, "i": [value], "u":
  [value], "p": group, "k": kind}`` (kind ``"op"``, ``"input"``, ``"output"``), with
  ``"a"`` (attributes as ``[name, text]``), ``"f"`` (findings), ``"doc"``, ``"fn"`` (the
  group of the local function it calls) when there are any;
* ``values``: ``[name, type, initializer, producer]``, the type an index into ``types``
  (inferred by :func:`onemodel.inference.infer_model`, else declared; ``-1`` unknown),
  ``initializer`` an index into ``inits`` or ``-1``, ``producer`` a node or ``-1``;
* ``inits``: ``{"n", "t": dtype, "s": dims, "b": bytes, "st": statistics}``
  (:func:`.statistics.tensor_statistics`);
* ``groups`` (:mod:`.grouping`; a node with subgraphs is a group ``"k": "node"`` holding the
  node and one group ``"subgraph"`` per graph; each function a group ``"function"``);
* ``findings``: ``{"c": code, "s": severity, "m": message, "p": path, "node": node or -1}``
  of :func:`onemodel.check` on the model in memory, each on the node (or the initializer's
  consumers) its path names;
* ``categories``: the kind of each op type of the model that has one
  (:data:`.categories.CATEGORY`), which colours its nodes;
* ``summary``: :func:`onemodel.summary.summarize`, and ``notes`` (what could not be done).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import OneModelError
from ..inference import Value, infer_model
from ..ir import Graph, Tensor
from ..ir.dtypes import name_of
from ..lazy import np
from .categories import CATEGORY
from .grouping import group_items, scope_of
from .statistics import statistics_of

#: Characters of one attribute's text on the page; longer ones are cut (the length is said).
ATTRIBUTE_TEXT = 400
#: Elements of a list attribute shown.
LIST_ITEMS = 64

_NODE_PATH = re.compile(r"nodes\[\d+\]")
_INIT_PATH = re.compile(r"^(.*)\.initializers\[(\d+)\]")


@dataclass
class Scopes:
    """Where each item of the page data is, for aligning two models (:mod:`.diff`); not on the
    page. ``node_graph[k]``, ``value_graph[v]``: the group of the graph node ``k`` or value
    ``v`` is in (-1: the main graph; a ``"subgraph"`` or ``"function"`` group); ``tags[g]`` of
    such a group: ``("attribute", node, attribute name, field)`` for a subgraph (the node
    holding it, the field ``g`` or ``graphs[i]``), ``("function", domain, name, overload)`` for
    a function; ``tensors[i]``: the :class:`onemodel.ir.Tensor` of ``inits[i]``."""

    node_graph: list
    value_graph: list
    tags: dict
    tensors: list


def page_model(model, name: str) -> dict:
    """The page data of ``model`` (an open :class:`onemodel.Model`; initializer statistics read
    its bytes), titled ``name``. Inference and check failures are kept as notes, not raised:
    the page shows what could be found, and so are tensors whose bytes cannot be read (their
    statistics say why)."""
    return page_model_scoped(model, name)[0]


def page_model_scoped(model, name: str) -> tuple[dict, Scopes]:
    """:func:`page_model` and the :class:`Scopes` of its items (what ``view A B`` aligns)."""
    from ..summary import summarize

    b = _Builder(model)
    b.notes = []
    try:
        b.inferred = infer_model(model).graphs
    except OneModelError as e:
        b.notes.append(f"shape inference failed: {e}")
    b.walk_graph(model.graph, "graph", -1, None, model.opset_imports)
    for k, f in enumerate(model.functions):
        g = len(b.groups)
        label = f"function {f.domain + '.' if f.domain else ''}{f.name}"
        b.groups.append({"l": label, "p": -1, "k": "function", "c": 0})
        b.functions[(f.domain or "", f.name, f.overload or "")] = g
        b.tags[g] = ("function", f.domain or "", f.name or "", f.overload or "")
        b.function_bodies.append((f, f"functions[{k}]", g))
    for f, path, g in b.function_bodies:
        b.graph = g
        scope = {n: b.value(n, None, path, None) for n in f.inputs}
        b.groups[g]["c"] = b.walk_nodes(f.nodes, path, g, scope, f.opset_imports,
                                        outputs=f.outputs)
    b.link_calls()
    for rec, st in zip(b.inits, statistics_of(b.init_tensors)):
        rec["st"] = st
    b.attach_findings()
    summary = summarize(model)
    data = {"title": name, "summary": summary, "notes": b.notes, "nodes": b.nodes,
            "categories": {op: kind for op in sorted({n["o"] for n in b.nodes})
                           if (kind := CATEGORY.get(op)) is not None},
            "values": b.values, "types": b.types, "inits": b.inits, "groups": b.groups,
            "findings": b.findings}
    return data, Scopes(b.node_graph, b.value_graph, b.tags, b.init_tensors)


class _Builder:
    def __init__(self, model):
        self.model = model
        self.inferred: dict = {}
        self.nodes: list = []
        self.values: list = []
        self.types: list = []
        self._type_index: dict = {}
        self._by_value: dict = {}
        self.inits: list = []
        self.init_tensors: list = []
        self.groups: list = []
        self.findings: list = []
        self.node_paths: dict[str, int] = {}
        self.init_paths: dict[str, int] = {}
        self.functions: dict = {}
        self.function_bodies: list = []
        self.calls: list = []  # (node index, (domain, op_type, overload))
        self.graph = -1  # the group of the graph being walked (Scopes.node_graph)
        self.node_graph: list = []
        self.value_graph: list = []
        self.tags: dict = {}

    # -- values -----------------------------------------------------------------------------
    def type_of(self, gpath: str, name: str, declared) -> int:
        v = self.inferred.get(gpath, {}).get(name)
        if v is None or v.kind is None:
            if declared is None:
                return -1
            v = Value.from_type(declared)
        i = self._by_value.get(v)  # (Values hash by content: one str() per distinct type)
        if i is not None:
            return i
        text = str(v)
        i = self._type_index.get(text)
        if i is None:
            i = self._type_index[text] = len(self.types)
            self.types.append(text)
        self._by_value[v] = i
        return i

    def value(self, name: str, declared, gpath: str, init: int | None) -> int:
        self.values.append([name, self.type_of(gpath, name, declared),
                            -1 if init is None else init, -1])
        self.value_graph.append(self.graph)
        return len(self.values) - 1

    def initializer(self, t, path: str) -> int:
        self.init_tensors.append(t)  # (statistics_of reads them all at the end, batched)
        self.inits.append({"n": t.name or "", "t": name_of(t.data_type or 0),
                           "s": list(t.dims), "b": t.nbytes, "st": None})
        self.init_paths[path] = len(self.inits) - 1
        return len(self.inits) - 1

    # -- graphs -----------------------------------------------------------------------------
    def walk_graph(self, graph, gpath: str, parent: int, outer: dict | None, opsets) -> int:
        """Walk ``graph`` (values, initializers, nodes) into groups below ``parent``; return the
        nodes counted below it."""
        self.graph = parent
        scope = dict(outer or {})
        declared = {vi.name: vi.type for vi in graph.value_info}
        for i, t in enumerate(graph.initializers):
            k = self.initializer(t, f"{gpath}.initializers[{i}]")
            scope[t.name or ""] = self.value(t.name or "", None, gpath, k)
        inputs = []
        for vi in graph.inputs:
            if vi.name in scope and self.values[scope[vi.name]][2] >= 0:
                continue  # an initializer listed as an input (IR < 4): its default
            v = scope[vi.name] = self.value(vi.name, vi.type, gpath, None)
            inputs.append(self.add_node(vi.name, "Input", "", None, [], [v], "input", gpath))
            self.values[v][3] = inputs[-1]
        for o in graph.outputs:
            declared.setdefault(o.name, o.type)
        return self.walk_nodes(graph.nodes, gpath, parent, scope, opsets, declared=declared,
                               inputs=inputs, outputs=[o.name for o in graph.outputs])

    def walk_nodes(self, nodes, gpath, parent, scope, opsets, declared=None, inputs=(),
                   outputs=()) -> int:
        self.graph = parent
        declared = declared or {}
        versions = {(o.domain or "") if o.domain != "ai.onnx" else "": o.version for o in opsets}
        items = [(("n", i), (), "Input") for i in inputs]
        nested = []  # (node index, node, node path)
        for j, node in enumerate(nodes):
            npath = f"{gpath}.nodes[{j}]"
            ins = [self.lookup(n, scope, gpath) if n else -1 for n in node.inputs]
            outs = []
            for n in node.outputs:
                if not n:
                    outs.append(-1)
                    continue
                v = scope[n] = self.value(n, declared.get(n), gpath, None)
                outs.append(v)
            domain = node.domain or ""
            k = self.add_node(node.name or "", node.op_type or "", domain,
                              versions.get("" if domain == "ai.onnx" else domain), ins, outs,
                              "op", npath, node)
            for v in outs:
                if v >= 0:
                    self.values[v][3] = k
            self.calls.append((k, (domain, node.op_type or "", node.overload or "")))
            if node.attributes and any(a.g is not None or a.graphs for a in node.attributes):
                nested.append((k, node, npath))
                items.append((("g", k), scope_of(node.name or ""), node.op_type or ""))
            else:
                items.append((("n", k), scope_of(node.name or ""), node.op_type or ""))
        outs = []
        for n in outputs:
            v = self.lookup(n, scope, gpath)
            outs.append(self.add_node(n, "Output", "", None, [v], [], "output", gpath))
        items += [(("n", k), (), "Output") for k in outs]
        # a node with subgraphs: a group of the node and its graphs, placed as the node is
        holders = {}
        for k, node, npath in nested:
            g = len(self.groups)
            self.groups.append({"l": f"{node.op_type} {node.name or ''}".strip(), "p": -1,
                                "k": "node", "c": 1, "node": k})
            holders[("g", k)] = g
            self.nodes[k]["p"] = g
            for ai, a in enumerate(node.attributes):
                for field, sub in a.subgraphs():
                    sg = len(self.groups)
                    self.groups.append({"l": f"{a.name}" + (f" ({sub.name})" if sub.name else ""),
                                        "p": g, "k": "subgraph", "c": 0})
                    self.tags[sg] = ("attribute", k, a.name or "", field)
                    self.groups[sg]["c"] = self.walk_graph(
                        sub, f"{npath}.attributes[{ai}].{field}", sg, scope, opsets)
                    self.groups[g]["c"] += self.groups[sg]["c"]
        placed = group_items(self.groups, parent, items)
        total = 0
        for key, p in placed.items():
            if key[0] == "n":
                self.nodes[key[1]]["p"] = p
                total += 1
            else:
                self.groups[holders[key]]["p"] = p
                total += self.groups[holders[key]]["c"]
        return total

    def lookup(self, name: str, scope: dict, gpath: str) -> int:
        v = scope.get(name)
        if v is None:  # used, never defined (check reports it): a value without a producer
            v = scope[name] = self.value(name, None, gpath, None)
        return v

    def add_node(self, name, op, domain, version, ins, outs, kind, path, node=None) -> int:
        rec = {"n": name, "o": op, "d": domain, "v": version, "i": ins, "u": outs, "p": -1,
               "k": kind}
        if node is not None:
            if node.attributes:
                rec["a"] = [[a.name or "", _attribute_text(a)] for a in node.attributes]
            if node.doc_string:
                rec["doc"] = _clip(node.doc_string)
        self.nodes.append(rec)
        self.node_graph.append(self.graph)
        k = len(self.nodes) - 1
        if kind == "op":
            self.node_paths[path] = k
        return k

    def link_calls(self) -> None:
        for k, key in self.calls:
            g = self.functions.get(key)
            if g is not None:
                self.nodes[k]["fn"] = g

    # -- findings ---------------------------------------------------------------------------
    def attach_findings(self) -> None:
        from ..validation import check
        try:
            report = check(self.model)
        except OneModelError as e:
            self.notes.append(f"check failed: {e}")
            return
        consumers: dict[int, list[int]] = {}
        for k, n in enumerate(self.nodes):
            for v in n["i"]:
                if v >= 0 and self.values[v][2] >= 0:
                    consumers.setdefault(self.values[v][2], []).append(k)
        for f in report.findings:
            idx = len(self.findings)
            targets = self.targets(f.path or "", consumers)
            self.findings.append({"c": f.code, "s": f.severity, "m": f.message,
                                  "p": f.path or "", "node": targets[0] if targets else -1})
            for k in targets:
                self.nodes[k].setdefault("f", []).append(idx)

    def targets(self, path: str, consumers: dict) -> list[int]:
        """The nodes a finding's path names: the node of its longest ``nodes[k]`` prefix, else
        the consumers of the initializer it names."""
        for m in reversed(list(_NODE_PATH.finditer(path))):
            k = self.node_paths.get(path[:m.end()])
            if k is not None:
                return [k]
        m = _INIT_PATH.match(path)
        if m:
            i = self.init_paths.get(f"{m.group(1)}.initializers[{m.group(2)}]")
            if i is not None:
                return consumers.get(i, [])
        return []


def _clip(text: str, limit: int = ATTRIBUTE_TEXT) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\u2026 ({len(text)} characters)"


def _attribute_text(a) -> str:
    """One line for an attribute's value: numbers, lists (the first :data:`LIST_ITEMS`),
    strings decoded (UTF-8, invalid bytes replaced), a tensor's type and shape, a graph's node
    count."""
    if a.ref_attr_name:
        return f"@{a.ref_attr_name}"
    try:
        v = a.value
    except OneModelError as e:
        return f"(unreadable: {e})"
    return _clip(_text(v))


def _text(v) -> str:
    if isinstance(v, bytes):
        return repr(v.decode("utf-8", "replace"))
    if isinstance(v, Tensor):
        return f"tensor {name_of(v.data_type or 0)}{list(v.dims)}"
    if isinstance(v, Graph):
        return f"graph {v.name or ''} ({len(v.nodes)} nodes)"
    if isinstance(v, (list, tuple)) or hasattr(v, "tolist"):
        items = list(v.tolist() if hasattr(v, "tolist") else v)
        shown = ", ".join(_text(x) for x in items[:LIST_ITEMS])
        more = f", \u2026 ({len(items)} items)" if len(items) > LIST_ITEMS else ""
        return f"[{shown}{more}]"
    if isinstance(v, float):  # (attribute floats are float32: their shortest form, 0.1)
        return str(np.float32(v))
    return str(v)
