"""``onemodel view MODEL [-o model.html]``: one self-contained HTML page of a model
(:func:`onemodel.view.render`): its graph, grouped by name scope, with inferred types,
``check`` findings and initializer statistics; opens offline in any current browser.
``--format svg``: a static picture (:func:`onemodel.view.render_svg`)."""

from __future__ import annotations

from typing import List, Optional

import typer

from .application import (
    DebugOpt,
    OutsideOpt,
    ShapeOpt,
    StorageOpt,
    _errors,
    _read_options,
    _storage,
    app,
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


@app.command()
def view(
    file: str = typer.Argument(..., metavar="MODEL", help="Model file or URL (any format "
                               "onemodel reads; .zst too)."),
    other: Optional[str] = typer.Argument(None, metavar="[B]", help="A second model: the page "
                                          "of B with what changed from MODEL marked."),
    output: Optional[str] = typer.Option(None, "-o", "--output", metavar="FILE",
                                         help="The page to write (default: the model's "
                                         "name with .html or .svg, in the current directory; "
                                         "- for standard output)."),
    fmt: Optional[str] = typer.Option(None, "--format", metavar="html|svg",
                                      help="html (the default; svg when FILE ends in .svg): "
                                      "the page; svg: a static, deterministic picture, drawn "
                                      "without a browser (needs igraph)."),
    run: bool = typer.Option(False, "--run", help="With B: run both models on the same "
                             "generated inputs (verify --run's options below) and colour each "
                             "node by the largest difference of its outputs; the first "
                             "differing node (verify --bisect's) is marked."),
    seed: int = SeedOpt,
    dim: Optional[List[str]] = DimOpt,
    shape: Optional[List[str]] = ShapeOpt,
    engine: Optional[str] = EngineOpt,
    engines: Optional[str] = EnginesOpt,
    atol: Optional[float] = AtolOpt,
    rtol: Optional[float] = RtolOpt,
    ulp: Optional[int] = UlpOpt,
    tol: Optional[List[str]] = TolOpt,
    depth: int = typer.Option(2, "--depth", min=1, help="svg: the levels of groups shown (1: "
                              "each top-level group a box; 2: those opened, the groups in them "
                              "boxes; ...)."),
    allow_outside: bool = OutsideOpt,
    storage_option: Optional[List[str]] = StorageOpt,
    debug: bool = DebugOpt,
):
    """Write one HTML page of a model that opens offline: the graph (groups open and close,
    pan and zoom, search), each node's op, attributes and inferred types, check findings on
    their nodes, weight statistics, and info's summary. With B: B's page, with the nodes
    added or changed since MODEL marked and those removed listed."""
    with _errors(debug):
        if fmt is None:
            fmt = "svg" if (output or "").lower().endswith(".svg") else "html"
        if fmt not in ("html", "svg"):
            from ..errors import UsageError
            raise UsageError(f"--format {fmt!r}: give html or svg")
        target = output if output is not None else default_output(file, fmt)
        if other is not None and fmt == "svg":
            from ..errors import UsageError
            raise UsageError("--format svg draws one model: give MODEL alone")
        if (run or engines is not None) and other is None:
            from ..errors import UsageError
            raise UsageError("--run compares two models: give MODEL and B")
        flags = run_flags(other or "", run=run, seed=seed, dim=dim, shape=shape, engine=engine,
                          engines=engines, atol=atol, rtol=rtol, ulp=ulp, tol=tol)
        given = [f for f, v in (("--seed", seed != 0), ("--dim", dim), ("--shape", shape),
                                ("--engine", engine)) if v]
        if given and not flags.run:
            from ..errors import UsageError
            raise UsageError(f"{given[0]} is for the run of both models: give --run")
        if other is not None and output is None:
            target = default_output(other, fmt)
        storage = _storage(storage_option, file, *([] if other is None else [other]),
                           *([] if target == "-" else [target]))
        from .. import api
        from ..view import render, render_svg

        with api.load(file, storage_options=storage, **_read_options(allow_outside)) as model:
            if target != "-":
                api.refuse_overwriting(model, [("the page", target)], in_place=False)
            title = title_of(file, model)
            if other is not None:
                page = _diff_page(model, title, other, target, storage, allow_outside,
                                  flags if flags.run else None)
            elif fmt == "html":
                page = render(model, title)
            else:
                page = render_svg(model, title, depth)
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


def _diff_page(model_a, title_a, other, target, storage, allow_outside,
               flags: Optional[RunFlags]) -> str:
    """The page of ``other`` against ``model_a`` (open), ``other`` loaded and closed here;
    with run ``flags``, both run as ``verify --bisect`` runs them (the same inputs, engines
    and tolerances: :func:`onemodel.bisect.bisect_generated`)."""
    from .. import api
    from ..view import render_diff

    with api.load(other, storage_options=storage, **_read_options(allow_outside)) as model_b:
        if target != "-":
            api.refuse_overwriting(model_b, [("the page", target)], in_place=False)
        report = verdict = None
        if flags is not None:
            from ..bisect import bisect_generated, verdict_line
            report = bisect_generated(model_a, model_b, seed=flags.seed, dims=flags.dims,
                                      shapes=flags.shapes, engines=flags.engines,
                                      tolerances=flags.tolerances, max_later=0)
            unknown = sorted(set(getattr(flags.tolerances, "per_output", ()))
                             - set(report.comparisons))
            if unknown:
                from ..errors import UsageError
                raise UsageError(f"--tol {unknown[0]}: no value of that name was compared")
            verdict = None if report.first is None else verdict_line(report.first)
        return render_diff(model_a, title_a, model_b, title_of(other, model_b), report,
                           verdict)


def default_output(file: str, fmt: str = "html") -> str:
    """``<model name>.html`` (``.svg``) in the current directory: the last part of the path or
    URL without its query, ``.zst`` and model suffix (``s3://b/m.onnx.zst`` -> ``m.html``)."""
    base = file.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1] or "model"
    for suffix in (".zst", ".onnx", ".onemodel", ".safetensors", ".pb"):
        if base.lower().endswith(suffix) and len(base) > len(suffix):
            base = base[:-len(suffix)]
    return f"{base}.{fmt}"


def title_of(file: str, model) -> str:
    """The page's title: the graph's name and the file's last path part."""
    name = file.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    graph = getattr(model.graph, "name", None) or ""
    return f"{graph} ({name})" if graph and graph != name else name
