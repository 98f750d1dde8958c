"""``onemodel check FILE``: a model validated (ONNX Part 1, Clause 10;
:mod:`onemodel.validation`), the findings printed as text, JSON or SARIF."""

from __future__ import annotations

from typing import List, Optional

import typer

from ..errors import OneModelError, UsageError
from .application import (
    DebugOpt,
    OutsideOpt,
    StorageOpt,
    _errors,
    _keep_until_exit,
    _no_collections,
    _nothing_left_at_exit,
    _storage,
    app,
    out,
)
from .redact import redact, shown


@app.command()
def check(
    file: str = typer.Argument(..., metavar="FILE", help="Model file or URL."),
    as_json: bool = typer.Option(False, "--json", help="Print the findings as JSON."),
    sarif: bool = typer.Option(False, "--sarif", help="Print the findings as SARIF 2.1.0."),
    full: bool = typer.Option(False, "--full", help="Also verify external data checksums "
                              "(SHA-1, reading the files) and every intermediate value's type "
                              "and shape by shape inference (OM410, OM411)."),
    strict: bool = typer.Option(False, "--strict", help="Warnings are errors."),
    select: Optional[str] = typer.Option(None, "--select", metavar="CODES",
                                         help="Report only these codes or prefixes "
                                              "(comma-separated: OM1,OM201)."),
    ignore: Optional[str] = typer.Option(None, "--ignore", metavar="CODES",
                                         help="Do not report these codes or prefixes."),
    allow_outside: bool = OutsideOpt,
    storage_option: Optional[List[str]] = StorageOpt,
    debug: bool = DebugOpt,
):
    """Validate a model (ONNX Part 1, Clause 10): every problem with its code, field path,
    offset and clause. Exit 0: no error (warnings allowed); 1: errors; 2: unreadable."""
    from ..validation.output import sarif as to_sarif
    from ..validation.output import text_lines
    from ..validation.run import check_and_model

    with _errors(debug):
        if as_json and sarif:
            raise UsageError("choose one of --json and --sarif")
        try:
            with _no_collections():
                report, model = check_and_model(
                    file, full=full, strict=strict, select=select.split(",") if select else None,
                    ignore=ignore.split(",") if ignore else None,
                    storage_options=_storage(storage_option, file), allow_outside=allow_outside)
        except OneModelError as e:  # unreadable: the document says so too, the line stays
            if (as_json or sarif) and not isinstance(e, UsageError):
                import json

                from ..validation.output import sarif_unreadable, unreadable
                kind = e.kind
                message = redact(" ".join(str(e).removeprefix(f"{kind}: ").split()))
                doc = sarif_unreadable(kind, message, shown(file)) if sarif \
                    else unreadable(kind, message)
                out.line(json.dumps(doc, indent=2))
            raise
        _keep_until_exit(model)  # freed with the process, not record by record on return
        where = shown(file)
        if as_json or sarif:
            import json
            doc = to_sarif(report, where) if sarif else report.as_dict()
            out.line(json.dumps(doc, indent=2))
        else:
            for text in text_lines(report, where):
                out.line(text)
    _nothing_left_at_exit()  # printed; nothing of the model needs tearing down
    raise typer.Exit(0 if report.ok else 1)

