"""Groups of the page of ``onemodel view``: nodes grouped by name scope, long runs chunked.

Exporters name nodes by module scope (``/model.15/m.0/cv1/conv/Conv``): each ``/``-separated
part but the last is a group, nested. A group holding one other group only is merged into it
(``model.15/m.0``); a group holding one item only is dropped (the item takes its place). Then
any level (the top level too) with more than :data:`GROUP_SIZE` entries has its long stretches
of scope-less items cut into runs, then its entries into runs of runs, in node order, until no
level has more: a chain of 50,000 unscoped nodes becomes three levels of at most 40, so any
model opens on a screenful.
"""

from __future__ import annotations

#: Items (nodes and groups) one group shows when it is opened; more are chunked into runs.
GROUP_SIZE = 40


def scope_of(name: str) -> tuple[str, ...]:
    """The scope parts of a node name: every non-empty ``/``-separated part but the last
    (``"/a/b/Conv"`` -> ``("a", "b")``; ``"Conv_3"`` -> ``()``)."""
    if "/" not in name:
        return ()
    parts = [p for p in name.split("/") if p]
    return tuple(parts[:-1])


class _Tree:
    __slots__ = ("label", "items", "sub")

    def __init__(self, label: str):
        self.label = label
        self.items: list = []  # ("item", key) | ("tree", _Tree), in first-appearance order
        self.sub: dict[str, _Tree] = {}


def group_items(groups: list, parent: int, items: list, kind_of_label=None) -> dict:
    """Group ``items`` under the group ``parent`` (``-1``: the top level), appending the new
    groups to ``groups`` (each ``{"l": label, "p": parent, "k": kind, "c": items below}``; kind
    ``"scope"`` or ``"run"``). ``items``: ``(key, scope, op)`` in node order; ``op`` names the
    item in a run's label. Returns ``{key: the index of its group, or parent}``."""
    root = _Tree("")
    for key, scope, op in items:
        t = root
        for part in scope:
            s = t.sub.get(part)
            if s is None:
                s = t.sub[part] = _Tree(part)
                t.items.append(("tree", s))
            t = s
        t.items.append(("item", (key, op)))
    placed: dict = {}
    _emit(groups, parent, _simplify(root).items, placed)
    return placed


def _simplify(t: _Tree) -> _Tree:
    """Merge single-group chains, drop groups of one item (in place, depth first)."""
    out = []
    for kind, x in t.items:
        if kind == "tree":
            x = _simplify(x)
            while len(x.items) == 1 and x.items[0][0] == "tree":
                inner = x.items[0][1]
                inner.label = f"{x.label}/{inner.label}"
                x = inner
            if len(x.items) == 1:
                out.append(x.items[0])
                continue
        out.append((kind, x))
    t.items = out
    return t


#: Consecutive scope-less items that become runs of their own when a level is too full.
RUN_MIN = 8


def _arrange(entries: list) -> list:
    """``entries`` with at most :data:`GROUP_SIZE` at this level: when there are more, each
    stretch of more than :data:`RUN_MIN` consecutive items (no scope) is cut into runs of at
    most ``GROUP_SIZE``; then, while the level still has more, its entries are cut into runs
    of ``GROUP_SIZE`` in order (runs of runs: a tree of logarithmic depth)."""
    if len(entries) <= GROUP_SIZE:
        return entries
    out: list = []
    stretch: list = []

    def flush():
        if len(stretch) > RUN_MIN:
            out.extend(_runs(stretch))
        else:
            out.extend(stretch)
        stretch.clear()

    for e in entries:
        if e[0] == "item":
            stretch.append(e)
        else:
            flush()
            out.append(e)
    flush()
    while len(out) > GROUP_SIZE:
        out = _runs(out)
    return out


def _runs(entries: list) -> list:
    """``entries`` cut into ``ceil(n / GROUP_SIZE)`` runs of near-equal length, in order."""
    count = -(-len(entries) // GROUP_SIZE)
    per = -(-len(entries) // count)
    return [("run", entries[i:i + per]) if len(entries[i:i + per]) > 1 else entries[i]
            for i in range(0, len(entries), per)]


def _emit(groups: list, parent: int, entries: list, placed: dict) -> int:
    """Append the groups of ``entries`` below ``parent``; return the items counted below."""
    return sum(_emit_one(groups, parent, e, placed) for e in _arrange(entries))


def _emit_one(groups: list, parent: int, entry, placed: dict) -> int:
    kind, x = entry
    if kind == "item":
        placed[x[0]] = parent
        return 1
    g = len(groups)
    if kind == "run":
        groups.append({"l": _run_label(x), "p": parent, "k": "run", "c": 0})
        groups[g]["c"] = sum(_emit_one(groups, g, e, placed) for e in x)
    else:
        groups.append({"l": x.label, "p": parent, "k": "scope", "c": 0})
        groups[g]["c"] = _emit(groups, g, x.items, placed)
    return groups[g]["c"]


def _run_label(run: list) -> str:
    """``"Add ×20, Relu ×5"``: the ops (and scopes) of a run, the most frequent first (three)."""
    counts: dict[str, int] = {}
    for op, n in _ops(run):
        counts[op] = counts.get(op, 0) + n
    top = sorted(counts.items(), key=lambda kv: -kv[1])  # (stable: first seen first on ties)
    text = ", ".join(f"{k} \u00d7{n}" for k, n in top[:3])
    return text + (", \u2026" if len(top) > 3 else "")


def _ops(entries: list):
    """``(name, count)`` of each entry of a run: an item's op, a scope's label with ``/``,
    a run's own ops (counted through)."""
    for kind, x in entries:
        if kind == "item":
            yield x[1], 1
        elif kind == "tree":
            yield x.label + "/", 1
        else:
            yield from _ops(x)
