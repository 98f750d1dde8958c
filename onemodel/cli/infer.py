"""``onemodel infer IN OUT``: the model with a ``value_info`` entry for every node output whose
type shape inference knows (ONNX Part 1, Clause 9; :mod:`onemodel.inference`), everything else
as it was.

Registered on :data:`onemodel.cli.app` when the command line is imported. The file-to-file work
is :func:`infer_file`; printing is the command's.
"""

from __future__ import annotations

from typing import List, Optional

import typer

from ..errors import IoError, UnsupportedError, printable
from .application import (
    DebugOpt,
    OutsideOpt,
    QuietOpt,
    StorageOpt,
    _count,
    _errors,
    _keep_until_exit,
    _no_collections,
    _nothing_left_at_exit,
    _read_options,
    _storage,
    app,
    out,
)
from .redact import redact, shown


def _annotated_graphs(model, before: dict) -> list:
    """The graphs whose ``value_info`` grew since ``before`` (``{id(graph): count}``)."""
    from ..ir.walk import iter_graphs

    return [g for _, g in iter_graphs(model.graph)
            if len(g.value_info) != before.get(id(g), len(g.value_info))]


def _output_types(model) -> dict:
    """``{id(graph): [its outputs' Type records]}`` of every graph of ``model``."""
    from ..ir.walk import iter_graphs

    return {id(g): [vi.type for vi in g.outputs] for _, g in iter_graphs(model.graph)}


def _completed_outputs(model, before: dict) -> dict:
    """``{id(graph): {index: ValueInfo}}`` of the outputs whose Type record changed since
    ``before`` (:func:`_output_types`): the ones :func:`onemodel.inference.complete_outputs`
    completed."""
    from ..ir.walk import iter_graphs

    out: dict = {}
    for _, g in iter_graphs(model.graph):
        was = before.get(id(g), [])
        changed = {k: vi for k, vi in enumerate(g.outputs) if k < len(was)
                   and vi.type is not was[k]}
        if changed:
            out[id(g)] = changed
    return out


def _spliced(model, out_format: str, src: str, dst: str, entries: list, grown: list,
             completed: dict):
    """The pieces of ``dst`` as the octets of the ONNX file ``model`` was read from with
    ``entries`` spliced into its main graph and the ``completed`` outputs (of
    :func:`_completed_outputs`) encoded again in their places
    (:mod:`onemodel.formats.onnx.splice`), or None when the model must be written by its writer
    instead: another format on either side, entries added or outputs completed in a subgraph,
    or a source whose octets cannot be used as they are
    (:func:`~onemodel.formats.onnx.splice.source_octets`)."""
    if out_format != "onnx" or any(g is not model.graph for g in grown) or \
            any(k != id(model.graph) for k in completed):
        return None
    from ..formats.onnx.splice import WireError, source_octets, splice_value_info

    whole = source_octets(model, src, dst)
    if whole is None:
        return None
    try:
        return splice_value_info(whole, entries, completed.get(id(model.graph)))
    except WireError:
        return None


def infer_file(src: str, dst: str, *, storage_options: dict | None = None,
               read_options: dict | None = None, progress=None) -> dict:
    """Read the model at ``src``, infer it (:func:`onemodel.inference.infer_model`), add a
    ``value_info`` entry for every node output whose type is known
    (:func:`onemodel.inference.annotate`), give the graph outputs what inference knows of their
    types and they do not state (:func:`onemodel.inference.complete_outputs`), and write the
    result to ``dst``, in the format of ``dst``'s suffix (``.onnx``, ``.onemodel``, ``.zst`` of
    either) as ``convert`` tells it.

    ONNX to ONNX, when only the main graph changed and the input is a local file (or bytes),
    the output is the input's octets with the entries spliced into the graph and the completed
    outputs encoded again in their places
    (:func:`onemodel.formats.onnx.splice.splice_value_info`): nothing else is encoded again and
    weights are copied as the file holds them; external data references are kept as written
    when ``dst`` is in ``src``'s directory (the data files are shared, not copied). Otherwise
    the annotated model is written by :func:`onemodel.save`, the write path of ``convert``:
    tensor bytes stream from the source, the ONNX ``keep`` layout writes the data files beside
    ``dst``. Nothing but ``value_info`` and the outputs' missing types and extents is added
    either way.

    Returns ``{"source_format", "target_format", "added", "outputs_completed", "inference",
    "model"}`` (the
    :class:`~onemodel.inference.Inference`, its paths in IR field names; the annotated model,
    closed). Raises the errors of
    :func:`onemodel.load` and :func:`onemodel.save` (UnsupportedError for a ``dst`` whose
    format cannot be told, before ``src`` is read); UsageError for a ``dst`` that is one of the
    files ``src`` was read from other than ``src`` itself (a data file, a shard, the shard
    index: :func:`onemodel.api.refuse_overwriting`), before anything is written;
    InvalidModelError for a model that breaks a graph rule
    (:func:`onemodel.ir.graph_rules.check_model`, as ``convert`` refuses it); InternalError for
    a rule's bug.
    """
    from .. import api
    from ..inference import annotate, complete_outputs, infer_model
    from ..ir.walk import iter_graphs
    from ..storage import check_storage_options, is_local

    try:
        out_plugin = api._plugin_for_target(dst, None)
    except UnsupportedError as e:  # (infer has no format option for its advice to name)
        raise UnsupportedError("cannot tell the output format from the file name: name it "
                               ".onnx or .onemodel (or .zst of either)",
                               source=e.source) from None
    check_storage_options(storage_options, src, dst)
    # the options are for the URLs among src and dst: a local dst is written without them
    # (save would refuse them as ignored, though they served src)
    out_options = None if is_local(dst) else storage_options
    model = api._load(src, storage_options=storage_options, **(read_options or {}))
    with model:
        # OUT is never a data file, shard or index of IN (IN itself: annotated in place)
        api.refuse_overwriting(model, [("OUT", dst)])
        # what convert refuses, infer does not write either; its orders spare the engine's
        orders = api.check_graph_rules(model)
        res = infer_model(model, orders=orders)
        main_before = len(model.graph.value_info) if model.graph is not None else 0
        before = {id(g): len(g.value_info) for _, g in iter_graphs(model.graph)} \
            if model.graph is not None else {}
        added = annotate(model, res)
        types = _output_types(model) if model.graph is not None else {}
        completed = complete_outputs(model, res)
        pieces = None
        if model.graph is not None:
            grown = _annotated_graphs(model, before)
            pieces = _spliced(model, out_plugin.name, src, dst,
                              model.graph.value_info[main_before:], grown,
                              _completed_outputs(model, types) if completed else {})
        if pieces is None:
            try:
                api.save(model, dst, format=out_plugin.name, storage_options=out_options,
                         progress=progress)
            except IoError as e:  # the hint names convert's flags, which infer has not
                raise _infer_hint(e) from None
        else:
            api.write_pieces(pieces, dst, out_options, progress)
        return {"source_format": model.format or "?", "target_format": out_plugin.name,
                "added": added, "outputs_completed": completed, "inference": res,
                "model": model}


def _infer_hint(e):
    """``e`` with the remedy of the writer's refusal to replace another model's data file (use
    --force or --external-data: convert's flags, kept apart as ``e.remedy``) replaced by what
    ``infer`` can do."""
    if getattr(e, "remedy", None) is not None:
        return IoError(f"{e.fact}; infer writes IN's data files beside OUT under their names: "
                       "write OUT in another directory", path=e.path, offset=e.offset,
                       source=e.source)
    return e


def contradiction_rows(model, res, fmt, which: str = "contradictions") -> list[dict]:
    """``[{"path", "message"}]`` of ``res``'s contradictions (``which="notes"``: its notes,
    the nodes left less known at a limit), the paths in the file's terms
    (:func:`onemodel.validation.paths.file_path`; the part after a model-local function's
    ``(function f)`` as the engine names it)."""
    found = getattr(res, which)
    if not found:  # (no import of the validator: ~20 ms)
        return []
    from ..validation.inferred import path_in_file

    return [{"path": printable(path_in_file(model, c.path, fmt)), "message": printable(c.message)}
            for c in found]


def wide_rows(model, res, fmt) -> list[dict]:
    """``[{"path", "message"}]``: each extent of a node output above 2^63 - 1 that the written
    ``value_info`` gives as unknown (:func:`onemodel.inference.wide_extents`; ``check --full``'s
    ``OM412``), the paths in the file's terms."""
    from ..inference import wide_extents

    wide = wide_extents(model, res)
    if not wide:
        return []
    from ..validation.inferred import path_in_file, wide_message

    return [{"path": path_in_file(model, f"{w['path']}.nodes[{w['node']}]", fmt),
             "message": wide_message(w)} for w in wide]


def value_counts(res) -> dict:
    """``{"values", "typed", "complete"}``: the values of every graph (inputs, initializers,
    node outputs), those whose type is known, those whose every extent is known (symbolic
    ones included)."""
    n = typed = complete = 0
    seen: dict = {}  # id -> (known, complete): a rule's memoized result is one Value for many
    for values in res.graphs.values():  # (every Value stays alive in res: ids stay theirs)
        n += len(values)
        for v in values.values():
            k = seen.get(id(v))
            if k is None:
                if v.kind == "tensor":  # (Value.complete, inline for the common kind)
                    s = v.shape
                    k = (True, v.elem is not None and s is not None and None not in s)
                else:
                    k = (v.known, v.complete)
                seen[id(v)] = k
            typed += k[0]
            complete += k[1]
    return {"values": n, "typed": typed, "complete": complete}


def shape_listing(model) -> dict:
    """What ``info --shapes`` adds to the summary: ``{"values": {graph path: [{"name",
    "type"}]}, "contradictions": [{"path", "message"}], "no_rule": ["com.x Foo-1"]}``, every
    graph of ``model`` (paths in
    the file's terms: ``graph``, ``graph.node[2].attribute[0].g``) with its inputs, its
    initializers and its node outputs in node order, each with its inferred type
    (``tensor(float)[N,seq + 1,?]``: extents as :func:`onemodel.inference.dims.shape_text`
    writes them, ``?`` unknown; ``?`` for a value of which nothing is known). ``model`` must
    be open (small initializers are read when a rule needs their elements)."""
    from ..inference import infer_model, operator_names
    from ..ir.walk import iter_graphs
    from ..validation.inferred import path_in_file

    res = infer_model(model)
    fmt = model.format
    listing: dict = {}
    if model.graph is not None:
        for gpath, g in iter_graphs(model.graph):
            values = res.graphs.get(gpath, {})
            names = [vi.name for vi in g.inputs] + [t.name for t in g.initializers]
            names += [n for node in g.nodes for n in node.outputs]
            seen: set = set()
            rows = []
            for name in names:
                if name and name not in seen:
                    seen.add(name)
                    v = values.get(name)
                    rows.append({"name": name, "type": str(v) if v is not None else "?"})
            listing[path_in_file(model, gpath, fmt)] = rows
    return {"values": listing, "contradictions": contradiction_rows(model, res, fmt),
            "no_rule": operator_names(res.no_rule)}


def shape_blocks(s: dict) -> list:
    """``info --shapes``'s part of the printed summary (:func:`shape_listing` in ``s``): a
    table per graph, then the contradictions, as :func:`onemodel.cli.tables.draw` takes
    them."""
    from .tables import Table

    blocks: list = []
    for gpath, rows in s.get("values", {}).items():
        t = Table(f"values of {printable(gpath)}: {len(rows)}", [("name", "left"),
                                                                   ("type", "left")])
        for r in rows:
            t.add_row(printable(redact(r["name"])), printable(r["type"]))
        blocks.append(t)
    if s.get("no_rule"):
        blocks.append(("line", "no inference rule (outputs typed by the constraints only): "
                               + ", ".join(s["no_rule"])))
    for r in s.get("contradictions", []):
        blocks.append(("line", f"contradiction: {r['message']}"
                               + (f" [{r['path']}]" if r["path"] else "")))
    return blocks


@app.command()
def infer(
    src: str = typer.Argument(..., metavar="IN", help="Model to read (.onnx, .onemodel; path "
                              "or URL)."),
    dst: str = typer.Argument(..., metavar="OUT", help="Where to write it with the inferred "
                              "value_info (format from the suffix, as convert)."),
    check: bool = typer.Option(False, "--check", help="List the contradictions inference finds "
                               "(a declared type the operators do not give, inputs an operator "
                               "cannot take); exit 1 when there is one."),
    as_json: bool = typer.Option(False, "--json", help="Print what was done as JSON."),
    allow_outside: bool = OutsideOpt,
    storage_option: Optional[List[str]] = StorageOpt,
    quiet: bool = QuietOpt,
    debug: bool = DebugOpt,
):
    """Write IN to OUT with value_info for every value whose type shape inference knows
    (Clause 9), and the graph outputs' types and extents it knows that they leave out,
    everything else unchanged. Exit 0; 1 with --check when the model contradicts
    itself; 2 on error."""
    from ..inference import operator_names
    from ..storage.progress import Progress

    with _errors(debug):
        with _no_collections():
            with Progress("infer", quiet=quiet or as_json) as bar:
                done = infer_file(src, dst, storage_options=_storage(storage_option, src, dst),
                                  read_options=_read_options(allow_outside), progress=bar)
            res, model = done["inference"], done["model"]
            rows = contradiction_rows(model, res, done["source_format"])
            counts = value_counts(res)
            no_rule = operator_names(res.no_rule)
            notes = contradiction_rows(model, res, done["source_format"], "notes")
            wide = wide_rows(model, res, done["source_format"])
        _keep_until_exit((model, res))  # freed with the process, not record by record
        if as_json:
            import json
            doc = {"source": shown(src), "target": shown(dst),
                   "source_format": done["source_format"],
                   "target_format": done["target_format"], "value_info_added": done["added"],
                   "outputs_completed": done["outputs_completed"], **counts,
                   "contradictions": rows, "no_rule": no_rule, "unknown_wide_extents": wide,
                   "notes": notes}
            out.line(json.dumps(doc, indent=2))
        elif not quiet or check:
            if not quiet:
                out.line(f"{shown(src)} ({done['source_format']}) -> {shown(dst)} "
                         f"({done['target_format']}): "
                         f"{done['added']} value_info "
                         f"{'entry' if done['added'] == 1 else 'entries'} added"
                         + (f", {_count(done['outputs_completed'], 'graph output')} completed"
                            if done["outputs_completed"] else "") + "; "
                         f"{counts['typed']} of {_count(counts['values'], 'value')} typed, "
                         f"{counts['complete']} with every extent known (ints or symbolic)")
                if no_rule:
                    out.line("  no inference rule (outputs typed by the constraints only): "
                             + ", ".join(no_rule))
                for r in wide:
                    out.line(f"  note: {r['message']} [{redact(r['path'])}]")
                if notes:
                    first = notes[0]
                    out.line(f"  {_count(len(notes), 'node')} left less known at a limit of "
                             f"inference (check --full lists them, OM413); the first: "
                             f"{first['message']} [{redact(first['path'])}]")
            if check:
                for r in rows:
                    where = f" [{redact(r['path'])}]" if r["path"] else ""
                    out.line(f"contradiction: {r['message']}{where}")
            if rows and not quiet:
                out.line(_count(len(rows), "contradiction") + " (declared types the operators "
                         "do not give, or inputs an operator cannot take)"
                         + ("" if check else "; --check lists them"))
    _nothing_left_at_exit()  # written and printed; nothing needs tearing down
    if check and rows:
        raise typer.Exit(1)


__all__ = ["infer", "infer_file", "contradiction_rows", "wide_rows", "value_counts",
           "shape_listing", "shape_blocks"]
