"""``onemodel.scan``: many models, one row each, the rows in a catalog (docs/scan.md).

The sources are expanded (:mod:`.sources`), the models not in the output yet are given to the
executor (:func:`onemodel.scan.executors.run_tasks`: local processes or a Dask cluster), each
row is appended to the catalog's journal as it completes (:mod:`.catalog`), and at the end the
catalog is written sorted by source, with a summary (:mod:`.summary`) and, from per-tensor
digests, the duplicates (:mod:`.duplicates`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..errors import UsageError
from .row import ScanOptions, failed_row, row_source, scan_item


@dataclass
class ScanResult:
    """What :func:`scan` found.

    rows: every row, sorted by source (those of an earlier run resumed included); summary:
    :func:`onemodel.scan.summary.summarize_rows` of them; duplicates:
    :func:`onemodel.scan.duplicates.find_duplicates` (with ``duplicates=True``, else None);
    scanned: the models scanned by this call; skipped: those already in the output (resume);
    rescanned: those of ``scanned`` whose row in the output (resume) lacked what this scan
    asks (the digest, the check's counts, a conversion) and was replaced.
    """

    rows: list[dict] = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    duplicates: dict | None = None
    scanned: int = 0
    skipped: int = 0
    rescanned: int = 0


def failed_item(item: tuple, kind: str, message: str) -> dict:
    """The executor's ``on_failure`` for an item ``(source, output[, listed, listed_output[,
    more]])`` (:func:`onemodel.scan.row.scan_item`): :func:`failed_row` of the source as
    listed."""
    return failed_row(item[2] if len(item) > 2 and item[2] is not None else item[0], kind,
                      message)


def _for_workers(item: tuple) -> tuple:
    """``item`` for a Dask worker: a local source or output made absolute (the worker's working
    directory is its own), named as listed in the row (:func:`onemodel.scan.row.scan_item`)."""
    import os

    from ..storage import is_local

    source, output = item[:2]
    more = item[4:]  # (flags set for this model too: kept)

    def absolute(p):
        return os.path.abspath(p) if p is not None and is_local(p) else p

    if absolute(source) == source and absolute(output) == output:
        return item
    return (absolute(source), absolute(output), source, output, *more)


def _layout_names() -> list[str]:
    from ..formats.layouts import names

    return ["onemodel", *names()]


#: The suffixes a conversion's output takes, by layout: the container, or ONNX.
def _output_suffix(layout: str) -> str:
    return ".onemodel" if layout == "onemodel" else ".onnx"


#: The layouts whose output is one file; any other writes data files beside the model (named by
#: the model, by its tensors, or as the source names them), so each model converted in it gets
#: a directory of its own: two models of one directory could otherwise name the same data file.
SINGLE_FILE_LAYOUTS = ("onemodel", "inline")


def plan_outputs(sources: list[str], directory: str, layout: str) -> dict[str, str]:
    """Where each source is converted to under ``directory``: its path relative to the
    sources' common directory (a URL's host and path; a local file's absolute path), with the
    suffix of ``layout``'s format in place of its own (and of ``.zst``); a name taken by an
    earlier source (in sorted order) gets ``~2``, ``~3`` ... before the suffix. A layout with
    data files (not in :data:`SINGLE_FILE_LAYOUTS`) puts each model in a directory of its own,
    named as the model without its suffix (``a/m.onnx`` -> ``DIR/a/m/m.onnx`` and its data
    files). UsageError when an output would be one of the sources."""
    from ..storage import is_local
    from .sources import model_suffixes

    if not sources:
        return {}
    keys = {}
    for s in sources:
        if is_local(s):
            keys[s] = os.path.abspath(s).lstrip(os.sep)
        else:
            rest = s.split("://", 1)[-1].split("?", 1)[0]
            keys[s] = rest.lstrip("/")
    dirs = [os.path.dirname(k) for k in keys.values()]
    common = os.path.commonpath(dirs) if all(dirs) else ""
    suffix = _output_suffix(layout)
    own = sorted(model_suffixes(), key=len, reverse=True)
    taken: set[str] = set()
    out = {}
    for s in sources:
        rel = os.path.relpath(keys[s], common) if common else keys[s]
        stem = next((rel[:-len(x)] for x in own if rel.lower().endswith(x)), rel)
        name, n = stem + suffix, 1
        while name in taken:
            n += 1
            name = f"{stem}~{n}{suffix}"
        taken.add(name)
        if layout not in SINGLE_FILE_LAYOUTS:  # DIR/a/m/m.onnx: its data files its own
            folder = name[:-len(suffix)]
            name = os.path.join(folder, os.path.basename(folder) + suffix)
        out[s] = os.path.join(directory, name)
    inputs = {os.path.abspath(s) for s in sources if is_local(s)}
    clash = sorted(o for o in out.values() if os.path.abspath(o) in inputs)
    if clash:
        raise UsageError(f"the conversion's output {clash[0]} would replace a model scanned; "
                         f"choose another directory than {directory}")
    return out


def scan(sources, output: str | None = None, *, jobs: int | None = None, client=None,
         dask=None, hash: bool = False, check: bool = False, tensors: bool = False,
         duplicates: bool = False, resume: bool = False, convert_to: str | None = None,
         layout: str = "onemodel", storage_options: dict | None = None,
         allow_outside: bool = False, progress=None) -> ScanResult:
    """Scan many models: one row each (docs/scan.md#rows), in a catalog sorted by source.

    Args:
        sources: a SOURCE or a list of them: paths, directories (recursive), globs, fsspec
            URLs of a file or a prefix (``s3://bucket/models/``), ``@LIST`` files
            (:mod:`onemodel.scan.sources`).
        output: a local ``.jsonl`` or ``.parquet`` file (Parquet needs the ``parquet`` extra);
            rows are journaled as they complete and the file is written sorted at the end.
        jobs: local processes (None: the CPU count; 1: in this process).
        client, dask: a ``dask.distributed.Client``, or a scheduler address
            (``tcp://host:8786``) as ``dask``: run on that cluster (the ``dask`` extra).
        hash: each model's content digest (reads every tensor byte once). tensors: each
            tensor's digest too. duplicates: identical models and shared tensors (implies
            ``tensors``). check: ``onemodel check``'s counts and codes.
        resume: keep the rows already in ``output``, scan only the other sources.
        convert_to: convert every readable model into this directory (:func:`plan_outputs`),
            in ``layout`` (``onemodel``, or an ONNX layout: ``inline``, ``file``,
            ``per_tensor``, ``safetensors``, ``keep``), its content digest checked after
            writing.
        storage_options: fsspec options for the URLs. allow_outside: resolve external data
            outside a model's directory (Clause 15.3).
        progress: a callable given each row as it completes.
    Returns:
        a :class:`ScanResult`.
    Raises:
        UsageError for arguments that do not fit (``resume`` without ``output``, both
        ``client`` and ``dask``, an unknown layout, a conversion over a source);
        IoError/UnsupportedError when a list, prefix or glob cannot be read or the output
        cannot be written. A model that cannot be read is never raised: it is a row.
    """
    from functools import partial

    from .catalog import Catalog
    from .duplicates import find_duplicates
    from .executors import run_tasks
    from .sources import expand
    from .summary import summarize_rows

    if client is not None and dask is not None:
        raise UsageError("give a Dask client or a scheduler address, not both")
    if jobs is not None and (client is not None or dask is not None):
        raise UsageError("jobs are local processes; a Dask cluster runs its own workers: "
                         "give one or the other")
    if isinstance(dask, str):
        from .executors import check_dask_address

        check_dask_address(dask)
    if resume and output is None:
        raise UsageError("resume needs the output to resume")
    # (the layouts' entry points, tens of milliseconds to read, only for another layout)
    if layout != "onemodel" and layout not in _layout_names():
        raise UsageError(f"layout {layout!r}: one of {', '.join(_layout_names())}")
    tensors = tensors or duplicates
    options = ScanOptions(hash=hash or tensors, tensors=tensors, check=check,
                          convert_to=convert_to, layout=layout,
                          storage_options=storage_options, allow_outside=allow_outside)
    found = expand(sources, storage_options=storage_options)
    if output is not None:
        _refuse_catalog_over_inputs(output, sources, found)
        if convert_to is not None:
            _refuse_conversion_over_catalog(convert_to, output)
    outputs = plan_outputs(found, convert_to, layout) if convert_to is not None else {}
    catalog = Catalog(output, resume=resume) if output is not None else None
    earlier = catalog.rows if catalog is not None else {}
    done = {s for s, r in earlier.items() if options.answered_by(r)}
    items = [_item(s, outputs.get(s), earlier.get(row_source(s)), options) for s in found
             if row_source(s) not in done or _converted_elsewhere(earlier[row_source(s)],
                                                                  outputs.get(s))]
    rescanned = sum(row_source(item[0]) in earlier for item in items)
    if client is not None or dask is not None:
        items = [_for_workers(item) for item in items]
    rows: dict[str, dict] = {}
    try:
        for _, row in run_tasks(partial(scan_item, options=options), items, jobs=jobs,
                                dask=client if client is not None else dask,
                                on_failure=failed_item):
            if catalog is not None:
                catalog.add(row)
            rows[row["source"]] = row
            if progress is not None:
                progress(row)
    finally:
        if catalog is not None:
            catalog.close()  # (interrupted: the journal stays, to resume from)
    if catalog is not None:
        all_rows = catalog.finish()
    else:
        all_rows = [rows[k] for k in sorted(rows)]
    return ScanResult(rows=all_rows, summary=summarize_rows(all_rows),
                      duplicates=find_duplicates(all_rows) if duplicates else None,
                      scanned=len(items), skipped=len(found) - len(items),
                      rescanned=rescanned)


def _item(source: str, output: str | None, earlier: dict | None, options: ScanOptions) -> tuple:
    """The task of ``source``: ``(source, output)``, with what its ``earlier`` row (resumed)
    holds that ``options`` do not ask, to be found again (:meth:`ScanOptions.kept_from`)."""
    more = options.kept_from(earlier) if earlier is not None else ()
    return (source, output, None, None, more) if more else (source, output)


def _converted_elsewhere(row: dict, output: str | None) -> bool:
    """Whether ``row`` (of an earlier scan, resumed) names a conversion output other than
    ``output``, this scan's (a resumed scan converting into another directory, or in another
    layout, converts again)."""
    return output is not None and row.get("output") is not None and \
        row["output"] != row_source(output)


def _refuse_conversion_over_catalog(convert_to: str, output: str) -> None:
    """UsageError, before anything is written, when the conversion's directory is the catalog
    or its journal (the models would be converted into a directory the catalog then cannot be
    written as, or not at all over an existing catalog)."""
    from ..storage.place import same_file
    from .catalog import JOURNAL_SUFFIX

    for what, path in (("the catalog", output), ("the catalog's journal",
                                                 output + JOURNAL_SUFFIX)):
        if same_file(convert_to, path):
            raise UsageError(f"the conversion's directory {convert_to} is {what}; choose "
                             "another directory")


def _refuse_catalog_over_inputs(output: str, sources, found: list[str]) -> None:
    """UsageError, before anything is written, when the catalog (or its journal) is a file the
    scan reads: a source, or a list of sources."""
    import os

    from ..storage import is_local
    from ..storage.place import refuse_inputs_as_outputs
    from .catalog import JOURNAL_SUFFIX

    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    lists = [os.fspath(s)[1:] for s in sources if os.fspath(s).startswith("@")]
    inputs = [("a list of sources", p) for p in lists if is_local(p)]
    inputs += [("a source", s) for s in found if is_local(s)]
    refuse_inputs_as_outputs([("the catalog", output),
                              ("the catalog's journal", output + JOURNAL_SUFFIX)], inputs)
