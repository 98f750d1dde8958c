"""``onemodel view MODEL [-o model.html]``: one self-contained HTML page of a model
(:func:`onemodel.view.render`): its graph, grouped by name scope, with inferred types,
``check`` findings and initializer statistics; opens offline in any current browser."""

from __future__ import annotations

from typing import List, Optional

import typer

from .application import DebugOpt, OutsideOpt, StorageOpt, _errors, _read_options, _storage, app


@app.command()
def view(
    file: str = typer.Argument(..., metavar="MODEL", help="Model file or URL (any format "
                               "onemodel reads; .zst too)."),
    output: Optional[str] = typer.Option(None, "-o", "--output", metavar="HTML",
                                         help="The page to write (default: the model's "
                                         "name with .html, in the current directory; - for "
                                         "standard output)."),
    allow_outside: bool = OutsideOpt,
    storage_option: Optional[List[str]] = StorageOpt,
    debug: bool = DebugOpt,
):
    """Write one HTML page of a model that opens offline: the graph (groups open and close,
    pan and zoom, search), each node's op, attributes and inferred types, check findings on
    their nodes, weight statistics, and info's summary."""
    with _errors(debug):
        target = output if output is not None else default_output(file)
        storage = _storage(storage_option, file, *([] if target == "-" else [target]))
        from .. import api
        from ..view import render

        with api.load(file, storage_options=storage, **_read_options(allow_outside)) as model:
            if target != "-":
                api.refuse_overwriting(model, [("the page", target)], in_place=False)
            page = render(model, title_of(file, model))
        data = page.encode("utf-8")
        if target == "-":
            import sys
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
            return
        from ..storage import open_sink
        sink = open_sink(target, storage_options=storage)  # (published on commit: atomic)
        try:
            sink.write(data)
        except BaseException:
            sink.abort()
            raise
        sink.commit()
        typer.echo(f"wrote {target} ({len(data):,} bytes)", err=True)


def default_output(file: str) -> str:
    """``<model name>.html`` in the current directory: the last part of the path or URL
    without its query, ``.zst`` and model suffix (``s3://b/m.onnx.zst`` -> ``m.html``)."""
    base = file.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1] or "model"
    for suffix in (".zst", ".onnx", ".onemodel", ".safetensors", ".pb"):
        if base.lower().endswith(suffix) and len(base) > len(suffix):
            base = base[:-len(suffix)]
    return base + ".html"


def title_of(file: str, model) -> str:
    """The page's title: the graph's name and the file's last path part."""
    name = file.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    graph = getattr(model.graph, "name", None) or ""
    return f"{graph} ({name})" if graph and graph != name else name
