"""``onemodel info FILE``: a model's summary (:func:`onemodel.summary.summarize`) as tables or
JSON, its external data files, with ``--shapes`` every value's inferred type; a safetensors
weights file's tensors."""

from __future__ import annotations

import sys
from typing import List, Optional

import typer

from ..errors import WeightsFileError, printable
from .application import (
    DebugOpt,
    OutsideOpt,
    StorageOpt,
    _count,
    _errors,
    _human,
    _keep_until_exit,
    _no_collections,
    _nothing_left_at_exit,
    _read_options,
    _stdout_gone,
    _storage,
    app,
    flag_of,
    out,
)
from .redact import redact, shown


@app.command()
def info(
    file: str = typer.Argument(..., metavar="FILE", help="Model file or URL."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    shapes: bool = typer.Option(False, "--shapes", help="Also list every value of every graph "
                                "with its inferred type and shape (shape inference)."),
    allow_outside: bool = OutsideOpt,
    storage_option: Optional[List[str]] = StorageOpt,
    debug: bool = DebugOpt,
):
    """Show a model: IR and opsets, producer, inputs and outputs, operators, weights (with
    --shapes, every value's inferred type). A safetensors weights file: what it is and its
    tensors."""
    with _errors(debug):
        storage = _storage(storage_option, file)
        try:
            _info_of_model(file, as_json, shapes, allow_outside, storage)
        except WeightsFileError as e:
            from ..formats.layouts import by_name
            _weights_listing(by_name(e.layout), e.spell_as(flag_of).message, file,
                             as_json, storage)
    _nothing_left_at_exit()  # printed; nothing of the model needs tearing down


def _info_of_model(file, as_json, shapes, allow_outside, storage) -> None:
    """``info`` of a model: load it, summarize, print (text or JSON); ``storage``: the
    storage options (:func:`~onemodel.cli.application._storage`)."""
    from .. import api
    from ..errors import IoError
    from ..storage.progress import Progress
    from ..summary import summarize

    unread: list = []  # the errors of the tensors whose data files could not be read
    failed = None  # the error of loading the model whole, raised once the structure is shown
    with _no_collections():
        try:
            with Progress("read", quiet=as_json) as bar:
                model = api.load(file, storage_options=storage, progress=bar,
                                 **_read_options(allow_outside))
        except IoError as e:  # a data file missing: the structure, and which file
            from .unread_data import load_structure
            model, unread = load_structure(file, e, storage_options=storage,
                                           allow_outside=allow_outside)
            failed = e
        with model:
            s = summarize(model)
            # (the report walks every tensor again: only for a model that has external data)
            s["external_data"] = external_report(model) if s["tensors"]["external"] else []
            if unread:
                from .unread_data import mark_unread
                mark_unread(s["external_data"], model, unread)
            if shapes:
                from .infer import shape_listing
                s.update(shape_listing(model))
    _keep_until_exit(model)  # freed with the process, not record by record on return
    s["source"] = shown(s["source"])
    if as_json:
        import json
        out.line(json.dumps(s, indent=2))
    else:
        _print_summary(s)
    if failed is not None:  # shown: still an error (exit 2), its line on stderr
        raise failed


def _weights_listing(layout, note: str, file: str, as_json: bool, storage_options) -> None:
    """``info`` of a weights file of ``layout`` (a safetensors file: what
    :func:`onemodel.formats.detect` refuses with a WeightsFileError, the model reader having
    found no model): the ``note`` that it is no model, then its tensors (key, dtype, shape,
    bytes; padding entries marked) from its checked header. Raises what the header check
    raises for a broken one (MalformedError, UnsupportedError), IoError when it cannot be
    read."""
    from ..storage import open_source

    src = open_source(file, storage_options=storage_options)
    try:
        metadata, rows = layout.list_weights(src, file)
    finally:
        close = getattr(src, "close", None)
        if close is not None:
            close()
    if as_json:
        import json
        out.line(json.dumps({"source": shown(file), "format": layout.name, "model": False,
                             "note": note, "metadata": metadata,
                             "tensors": rows}, indent=2))
        return
    tensors = [r for r in rows if not r["padding"]]
    out.line(f"{shown(file)}: {note}")
    out.line(f"tensors: {len(tensors)}, {_human(sum(r['bytes'] for r in tensors))}"
             + (f" (+{len(rows) - len(tensors)} padding entries)" if len(rows) > len(tensors)
                else ""))
    for r in rows:
        out.line(f"  {printable(r['name'])}  {printable(r['dtype'])}{r['shape']}  "
                 f"{_human(r['bytes'])}"
                 + ("  (padding)" if r["padding"] else ""))


def external_report(model) -> list[dict]:
    """Per external data file: bytes referenced, unreferenced, alignment (ONNX models only)."""
    if model.format != "onnx":
        return []
    from ..formats.onnx.external_report import external_data_report
    return external_data_report(model)


def _summary_blocks(s: dict) -> list:
    """What ``info`` prints, as :func:`onemodel.cli.tables.draw` takes it: lines and tables."""
    from ..storage.progress import binary_size
    from .tables import Table

    # every string of the model is made printable (escape codes, newlines: errors.printable)
    p = printable
    blocks: list = [("bold", p(str(s["source"])), f"  format {s['format']}, IR version "
                     f"{s['ir_version']}")]
    opsets = ", ".join(f"{p(o['domain']) or 'ai.onnx'} {o['version']}" for o in s["opsets"])
    blocks.append(("line", f"opsets: {opsets}"))
    prod = s["producer"]
    if prod["name"] or prod["version"]:
        blocks.append(("line", f"producer: {p(prod['name'])} {p(prod['version'])}".rstrip()))
    for title, values in (("inputs", s["inputs"]), ("outputs", s["outputs"])):
        t = Table(title, [("name", "left"), ("type", "left")])
        for v in values:
            t.add_row(p(redact(v["name"])), p(v["type"]))
        blocks.append(t)
    t = Table(f"nodes: {s['nodes']}", [("op_type", "left"), ("count", "right")])
    for op, n in s["ops"].items():
        t.add_row(p(op), str(n))
    blocks.append(t)
    init = s["initializers"]
    if not init["count"]:
        blocks.append(("line", "initializers: none"))
    else:
        t = Table(f"initializers: {init['count']}, {init['parameters']:,} parameters, "
                  f"{binary_size(init['bytes'])}",
                  [("dtype", "left"), ("count", "right"), ("parameters", "right"),
                   ("bytes", "right")])
        for dt, e in init["by_dtype"].items():
            t.add_row(dt, str(e["count"]), f"{e['parameters']:,}", binary_size(e["bytes"]))
        blocks.append(t)
    if s["functions"]:
        blocks.append(("line", "functions: " + ", ".join(map(p, s["functions"]))))
    for f in s.get("external_data", []):
        blocks.append(("line", _data_file_line(f)))
    if "values" in s:  # info --shapes
        from .infer import shape_blocks
        blocks += shape_blocks(s)
    return blocks


def _print_summary(s: dict) -> None:
    """Print ``info``'s summary: drawn by :mod:`onemodel.cli.tables` when it can draw it as rich
    would, else by rich. Titles and the text after the bold source go through rich markup
    (their text never holds ``[``); every other text is escaped; lines are redacted."""
    from .tables import Table, draw

    blocks = _summary_blocks(s)
    marked = [b.title if isinstance(b, Table) else b[2] for b in blocks
              if isinstance(b, Table) or b[0] == "bold"]
    if not any("[" in text for text in marked):
        plain = [("line", redact(b[1])) if isinstance(b, tuple) and b[0] == "line" else b
                 for b in blocks]
        try:
            if draw(plain, sys.stdout):
                return
        except BrokenPipeError:
            _stdout_gone()
    _print_rich(blocks)


def _print_rich(blocks: list) -> None:
    """Print ``blocks`` with rich: on a terminal a table wider than it folds its cells; into a
    pipe or a file every table is drawn whole, as wide as its text (nothing cut with ``…``)."""
    from rich.markup import escape
    from rich.table import Table as RichTable

    from .tables import Table, cut_to_screen, unbounded_width

    whole = not cut_to_screen(sys.stdout)
    for b in blocks:
        if isinstance(b, Table):
            t = RichTable(title=escape(b.title), title_justify="left", show_edge=False)
            for header, justify in b.columns:
                t.add_column(header, justify=justify, overflow="fold")
            for row in b.rows:
                t.add_row(*map(escape, row))
            if whole:
                from rich.console import Console

                wide = Console(highlight=False, soft_wrap=True, emoji=False,
                               width=unbounded_width(b))
                wide.on_broken_pipe = _stdout_gone
                wide.print(t)
            else:
                out.print(t)
        elif b[0] == "bold":
            out.print(f"[bold]{escape(b[1])}[/bold]{b[2]}")
        else:
            out.line(b[1])


def _data_file_line(f: dict) -> str:
    from ..errors import PART_LIMIT, clip

    if f.get("error"):  # (a location or message from the file: bounded, as an error line is)
        where = printable(clip(str(f['location']), PART_LIMIT))
        return f"data file {where}: {printable(clip(f['error'], 2000))}"
    from ..formats.onnx.external_report import describe_alignment

    aligned = describe_alignment(f.get("alignment"))
    unref = ("size unknown" if f.get("unreferenced") is None else
             f"{_human(f['unreferenced'])} unreferenced (gaps {_human(f['gaps'])}, "
             f"trailing {_human(f['trailing'])})")
    from ..formats.layouts import layouts
    st = "".join(layout.summary(f[layout.name], f["tensors"]) for layout in layouts()
                 if isinstance(f.get(layout.name), dict))  # what a layout said of its file
    return (f"data file {printable(f['location'])}: {_count(f['tensors'], 'tensor')}, "
            f"{_human(f['referenced'])} referenced, {unref}, {aligned}{st}")

