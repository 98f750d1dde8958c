"""``check --full``: the types and shapes of every intermediate value, from shape inference
(ONNX Part 1, Clauses 9.4 and 10.4; :mod:`onemodel.inference`).

Inference walks every graph (subgraphs and model-local functions through their calls) and
finds two kinds of contradiction, each reported as ``OM410`` (error) at the node or value
where it was found: what the model declares (a graph input or output, a ``value_info``) that
the operators cannot produce (another element type, another rank, an extent that cannot be
equal), and what an operator requires of its inputs that they cannot satisfy (extents that must
be equal, an axis out of range, a required rank). Operators without an inference rule are
listed once, ``OM411`` (info): their outputs get the element types their definitions' type
constraints give and an unknown shape, so what follows them is checked less. A node output
with an extent of 2^63 or more, which no ``dim_value`` (an int64, Clause 12.2) records, is
``OM412`` (warning): ``onemodel infer`` writes that extent as unknown.
A node whose outputs inference leaves less known at a documented limit (an extent or element
past ``MAX_EXPR_SIZE``, a function call not expanded) is ``OM413`` (info), at the node.
"""

from __future__ import annotations

from .codes import finding
from .paths import file_path

#: How the engine names a path inside a model-local function's body, after the calling node.
_FUNCTION = "(function "


def path_in_file(model, path: str | None, fmt: str | None) -> str | None:
    """An inference path (IR field names: ``graph.nodes[3]``,
    ``graph.nodes[2].attributes[0].g.outputs[0]``) in the file's terms
    (:func:`.paths.file_path`). Inside a model-local function's body the engine names the
    call and then the body's field (``graph.nodes[3](function f).nodes[1]``): each part is
    translated, the body's from the function of that name (ONNX:
    ``graph.node[3](function f).node[1]``; OneModel: ``manifest.graph.nodes[3](function
    f).nodes[1]``)."""
    if path is None:
        return None
    head, *calls = path.split(_FUNCTION)
    out = file_path(model, head, fmt)
    for call in calls:
        name, _, rest = call.partition(").")
        if fmt == "onnx":
            from ..formats.onnx.paths import onnx_path

            f = next((f for f in model.functions if f.name == name), None)
            if f is not None:
                rest = onnx_path(f, rest)
        out += f"{_FUNCTION}{name})." + rest
    return out


def check_inferred(model, ctx: dict) -> list:
    """The findings of shape inference on ``model`` when ``ctx["full"]`` (else none): one
    ``OM410`` per contradiction, one ``OM411`` naming every operator without a rule, one
    ``OM413`` per :class:`~onemodel.inference.engine.Note` (a limit met). Paths
    are in the file's terms (``ctx["fmt"]``). Initializers of at most
    :data:`onemodel.inference.value.MAX_DATA` elements are read when a rule needs their
    elements (shapes, axes); no other tensor is. Raises InternalError for a rule's bug."""
    if not ctx.get("full") or model.graph is None:
        return []
    from ..inference import infer_model, operator_names, wide_extents

    res = infer_model(model)
    fmt = ctx.get("fmt")
    found = [finding("OM410", c.message, path_in_file(model, c.path, fmt))
             for c in res.contradictions]
    found += [finding("OM412", wide_message(w), path_in_file(
        model, f"{w['path']}.nodes[{w['node']}]", fmt)) for w in wide_extents(model, res)]
    ops = operator_names(res.no_rule)
    if ops:
        found.append(finding("OM411", f"no inference rule for {len(ops)} operator"
                             f"{'' if len(ops) == 1 else 's'} ({', '.join(ops)}): their "
                             "outputs' shapes are unknown, what depends on them is checked "
                             "less"))
    found.extend(finding("OM413", n.message, path_in_file(model, n.path, fmt))
                 for n in res.notes)
    return found


def wide_message(w: dict) -> str:
    """The words of one entry of :func:`onemodel.inference.wide_extents` (``OM412``, and the
    note of ``onemodel infer``)."""
    from ..errors import quote

    of = f"the element of output {quote(w['name'])}" if w["where"] else \
        f"output {quote(w['name'])}"
    return (f"{of} has extent {w['extent']} at axis {w['axis']}, above 2^63 - 1: no dim_value "
            "(an int64) holds it, so a written type gives it as unknown (onemodel infer)")


__all__ = ["check_inferred", "path_in_file", "wide_message"]
