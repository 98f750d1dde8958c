"""``onemodel verify A [B]``: two models compared field by field and tensor by tensor
(:func:`onemodel.verify.verify`), with ``--run`` their outputs, with ``--bisect`` the first
node whose outputs differ (:func:`onemodel.bisect.bisect`); the report printed as text or
JSON (:mod:`.compare_report`)."""

from __future__ import annotations

from typing import List, Optional

import typer

from ..errors import OneModelError, UsageError, printable
from .application import (
    DebugOpt,
    OutsideOpt,
    QuietOpt,
    ShapeOpt,
    StorageOpt,
    _errors,
    _read_options,
    _storage,
    app,
    flag_of,
    out,
)
from .compare_report import (
    AtolOpt,
    DimOpt,
    EngineOpt,
    EnginesOpt,
    RtolOpt,
    RunFlags,
    SeedOpt,
    TolOpt,
    UlpOpt,
    run_flags,
)
from .redact import shown

#: Differences verify collects at most (the report says "at least" when it is reached).
REPORT_LIMIT = 100


@app.command()
def verify(
    a: str = typer.Argument(..., metavar="A", help="First model (any format, path or URL)."),
    b: Optional[str] = typer.Argument(None, metavar="B", help="Second model (may be "
                                      "omitted with --engines: A on both engines)."),
    loose: bool = typer.Option(False, "--loose", help="Compare what a plain OneModel v1 file "
                               "holds: absent equals empty; unknown fields and fields v1 has no "
                               "place for (metadata_props below the model, denotations, ...) "
                               "are ignored."),
    run: bool = typer.Option(False, "--run", help="Also run both models and compare every "
                             "output (bit for bit on one engine unless a tolerance is given)."),
    seed: int = SeedOpt,
    dim: Optional[List[str]] = DimOpt,
    shape: Optional[List[str]] = ShapeOpt,
    engine: Optional[str] = EngineOpt,
    engines: Optional[str] = EnginesOpt,
    atol: Optional[float] = AtolOpt,
    rtol: Optional[float] = RtolOpt,
    ulp: Optional[int] = UlpOpt,
    tol: Optional[List[str]] = TolOpt,
    as_json: bool = typer.Option(False, "--json", help="Print the report as one JSON object."),
    bisect: bool = typer.Option(False, "--bisect", help="Also name the first node, in "
                                "topological order, whose outputs differ beyond tolerance, and "
                                "re-run it alone on A's inputs: the node itself or its inputs "
                                "differ (implies --run)."),
    allow_outside: bool = OutsideOpt,
    storage_option: Optional[List[str]] = StorageOpt,
    quiet: bool = QuietOpt,
    debug: bool = DebugOpt,
):
    """Compare two models field by field and tensor byte by byte, and with --run their outputs
    (exit 0 equal or within tolerance, 1 different)."""
    from ..verify import verify as do_verify
    from .compare_report import print_report, report_json

    with _errors(debug):
        flags = run_flags(b, run=run or bisect, seed=seed, dim=dim, shape=shape, engine=engine,
                          engines=engines, atol=atol, rtol=rtol, ulp=ulp, tol=tol)
        pair, tolerances, dims, shapes, run = (flags.pair, flags.tolerances, flags.dims,
                                               flags.shapes, flags.run)
        read_options = _read_options(allow_outside)
        try:  # (the options are checked against A and B once: bisect reads them too)
            storage = _storage(storage_option, a, *filter(None, [b]))
            report = do_verify(a, b, loose=loose, run=run, seed=seed, dims=dims, shapes=shapes,
                               engine=engine or "onemodel", engines=pair,
                               tolerances=tolerances,
                               by_outputs=tolerances is not None or pair is not None,
                               read_options=read_options, limit=REPORT_LIMIT,
                               storage_options=storage)
        except (OneModelError, UsageError):  # (the hints' settings: written as flags by _errors)
            raise
        if tolerances is not None and report.comparisons:
            unknown = sorted(set(tolerances.per_output) - set(report.outputs_compared))
            if unknown:
                raise UsageError(f"--tol {unknown[0]}: no output of that name (outputs: "
                                 f"{', '.join(report.outputs_compared)})")
        bisected = None
        not_bisected = None  # why bisect could not run, when the report has a verdict
        if bisect:
            try:
                bisected = _bisect(a, b, flags, read_options, storage)
            except UsageError:  # (a OneModelError: caught first)
                raise
            except OneModelError as e:  # (an InternalError, a bug, is not: it goes on up)
                # the runs could not be matched (B cannot run on A's inputs): the report
                # already says they differ; bisect's failure is one line of it, not an error
                if report.equal:
                    raise
                not_bisected = " ".join(str(e.spell_as(flag_of)).removeprefix(
                    f"{e.kind}: ").split())
    if as_json:
        import json
        doc = report_json(report, shown(a), shown(b) if b is not None else None, REPORT_LIMIT)
        if bisect:
            doc["bisect"] = bisected.to_json() if bisected is not None else None
            doc["bisect_error"] = not_bisected
        out.line(json.dumps(doc, indent=2))
    else:
        print_report(out, report, shown(a), shown(b) if b is not None else None, quiet=quiet,
                     limit=REPORT_LIMIT)
        for line in bisected.lines() if bisected is not None else ():
            out.line(printable(line))
        if not_bisected is not None:
            out.line(printable(f"bisect: not run: {not_bisected}"))
    raise typer.Exit(0 if report.equal else 1)


def _bisect(a: str, b: Optional[str], flags: RunFlags, read_options, storage_options):
    """verify --bisect: :func:`onemodel.bisect.bisect_generated` of A and B (A again when B is
    omitted) on the inputs ``--run`` generated (the same seed, dims and shapes)."""
    from ..api import _load as load  # (storage options checked against A and B by verify)
    from ..bisect import bisect_generated

    opts = dict(read_options or {}, storage_options=storage_options)
    ma = load(a, **opts)
    try:
        mb = ma if b is None else load(b, **opts)
        try:
            return bisect_generated(ma, mb, seed=flags.seed, dims=flags.dims,
                                    shapes=flags.shapes, engines=flags.engines,
                                    tolerances=flags.tolerances)
        finally:
            if mb is not ma:
                mb.close()
    finally:
        ma.close()
