"""``onemodel scan SOURCE...``: many models, one row each, in a catalog (:mod:`onemodel.scan`,
docs/scan.md), with a progress bar on a terminal and a summary at the end."""

from __future__ import annotations

import sys
from typing import List, Optional

import typer

from .application import (
    DebugOpt,
    OutsideOpt,
    QuietOpt,
    StorageOpt,
    _count,
    _errors,
    _human,
    app,
    err,
    out,
)


@app.command()
def scan(
    sources: List[str] = typer.Argument(..., metavar="SOURCE...", help="Model files, "
                                        "directories (recursive), globs, URLs of a file or a "
                                        "prefix (s3://bucket/models/), or @LIST: a file "
                                        "listing sources, one a line."),
    output: Optional[str] = typer.Option(None, "--output", "-o", metavar="CATALOG",
                                         help="Write the rows to CATALOG: .jsonl (JSON lines) "
                                         "or .parquet (the parquet extra, pyarrow). "
                                         "Without it the rows are printed as JSON lines and "
                                         "the summary goes to stderr."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, metavar="N",
                                       help="Local processes (default: the CPU count)."),
    dask: Optional[str] = typer.Option(None, "--dask", metavar="ADDRESS",
                                       help="Run on the Dask cluster whose scheduler is at "
                                       "ADDRESS (tcp://host:8786; the dask extra)."),
    hash_: bool = typer.Option(False, "--hash", help="Each model's content digest (reads "
                               "every tensor byte once)."),
    check: bool = typer.Option(False, "--check", help="Check each model: error, warning and "
                               "info counts and codes (onemodel check)."),
    tensors: bool = typer.Option(False, "--tensors", help="Each tensor's digest too "
                                 "(implies --hash)."),
    duplicates: bool = typer.Option(False, "--duplicates", help="Report identical models and "
                                    "tensors shared between models (implies --tensors)."),
    resume: bool = typer.Option(False, "--resume", help="Keep the rows already in CATALOG and "
                                "scan only the other models."),
    convert_to: Optional[str] = typer.Option(None, "--convert-to", metavar="DIR",
                                             help="Convert every readable model into DIR "
                                             "(paths as under the sources' common directory), "
                                             "its digest checked after writing."),
    layout: str = typer.Option("onemodel", "--layout", metavar="LAYOUT",
                               help="With --convert-to: onemodel (the container), or an ONNX "
                               "layout (inline, file, per_tensor, safetensors, keep)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary (and duplicates) "
                                 "as JSON."),
    quiet: bool = QuietOpt,
    allow_outside: bool = OutsideOpt,
    storage_option: Optional[List[str]] = StorageOpt,
    debug: bool = DebugOpt,
):
    """Scan many models (directories, buckets, lists): one row each, in a catalog.

    A row holds the model's format, sizes, IR version, opsets, producer, operators and
    weights by element type; the digest, check counts and per-tensor digests when asked. A
    model that cannot be read is a row with its error; nothing stops the scan. Exit 0 when
    the scan ran (whatever the models); 2 when it could not."""
    import json

    from ..errors import UsageError
    from ..scan import scan as run_scan

    with _errors(debug):
        if layout != "onemodel" and convert_to is None:
            raise UsageError("--layout takes effect with --convert-to")
        options = _storage_options(storage_option, sources, output, convert_to)
        from ..signals import Terminated

        try:
            with _Bar(quiet) as bar:
                result = run_scan(sources, output, jobs=jobs, dask=dask, hash=hash_,
                                  check=check, tensors=tensors, duplicates=duplicates,
                                  resume=resume, convert_to=convert_to, layout=layout,
                                  storage_options=options, allow_outside=allow_outside,
                                  progress=bar)
        except (KeyboardInterrupt, Terminated):
            if output is not None and bar.done:
                done = _count(bar.done, 'row')
                err.line(f"the rows done so far ({done}) are kept in {output}: the same "
                         "command with --resume goes on from them")
            raise
        show = err if output is None else out
        if output is None:
            for row in result.rows:
                out.line(json.dumps(row, ensure_ascii=False, separators=(",", ":")))
        if as_json:
            doc = {"summary": result.summary, "scanned": result.scanned,
                   "skipped": result.skipped, "rescanned": result.rescanned}
            if result.duplicates is not None:
                doc["duplicates"] = result.duplicates
            show.line(json.dumps(doc, indent=2))
        elif not quiet:
            for text in summary_lines(result, output):
                show.line(text)


def _storage_options(items, sources, output, convert_to) -> Optional[dict]:
    """``--storage-option`` values; checked against the sources and outputs, except when a
    ``@LIST`` may name URLs (its lines are read later)."""
    if not items:
        return None
    from .application import _storage

    if any(s.startswith("@") for s in sources):  # the list's URLs are the options' use
        from .redact import add_secrets
        from .values import parse_storage_options

        options = parse_storage_options(items)
        add_secrets(options)
        return options
    return _storage(items, *sources, output, convert_to)


def _top(counts: dict, n: int = 8) -> str:
    items = list(counts.items())
    text = ", ".join(f"{k or '(none)'} {v}" for k, v in items[:n])
    return text + (f", ... ({len(items) - n} more)" if len(items) > n else "")


def _some(sources: list, n: int = 4) -> str:
    """The first ``n`` of ``sources`` and how many more."""
    text = ", ".join(sources[:n])
    return text + (f" and {len(sources) - n} more" if len(sources) > n else "")


def summary_lines(result, output: str | None) -> list[str]:
    """The summary a scan prints: what was scanned, counts by format, error kind, validity,
    producer and opset, check codes, the slowest and largest models, duplicates."""
    from ..errors import printable

    s = result.summary
    head = f"scanned {_count(result.scanned, 'model')}"
    kept = [f"{_count(result.skipped, 'row')} kept from {output}"] if result.skipped else []
    if result.rescanned:
        kept.append(f"{result.rescanned} of those scanned replacing rows of {output} that "
                    "lacked what this scan asks")
    if kept:
        head += f" ({'; '.join(kept)})"
    head += f": {_count(s['models'], 'row')}, {s['failed']} failed, {_human(s['bytes'])}"
    if output is not None:
        head += f" -> {output}"
    lines = [head]
    if not s["models"]:  # (an empty folder, a glob that matches nothing: say what counts)
        from ..scan.sources import model_suffixes

        lines.append(f"  no model found: a listing counts the files named "
                     f"{', '.join(model_suffixes())}")
    for key, label in (("formats", "formats"), ("errors", "errors"), ("validity", "validity"),
                       ("producers", "producers"), ("opsets", "opsets"),
                       ("check_codes", "check codes")):
        if s[key]:
            lines.append(f"  {label}: {printable(_top(s[key]))}")
    if s["slowest"]:
        lines.append("  slowest: " + ", ".join(f"{r['source']} {r['seconds']:.3f} s"
                                               for r in s["slowest"]))
    if s["largest"]:
        lines.append("  largest: " + ", ".join(f"{r['source']} {_human(r['bytes'])}"
                                               for r in s["largest"]))
    d = result.duplicates
    if d is not None:
        lines.append(f"  duplicates: {_count(len(d['identical']), 'group')} of identical "
                     f"models; tensors {_human(d['tensor_bytes'])}, distinct "
                     f"{_human(d['unique_tensor_bytes'])}: a deduplicated store saves "
                     f"{_human(d['saved_bytes'])}")
        for g in d["identical"]:
            lines.append(f"    identical: {_some(g['sources'])}")
        for g in d["shared"]:
            lines.append(f"    shared by {_some(g['sources'])}: "
                         f"{_count(g['tensors'], 'tensor')}, {_human(g['bytes'])}")
        if d["shared_groups"] > len(d["shared"]):
            lines.append(f"    ... {d['shared_groups'] - len(d['shared'])} more groups")
    return lines


class _Bar:
    """The scan's progress bar on stderr, when stderr is a terminal and not ``quiet``: models
    done (of those listed once known), failed, bytes read from URLs. Called with each row."""

    def __init__(self, quiet: bool):
        self.enabled = not quiet and sys.stderr.isatty()
        self.done = self.failed = self.read = 0
        self._progress = None

    def __enter__(self):
        if self.enabled:
            from rich.console import Console
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"),
                                      TimeElapsedColumn(),
                                      console=Console(stderr=True), transient=True)
            self._progress.__enter__()
            self._task = self._progress.add_task(self._text())
        return self

    def _text(self) -> str:
        return f"scan: {self.done} done, {self.failed} failed, {_human(self.read)} read"

    def __call__(self, row: dict) -> None:
        self.done += 1
        self.failed += row.get("error_kind") is not None
        self.read += row.get("read_bytes") or 0
        if self._progress is not None:
            self._progress.update(self._task, description=self._text())

    def __exit__(self, *exc):
        if self._progress is not None:
            self._progress.__exit__(*exc)
        return False
